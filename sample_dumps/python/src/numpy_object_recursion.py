"""NumPy object arrays nested 100,000 deep compared with ==.

Each element of a dtype=object array is another one-element object array, so
the equal ufunc's object loop calls PyObject_RichCompare on the elements, which
runs the ufunc again one level down: C recursion inside _multiarray_umath.
"""

import json
import sys

import numpy

DEPTH = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000


def nested_array(depth):
    value = numpy.zeros(1)
    for _ in range(depth):
        outer = numpy.empty(1, dtype=object)
        outer[0] = value
        value = outer
    return value


def same_tree(left, right):
    return left == right  # stack


def main():
    sys.setrecursionlimit(100_000_000)
    left, right = nested_array(DEPTH), nested_array(DEPTH)
    facts = {
        "scenario": "numpy_object_recursion",
        "python": sys.version,
        "executable": sys.executable,
        "numpy": numpy.__version__,
        "numpy_file": numpy.__file__,
        "depth": DEPTH,
        "recursion_limit": sys.getrecursionlimit(),
    }
    print("MARKER " + json.dumps(facts), flush=True)
    print(same_tree(left, right))  # stack


main()  # stack
