"""The environment a TensorFlow issue report asks for, read from a dump.

OS and build, CPU and its AVX support, Python, the TensorFlow module, the CUDA runtime /
cuDNN / CUDA libraries / NVIDIA driver, and whether they fit TensorFlow's tested Windows
GPU configurations (`dumpkit.analysis.tf_builds`).

Pure over a `Target`: no file I/O here. Versions come from the dump's own module records
(VS_FIXEDFILEINFO); the caller may pass `image_version(module)`, which reads the PE version
resource of the module's image when one was found (that adds the version *strings*, e.g.
"NVIDIA CUDA 11.2.152 Runtime", which a minidump never carries).

Every value says where it came from, and nothing is claimed that the dump does not show:
a CPU feature the dump has no evidence for is None (unknown), not False.
"""

from __future__ import annotations

import re
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from dumpkit.analysis import tf_builds
from dumpkit.analysis.model import CudaComponent, Environment
from dumpkit.pe import VersionInfo
from dumpkit.target import Module, SystemInfo, Target

__all__ = [
    "describe_environment",
    "VersionLookup",
    "nvidia_driver_version",
    "cuda_toolkit_version",
    "python_version_from_file_version",
    "os_name",
]

VersionLookup = Callable[[Module], Optional[VersionInfo]]

# ----------------------------------------------------------------------------- CPU features
# IsProcessorFeaturePresent numbers (winnt.h; learn.microsoft.com "IsProcessorFeaturePresent
# function"). On AMD64 dumps, MINIDUMP_SYSTEM_INFO.Cpu.OtherCpuInfo.ProcessorFeatures[0] has
# bit N set when IsProcessorFeaturePresent(N) was true for the writer (dbghelp, and Wine's
# dbghelp, loop over the bits). x86 dumps record CPUID instead (vendor, leaf 1 EAX and EDX).
PF_SSSE3 = 36
PF_SSE4_1 = 37
PF_SSE4_2 = 38
PF_AVX = 39
PF_AVX2 = 40
PF_AVX512F = 41
PF_ERMS = 42

# MISC_INFO_5 XStateData.EnabledFeatures bits (XSTATE_* in winnt.h).
XSTATE_LEGACY_FP = 0
XSTATE_LEGACY_SSE = 1
XSTATE_AVX = 2  # "GSSE": the upper halves of the YMM registers
XSTATE_AVX512_MASK = 0b111 << 5  # opmask, ZMM_Hi256, Hi16_ZMM

FEATURES = ("AVX", "AVX2", "AVX512F")
_PF_BIT = {"AVX": PF_AVX, "AVX2": PF_AVX2, "AVX512F": PF_AVX512F}

SRC_PF = "PF_* processor-feature bits (IsProcessorFeaturePresent)"
SRC_XSTATE = "XSTATE mask in MiscInfo (state the OS enabled)"


