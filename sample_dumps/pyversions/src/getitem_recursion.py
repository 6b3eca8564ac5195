"""A __getitem__ that subscripts its child, over a chain of a million nodes.

Node.__getitem__ -> self.child[key] -> PyObject_GetItem -> slot_mp_subscript ->
Node.__getitem__ ...: on 3.9 and 3.10 a subscript reaches a class's __getitem__ through
the type's mapping slot, so every level nests PyObject_GetItem, slot_mp_subscript, the call
machinery and a new _PyEval_EvalFrameDefault, and with the recursion limit raised the main
thread's C stack overflows. 3.11 does not crash (seen: the chain's end is reached and
None[key] raises TypeError): its specializing interpreter runs a Python __getitem__ in the
same eval loop (BINARY_SUBSCR_GETITEM), as it does plain Python calls. Lines marked
"# stack" are the Python frames at the crash.
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

    def __getitem__(self, key):
        return self.child[key]  # stack


def build_chain(depth):
    node = None
    for index in range(depth):
        node = Node(index, node)
    return node


def describe(root):
    facts = {
        "scenario": "getitem_recursion",
        "python": sys.version,
        "executable": sys.executable,
        "depth": DEPTH,
        "recursion_limit": sys.getrecursionlimit(),
        "recursion_kind": "python_slot",
        "protocol": "subscript",
        "cycle": ["__getitem__"],
        "crash_native_id": threading.get_native_id(),
        "main_native_id": threading.main_thread().native_id,
        "stack_at_entry": stack_here(),
    }
    print("MARKER " + json.dumps(facts), flush=True)
    return root["leaf"]  # stack


def main():
    sys.setrecursionlimit(100_000_000)
    root = build_chain(DEPTH)
    print(describe(root))  # stack


main()  # stack
