"""A __repr__ that calls repr() on its child, over a chain of a million nodes.

Node.__repr__ -> repr(self.child) -> slot_tp_repr -> Node.__repr__ ...: a Python special
method reached through the C type slot, so even on 3.11 (where plain Python-to-Python calls
no longer nest the C stack) every level nests PyObject_Repr, slot_tp_repr, the call
machinery and a new _PyEval_EvalFrameDefault: with the recursion limit raised it overflows
the main thread's C stack on 3.9-3.11. 3.12 and 3.13 count C recursion and raise
RecursionError instead. Lines marked "# stack" are the Python frames at the crash.
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


class Node:
    def __init__(self, name, child):
        self.name = name
        self.child = child

    def __repr__(self):
        return f"Node({repr(self.child)})"  # stack


def build_chain(depth):
    node = None
    for index in range(depth):
        node = Node(index, node)
    return node


def describe(root):
    facts = {
        "scenario": "slot_recursion",
        "python": sys.version,
        "executable": sys.executable,
        "depth": DEPTH,
        "recursion_limit": sys.getrecursionlimit(),
        "recursion_kind": "python_slot",
        "protocol": "repr",
        "cycle": ["__repr__"],
        "crash_native_id": threading.get_native_id(),
        "main_native_id": threading.main_thread().native_id,
        "stack_at_entry": stack_here(),
    }
    print("MARKER " + json.dumps(facts), flush=True)
    return repr(root)  # stack


def main():
    sys.setrecursionlimit(100_000_000)
    root = build_chain(DEPTH)
    print(len(describe(root)))  # stack


main()  # stack
