"""Calls into an MSVC-built DLL that ships its PDB (debugpy's attach_amd64.dll, from its
Windows wheel: tests/symbols/msvc) with a NULL pointer it does not check, so the process dies
of an access violation in MSVC code, which dumpkit names, with its source line, from that PDB."""

import ctypes
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
dll = ctypes.CDLL(os.path.join(here, "attach_amd64.dll"))
run = dll.AttachAndRunPythonCode
run.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_bool]
run.restype = ctypes.c_int
print("MARKER python", sys.version.split()[0], flush=True)
run(b"pass", None, False)  # the second argument is an out-pointer the DLL reads first
print("returned", flush=True)
