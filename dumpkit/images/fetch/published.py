"""Where a module the crashed process loaded is published, from what the dump says of it
and of the process (pure: no network): a wheel on the package index for a file under
site-packages, python.org's embeddable zip for the interpreter's own files, Microsoft's
symbol server for Windows' DLLs, or nowhere dumpkit knows. The same answer says, when
fetching is off, what `--fetch-images` would fetch, and drives the fetch when it is on."""

from __future__ import annotations

import ntpath
import re
from typing import Dict, Optional, Sequence, Tuple

from dumpkit.records import record
from dumpkit.target import (
    PROCESSOR_ARCHITECTURE_AMD64,
    PROCESSOR_ARCHITECTURE_ARM64,
    PROCESSOR_ARCHITECTURE_INTEL,
    Module,
    SystemInfo,
)

MICROSOFT_SYMBOLS = "https://msdl.microsoft.com/download/symbols"
PYTHON_ORG = "https://www.python.org/ftp/python"  # the release files; DUMPKIT_PYTHON_ORG_URL overrides
_SITE_DIRS = ("site-packages", "dist-packages")
_WINDOWS_DIRS = ("c:\\windows\\", "\\systemroot\\", "\\??\\c:\\windows\\")
_PYTHON_DLL = re.compile(r"^python3(\d+)\.dll$", re.IGNORECASE)
# Import packages whose distribution is named otherwise (the rest are asked by their own
# name; a wheel that does not hold the module may still name the one that does).
ALIASES = {
    "cv2": ("opencv-python", "opencv-python-headless", "opencv-contrib-python", "opencv-contrib-python-headless"),
    "sklearn": ("scikit-learn",),
    "skimage": ("scikit-image",),
    "pil": ("pillow",),
    "yaml": ("pyyaml",),
    "_cffi_backend": ("cffi",),
    "win32": ("pywin32",),
    "pywin32_system32": ("pywin32",),
    "google": ("protobuf",),
    "zmq": ("pyzmq",),
    "lxml": ("lxml",),
}
_EMBED_ARCH = {
    PROCESSOR_ARCHITECTURE_AMD64: "amd64",
    PROCESSOR_ARCHITECTURE_INTEL: "win32",
    PROCESSOR_ARCHITECTURE_ARM64: "arm64",
}
_WHEEL_PLATFORM = {
    PROCESSOR_ARCHITECTURE_AMD64: "win_amd64",
    PROCESSOR_ARCHITECTURE_INTEL: "win32",
    PROCESSOR_ARCHITECTURE_ARM64: "win_arm64",
}


@record
class Process:
    """What the wheel and release a module came from depend on."""

    python_minor: Optional[int]  # 8 for python38.dll
    python_version: Optional[str]  # "3.8.1", from python3X.dll's version resource
    python_home: Optional[str]  # python3X.dll's folder, lower case
    platform: str  # the wheel platform tag: win_amd64, win32, win_arm64
    embed_arch: str  # python.org's: amd64, win32, arm64
    wine: bool  # Windows' DLLs are Wine's own, published nowhere
    # project -> the latest TimeDateStamp among its modules: when a reproducible build (0)
    # is looked for, its siblings' link time orders the candidates (numpy.libs' DLLs)
    link_times: Tuple[Tuple[str, int], ...] = ()

    def link_time(self, project: str) -> int:
        return dict(self.link_times).get(project.lower(), 0)


@record
class Wheel:
    projects: Tuple[str, ...]  # distributions to ask, in order
    member: str  # the file's path inside the wheel, '/'-separated


@record
class Release:
    version: str  # "3.11.9", "3.8.6rc1"
    url: str  # the embeddable zip
    member: str  # its file name there


@record
class Windows:
    url: str  # the symbol server


@record
class Unpublished:
    why: str


Published = object  # one of Wheel, Release, Windows, Unpublished


def python_version(file_version: Optional[str]) -> Optional[str]:
    """CPython's release from its DLL's file version a.b.c.d, where c is
    micro*1000 + level*10 + serial (level 10 alpha, 11 beta, 12 rc, 15 final)."""
    if not file_version:
        return None
    parts = file_version.split(".")
    if len(parts) < 3 or not all(p.isdigit() for p in parts[:3]) or parts[0] != "3":
        return None
    field = int(parts[2])
    micro, level, serial = field // 1000, (field % 1000) // 10, field % 10
    pre = {10: "a", 11: "b", 12: "rc", 15: ""}.get(level)
    if pre is None:
        return None
    return f"3.{int(parts[1])}.{micro}" + (f"{pre}{serial}" if pre else "")


