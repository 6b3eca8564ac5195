"""os._exit(3): a process that ends itself at once, skipping every cleanup.

A forked-worker style `run_task` -> `bail_out` leaves with os._exit(3) after a failed task
(the C runtime's _exit(3): no atexit handlers, no interpreter finalization, no flush).
Exit code 3 through ntdll!RtlExitUserProcess, no exception.
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


def bail_out(task, error):
    marker("os_exit3", call="os._exit(3)", task=task, error=error)
    os._exit(3)  # stack


def run_task(task):
    try:
        return 1 / task["weight"]
    except ZeroDivisionError as error:
        bail_out(task["name"], str(error))  # stack


def main():
    run_task({"name": "normalize", "weight": 0})  # stack


main()  # stack