def cpu_features(
    system: Optional[SystemInfo], xstate: Optional[int]
) -> Tuple[Dict[str, Optional[bool]], Dict[str, str], str]:
    """(feature -> True/False/None, feature -> source sentence, one-line summary).

    Rules, strongest first:
    * AMD64 PF bits. A set bit is proof. A clear bit is proof of absence only when the
      writer is known to fill that part of the mask: Windows sets PF 36..41 (SSSE3 ..
      AVX512F) together from Windows 10 2004 on, and leaves all of them clear before (the
      real 14393/17134 dumps here have Haswell/Broadwell CPUs, which have AVX2, and no bit
      36+). So "no AVX bit" means "no AVX" only when SSSE3/SSE4.x bits are present. Wine 8.0
      fills 36..40 but never 41 (newer Wine fills 41 and 42 together), so under Wine a
      clear AVX512F bit counts only when the ERMS bit (42) shows the newer code wrote it.
    * XSTATE EnabledFeatures (MISC_INFO_5): AVX state enabled => the CPU has AVX and the OS
      uses it; bits 5-7 enabled => AVX-512 (every AVX-512 CPU has AVX512F). A clear bit
      proves nothing: breakpad's tiny-exe-with-cet-xsave.dmp (a Tiger Lake CPU, which has
      AVX) records 0x8000000000000803, evidently the features of the captured context only.
      The mask never says anything about AVX2.
    * x86 dumps record CPUID leaf 1 EDX only; AVX is a leaf 1 ECX bit (and AVX2/AVX512F are
      leaf 7), so they cannot show any of the three.
    """
    feats: Dict[str, Optional[bool]] = dict.fromkeys(FEATURES)
    sources: Dict[str, str] = {}
    if system is None:
        return feats, sources, "no SystemInfo stream in the dump"
    reason_unknown = "nothing in the dump shows it"
    if system.is_x64 and system.cpu_vendor is None and system.processor_features[0]:
        pf = system.processor_features[0]
        wine = system.wine_version is not None
        knows_block = bool(pf & ((1 << PF_SSSE3) | (1 << PF_SSE4_1) | (1 << PF_SSE4_2)))
        knows_512 = bool(pf & (1 << PF_ERMS)) if wine else knows_block
        for name, bit in _PF_BIT.items():
            if pf >> bit & 1:
                feats[name] = True
                sources[name] = f"{SRC_PF}: bit {bit} set"
            elif knows_512 if name == "AVX512F" else knows_block:
                feats[name] = False
                sources[name] = f"{SRC_PF}: bit {bit} clear while the writer fills bits 36+"
        if not knows_block:
            reason_unknown = (
                "the PF_* mask has no SSSE3/SSE4 bits (36-38), so this writer/OS "
                "does not report PF 39-41 and a clear bit means nothing"
            )
    elif system.processor_architecture == 0 and system.cpu_vendor:
        reason_unknown = (
            "x86 dump: it records CPUID leaf 1 EDX only, and AVX is in ECX "
            "(AVX2/AVX-512 in leaf 7), which minidumps do not record"
        )
    if xstate is not None and xstate & 0b11 == 0b11:  # x87 and SSE are always on: sane mask
        if feats["AVX"] is None and xstate >> XSTATE_AVX & 1:
            feats["AVX"] = True
            sources["AVX"] = f"{SRC_XSTATE}: AVX state bit 2 set (0x{xstate:x})"
        if feats["AVX512F"] is None and xstate & XSTATE_AVX512_MASK == XSTATE_AVX512_MASK:
            feats["AVX512F"] = True
            sources["AVX512F"] = f"{SRC_XSTATE}: AVX-512 state bits 5-7 set (0x{xstate:x})"
    for name in FEATURES:
        if feats[name] is None:
            sources.setdefault(name, f"unknown: {reason_unknown}")
    by_source: Dict[str, List[str]] = {}
    for n in FEATURES:
        by_source.setdefault(sources[n].split(":")[0] if feats[n] is not None else "", []).append(n)
    unknown = by_source.pop("", [])
    if not by_source:
        summary = f"unknown: {reason_unknown}"
    elif not unknown and len(by_source) == 1:
        summary = next(iter(by_source))
    else:
        summary = "; ".join(f"{src} for {', '.join(ns)}" for src, ns in by_source.items())
        if unknown:
            summary += f"; {', '.join(unknown)} unknown"
    return feats, sources, summary


# ----------------------------------------------------------------------------- OS / CPU
_SERVER_BY_BUILD = (
    (26100, "Windows Server 2025"),
    (20348, "Windows Server 2022"),
    (17763, "Windows Server 2019"),
    (14393, "Windows Server 2016"),
)


def os_name(major: int, minor: int, build: int, product_type: int = 1) -> str:
    """Marketing name from the version numbers. product_type 1 = workstation, 2 = domain
    controller, 3 = server. Windows 11 reports 10.0 like Windows 10; build 22000 is its
    first release."""
    server = product_type not in (0, 1)
    if (major, minor) == (10, 0):
        if server:
            for first, name in _SERVER_BY_BUILD:
                if build == first:
                    return name
            return f"Windows Server (build {build})"
        return "Windows 11" if build >= 22000 else "Windows 10"
    names = {
        (6, 3): ("Windows 8.1", "Windows Server 2012 R2"),
        (6, 2): ("Windows 8", "Windows Server 2012"),
        (6, 1): ("Windows 7", "Windows Server 2008 R2"),
        (6, 0): ("Windows Vista", "Windows Server 2008"),
        (5, 2): ("Windows XP x64 / Server 2003", "Windows Server 2003"),
        (5, 1): ("Windows XP", "Windows XP"),
        (5, 0): ("Windows 2000", "Windows 2000 Server"),
    }
    pair = names.get((major, minor))
    if pair:
        return pair[1] if server else pair[0]
    return f"Windows NT {major}.{minor}"


