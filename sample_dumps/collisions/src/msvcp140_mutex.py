"""The Visual Studio 2022 17.10 std::mutex break, with real wheels.

msvc-runtime 14.34.31931 puts Microsoft's msvcp140.dll (14.34) into sys.prefix, next to
python.exe: `import msvc_runtime` (its extension imports MSVCP140.dll) loads that copy first,
and every later extension that imports MSVCP140.dll gets it. ctranslate2 4.8.5's
ctranslate2.dll and _ext.pyd are linked by MSVC 14.44 and import _Mtx_lock but not
_Mtx_init_in_situ: their std::mutex objects come from the constexpr constructor (17.10+),
whose layout only msvcp140.dll 14.40+ understands. The first lock of one of them in the old
msvcp140.dll calls through a null pointer: ctranslate2.get_log_level() (spdlog's registry
mutex) -> access violation in msvcp140.dll.
Under Wine, a wheel's own msvcp140.dll is used only with WINEDLLOVERRIDES=msvcp140=n,b
(build.sh sets it); otherwise Wine's builtin msvcp140 answers every import.
"""

import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # python3X._pth: no script dir
from loaded import marker, module  # noqa: E402

import msvc_runtime  # noqa: F401  (loads sys.prefix\msvcp140.dll 14.34 first)

old = module("msvcp140.dll")
print("prog: msvcp140.dll after import msvc_runtime:", old["path"] if old else None, flush=True)

import ctranslate2  # noqa: E402

marker(scenario="msvcp140_mutex", ctranslate2_version=ctranslate2.__version__,
       msvcp140=module("msvcp140.dll"), ctranslate2_dll=module("ctranslate2.dll"),
       ext=module(ctranslate2._ext.__file__.rsplit("\\", 1)[-1]),
       next_call="ctranslate2.get_log_level()")
print("prog: never printed:", ctranslate2.get_log_level())  # stack: AV in msvcp140!_Mtx_lock
