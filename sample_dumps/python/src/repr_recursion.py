"""repr() of a list nested a million deep: C recursion through the repr protocol.

list_repr -> PyObject_Repr -> list_repr ...: the eval loop is not in the cycle,
so this overflows the C stack inside python38.dll alone once the recursion
limit (which PyObject_Repr checks) is out of the way.
"""

import json
import sys

DEPTH = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000


def nested_list(depth):
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def render(value):
    return repr(value)  # stack


def main():
    sys.setrecursionlimit(100_000_000)
    value = nested_list(DEPTH)
    facts = {
        "scenario": "repr_recursion",
        "python": sys.version,
        "executable": sys.executable,
        "depth": DEPTH,
        "recursion_limit": sys.getrecursionlimit(),
    }
    print("MARKER " + json.dumps(facts), flush=True)
    print(len(render(value)))  # stack


main()  # stack
