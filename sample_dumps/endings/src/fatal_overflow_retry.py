"""RecursionError caught, and the handler recursing again: a fatal error on 3.8.

A resolver follows `parent` links up a chain of settings; the chain has a cycle (a setting
whose parent is itself, two levels up). `resolve` catches RecursionError and falls back to
`follow`, which recurses again from inside the handler. Up to CPython 3.8 the thread stays in
its "overflowed" state until the depth drops well below the limit, so the fallback's frames
are let through until the depth passes the limit + 50, and Py_FatalError gives up (its
message: logs/fatal_overflow_py38.log). From 3.9 on the fallback just gets another RecursionError (the program
ends with a traceback, exit code 1): see fatal_overflow_throw.py for 3.9-3.13.
Lines marked "# stack" are the main thread's Python frames when it dies.
"""

import json
import linecache
import sys
import threading
import traceback


def stack_here():
    """The caller's Python stack, outermost first ([function, file, line]), its innermost
    line moved to the next "# stack" line (the call it is about to make)."""
    frame = sys._getframe(1)
    frames = [[f.name, f.filename, f.lineno] for f in traceback.extract_stack(frame)]
    line = frame.f_lineno
    while not linecache.getline(frame.f_code.co_filename, line).rstrip().endswith("# stack"):
        line += 1
    frames[-1][2] = line
    return frames


class Setting:
    def __init__(self, name, parent=None):
        self.name = name
        self.parent = parent


def follow(setting):
    return follow(setting.parent) if setting.parent else setting  # stack


def resolve(setting):
    try:
        return resolve(setting.parent) if setting.parent else setting  # stack
    except RecursionError:
        return follow(setting)  # stack


def load_settings():
    base = Setting("base")
    site = Setting("site", base)
    user = Setting("user", site)
    base.parent = user  # the cycle: base -> user -> site -> base
    facts = {
        "scenario": "fatal_overflow",
        "python": sys.version,
        "executable": sys.executable,
        "recursion_limit": sys.getrecursionlimit(),
        "mechanism": "RecursionError caught, the handler recurses again",
        "cycle": ["resolve", "follow"],
        "crash_native_id": threading.get_native_id(),
        "main_native_id": threading.main_thread().native_id,
        "stack_at_entry": stack_here(),
    }
    print("MARKER " + json.dumps(facts), flush=True)
    return resolve(user)  # stack


def main():
    print("resolved", load_settings().name)  # stack


main()  # stack
