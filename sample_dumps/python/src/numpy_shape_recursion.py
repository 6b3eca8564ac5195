"""A NumPy array reshaped by assigning `.shape`, with a dimension whose `__index__`
assigns the shape again, 100,000 deep.

`arr.shape = (dim,)` runs NumPy's setter of ndarray.shape (a PyGetSetDef's set
function in _multiarray_umath), which converts each dimension with
PyNumber_Index; the dimension's Python `__index__` assigns the shape of the next
array, so the setter runs again one level down: C recursion through NumPy's
attribute setter and CPython's `__index__` slot, with a Python frame per level.
"""

import json
import sys

import numpy

DEPTH = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000


class Dimension:
    """A length that is only known once the next array has been reshaped."""

    def __init__(self, arrays, level):
        self.arrays = arrays
        self.level = level

    def __index__(self):
        if self.level + 1 < len(self.arrays):
            reshape(self.arrays, self.level + 1)  # stack
        return 1


def reshape(arrays, level):
    arrays[level].shape = (Dimension(arrays, level),)  # stack


def main():
    sys.setrecursionlimit(100_000_000)
    arrays = [numpy.zeros(1) for _ in range(DEPTH)]
    facts = {
        "scenario": "numpy_shape_recursion",
        "python": sys.version,
        "executable": sys.executable,
        "numpy": numpy.__version__,
        "numpy_file": numpy.__file__,
        "depth": DEPTH,
        "recursion_limit": sys.getrecursionlimit(),
    }
    print("MARKER " + json.dumps(facts), flush=True)
    reshape(arrays, 0)  # stack
    print("reshaped")


main()  # stack
