"""An exception whose __init__ recurses, instantiated while CPython normalizes it.

A config loader feeds includes to a checker generator and reports a broken one with
`checker.throw(IncludeError, include)` (the (type, value) form: the interpreter creates the
exception itself, in _PyErr_NormalizeException). IncludeError.__init__ builds its message
from include.path(), which follows `parent` links; the includes form a cycle, so path()
recurses without end. Exception normalization runs with the thread's recursion "headroom"
set: instead of RecursionError at the limit, CPython 3.9-3.13 let the recursion run 50 frames
past it and then call Py_FatalError from _Py_CheckRecursiveCall (3.9-3.11) or
_Py_CheckRecursiveCallPy (3.12, 3.13); the exact lines are in logs/fatal_overflow_py3X.log.
CPython 3.8 raises a plain RecursionError here.
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


class Include:
    def __init__(self, name, parent=None):
        self.name = name
        self.parent = parent

    def path(self):
        return (self.parent.path() + " > " if self.parent else "") + self.name  # stack


class IncludeError(Exception):
    def __init__(self, include):
        super().__init__("broken include: " + include.path())  # stack


def checker():
    while True:
        include = yield
        if include.name.endswith(".tmp"):
            raise ValueError(include.name)


def report(check, include):
    facts = {
        "scenario": "fatal_overflow",
        "python": sys.version,
        "executable": sys.executable,
        "recursion_limit": sys.getrecursionlimit(),
        "mechanism": "generator.throw(type, value): __init__ recurses during normalization",
        "cycle": ["path"],
        "crash_native_id": threading.get_native_id(),
        "main_native_id": threading.main_thread().native_id,
        "stack_at_entry": stack_here(),
    }
    print("MARKER " + json.dumps(facts), flush=True)
    check.throw(IncludeError, include)  # stack


def load_config():
    main_cfg = Include("main.cfg")
    common = Include("common.cfg", main_cfg)
    local = Include("local.cfg", common)
    main_cfg.parent = local  # the cycle: main.cfg -> local.cfg -> common.cfg -> main.cfg
    check = checker()
    next(check)
    report(check, local)  # stack


def main():
    load_config()  # stack


main()  # stack
