"""os.abort(): a batch job that finds its state corrupt and aborts on purpose.

`commit_batch` -> `verify_checksums` finds a mismatch and calls os.abort() ("so that we get a
crash dump"): the C runtime's abort(). Under Wine 8 abort() raises SIGABRT, whose default
action is _exit(3): the process ends with exit code 3 through ntdll!RtlExitUserProcess and no
exception. On Windows abort() fail-fasts (0xC0000409, subcode 7).
Lines marked "# stack" are the main thread's Python frames when it ends.
"""

import json
import linecache
import os
import sys
import threading
import traceback


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


def verify_checksums(rows, expected):
    actual = sum(rows) % 65521
    if actual != expected:
        marker("os_abort", call="os.abort()", expected=expected, actual=actual)
        os.abort()  # stack
    return actual


def commit_batch(rows):
    return verify_checksums(rows, expected=4242)  # stack


def main():
    print("committed", commit_batch(list(range(100))))  # stack


main()  # stack
