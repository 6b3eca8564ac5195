"""A worker thread given a bigger stack with threading.stack_size() still overflows.

On Windows the size passed to threading.stack_size() reaches _beginthreadex as
the thread's initial *commit*; the reserve is the larger of that and the
executable's /STACK reserve (1.9 MiB for python.exe). The worker recurses in
Python (recursion limit raised) until its 8 MiB stack runs out; the main
thread waits in join(). Before recursing, the worker asks Windows for its own
stack bounds (GetCurrentThreadStackLimits) so the reserve it really got is on
record next to the dump.
"""

import ctypes
import json
import sys
import threading

DEPTH = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
STACK_SIZE = 8 * 1024 * 1024


def stack_limits():
    low, high = ctypes.c_size_t(), ctypes.c_size_t()
    ctypes.windll.kernel32.GetCurrentThreadStackLimits(ctypes.byref(low), ctypes.byref(high))
    return low.value, high.value


def descend(level):
    if level == 0:
        return 0
    return descend(level - 1) + 1  # stack


def worker(depth, facts):
    low, high = stack_limits()
    facts.update(worker_native_id=threading.get_native_id(), worker_stack_low=low, worker_stack_high=high)
    print("MARKER " + json.dumps(facts), flush=True)
    descend(depth)  # stack


def main():
    sys.setrecursionlimit(100_000_000)
    threading.stack_size(STACK_SIZE)  # (calling stack_size() without an argument would reset it)
    facts = {
        "scenario": "thread_stack_size",
        "python": sys.version,
        "executable": sys.executable,
        "depth": DEPTH,
        "recursion_limit": sys.getrecursionlimit(),
        "stack_size": STACK_SIZE,
        "main_native_id": threading.get_native_id(),
    }
    thread = threading.Thread(target=worker, args=(DEPTH, facts), name="descender")
    thread.start()
    thread.join()  # stack(main)


main()  # stack(main)
