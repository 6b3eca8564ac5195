"""signal.raise_signal(signal.SIGABRT): the C runtime's raise(SIGABRT), no handler installed.

A worker pool's `shutdown` -> `_escalate` gives up on a stuck job the way C code does,
raise(SIGABRT). With no handler for SIGABRT, the C runtime's default action ends the
process with exit code 3 (_exit(3)), on Windows and under Wine alike: no exception.
Lines marked "# stack" are the main thread's Python frames when it ends.
"""

import json
import linecache
import signal
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


def _escalate(job):
    marker("sigabrt", call="signal.raise_signal(signal.SIGABRT)", job=job)
    signal.raise_signal(signal.SIGABRT)  # stack


def shutdown(jobs):
    for job in jobs:
        if job["state"] == "stuck":
            _escalate(job)  # stack


def main():
    shutdown([{"id": 1, "state": "done"}, {"id": 2, "state": "stuck"}])  # stack


main()  # stack
