"""Python functions recursing until the main thread's C stack runs out.

A job walks a linked chain of nodes with two mutually recursive functions
(walk -> visit -> walk ...: a Python-level cycle of period 2). The recursion
limit is raised far above what the 1.9 MiB C stack of python.exe's main thread
can hold, so the interpreter never raises RecursionError: every Python call
nests another _PyEval_EvalFrameDefault on the C stack until it overflows.
Lines marked "# stack" are the ones on the Python stack when it crashes.
"""

import json
import sys

DEPTH = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000


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
    return walk(root)  # stack


def main():
    sys.setrecursionlimit(10_000_000)
    facts = {
        "scenario": "py_recursion",
        "python": sys.version,
        "executable": sys.executable,
        "depth": DEPTH,
        "recursion_limit": sys.getrecursionlimit(),
    }
    print("MARKER " + json.dumps(facts), flush=True)
    print("walked", run_job(DEPTH))  # stack


main()  # stack
