"""json.dumps() of a list nested a million deep: C recursion in the _json encoder.

json.dumps uses the C accelerator (_json.c, built into python38.dll):
encoder_listencode_list -> encoder_listencode_obj -> encoder_listencode_list ...
"""

import json
import sys

DEPTH = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000


def nested_list(depth):
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def save_config(value):
    return json.dumps(value)  # stack


def main():
    sys.setrecursionlimit(100_000_000)
    value = nested_list(DEPTH)
    facts = {
        "scenario": "json_recursion",
        "python": sys.version,
        "executable": sys.executable,
        "depth": DEPTH,
        "recursion_limit": sys.getrecursionlimit(),
    }
    print("MARKER " + json.dumps(facts), flush=True)
    print(len(save_config(value)))  # stack


main()  # stack
