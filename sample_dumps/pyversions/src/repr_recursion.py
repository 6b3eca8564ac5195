"""repr() of a list nested a million deep: C recursion through the repr protocol.

list_repr -> PyObject_Repr -> list_repr ...: the eval loop is not in the cycle, so on
CPython 3.9-3.11 this overflows the C stack inside python3X.dll alone once the recursion
limit (which PyObject_Repr checks) is out of the way. 3.12 and 3.13 also count C
recursion (Py_C_RECURSION_LIMIT) and raise RecursionError instead.
Lines marked "# stack" are the Python frames at the crash.
"""

import json
import linecache
import sys
import threading
import traceback

DEPTH = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000


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


def nested_list(depth):
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def render(value):
    facts = {
        "scenario": "repr_recursion",
        "python": sys.version,
        "executable": sys.executable,
        "depth": DEPTH,
        "recursion_limit": sys.getrecursionlimit(),
        "recursion_kind": "c_protocol",
        "protocol": "repr",
        "cycle": None,
        "crash_native_id": threading.get_native_id(),
        "main_native_id": threading.main_thread().native_id,
        "stack_at_entry": stack_here(),
    }
    print("MARKER " + json.dumps(facts), flush=True)
    return repr(value)  # stack


def main():
    sys.setrecursionlimit(100_000_000)
    value = nested_list(DEPTH)
    print(len(render(value)))  # stack


main()  # stack
