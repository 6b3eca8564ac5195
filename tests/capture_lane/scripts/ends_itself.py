"""A Python program that ends itself without a crash of its own, as the argument says:
  gil        - a Python C-API function called without the GIL (ctypes.CDLL releases it):
               Py_FatalError, then abort() (exit code 3 under Wine)
  abort      - os.abort()
  exit       - sys.exit(4): a normal exit with a nonzero code
  terminate  - TerminateProcess on itself with 0xE0000001
Prints one MARKER line first (the thread that ends the process)."""

import ctypes
import json
import os
import sys
import threading


def end(how):
    print(
        "MARKER " + json.dumps({"how": how, "native_id": threading.get_native_id(), "version": sys.version}), flush=True
    )
    if how == "gil":
        api = ctypes.CDLL(f"python3{sys.version_info[1]}", handle=sys.dllhandle)
        api.PyThreadState_Get()  # ends
    elif how == "abort":
        os.abort()  # ends
    elif how == "exit":
        sys.exit(4)
    elif how == "terminate":
        kernel32 = ctypes.WinDLL("kernel32")
        kernel32.TerminateProcess(ctypes.c_void_p(-1), 0xE0000001)


def main():
    end(sys.argv[1])


main()
