"""Two copies of Intel's OpenMP runtime (libiomp5md.dll) in one Python process.

intel-openmp's copy (sys.prefix\\Library\\bin, where the wheel puts it and where MKL and
PyTorch builds look for it) is loaded and initialised first, as a numerical library built on
MKL would do; then `import ctranslate2`, whose __init__ loads every DLL of its own folder,
its own libiomp5md.dll among them (a second file, a second module). Initialising the second
copy runs the OpenMP library registration, which finds the first copy's environment variable
__KMP_REGISTERED_LIB_<pid> and stops the process:
    OMP: Error #15: Initializing libiomp5md.dll, but found libiomp5md.dll already initialized.
then exit(3) (the ucrt's exit, through ntdll!RtlExitUserProcess).
Under Wine, KMP_AFFINITY=disabled is needed in the environment (build.sh sets it): without
it each copy stops earlier with "OMP: Error #179: Function GetNumaNodeProcessorMaskEx() failed".
"""

import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # python3X._pth: no script dir
from loaded import marker, module  # noqa: E402

site = os.path.join(sys.prefix, "Lib", "site-packages")
first = ctypes.CDLL(os.path.join(sys.prefix, "Library", "bin", "libiomp5md.dll"))
first_threads = first.omp_get_max_threads()  # initialises the first copy
print("prog: intel-openmp libiomp5md.dll: omp_get_max_threads() =", first_threads, flush=True)

import ctranslate2  # noqa: E402  (loads ctranslate2\libiomp5md.dll, not yet initialised)

second = ctypes.CDLL(os.path.join(site, "ctranslate2", "libiomp5md.dll"))
marker(scenario="omp_duplicate", ctranslate2_version=ctranslate2.__version__,
       first=module(first), first_max_threads=first_threads, second=module(second),
       next_call="second.omp_get_max_threads()")
print("prog: never printed:", second.omp_get_max_threads())  # stack: Error #15, exit(3)
