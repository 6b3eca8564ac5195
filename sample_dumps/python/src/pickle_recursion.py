"""pickle.dumps() of a list nested a million deep: C recursion in the _pickle module.

_pickle.c (built into python38.dll): save -> save_list -> batch_list -> save ...
"""

import json
import pickle
import sys

DEPTH = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000


def nested_list(depth):
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def checkpoint(value):
    return pickle.dumps(value)  # stack


def main():
    sys.setrecursionlimit(100_000_000)
    value = nested_list(DEPTH)
    facts = {
        "scenario": "pickle_recursion",
        "python": sys.version,
        "executable": sys.executable,
        "depth": DEPTH,
        "recursion_limit": sys.getrecursionlimit(),
    }
    print("MARKER " + json.dumps(facts), flush=True)
    print(len(checkpoint(value)))  # stack


main()  # stack
