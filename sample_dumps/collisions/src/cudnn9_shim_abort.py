"""cuDNN 9's front DLL without its sub-libraries: a real abort() that fail-fasts.

ctranslate2 4.8.5 ships cudnn64_9.dll (cuDNN 9.10.2's small front DLL, 266 KB) but not
cudnn_graph64_9.dll, cudnn_ops64_9.dll, ... which it loads on first use (they come from
nvidia-cudnn-cu12 or a CUDA install). Any cuDNN call, even cudnnGetVersion(), makes it look
for cudnn_graph64_9.dll; when that is not found it prints
    Could not locate cudnn_graph64_9.dll. Please make sure it is in your library path!
    Invalid handle. Cannot load symbol cudnnGetVersion
and calls abort() of the C runtime linked into cudnn64_9.dll itself, which fail-fasts
(__fastfail(FAST_FAIL_FATAL_APP_EXIT): 0xC0000409, parameter 7) even under Wine, because that
abort() is not Wine's ucrtbase one. Users of faster-whisper / ctranslate2 on Windows meet the
same text as "Could not locate cudnn_ops64_9.dll" when cuDNN 9 is missing or incomplete.
"""

import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # python3X._pth: no script dir
from loaded import marker, module  # noqa: E402

import ctranslate2  # noqa: E402  (loads ctranslate2\cudnn64_9.dll among its DLLs)

site = os.path.join(sys.prefix, "Lib", "site-packages")
cudnn9 = ctypes.CDLL(os.path.join(site, "ctranslate2", "cudnn64_9.dll"))
cudnn9.cudnnGetVersion.restype = ctypes.c_size_t
marker(scenario="cudnn9_shim_abort", ctranslate2_version=ctranslate2.__version__,
       cudnn64_9=module(cudnn9), cudnn_graph64_9=module("cudnn_graph64_9.dll"),
       next_call="cudnn64_9.cudnnGetVersion()")
print("prog: never printed:", cudnn9.cudnnGetVersion())  # stack: abort() -> __fastfail(7)
