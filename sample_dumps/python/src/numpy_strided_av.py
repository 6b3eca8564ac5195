"""numpy.lib.stride_tricks.as_strided with a 2**40-byte stride, then .sum().

as_strided trusts the caller: the view's second element lies 1 TiB past a
16-byte buffer, and the summing loop in _multiarray_umath reads it.
"""

import json
import sys

import numpy
from numpy.lib.stride_tricks import as_strided

STRIDE = 2**40


def bogus_view(buffer):
    return as_strided(buffer, shape=(1024,), strides=(STRIDE,))


def total(view):
    return view.sum()  # stack


def main():
    buffer = numpy.arange(2, dtype=numpy.float64)
    view = bogus_view(buffer)
    facts = {
        "scenario": "numpy_strided_av",
        "python": sys.version,
        "executable": sys.executable,
        "numpy": numpy.__version__,
        "numpy_file": numpy.__file__,
        "buffer_address": buffer.ctypes.data,
        "stride": STRIDE,
        "shape": list(view.shape),
    }
    print("MARKER " + json.dumps(facts), flush=True)
    print(total(view))  # stack


main()  # stack
