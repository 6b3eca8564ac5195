"""Python functions recursing until the main thread's C stack runs out (CPython 3.9, 3.10).

A job walks a linked chain of nodes with two mutually recursive functions (walk -> visit ->
walk ...: a Python-level cycle of period 2). The recursion limit is raised far above what
the 1.9 MiB C stack of python.exe's main thread can hold, so up to 3.10 every Python call
nests another _PyEval_EvalFrameDefault on the C stack until it overflows. From 3.11 on a
Python-to-Python call does not nest the C stack: the same program just runs.
Lines marked "# stack" are the ones on the Python stack when it crashes.
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
    def __init__(self, index, child):
        self.index = index
        self.child = child


def build_chain(depth):
    node = None
    for index in range(depth):
        node = Node(index, node)
    return node


def walk(node):
    if node is None:
        return 0
    return visit(node.child) + 1  # stack


def visit(node):
    if node is None:
        return 0
    return walk(node.child) + 1  # stack


def run_job(depth):
    root = build_chain(depth)
    facts = {
        "scenario": "py_recursion",
        "python": sys.version,
        "executable": sys.executable,
        "depth": depth,
        "recursion_limit": sys.getrecursionlimit(),
        "recursion_kind": "python",
        "cycle": ["walk", "visit"],
        "crash_native_id": threading.get_native_id(),
        "main_native_id": threading.main_thread().native_id,
        "stack_at_entry": stack_here(),
    }
    print("MARKER " + json.dumps(facts), flush=True)
    return walk(root)  # stack


def main():
    sys.setrecursionlimit(10_000_000)
    print("walked", run_job(DEPTH))  # stack


main()  # stack
