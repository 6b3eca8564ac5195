"""An uncaught C++ exception in a noexcept function of a native library: terminate -> abort().

main -> open_dataset -> read_shard calls shardlib.load_shard(5, 4) through ctypes. The DLL
(src/shardlib.cpp, Microsoft C++ ABI) throws `ShardError{<what>, 5}` from
open_shard() with _CxxThrowException (exception 0xE06D7363). load_shard is noexcept (its
FuncInfo carries MSVC's noexcept flag), so the frame handler, __CxxFrameHandler3, calls
std::terminate() when the search phase reaches load_shard's frame, before ctypes' own SEH
filter is asked: terminate() -> abort(). Under Wine, abort() is _exit(3): exit code 3, no
second exception; `dumper.exe --on-exit` stops the process at ntdll!RtlExitUserProcess with the
exception dispatch (and the 0xE06D7363 record with its ThrowInfo) still on the stack.

With argv[1] == "checked" it calls load_shard_checked (the same throw without noexcept)
instead and prints what ctypes makes of it (OSError, no crash).
Lines marked "# stack" are the Python frames at the abort (the last one is the native call).
"""

import ctypes
import json
import os
import sys
import threading

DLL_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shardlib.dll")
MODE = sys.argv[1] if len(sys.argv) > 1 else "noexcept"


def read_shard(lib, index, count):
    facts = {
        "scenario": "cxx_terminate",
        "mode": MODE,
        "python": sys.version,
        "executable": sys.executable,
        "dll": DLL_PATH,
        "native_entry": "load_shard" if MODE == "noexcept" else "load_shard_checked",
        "thrown_type": "ShardError",
        "index": index,
        "count": count,
        "crash_native_id": threading.get_native_id(),
        "main_native_id": threading.main_thread().native_id,
    }
    print("MARKER " + json.dumps(facts), flush=True)
    if MODE == "noexcept":
        return lib.load_shard(index, count)  # stack
    try:
        return lib.load_shard_checked(index, count)
    except OSError as exc:
        print("CAUGHT %s: %s (winerror %r)" % (type(exc).__name__, exc, exc.winerror), flush=True)
        return None


def open_dataset(shards):
    lib = ctypes.CDLL(DLL_PATH)
    for fn in (lib.load_shard, lib.load_shard_checked):
        fn.argtypes = [ctypes.c_int, ctypes.c_int]
        fn.restype = ctypes.c_int
    return read_shard(lib, shards + 1, shards)  # stack


def main():
    print("loaded", open_dataset(4), flush=True)  # stack
    print("still running after the C++ exception", flush=True)


main()  # stack