def _os_build(system: SystemInfo, build_string: Optional[str]) -> str:
    text = f"{system.os_major}.{system.os_minor}.{system.os_build}"
    csd = (system.csd_version or "").strip()
    if csd.isdigit():
        text += f".{csd}"  # newer writers put the update build revision (UBR) here
    elif csd:
        text += f" {csd}"
    if build_string and not build_string.rstrip().endswith(text):
        text += f" ({build_string})"
    return text


def _wine_description(wine: str, system: SystemInfo) -> str:
    parts = [p.strip() for p in wine.split(" / ")]
    version = parts[0]
    if version.lower().startswith("wine-"):
        version = version[5:]
    host = " ".join(parts[1:3]).strip()
    claimed = os_name(system.os_major, system.os_minor, system.os_build, system.product_type)
    return (
        f"Wine {version}"
        + (f" on {host}" if host else "")
        + f": the program ran under Wine, not Windows (the Wine prefix reports {claimed}, "
        f"{system.os_major}.{system.os_minor}.{system.os_build})"
    )


# Families only AMD (or Hygon, 0x18) uses today; Intel uses 6 and 15 and has announced
# others, so no vendor is inferred from any other family.
_AMD_FAMILIES = {
    0x15: "Bulldozer family",
    0x16: "Jaguar family",
    0x17: "Zen/Zen+/Zen 2",
    0x19: "Zen 3/Zen 4",
    0x1A: "Zen 5",
}


def _cpu(system: SystemInfo) -> str:
    n = system.number_of_processors
    procs = f", {n} logical processor{'s' if n != 1 else ''}" if n else ""
    if system.cpu_vendor and system.cpuid_version:
        fam, model, step = system.cpu_family, system.cpu_model, system.cpu_stepping
        return (
            f"{system.cpu_vendor} family {fam} model {model} stepping {step} (CPUID 0x{system.cpuid_version:x}){procs}"
        )
    if system.processor_architecture in (0, 9) and system.processor_level:
        # Windows' ProcessorLevel is the (display) family, ProcessorRevision model<<8|stepping.
        fam = system.processor_level
        model, step = system.processor_revision >> 8, system.processor_revision & 0xFF
        if fam in _AMD_FAMILIES:
            vendor = (
                f"AMD {_AMD_FAMILIES[fam]}: the dump does not record the vendor, but only AMD uses family 0x{fam:x}"
            )
        else:
            vendor = "vendor not recorded"
        return f"{system.arch_name}, family {fam} model {model} stepping {step} ({vendor}){procs}"
    return f"{system.arch_name}{procs}"


# ----------------------------------------------------------------------------- versions
def _groups(version: Optional[str]) -> Optional[Tuple[int, ...]]:
    if not version:
        return None
    try:
        return tuple(int(x) for x in version.split("."))
    except ValueError:
        return None


def python_version_from_file_version(file_version: str) -> Optional[str]:
    """pythonXY.dll's VS_FIXEDFILEINFO is major.minor.FIELD3.api, with
    FIELD3 = micro*1000 + release_level*10 + serial (CPython PC/field3.py / make_versioninfo.c;
    levels 0xA alpha, 0xB beta, 0xC candidate, 0xF final): 3.10.11150.1013 -> "3.10.11"."""
    g = _groups(file_version)
    if not g or len(g) < 3:
        return None
    micro, rest = divmod(g[2], 1000)
    level, serial = divmod(rest, 10)
    suffix = {0xA: "a", 0xB: "b", 0xC: "rc", 0xF: ""}.get(level)
    if suffix is None:
        return None
    return f"{g[0]}.{g[1]}.{micro}" + (f"{suffix}{serial}" if suffix else "")


