"""A seed that reseeds: unbounded recursion through NumPy's Cython code.

numpy.random.default_rng(seed) builds a PCG64, whose SeedSequence asks len() of a list
seed. This list's __len__ asks default_rng for a generator seeded with itself, so each
level runs four Cython functions of numpy.random (default_rng, PCG64.__init__,
BitGenerator.__init__, SeedSequence's entropy) and one Python method, until the main
thread's stack is gone. With the recursion limit raised, CPython 3.8 does not stop it.
"""

import json
import sys

import numpy


class Reseeding(list):
    def __len__(self):
        numpy.random.default_rng(self)  # stack
        return 1


def main():
    sys.setrecursionlimit(100_000_000)
    facts = {
        "scenario": "numpy_cython_recursion",
        "python": sys.version,
        "executable": sys.executable,
        "numpy": numpy.__version__,
        "numpy_file": numpy.__file__,
        "recursion_limit": sys.getrecursionlimit(),
        "depth": sys.getrecursionlimit(),  # nothing else bounds it
    }
    print("MARKER " + json.dumps(facts), flush=True)
    numpy.random.default_rng(Reseeding([1]))  # stack


main()  # stack
