"""What the collision programs print about themselves: loaded modules and the MARKER line.

Imported by every program in this folder (they run from C:\\scripts, so this file is found
next to them). `module_path(handle)` is kernel32!GetModuleFileNameW; `marker(**facts)` prints
one `MARKER {json}` line with flush=True just before the call that ends the process. The
programs' own lines start with `prog: `; every other line of a log (stdout and stderr share one
pipe) was written by a runtime: OpenMP, cuDNN, Python's traceback.
"""

import ctypes
import json
import os
import sys
import threading

_k32 = ctypes.WinDLL("kernel32", use_last_error=True)
_k32.GetModuleFileNameW.argtypes = [ctypes.c_void_p, ctypes.c_wchar_p, ctypes.c_uint32]
_k32.GetModuleFileNameW.restype = ctypes.c_uint32
_k32.GetModuleHandleW.argtypes = [ctypes.c_wchar_p]
_k32.GetModuleHandleW.restype = ctypes.c_void_p


def module_path(handle):
    buf = ctypes.create_unicode_buffer(1024)
    n = _k32.GetModuleFileNameW(handle, buf, 1024)
    return buf.value[:n]


def module(dll_or_handle):
    """{'path', 'base'} of a ctypes.CDLL (its _handle) or of a module name already loaded."""
    if isinstance(dll_or_handle, str):
        handle = _k32.GetModuleHandleW(dll_or_handle)
    else:
        handle = getattr(dll_or_handle, "_handle", dll_or_handle)
    if not handle:
        return None
    return {"path": module_path(handle), "base": "0x%x" % handle}


def marker(**facts):
    out = {
        "version": sys.version,
        "executable": sys.executable,
        "prefix": sys.prefix,
        "native_id": threading.get_native_id(),
        "pid": os.getpid(),
        "env": {k: os.environ.get(k) for k in ("KMP_AFFINITY", "KMP_DUPLICATE_LIB_OK",
                                              "WINEDLLOVERRIDES")},
    }
    out.update(facts)
    print("MARKER " + json.dumps(out), flush=True)
