"""A Python C-API function called through ctypes.CDLL, that is without the GIL.

A plugin loader checks that "the interpreter is alive" before it loads each plugin by calling
the interpreter's own PyThreadState_Get() through ctypes: `ctypes.CDLL(f"python3{minor}",
handle=sys.dllhandle)` (the classic mistake: a CDLL function is called with the GIL released;
only ctypes.PyDLL keeps it). PyThreadState_Get() finds no thread state and calls Py_FatalError
(its wording differs between 3.8 and later versions; the exact lines are in
logs/fatal_gil_py3X.log and manifest.json, and deliberately not in this file, whose text a
full-memory dump holds), then abort(). Lines marked "# stack" are the main thread's Python
frames when it dies.
"""

import ctypes
import json
import linecache
import sys
import threading
import traceback


def stack_here():
    """The caller's Python stack, outermost first ([function, file, line]), its innermost
    line moved to the next "# stack" line (the call it is about to make)."""
    frame = sys._getframe(1)
    frames = [[f.name, f.filename, f.lineno] for f in traceback.extract_stack(frame)]
    line = frame.f_lineno
    while not linecache.getline(frame.f_code.co_filename, line).rstrip().endswith("# stack"):
        line += 1
    frames[-1][2] = line
    return frames


def interpreter_api():
    return ctypes.CDLL(f"python3{sys.version_info[1]}", handle=sys.dllhandle)


def check_interpreter(api, plugin):
    facts = {
        "scenario": "fatal_gil",
        "python": sys.version,
        "executable": sys.executable,
        "plugin": plugin,
        "c_api_function": "PyThreadState_Get",
        "called_through": "ctypes.CDLL (GIL released)",
        "crash_native_id": threading.get_native_id(),
        "main_native_id": threading.main_thread().native_id,
        "stack": stack_here(),
    }
    print("MARKER " + json.dumps(facts), flush=True)
    return api.PyThreadState_Get()  # stack


def load_plugins(names):
    api = interpreter_api()
    loaded = []
    for name in names:
        check_interpreter(api, name)  # stack
        loaded.append(name)
    return loaded


def main():
    print("loaded", load_plugins(["csv_export", "charts"]))  # stack


main()  # stack
