"""The GPU stack: CUDA runtime, cuDNN, CUDA libraries and the NVIDIA driver, with the
versions their file names and version resources give."""

from __future__ import annotations

import functools
import re
from typing import List, Optional, Sequence, Tuple

from dumpkit.analysis.environment.versions import Versions, trim_version, version_groups
from dumpkit.analysis.model import CudaComponent
from dumpkit.target import Module


def cuda_toolkit_version(file_version: Optional[str]) -> Optional[str]:
    """CUDA toolkit DLLs (cudart, cuBLAS, cuFFT, ...) carry FileVersion 6.14.11.NNNNN where
    NNNNN is the toolkit version in NVIDIA's CUDART_VERSION encoding,
    major*1000 + minor*10 (cudaRuntimeGetVersion's documented format): 11020 -> "11.2",
    10010 -> "10.1", 9000 -> "9.0". The patch release (11.2.152) is only in the strings."""
    g = version_groups(file_version)
    if not g or len(g) != 4 or g[0] != 6 or g[1] != 14:
        return None
    n = g[3]
    if n < 1000 or n % 10:
        return None
    return f"{n // 1000}.{n % 1000 // 10}"


def nvidia_driver_version(file_version: Optional[str]) -> Optional[str]:
    """NVIDIA's Windows display-driver file version is WDDM.DX.AB.CDEF; the NVIDIA driver
    version is the last five digits of AB and CDEF (CDEF zero-padded to four), split 3+2:
    31.0.15.3179 -> "15"+"3179" -> 53179 -> 531.79; 27.21.14.5671 -> 456.71. (The same
    rule as (AB - 10) * 10000 + CDEF for AB in 10..19.)"""
    g = version_groups(file_version)
    if not g or len(g) != 4 or g[3] > 9999:
        return None
    digits = f"{g[2]}{g[3]:04d}"[-5:]
    if len(digits) < 5 or digits[0] == "0":
        return None
    return f"{int(digits[:3])}.{digits[3:]}"


# name pattern -> component name. Numbers in names: cudart64_110.dll, cublas64_11.dll,
# cudnn64_8.dll, cufft64_10.dll, cusolver64_11.dll, cupti64_2022.1.1.dll... The patterns are
# strings that re compiles (and caches) at their first use: most processes load no CUDA DLL,
# and compiling them at import cost ~1.5 ms of every start-up.
_CUDA_LIBS = (
    (r"(?i)^cudart(?:64|32)_(\d+)(?:_\d+)?\.dll$", "CUDA runtime"),
    (r"(?i)^cudnn(?:64|32)_(\d+)\.dll$", "cuDNN"),
    (r"(?i)^cublas(?:64|32)_(\d+)\.dll$", "cuBLAS"),
    (r"(?i)^cublaslt(?:64|32)_(\d+)\.dll$", "cuBLASLt"),
    (r"(?i)^cufft(?:64|32)_(\d+)\.dll$", "cuFFT"),
    (r"(?i)^curand(?:64|32)_(\d+)\.dll$", "cuRAND"),
    (r"(?i)^cusolver(?:64|32)_(\d+)\.dll$", "cuSOLVER"),
    (r"(?i)^cusparse(?:64|32)_(\d+)\.dll$", "cuSPARSE"),
    (r"(?i)^cupti(?:64|32)_([\d.]+)\.dll$", "CUPTI"),
    (r"(?i)^nvcuda\.dll$", "NVIDIA driver"),
)


_ORDER = [name for _, name in _CUDA_LIBS]


_CUDA_IN_TEXT = r"CUDA\s+(\d+\.\d+(?:\.\d+)?)"


_VERSION_IN_TEXT = r"(?i)Version\s+(\d+(?:\.\d+){1,3})"


def cudart_name_family(tag: str) -> str:
    """cudart64_XY[Z].dll digits -> the CUDA versions that ship that name: "101" -> "10.1",
    "90" -> "9.0", "110" -> "11.x" (all CUDA 11 releases ship cudart64_110.dll), "12" ->
    "12.x"."""
    if tag == "110":
        return "11.x"
    if len(tag) <= 2 and int(tag) >= 12:
        return f"{int(tag)}.x"
    return f"{tag[:-1]}.{tag[-1]}"


class CudaStack:
    def __init__(self) -> None:
        self.components: List[CudaComponent] = []
        self.runtime: Optional[str] = None  # "11.2" (major.minor) when known
        self.runtime_tag: Optional[str] = None  # "110"
        self.cudnn: Optional[str] = None  # "8.1.0" or a major "8"
        self.cudnn_tag: Optional[str] = None
        self.driver_cuda: Optional[str] = None  # "12.1" from nvcuda's strings
        self.driver: Optional[str] = None

    @property
    def several(self) -> bool:
        """More than one CUDA runtime or cuDNN loaded: the fields above describe the last
        one found, and runtimes.py says the collision."""
        names = [c.name for c in self.components]
        return names.count("CUDA runtime") > 1 or names.count("cuDNN") > 1