def process_of(modules: Sequence[Module], system: Optional[SystemInfo]) -> Process:
    dll = next((m for m in modules if _PYTHON_DLL.match(m.name or "")), None)
    arch = system.processor_architecture if system is not None else PROCESSOR_ARCHITECTURE_AMD64
    minor = int(_PYTHON_DLL.match(dll.name).group(1)) if dll is not None else None  # type: ignore[union-attr]
    times: Dict[str, int] = {}
    for m in modules:  # bounded by the module list
        member = _site_relative(m.path or "") if m.timestamp else None
        if member is not None:
            project = projects_for(member)[0].lower()
            times[project] = max(times.get(project, 0), m.timestamp)
    return Process(
        python_minor=minor,
        python_version=python_version(dll.file_version) if dll is not None else None,
        python_home=ntpath.dirname(dll.path).lower() if dll is not None and dll.path else None,
        platform=_WHEEL_PLATFORM.get(arch, "win_amd64"),
        embed_arch=_EMBED_ARCH.get(arch, "amd64"),
        wine=bool(system is not None and system.wine_version),
        link_times=tuple(sorted(times.items())),
    )


def _site_relative(path: str) -> Optional[str]:
    parts = path.replace("/", "\\").split("\\")
    low = [p.lower() for p in parts]
    for i in range(len(parts) - 1, -1, -1):
        if low[i] in _SITE_DIRS:
            rest = [p for p in parts[i + 1 :] if p]
            return "/".join(rest) if rest else None
    return None


def projects_for(member: str) -> Tuple[str, ...]:
    """The distributions to ask for a file at `member` (relative to site-packages)."""
    top = member.split("/", 1)[0]
    if "/" not in member:  # a module straight in site-packages: its import name
        top = top.split(".", 1)[0]
    elif top.lower().endswith(".libs"):  # delvewheel's NAME.libs folder
        top = top[: -len(".libs")]
    elif top.lower().endswith(".data"):
        top = top[: -len(".data")].split("-", 1)[0]
    return ALIASES.get(top.lower(), (top,))


def published(module: Module, process: Process, python_org: str = PYTHON_ORG) -> object:
    """Where `module` is published (Wheel, Release, Windows or Unpublished)."""
    path = module.path or ""
    low = path.lower()
    if low.startswith(_WINDOWS_DIRS):
        if process.wine:
            return Unpublished("Wine's own DLL: published nowhere")
        return Windows(MICROSOFT_SYMBOLS)
    member = _site_relative(path)
    if member is not None:
        return Wheel(projects_for(member), member)
    folder = ntpath.dirname(low)
    if process.python_home is not None and folder in (process.python_home, ntpath.join(process.python_home, "dlls")):
        version = python_version(module.file_version) or process.python_version
        if version is None:
            return Unpublished("the Python version is not in the dump (no version resource in python3X.dll)")
        base = re.sub(r"(a|b|rc)\d+$", "", version)  # a pre-release lives in its release's folder
        url = f"{python_org.rstrip('/')}/{base}/python-{version}-embed-{process.embed_arch}.zip"
        return Release(version, url, module.name)
    return Unpublished("not installed from a wheel, not Python's nor Windows' own")


def pdb_package(release: Release, module_name: str, arch: str, python_org: str = PYTHON_ORG) -> str:
    """The URL of the python.org MSI package holding the PDB of one of the interpreter's files:
    core_pdb (python3X.dll), exe_pdb (python.exe, pythonw.exe), lib_pdb (the DLLs folder's)."""
    low = module_name.lower()
    package = "core_pdb" if low.startswith("python3") and low.endswith(".dll") else "lib_pdb"
    if low in ("python.exe", "pythonw.exe"):
        package = "exe_pdb"
    base = re.sub(r"(a|b|rc)\d+$", "", release.version)
    return f"{python_org.rstrip('/')}/{base}/{arch}/{package}.msi"


def plan_line(where: object, index_hosts: Sequence[str] = ()) -> Optional[str]:
    """What --fetch-images would fetch for a module, for the report (None: nothing)."""
    if isinstance(where, Wheel):
        names = " or ".join(where.projects)
        return f"--fetch-images would look for it in the wheels of {names} on pip's package index"
    if isinstance(where, Release):
        return f"--fetch-images would take it from python.org's Python {where.version} embeddable zip"
    if isinstance(where, Windows):
        return "--fetch-images would take it from Microsoft's symbol server"
    return None