def cuda_toolkit_version(file_version: Optional[str]) -> Optional[str]:
    """CUDA toolkit DLLs (cudart, cuBLAS, cuFFT, ...) carry FileVersion 6.14.11.NNNNN where
    NNNNN is the toolkit version in NVIDIA's CUDART_VERSION encoding,
    major*1000 + minor*10 (cudaRuntimeGetVersion's documented format): 11020 -> "11.2",
    10010 -> "10.1", 9000 -> "9.0". The patch release (11.2.152) is only in the strings."""
    g = _groups(file_version)
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
    g = _groups(file_version)
    if not g or len(g) != 4 or g[3] > 9999:
        return None
    digits = f"{g[2]}{g[3]:04d}"[-5:]
    if len(digits) < 5 or digits[0] == "0":
        return None
    return f"{int(digits[:3])}.{digits[3:]}"


def _trim(version: str, keep: int) -> str:
    return ".".join(version.split(".")[:keep])


class _Versions:
    """Per-module version evidence: the dump's record first, then the image's resource."""

    def __init__(self, image_version: Optional[VersionLookup]):
        self._lookup = image_version
        self._cache: Dict[Tuple[str, int], Optional[VersionInfo]] = {}
        self.problems: List[str] = []

    def image(self, module: Module) -> Optional[VersionInfo]:
        if self._lookup is None:
            return None
        key = (module.name.lower(), module.base)
        if key not in self._cache:
            try:
                self._cache[key] = self._lookup(module)
            except Exception as e:  # the lookup is the caller's; never let it sink the report
                self.problems.append(f"{module.name}: version lookup failed ({e})")
                self._cache[key] = None
        return self._cache[key]

    def fixed(self, module: Module) -> Tuple[Optional[str], Optional[str], Optional[str]]:
        """(file_version, product_version, source) from the record, else from the image."""
        if module.file_version and module.file_version != "0.0.0.0":
            return module.file_version, module.product_version, "module record"
        vi = self.image(module)
        if vi is not None and vi.file_version and vi.file_version != "0.0.0.0":
            return vi.file_version, vi.product_version, "image"
        return None, None, None

    def strings(self, module: Module) -> Dict[str, str]:
        vi = self.image(module)
        return dict(vi.strings) if vi is not None and vi.strings else {}


# ----------------------------------------------------------------------------- Python
_PYDLL = re.compile(r"^python(\d)(\d{1,2})(_d)?\.dll$", re.I)
_PYEXE = re.compile(r"^pythonw?(_d)?\.exe$", re.I)


def _python(modules: Sequence[Module], vers: _Versions) -> Tuple[Optional[str], Optional[str], Optional[str]]:
    exe = next((m.path for m in modules if _PYEXE.match(m.name)), None)
    for m in modules:
        mt = _PYDLL.match(m.name)
        if not mt:
            continue
        family = f"{mt.group(1)}.{mt.group(2)}"
        version = family
        fv, _pv, _src = vers.fixed(m)
        exact = python_version_from_file_version(fv) if fv else None
        if exact and exact.startswith(family + "."):
            version = exact
        else:
            sv = vers.strings(m).get("ProductVersion") or vers.strings(m).get("FileVersion")
            if sv and re.fullmatch(re.escape(family) + r"\.\d+\S*", sv.strip()):
                version = sv.strip()
        return version, m.path, exe
    return None, None, exe


# ----------------------------------------------------------------------------- TensorFlow
_TF_NAME = re.compile(
    r"^(_pywrap_tensorflow\w*\.pyd|tensorflow_framework[\w.]*\.dll|"
    r"tensorflow_cc[\w.]*\.dll|tensorflow\.dll)$",
    re.I,
)
_TF_DIR = re.compile(r"[\\/]tensorflow(?:_core)?[\\/]", re.I)
_TF_PATH_VERSION = re.compile(
    r"tensorflow(?:[-_](?:gpu|cpu|base|intel|directml))?[-_](\d+\.\d+(?:\.\d+)?(?:rc\d+)?)(?=[-_\\/.]|$)", re.I
)
_VERSION_TEXT = re.compile(r"^\d+\.\d+(?:\.\d+)?(?:[-.]?(?:rc|dev|a|b)\d*)?$", re.I)


