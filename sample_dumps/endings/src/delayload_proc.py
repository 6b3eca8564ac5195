"""A GPU backend that finds an OLD CUDA runtime: the DLL loads, a function is missing: 0xC06D007F.

The backend's native module gpuext.pyd (src/gpuext.c, in C:\\scripts\\gpu; the embeddable
build's ._pth leaves the script's folder off sys.path, so `load_backend` puts that folder on
it) DELAY-loads cudart64_110.dll. `configure_cuda` puts the CUDA 11.0 toolkit's bin folder
on PATH, as the CUDA installer does system-wide; the cudart64_110.dll there is an 11.0
runtime (src/cudart_old.c: a stand-in exporting cudaRuntimeGetVersion only), while gpuext was
built against 11.2, which added cudaMallocAsync. `main` -> `train` -> `allocate_workspace` ->
`gpuext.alloc_async(n)`: cudaRuntimeGetVersion() is resolved (the delay-load helper's
LoadLibraryA("cudart64_110.dll") finds it through PATH) and returns 11000, then
cudaMallocAsync(&p, n, 0): GetProcAddress fails, GetLastError() = 127 (ERROR_PROC_NOT_FOUND),
and mingw-w64's __delayLoadHelper2 raises 0xC06D007F (VcppException(ERROR_SEVERITY_ERROR,
ERROR_PROC_NOT_FOUND)) with one parameter, the address of its DelayLoadInfo on the stack.
Nothing handles it: no Python traceback, nothing on stderr, the process just dies.
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
CUDA_BIN = r"C:\Program Files\NVIDIA GPU Computing Toolkit\CUDA\v11.0\bin"
WORKSPACE_BYTES = 64 << 20


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


def configure_cuda():
    os.environ["PATH"] = CUDA_BIN + os.pathsep + os.environ.get("PATH", "")


def load_backend():
    configure_cuda()
    sys.path.insert(0, BACKEND_DIR)
    import gpuext
    return gpuext


def allocate_workspace(gpuext, nbytes):
    marker("delayload_proc", call="gpuext.alloc_async(%d)" % nbytes, expected_code="0xC06D007F",
           dll="cudart64_110.dll", function="cudaMallocAsync",
           resolved_first="cudaRuntimeGetVersion", importer=gpuext.__file__,
           loaded={"gpuext.pyd": loaded_module("gpuext.pyd"),
                   "cudart64_110.dll": loaded_module("cudart64_110.dll")},
           search=search_path("cudart64_110.dll"))
    return gpuext.alloc_async(nbytes)  # stack


def train(steps):
    gpuext = load_backend()
    workspace = allocate_workspace(gpuext, WORKSPACE_BYTES)  # stack
    return [workspace] * steps


def main():
    print("trained", len(train(10)))  # stack


main()  # stack
