"""A failed assert() in MSVC-ABI native code: the Universal CRT's _wassert, then abort().

main -> plan_batches -> check_range calls shardlib.check_shard_range(7, 4) through ctypes.
The DLL (src/shardlib.cpp) asserts that the index is in range the way MSVC's <assert.h> does
in a release build that keeps asserts: _wassert(L"<expression>", L"<file>", line), imported
from api-ms-win-crt-runtime-l1-1-0.dll (ucrtbase). _wassert prints the expression, file and
line to stderr and calls abort(); under Wine abort() is _exit(3): `dumper.exe --on-exit` stops
the process at ntdll!RtlExitUserProcess. The texts themselves are not quoted here (the
MARKER's "assertion" aside): the program's source is in the process's memory.
Lines marked "# stack" are the Python frames at the abort (the last one is the native call).
"""

import ctypes
import json
import os
import sys
import threading

DLL_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shardlib.dll")


def check_range(lib, index, count):
    facts = {
        "scenario": "assert_ucrt",
        "python": sys.version,
        "executable": sys.executable,
        "dll": DLL_PATH,
        "native_entry": "check_shard_range",
        "assertion": "index >= 0 && index < count",
        "index": index,
        "count": count,
        "crash_native_id": threading.get_native_id(),
        "main_native_id": threading.main_thread().native_id,
    }
    print("MARKER " + json.dumps(facts), flush=True)
    return lib.check_shard_range(index, count)  # stack


def plan_batches(count):
    lib = ctypes.CDLL(DLL_PATH)
    lib.check_shard_range.argtypes = [ctypes.c_int, ctypes.c_int]
    lib.check_shard_range.restype = ctypes.c_int
    last = count + 3  # the bug: one batch too many
    return check_range(lib, last, count)  # stack


def main():
    print("batches", plan_batches(4), flush=True)  # stack


main()  # stack