@functools.lru_cache(maxsize=4096)  # asked of every module of every dump, twice; fleets share names
def cuda_library(file_name: str) -> Optional[Tuple[str, Optional[str]]]:
    """(component, the number in the file name) of a CUDA DLL: cudart64_110.dll ->
    ("CUDA runtime", "110"), cudnn64_8.dll -> ("cuDNN", "8"), nvcuda.dll -> ("NVIDIA
    driver", None); None for any other file."""
    if file_name[:2].lower() not in ("cu", "nv"):  # what every name below starts with
        return None
    for pattern, name in _CUDA_LIBS:
        mt = re.match(pattern, file_name)
        if mt:
            return name, mt.group(1) if mt.groups() else None
    return None


def find_cuda(modules: Sequence[Module], vers: Versions) -> CudaStack:
    out = CudaStack()
    for m in modules:
        lib = cuda_library(m.name)
        if lib is not None:
            out.components.append(_component(lib[0], m, lib[1], vers, out))
    out.components.sort(key=lambda c: _ORDER.index(c.name))
    return out


def _component(name: str, m: Module, tag: Optional[str], vers: Versions, out: CudaStack) -> CudaComponent:
    fv, _pv, src = vers.fixed(m)
    s = vers.strings(m)
    text = " ".join(v for k, v in s.items() if k in ("ProductName", "FileDescription"))
    version: Optional[str] = None
    detail: Optional[str] = None
    if name == "CUDA runtime":
        out.runtime_tag = tag
        toolkit = cuda_toolkit_version(fv)
        exact = re.search(_CUDA_IN_TEXT, text)
        if exact and toolkit and not exact.group(1).startswith(toolkit + "."):
            exact = None  # strings that disagree with the fixed version are not trusted
        if toolkit:
            version = exact.group(1) if exact else toolkit
            out.runtime = toolkit
            detail = f"FileVersion {fv} -> CUDA {toolkit} (major*1000 + minor*10 = {(fv or '').split('.')[-1]})"
        elif exact:
            version = exact.group(1)
            out.runtime = trim_version(version, 2)
            src = "image"
            detail = f"version string '{text.strip()}'"
        else:
            family = cudart_name_family(tag) if tag else None
            version = family
            src = "file name"
            detail = f"file name only: {m.name} ships with CUDA {family}" if family else None
            if family and not family.endswith(".x"):
                out.runtime = family
        if exact:
            detail = (detail + f"; {exact.group(0)} from the version strings") if detail else detail
    elif name == "cuDNN":
        out.cudnn_tag = tag
        g = version_groups(fv)
        if g and tag and len(g) == 4 and str(g[0]) == tag:
            version = trim_version(fv or "", 3)
            detail = f"FileVersion {fv} (build {g[3]})"
        elif tag:
            version, src = tag, "file name"
            detail = f"file name only: cudnn64_{tag}.dll is cuDNN {tag}.x"
        out.cudnn = version
    elif name == "NVIDIA driver":
        drv = nvidia_driver_version(fv)
        supports = re.search(_CUDA_IN_TEXT, text)
        if drv:
            version = drv
            detail = f"Windows driver FileVersion {fv} -> NVIDIA {drv} (last five digits of the last two groups)"
        if supports:
            out.driver_cuda = trim_version(supports.group(1), 2)
            detail = ((detail + "; ") if detail else "") + f"supports CUDA {supports.group(1)} (version strings)"
        out.driver = drv
        if not drv:
            src = src if supports else None
    else:
        toolkit = cuda_toolkit_version(fv)
        own = re.search(_VERSION_IN_TEXT, s.get("FileDescription", "")) if s else None
        if own:
            version = own.group(1)
            detail = f"{name} {own.group(1)} (FileDescription)" + (
                f", from CUDA {toolkit} (FileVersion {fv})" if toolkit else ""
            )
            src = "image"
        elif toolkit:
            version = f"CUDA {toolkit}"
            detail = f"FileVersion {fv}: the {name} of CUDA toolkit {toolkit}"
        elif fv:
            version = fv
            detail = f"FileVersion {fv}"
        else:
            version, src = None, None
    if version is None:
        src = None
        detail = detail or "no version: the dump's module record has none and no image was read"
    return CudaComponent(name=name, module=m.path, version=version, source=src, detail=detail)
