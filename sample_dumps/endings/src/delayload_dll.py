"""A GPU backend whose cuDNN DLL is missing: the delay-load helper raises 0xC06D007E, unhandled.

The backend's native module gpuext.pyd (src/gpuext.c, in C:\\scripts\\gpu; the embeddable
build's ._pth leaves the script's folder off sys.path, so `load_backend` puts that folder on
it) is linked against the stable ABI's python3.dll and DELAY-loads its CUDA DLLs, as ML
libraries do: cudnn64_8.dll and cudart64_110.dll are only loaded when a function of theirs is
first called. `main` -> `build_model` -> `load_backend` -> `gpuext.cudnn_version()` calls
cudnnGetVersion(): the delay-load helper linked into gpuext.pyd (mingw-w64's
__delayLoadHelper2) calls LoadLibraryA("cudnn64_8.dll"), which fails - there is no
cudnn64_8.dll anywhere in the process's DLL search path (the application folder, the system
folders, the current folder C:\\scripts, PATH), GetLastError() = 126 (ERROR_MOD_NOT_FOUND) -
and raises 0xC06D007E (VcppException(ERROR_SEVERITY_ERROR, ERROR_MOD_NOT_FOUND)) with one
parameter, the address of its DelayLoadInfo on the stack. Nothing handles it: no Python
traceback, nothing on stderr, the process just dies of an unhandled exception.
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

HERE = os.path.dirname(os.path.abspath(__file__))
BACKEND_DIR = os.path.join(HERE, "gpu")


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


def search_path(dll):
    """Where LoadLibraryA(dll) looks (the standard search order), and where the file is."""
    windir = os.environ.get("SystemRoot", r"C:\windows")
    folders = [os.path.dirname(sys.executable), os.path.join(windir, "system32"),
               os.path.join(windir, "system"), windir, os.getcwd()]
    folders += [p for p in os.environ.get("PATH", "").split(os.pathsep) if p]
    return {"searched": folders,
            "found": [os.path.join(f, dll) for f in folders if os.path.isfile(os.path.join(f, dll))]}


def load_backend():
    sys.path.insert(0, BACKEND_DIR)
    import gpuext
    marker("delayload_dll", call="gpuext.cudnn_version()", expected_code="0xC06D007E",
           dll="cudnn64_8.dll", function="cudnnGetVersion", importer=gpuext.__file__,
           loaded={"gpuext.pyd": loaded_module("gpuext.pyd"),
                   "cudnn64_8.dll": loaded_module("cudnn64_8.dll")},
           search=search_path("cudnn64_8.dll"))
    return gpuext.cudnn_version()  # stack


def build_model(layers):
    cudnn = load_backend()  # stack
    return {"layers": layers, "cudnn": cudnn}


def main():
    model = build_model(["conv2d", "batch_norm", "relu", "dense"])  # stack
    print("model", model)


main()  # stack
