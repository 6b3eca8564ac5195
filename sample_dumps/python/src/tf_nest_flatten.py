"""tf.nest.flatten of a list nested 100,000 deep, with TensorFlow loaded.

tf.nest.flatten calls tensorflow::swig::Flatten in _pywrap_tensorflow_internal.pyd,
which recurses once per nesting level in C++. Flatten counts its levels against
the interpreter's recursion limit (Py_EnterRecursiveCall: "maximum recursion depth
exceeded in flatten" at the default 1000), so the limit is raised first.
"""

import json
import sys

import numpy
import tensorflow as tf

DEPTH = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000


def nested_list(depth):
    value: list = [0]
    for _ in range(depth):
        value = [value]
    return value


def leaves(structure):
    return tf.nest.flatten(structure)  # stack


def main():
    sys.setrecursionlimit(100_000_000)
    structure = nested_list(DEPTH)
    facts = {
        "scenario": "tf_nest_flatten",
        "python": sys.version,
        "executable": sys.executable,
        "tensorflow": tf.__version__,
        "tensorflow_file": tf.__file__,
        "numpy": numpy.__version__,
        "depth": DEPTH,
    }
    print("MARKER " + json.dumps(facts), flush=True)
    print(len(leaves(structure)))  # stack


main()  # stack