def _tensorflow(modules: Sequence[Module], vers: _Versions) -> Tuple[Tuple[str, ...], Optional[str], Optional[str]]:
    found = [
        m
        for m in modules
        if _TF_NAME.match(m.name) or (_TF_DIR.search(m.path) and m.name.lower().endswith((".pyd", ".dll")))
    ]
    if not found:
        return (), None, None
    # The main extension first: renderers show the first path.
    found.sort(
        key=lambda m: (
            not m.name.lower().startswith("_pywrap_tensorflow_internal"),
            not m.name.lower().startswith("_pywrap_tensorflow"),
            not m.name.lower().startswith("tensorflow"),
            m.name.lower(),
        )
    )
    primary = found[0]
    for m in found[:3]:
        s = vers.strings(m)
        product = (s.get("ProductName") or "") + " " + (s.get("FileDescription") or "")
        for key in ("ProductVersion", "FileVersion"):
            v = (s.get(key) or "").strip()
            if v and _VERSION_TEXT.match(v) and "tensorflow" in product.lower():
                return tuple(m.path for m in found), v, f"version resource of {m.name} ({key} string)"
    for m in found[:3]:
        fv, pv, src = vers.fixed(m)
        v = pv or fv
        if v and m is primary:
            g = _groups(v)
            if g and g[0] in (1, 2, 3) and len(g) >= 3:
                text = _trim(v, 3) if len(g) == 4 and g[3] == 0 else v
                return (
                    tuple(x.path for x in found),
                    text,
                    f"VS_FIXEDFILEINFO of {m.name} ({'dump' if src == 'module record' else 'image'})",
                )
    for m in found:
        hint = _TF_PATH_VERSION.search(m.path)
        if hint:
            return tuple(x.path for x in found), hint.group(1), f"path hint ({m.path})"
    return tuple(m.path for m in found), None, None


# ----------------------------------------------------------------------------- CUDA
# name pattern -> component name. Numbers in names: cudart64_110.dll, cublas64_11.dll,
# cudnn64_8.dll, cufft64_10.dll, cusolver64_11.dll, cupti64_2022.1.1.dll...
_CUDA_LIBS = (
    (re.compile(r"^cudart(?:64|32)_(\d+)(?:_\d+)?\.dll$", re.I), "CUDA runtime"),
    (re.compile(r"^cudnn(?:64|32)_(\d+)\.dll$", re.I), "cuDNN"),
    (re.compile(r"^cublas(?:64|32)_(\d+)\.dll$", re.I), "cuBLAS"),
    (re.compile(r"^cublaslt(?:64|32)_(\d+)\.dll$", re.I), "cuBLASLt"),
    (re.compile(r"^cufft(?:64|32)_(\d+)\.dll$", re.I), "cuFFT"),
    (re.compile(r"^curand(?:64|32)_(\d+)\.dll$", re.I), "cuRAND"),
    (re.compile(r"^cusolver(?:64|32)_(\d+)\.dll$", re.I), "cuSOLVER"),
    (re.compile(r"^cusparse(?:64|32)_(\d+)\.dll$", re.I), "cuSPARSE"),
    (re.compile(r"^cupti(?:64|32)_([\d.]+)\.dll$", re.I), "CUPTI"),
    (re.compile(r"^nvcuda\.dll$", re.I), "NVIDIA driver"),
)
_ORDER = [name for _, name in _CUDA_LIBS]
_CUDA_IN_TEXT = re.compile(r"CUDA\s+(\d+\.\d+(?:\.\d+)?)")
_VERSION_IN_TEXT = re.compile(r"Version\s+(\d+(?:\.\d+){1,3})", re.I)


def cudart_name_family(tag: str) -> str:
    """cudart64_XY[Z].dll digits -> the CUDA versions that ship that name: "101" -> "10.1",
    "90" -> "9.0", "110" -> "11.x" (all CUDA 11 releases ship cudart64_110.dll), "12" ->
    "12.x"."""
    if tag == "110":
        return "11.x"
    if len(tag) <= 2 and int(tag) >= 12:
        return f"{int(tag)}.x"
    return f"{tag[:-1]}.{tag[-1]}"


