"""Control for omp_duplicate: ONE copy of libiomp5md.dll loaded, then os.abort().

The same interpreter folder as omp_duplicate_py311 (intel-openmp's copy is on disk in
sys.prefix\\Library\\bin but never loaded): `import ctranslate2` loads its own libiomp5md.dll,
which is initialised through omp_get_max_threads(); then os.abort(). No collision: the dump
has one libiomp5md.dll, and the ending is abort()'s (under Wine `_exit(3)`, so the exit code
is also 3; on Windows abort() fail-fasts with 0xC0000409 instead).
"""

import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # python3X._pth: no script dir
from loaded import marker, module  # noqa: E402

import ctranslate2

site = os.path.join(sys.prefix, "Lib", "site-packages")
omp = ctypes.CDLL(os.path.join(site, "ctranslate2", "libiomp5md.dll"))
threads = omp.omp_get_max_threads()
print("prog: ctranslate2 libiomp5md.dll: omp_get_max_threads() =", threads, flush=True)
marker(scenario="omp_single", ctranslate2_version=ctranslate2.__version__,
       omp=module(omp), max_threads=threads,
       intel_openmp_loaded=module("libiomp5md.dll"), next_call="os.abort()")
os.abort()  # stack
