"""CUDA runtimes of two CUDA majors, and cuDNN of two majors, in one Python process.

No GPU is needed to load them: cudart and cuDNN load the driver (nvcuda.dll) only at their
first device call. Loaded through ctypes from where their wheels put them:
  nvidia-cuda-runtime-cu11 11.8.89:  site-packages\\nvidia\\cuda_runtime\\bin\\cudart64_110.dll
  nvidia-cuda-runtime-cu12 12.9.79:  site-packages\\nvidia\\cuda_runtime\\bin\\cudart64_12.dll
  ctranslate2 4.8.5 (import ctranslate2 loads it): site-packages\\ctranslate2\\cudnn64_9.dll
  ctranslate2 3.24.0, unpacked as `pip install --target C:\\apps\\legacy` would:
                                     C:\\apps\\legacy\\ctranslate2\\cudnn64_8.dll
The CUDA runtimes are asked their version (cudaRuntimeGetVersion: 11.8's answers 35,
cudaErrorInsufficientDriver, without a driver; 12.9's answers 12090); the cuDNN DLLs are only
loaded: both are the small front DLL of their cuDNN, and asking cudnn64_9.dll anything loads
cudnn_graph64_9.dll, which ctranslate2 does not ship (see cudnn9_shim_abort.py), and
cudnn64_8.dll's cudnnGetVersion ends the process with exit code 9 under Wine. Then
os.abort(). No GPU, no driver: no CUDA error is the point; the dump's module list is.
"""

import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # python3X._pth: no script dir
from loaded import marker, module  # noqa: E402

site = os.path.join(sys.prefix, "Lib", "site-packages")
cudart_dir = os.path.join(site, "nvidia", "cuda_runtime", "bin")


def cudart_version(dll):
    v = ctypes.c_int(0)
    rc = dll.cudaRuntimeGetVersion(ctypes.byref(v))
    return rc, v.value


cudart11 = ctypes.CDLL(os.path.join(cudart_dir, "cudart64_110.dll"))
cudart12 = ctypes.CDLL(os.path.join(cudart_dir, "cudart64_12.dll"))
rt11 = cudart_version(cudart11)
rt12 = cudart_version(cudart12)
print("prog: cudart64_110.dll cudaRuntimeGetVersion ->", rt11, flush=True)
print("prog: cudart64_12.dll cudaRuntimeGetVersion ->", rt12, flush=True)

import ctranslate2  # noqa: E402  (loads ctranslate2\cudnn64_9.dll among its DLLs)

cudnn9 = ctypes.CDLL(os.path.join(site, "ctranslate2", "cudnn64_9.dll"))
cudnn8 = ctypes.CDLL(r"C:\apps\legacy\ctranslate2\cudnn64_8.dll")
print("prog: loaded cudnn64_9.dll and cudnn64_8.dll", flush=True)
marker(scenario="two_cuda_runtimes", ctranslate2_version=ctranslate2.__version__,
       cudart64_110=module(cudart11), cudart64_12=module(cudart12),
       cuda_runtime_versions={"cudart64_110.dll": rt11, "cudart64_12.dll": rt12},
       cudnn64_9=module(cudnn9), cudnn64_8=module(cudnn8),
       next_call="os.abort()")
os.abort()  # stack