class _Cuda:
    def __init__(self) -> None:
        self.components: List[CudaComponent] = []
        self.runtime: Optional[str] = None  # "11.2" (major.minor) when known
        self.runtime_tag: Optional[str] = None  # "110"
        self.cudnn: Optional[str] = None  # "8.1.0" or a major "8"
        self.cudnn_tag: Optional[str] = None
        self.driver_cuda: Optional[str] = None  # "12.1" from nvcuda's strings
        self.driver: Optional[str] = None


def _cuda(modules: Sequence[Module], vers: _Versions) -> _Cuda:
    out = _Cuda()
    for m in modules:
        for pattern, name in _CUDA_LIBS:
            mt = pattern.match(m.name)
            if mt:
                out.components.append(_component(name, m, mt.group(1) if mt.groups() else None, vers, out))
                break
    out.components.sort(key=lambda c: _ORDER.index(c.name))
    return out


def _component(name: str, m: Module, tag: Optional[str], vers: _Versions, out: _Cuda) -> CudaComponent:
    fv, _pv, src = vers.fixed(m)
    s = vers.strings(m)
    text = " ".join(v for k, v in s.items() if k in ("ProductName", "FileDescription"))
    version: Optional[str] = None
    detail: Optional[str] = None
    if name == "CUDA runtime":
        out.runtime_tag = tag
        toolkit = cuda_toolkit_version(fv)
        exact = _CUDA_IN_TEXT.search(text)
        if exact and toolkit and not exact.group(1).startswith(toolkit + "."):
            exact = None  # strings that disagree with the fixed version are not trusted
        if toolkit:
            version = exact.group(1) if exact else toolkit
            out.runtime = toolkit
            detail = f"FileVersion {fv} -> CUDA {toolkit} (major*1000 + minor*10 = {fv.split('.')[-1]})"
        elif exact:
            version = exact.group(1)
            out.runtime = _trim(version, 2)
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
        g = _groups(fv)
        if g and tag and len(g) == 4 and str(g[0]) == tag:
            version = _trim(fv, 3)
            detail = f"FileVersion {fv} (build {g[3]})"
        elif tag:
            version, src = tag, "file name"
            detail = f"file name only: cudnn64_{tag}.dll is cuDNN {tag}.x"
        out.cudnn = version
    elif name == "NVIDIA driver":
        drv = nvidia_driver_version(fv)
        supports = _CUDA_IN_TEXT.search(text)
        if drv:
            version = drv
            detail = f"Windows driver FileVersion {fv} -> NVIDIA {drv} (last five digits of the last two groups)"
        if supports:
            out.driver_cuda = _trim(supports.group(1), 2)
            detail = ((detail + "; ") if detail else "") + f"supports CUDA {supports.group(1)} (version strings)"
        out.driver = drv
        if not drv:
            src = src if supports else None
    else:
        toolkit = cuda_toolkit_version(fv)
        own = _VERSION_IN_TEXT.search(s.get("FileDescription", "")) if s else None
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


# ----------------------------------------------------------------------------- compatibility
def _ver_key(v: str) -> Tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def _runs(builds: Sequence[tf_builds.TFBuild]) -> str:
    """Table rows -> "2.5-2.10" style ranges over adjacent rows of the published table."""
    order = list(tf_builds.WINDOWS_GPU_BUILDS)[::-1]  # oldest first
    idx = sorted(order.index(b) for b in builds)
    parts: List[str] = []
    start = prev = None
    for i in idx + [None]:
        if start is not None and (i is None or i != prev + 1):
            a, b = order[start], order[prev]
            short = lambda x: ".".join(x.version.split(".")[:2])  # noqa: E731
            parts.append(short(a) if start == prev else f"{short(a)}-{short(b)}")
            start = None
        if i is not None:
            if start is None:
                start = i
            prev = i
    return ", ".join(parts)


def _cudnn_fits(table: str, loaded: str) -> Optional[bool]:
    """Table "8.1" accepts 8.1.x; table "7" accepts any 7.x. None when the loaded version is
    too coarse to tell (a major from the file name, "7", against a table "7.6")."""
    t, have = table.split("."), loaded.split(".")
    n = min(len(t), len(have))
    if have[:n] != t[:n]:
        return False
    return True if len(have) >= len(t) else None


