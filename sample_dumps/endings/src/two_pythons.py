"""Two Python DLLs in one process: a helper built for CPython 3.9 loaded into CPython 3.11.

A plugin manager loads the native part of an old plugin, oldext.dll (src/oldext.c, linked
against python39.dll; a python39.dll sits next to it in the plugin's folder), with ctypes, and
calls its module init, PyInit_oldext(). The Windows loader maps that python39.dll into the
python311.dll process; python39.dll was never initialised, and PyModule_Create2 reads the
interpreter state through its NULL thread state: an access violation inside python39.dll.
(A .pyd importing python39.dll directly would be refused by CPython's import: "Module use of
python39.dll conflicts with this version of Python".)
Lines marked "# stack" are the main thread's Python frames when it dies.
"""

import ctypes
import json
import linecache
import os
import sys
import threading
import traceback
from ctypes import wintypes

PLUGIN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "oldext")


def marker(scenario, **extra):
    """Print the MARKER line just before the program ends itself: versions, thread ids and
    the caller's Python stack, outermost first ([function, file, line]), its innermost
    line moved to the next "# stack" line (the call it is about to make)."""
    frame = sys._getframe(1)
    frames = [[f.name, f.filename, f.lineno] for f in traceback.extract_stack(frame)]
    line = frame.f_lineno
    while not linecache.getline(frame.f_code.co_filename, line).rstrip().endswith("# stack"):
        line += 1
    frames[-1][2] = line
    facts = {
        "scenario": scenario,
        "python": sys.version,
        "executable": sys.executable,
        **extra,
        "crash_native_id": threading.get_native_id(),
        "main_native_id": threading.main_thread().native_id,
        "stack": frames,
    }
    print("MARKER " + json.dumps(facts), flush=True)


def loaded_module(name):
    """(path, base address) of a DLL loaded in this process, or None."""
    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
    kernel32.GetModuleHandleW.argtypes = (wintypes.LPCWSTR,)
    kernel32.GetModuleHandleW.restype = wintypes.HMODULE
    kernel32.GetModuleFileNameW.argtypes = (wintypes.HMODULE, wintypes.LPWSTR, wintypes.DWORD)
    handle = kernel32.GetModuleHandleW(name)
    if not handle:
        return None
    buffer = ctypes.create_unicode_buffer(520)
    kernel32.GetModuleFileNameW(handle, buffer, len(buffer))
    return {"path": buffer.value, "base": handle}


def init_plugin(lib, name):
    init = getattr(lib, "PyInit_" + name)
    init.restype = ctypes.c_void_p
    dlls = {dll: loaded_module(dll) for dll in
            ("python3%d.dll" % sys.version_info[1], "python39.dll", name + ".dll")}
    marker("two_pythons", call="%s.PyInit_%s()" % (name, name), loaded=dlls)
    return init()  # stack


def load_plugin(name):
    lib = ctypes.CDLL(os.path.join(PLUGIN_DIR, name + ".dll"))
    return init_plugin(lib, name)  # stack


def main():
    print("plugin module at", load_plugin("oldext"))  # stack


main()  # stack
