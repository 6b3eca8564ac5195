"""sys.exit(3): the control case, a NORMAL exit with code 3.

`main` -> `validate` finds bad input and calls sys.exit(3): SystemExit unwinds the Python
stack, the interpreter finalizes, python.exe returns 3 from main and the C runtime's exit(3)
runs atexit handlers and ends the process through ntdll!RtlExitUserProcess(3). The dump
stops there (as every exit with a nonzero code does under `dumper.exe --on-exit`) with no
Python frame left on the stack: an analysis must not call this an abort.
Lines marked "# stack" are the main thread's Python frames when sys.exit is called.
"""

import json
import linecache
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


def validate(rows):
    bad = [row for row in rows if row < 0]
    if bad:
        marker("sys_exit3", call="sys.exit(3)", bad_rows=len(bad))
        sys.exit(3)  # stack
    return rows


def main():
    print("valid", len(validate([1, 2, -3, 4])))  # stack


main()  # stack