def _compatibility(cuda: _Cuda, tf_version: Optional[str], python: Optional[str], wine: bool) -> Tuple[str, ...]:
    out: List[str] = []
    rows = tf_builds.WINDOWS_GPU_BUILDS
    src = f"({tf_builds.SOURCE})"
    have_gpu = cuda.runtime_tag is not None or cuda.cudnn_tag is not None
    # 1. Which TF versions the loaded CUDA / cuDNN fit.
    if cuda.runtime and cuda.cudnn:
        exact = [b for b in rows if b.cuda == cuda.runtime and _cudnn_fits(b.cudnn, cuda.cudnn)]
        maybe = [b for b in rows if b.cuda == cuda.runtime and _cudnn_fits(b.cudnn, cuda.cudnn) is None]
        if exact:
            out.append(
                f"CUDA {cuda.runtime} with cuDNN {cuda.cudnn} is the tested Windows GPU "
                f"configuration of TensorFlow {_runs(exact)} {src}."
            )
        elif maybe:
            out.append(
                f"CUDA {cuda.runtime} with cuDNN {cuda.cudnn}.x is the tested Windows GPU "
                f"configuration of TensorFlow {_runs(maybe)} if the cuDNN is {maybe[0].cudnn} "
                f"(only its major version is known) {src}."
            )
        else:
            by_cuda = [b for b in rows if b.cuda == cuda.runtime]
            by_cudnn = [b for b in rows if _cudnn_fits(b.cudnn, cuda.cudnn) is not False]
            parts = [
                f"CUDA {cuda.runtime} with cuDNN {cuda.cudnn} is not a tested Windows GPU configuration of any TensorFlow release"
            ]
            if by_cuda:
                parts.append(
                    f"CUDA {cuda.runtime} was tested with TensorFlow {_runs(by_cuda)} (cuDNN {by_cuda[0].cudnn})"
                )
            if by_cudnn:
                parts.append(f"cuDNN {cuda.cudnn} fits TensorFlow {_runs(by_cudnn)} (CUDA {by_cudnn[0].cuda})")
            out.append("; ".join(parts) + f" {src}.")
    elif cuda.runtime and not cuda.cudnn_tag:
        by_cuda = [b for b in rows if b.cuda == cuda.runtime]
        out.append(
            f"CUDA {cuda.runtime} is loaded without a cuDNN DLL"
            + (
                f"; TensorFlow {_runs(by_cuda)} was tested with CUDA {cuda.runtime} and cuDNN {by_cuda[0].cudnn} {src}."
                if by_cuda
                else f"; no TensorFlow release lists CUDA {cuda.runtime} for Windows {src}."
            )
        )
    # 2. Which TF builds can load DLLs of these names at all.
    if cuda.runtime_tag and cuda.cudnn_tag:
        loaders = [
            b
            for b in rows
            if tf_builds.cudart_dll_tag(b.cuda) == cuda.runtime_tag and b.cudnn.split(".")[0] == cuda.cudnn_tag
        ]
        if loaders:
            out.append(
                f"By DLL name (cudart64_{cuda.runtime_tag}.dll, cudnn64_{cuda.cudnn_tag}.dll) "
                f"these are what TensorFlow {_runs(loaders)} Windows GPU builds load."
            )
        else:
            out.append(
                f"No native-Windows TensorFlow GPU build loads cudart64_{cuda.runtime_tag}.dll "
                f"together with cudnn64_{cuda.cudnn_tag}.dll; TensorFlow itself did not load this pair."
            )
    # 3. The loaded TF version against its own tested pair and Python range.
    tf_key = _ver_key(tf_version)[:2] if tf_version else None
    row = tf_builds.build_for(*tf_key) if tf_key and len(tf_key) == 2 else None
    if tf_version and row:
        if cuda.runtime or cuda.cudnn:
            ok_cuda = cuda.runtime == row.cuda if cuda.runtime else None
            ok_cudnn = _cudnn_fits(row.cudnn, cuda.cudnn) if cuda.cudnn else None
            loaded = ", ".join(
                x
                for x in (f"CUDA {cuda.runtime}" if cuda.runtime else "", f"cuDNN {cuda.cudnn}" if cuda.cudnn else "")
                if x
            )
            if ok_cuda is False or ok_cudnn is False:
                verdict = "do not match"
            elif ok_cudnn is None and cuda.cudnn:
                verdict = "match as far as known (the cuDNN minor version is unknown)"
            else:
                verdict = "match"
            out.append(
                f"TensorFlow {tf_version} was tested on Windows with CUDA {row.cuda} and "
                f"cuDNN {row.cudnn}; the loaded {loaded} {verdict}."
            )
        if python:
            lo, hi = row.python
            pv = _ver_key(python)[:2]
            inside = _ver_key(lo)[:2] <= pv <= _ver_key(hi)[:2]
            out.append(
                f"Python {'.'.join(map(str, pv))} is {'within' if inside else 'OUTSIDE'} "
                f"TensorFlow {'.'.join(map(str, tf_key))}'s tested Python range "
                f"{lo}-{hi}" + ("." if inside else "; that combination was never tested.")
            )
    elif tf_version and tf_key and tf_key > tf_builds.LAST_NATIVE_WINDOWS_GPU:
        if have_gpu:
            out.append(
                f"TensorFlow {tf_version} is loaded together with CUDA DLLs, but TensorFlow "
                f"2.11 and later have no GPU support on native Windows (2.10 was the last); "
                f"TensorFlow does not use these DLLs here. GPU needs WSL2 (or the "
                f"TensorFlow-DirectML-Plugin)" + (" - and this process ran under Wine." if wine else ".")
            )
    # 4. Driver against runtime, when the driver's own strings say what CUDA it supports.
    if cuda.driver_cuda and cuda.runtime:
        if _ver_key(cuda.driver_cuda) >= _ver_key(cuda.runtime):
            out.append(
                f"The NVIDIA driver{f' {cuda.driver}' if cuda.driver else ''} supports CUDA "
                f"up to {cuda.driver_cuda}, enough for the CUDA {cuda.runtime} runtime."
            )
        else:
            out.append(
                f"The NVIDIA driver{f' {cuda.driver}' if cuda.driver else ''} supports CUDA "
                f"only up to {cuda.driver_cuda}, older than the CUDA {cuda.runtime} runtime: "
                f"CUDA calls fail with cudaErrorInsufficientDriver."
            )
    return tuple(out)


# ----------------------------------------------------------------------------- entry point
def describe_environment(target: Target, *, image_version: Optional[VersionLookup] = None) -> Environment:
    """Everything an issue report asks about the machine and the loaded stack, from a dump.

    `image_version(module)` (optional) returns the PE version resource of the module's image
    (or None); it is called at most once per module and only for modules named here."""
    system = target.system
    modules = list(target.modules)
    vers = _Versions(image_version)
    notes: List[str] = []

    os_text = os_build = wine = cpu = None
    if system is not None:
        os_build = _os_build(system, target.build_string)
        if system.wine_version:
            wine = system.wine_version
            os_text = _wine_description(system.wine_version, system)
            notes.append(
                "The process ran under Wine: OS version, CPU data and DLL behaviour are "
                "Wine's, not those of a Windows machine."
            )
        else:
            os_text = os_name(system.os_major, system.os_minor, system.os_build, system.product_type)
        cpu = _cpu(system)
    feats, feat_sources, feat_summary = cpu_features(system, target.xstate_enabled_features)

    python, python_module, python_exe = _python(modules, vers)
    tf_paths, tf_version, tf_source = _tensorflow(modules, vers)
    cuda = _cuda(modules, vers)
    compat = _compatibility(cuda, tf_version, python, wine is not None)
    if tf_paths and not tf_version:
        notes.append(
            "TensorFlow's version is unknown: its module has no version resource in the "
            'dump and no image was read; run `python -c "import tensorflow as tf; '
            'print(tf.__version__)"` in the same environment.'
        )
    notes.extend(vers.problems)
    return Environment(
        os=os_text,
        os_build=os_build,
        wine=wine,
        cpu=cpu,
        cpu_features=feats,
        cpu_features_source=feat_summary,
        cpu_feature_sources=feat_sources,
        python=python,
        python_module=python_module,
        python_executable=python_exe,
        tensorflow=tf_paths,
        tensorflow_version=tf_version,
        tensorflow_version_source=tf_source,
        cuda=tuple(cuda.components),
        compatibility=compat,
        notes=tuple(notes),
    )
