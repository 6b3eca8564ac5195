"""Runtime DLLs loaded together that do not fit: what the module list, the version records
and the images (linker version, imports) show of them.

- an msvcp140.dll older than 14.40 in a process holding code linked by MSVC 14.40+ that
  locks a std::mutex (imports `_Mtx_lock` but not `_Mtx_init_in_situ`): Visual Studio 2022
  17.10 made std::mutex's constructor constexpr, and only msvcp140.dll 14.40+ can lock a
  mutex built that way; the older copy, loaded first by name, serves every module;
- two OpenMP runtimes: Intel's (or LLVM's, the same code) twice ends the process with
  "OMP: Error #15" and exit code 3; with Microsoft's or GNU's, two thread pools;
- two Python DLLs: an extension built for another Python pulls its own python3Y.dll in;
- CUDA runtimes or cuDNN of two majors (beside cuda.py's versions and compatibility.py's
  fit, which describe one of each).

Pure: the caller hands the modules, their `Versions` and, optionally, a lookup of each
module's image (`ImageFacts`: a `pe.PEImage` is one). Without an image nothing is claimed
of a module's imports; what that leaves unknown is said in the collision."""

from __future__ import annotations

import functools
import ntpath
import re
from typing import Callable, Dict, Iterable, List, Optional, Protocol, Sequence, Tuple

from dumpkit.analysis.environment.cuda import cuda_library, cuda_toolkit_version, cudart_name_family
from dumpkit.analysis.environment.python import (
    is_python_executable,
    python_dll_family,
    python_version_from_file_version,
)
from dumpkit.analysis.environment.versions import Versions, version_groups
from dumpkit.analysis.model import CollidingModule, CollisionKind, Confidence, RuntimeCollision
from dumpkit.pe import ImportTable
from dumpkit.target import Module

__all__ = ["ImageFacts", "ImageFactsLookup", "runtime_collisions", "package_of", "MAX_IMAGES_EXAMINED"]

MAX_IMAGES_EXAMINED = 1024  # modules whose image one rule asks for; a process has hundreds


class ImageFacts(Protocol):
    """What a collision rule reads of a module's image (pe.PEImage is one)."""

    linker_version: Tuple[int, int]  # (MajorLinkerVersion, MinorLinkerVersion)

    def imports(self) -> ImportTable: ...


ImageFactsLookup = Callable[[Module], Optional[ImageFacts]]


def runtime_collisions(
    modules: Sequence[Module], versions: Versions, image_facts: Optional[ImageFactsLookup] = None
) -> Tuple[RuntimeCollision, ...]:
    """Every collision the module list (and the images `image_facts` finds) shows, in the
    order of the rules above. A lookup that fails is a line in `versions.problems`."""
    places = _Places.of(modules)
    images = _Images(image_facts, versions.problems)
    out: List[RuntimeCollision] = []
    out += _msvcp140_mutex(modules, versions, images, places)
    out += _openmp(modules, versions, places)
    out += _python(modules, versions, images, places)
    out += _cuda(modules, versions, places)
    return tuple(out)


# ----------------------------------------------------------------------------- where a module comes from
# The patterns only a collision's sentences need are strings that re compiles (and caches) at
# their first use: compiling them at import cost ~1 ms of every start-up.
_SITE = r"(?i)[\\/](?:site|dist)-packages[\\/]([^\\/]+)([\\/])?"
_WINDOWS = r"(?i)^(?:\\\\\?\\|\\\?\?\\)?(?:[a-z]:)?\\windows\\|^\\systemroot\\"
_CUDA_TOOLKIT = r"(?i)\\NVIDIA GPU Computing Toolkit\\CUDA\\v(\d+\.\d+)\\"
_EXTENSION_TAG = r"(?i)\.(?:cp|pypy)\d+[-\w]*\.pyd$"
LIBRARY_BIN = "the environment's Library\\bin"
# conda's packages and some wheels (intel-openmp, mkl) install their DLLs there, not in site-packages
LIBRARY_BIN_OWNERS = "the folder where conda and wheels such as intel-openmp and mkl put their DLLs"


class _Places:
    """The Python installation's folders (python.exe's and pythonX.dll's, with their DLLs
    and Scripts), lower case, to name what a folder belongs to."""

    def __init__(self, homes: Iterable[str]):
        self.python = {h.lower().rstrip("\\") for h in homes if h}
        self.installation = {f for h in self.python for f in (h, h + "\\dlls", h + "\\scripts")}
        self.library_bin = {h + "\\library\\bin" for h in self.python}

    @classmethod
    def of(cls, modules: Sequence[Module]) -> "_Places":
        """python.exe's folder, and the Python DLL's when there is one: a second Python
        DLL's folder is not the installation's (it is what a collision names)."""
        homes = {_folder(m.path) for m in modules if is_python_executable(m.name)}
        dlls = {_folder(m.path) for m in modules if python_dll_family(m.name) is not None}
        return cls(homes | dlls if len(dlls) == 1 else homes)


def _folder(path: str) -> str:
    return ntpath.dirname(path).lower().rstrip("\\")


def package_of(path: str, python_folders: Iterable[str] = ()) -> Optional[str]:
    """What the folder of `path` belongs to: the package under site-packages
    (`...\\site-packages\\PyQt5\\Qt5\\bin\\x.dll` -> "PyQt5", `numpy.libs` -> "numpy"),
    "the Python installation" (a folder of `python_folders`, or its DLLs or Scripts), the
    environment's Library\\bin, "Windows", a CUDA Toolkit; None when the path does not say."""
    return _package(path, _Places(python_folders))


def _package(path: str, places: _Places) -> Optional[str]:
    site = re.search(_SITE, path)
    if site:
        top = site.group(1)
        if not site.group(2):  # the file sits in site-packages itself: its own name says
            return re.sub(r"\.(?:dll|pyd)$", "", re.sub(_EXTENSION_TAG, "", top), flags=re.I)
        if top.lower().endswith(".libs"):  # delvewheel's folder of a package's DLLs
            return top[: -len(".libs")]
        if top.lower() == "nvidia":  # NVIDIA's wheels share one namespace folder: nvidia\\cudnn
            rest = re.match(r"([^\\/]+)[\\/]", path[site.end() :])
            return f"nvidia.{rest.group(1)}" if rest else top
        return top
    folder = _folder(path)
    if folder in places.installation:
        return "the Python installation"
    if folder in places.library_bin:
        return LIBRARY_BIN
    if re.search(_WINDOWS, path):
        return "Windows"
    toolkit = re.search(_CUDA_TOOLKIT, path)
    if toolkit:
        return f"the CUDA Toolkit {toolkit.group(1)}"
    return None


def _where(m: Module, places: _Places) -> str:
    """`package` (folder) for a sentence, or the folder alone."""
    package = _package(m.path, places)
    folder = ntpath.dirname(m.path) or m.path
    return f"{package} ({folder})" if package else folder


def _version(m: Module, versions: Versions) -> Optional[str]:
    return versions.fixed(m)[0]


def _colliding(m: Module, versions: Versions, places: _Places, role: str) -> CollidingModule:
    return CollidingModule(m.name, m.path, _version(m, versions), _package(m.path, places), role)


def _names(ms: Sequence[Module]) -> str:
    names = [m.name for m in ms]
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]


def _packages(ms: Sequence[Module], places: _Places) -> str:
    found: List[str] = []
    for m in ms:
        p = _package(m.path, places) or m.name
        if p not in found:
            found.append(p)
    return " and ".join(found)


class _Images:
    """The caller's lookup, asked at most once per module and MAX_IMAGES_EXAMINED times in
    all; a failure is a problem line, never a lost report."""

    def __init__(self, lookup: Optional[ImageFactsLookup], problems: List[str]):
        self._lookup = lookup
        self._problems = problems
        self._found: Dict[Tuple[str, int], Optional[ImageFacts]] = {}

    @property
    def available(self) -> bool:
        return self._lookup is not None

    def __call__(self, m: Module) -> Optional[ImageFacts]:
        key = (m.name.lower(), m.base)
        if key not in self._found:
            found = None
            if self._lookup is not None and len(self._found) < MAX_IMAGES_EXAMINED:
                try:
                    found = self._lookup(m)
                except Exception as e:  # the lookup is the caller's
                    self._problems.append(f"{m.name}: image lookup failed ({e})")
            self._found[key] = found
        return self._found[key]


# Runtime DLLs themselves and Windows' own: never the code that needs a newer runtime.
_RUNTIME_DLL = (  # compiled at first use, as _SITE
    r"(?i)^(?:msvcp\d+[\w-]*|vcruntime\d+[\w-]*|concrt\d+[\w-]*|vccorlib\d+[\w-]*|ucrtbase\w*|api-ms-win-[\w-]+|ext-ms-[\w-]+)\.dll$"
)


def _own_code(modules: Sequence[Module], places: _Places) -> List[Module]:
    """The modules whose images may hold code a runtime serves: not the runtimes, not Windows'."""
    return [m for m in modules if not re.match(_RUNTIME_DLL, m.name) and not _windows(m.path, places)]


def _windows(path: str, places: _Places) -> bool:
    """`_package(path, places) == "Windows"`, its Windows pattern asked first: most of an
    application's hundreds of modules (an Unreal editor's 600) are not in Windows' folders,
    and for them the rest of `_package` (a search of the path, its folder) is not needed."""
    return re.search(_WINDOWS, path) is not None and _package(path, places) == "Windows"


# ----------------------------------------------------------------------------- msvcp140.dll and std::mutex
_MSVCP140 = re.compile(r"^msvcp140(?:-[0-9a-f]+)?\.dll$", re.I)  # delvewheel renames its copies msvcp140-HASH.dll
CONSTEXPR_MUTEX = (14, 40)  # Visual Studio 2022 17.10's toolset


def _msvcp140_mutex(
    modules: Sequence[Module], versions: Versions, images: _Images, places: _Places
) -> List[RuntimeCollision]:
    old = []
    for m in modules:
        groups = version_groups(_version(m, versions)) if _MSVCP140.match(m.name) else None
        if groups and len(groups) >= 2 and groups[:2] < CONSTEXPR_MUTEX:
            old.append(m)
    if not old or not images.available:
        return []
    out: List[RuntimeCollision] = []
    # CPython itself is C: its DLL and executables import no msvcp140.dll (an image whose
    # imports a dump lacks would otherwise be a "maybe" in every Python 3.12+ process)
    code = [
        m
        for m in _own_code(modules, places)
        if python_dll_family(m.name) is None and not is_python_executable(m.name) and m.name.lower() != "python3.dll"
    ]
    for runtime in old:
        current = [
            m
            for m in modules
            if m.name.lower() == runtime.name.lower()
            and m.base != runtime.base
            and (version_groups(_version(m, versions)) or (0,))[:2] >= CONSTEXPR_MUTEX
        ]
        users: List[Module] = []  # read: it locks a std::mutex of the constexpr kind
        maybe: List[Module] = []  # linked by 14.40+, imports not read in full
        without: List[Module] = []  # no image
        for m in code:
            facts = images(m)
            if facts is None:
                without.append(m)
                continue
            if tuple(facts.linker_version) < CONSTEXPR_MUTEX:
                continue
            table = facts.imports()
            taken = table.from_dll(runtime.name)
            locks = any("_Mtx_lock" in d.names for d in taken)
            inits = any("_Mtx_init_in_situ" in d.names for d in taken)
            if locks and not inits:
                (users if all(d.complete for d in taken) else maybe).append(m)
            elif not taken and not table.complete:
                maybe.append(m)
        if users or maybe:
            out.append(_mutex_collision(runtime, users, maybe, current, without, versions, images, places))
    return out


def _linker(m: Module, images: _Images) -> str:
    facts = images(m)
    return "{}.{}".format(*facts.linker_version) if facts is not None else "?"


def _mutex_collision(
    runtime: Module,
    users: List[Module],
    maybe: List[Module],
    current: List[Module],
    without: List[Module],
    versions: Versions,
    images: _Images,
    places: _Places,
) -> RuntimeCollision:
    version = _version(runtime, versions)
    needing = users or maybe
    linkers = sorted({_linker(m, images) for m in needing})
    modules = [
        _colliding(
            runtime, versions, places, f"older than 14.40, loaded first: every module importing {runtime.name} gets it"
        )
    ]
    for m in users:
        modules.append(
            _colliding(
                m,
                versions,
                places,
                f"linked by MSVC {_linker(m, images)}; imports _Mtx_lock but not _Mtx_init_in_situ from {runtime.name}",
            )
        )
    for m in maybe:
        modules.append(
            _colliding(
                m, versions, places, f"linked by MSVC {_linker(m, images)}; its imports could not be read in full"
            )
        )
    for m in current:
        modules.append(_colliding(m, versions, places, "a current msvcp140.dll, also loaded"))
    who = _names(needing)
    title = (
        f"{runtime.name} {version} from {_where(runtime, places)} is older than the 14.40 that {who} "
        f"(linked by MSVC {', '.join(linkers)}) {'needs' if len(needing) == 1 else 'need'} for std::mutex"
    )
    leads_to = (
        "Code compiled by MSVC 14.40 or newer (Visual Studio 2022 17.10+) builds a std::mutex with a constexpr "
        "constructor that never calls msvcp140.dll, and only msvcp140.dll 14.40 or newer can lock a mutex built "
        f"that way. The loader gives every module that imports {runtime.name} the copy loaded first, here "
        + (
            f"{version}: the first std::mutex lock in {who} dies"
            if users
            else f"{version}: if {who} locks a std::mutex, its first lock dies"
        )
        + f" with an access violation reading address 0 inside {runtime.name} (`_Mtx_lock`)."
    )
    old_package = _package(runtime.path, places)
    if old_package == "the Python installation":
        first = (
            f"Replace {runtime.path} with msvcp140.dll 14.40 or newer, or remove it: the loader looks in python.exe's "
            "folder first, so that copy is the one found, whatever the order of the imports."
        )
    elif old_package == "Windows":
        first = (
            "Import first a package that ships msvcp140.dll 14.40 or newer, so that its copy is the one loaded, "
            f"before anything loads Windows' {version}."
        )
    else:
        first = (
            f"Load a current msvcp140.dll first: import {_packages(needing, places)} before "
            f"{old_package or 'the module that loads ' + runtime.path}, so that the loader finds one 14.40 or newer "
            f"(Windows', once current) before {runtime.path}; or remove that copy."
        )
    ways_out = (
        first,
        "Install the current Microsoft Visual C++ Redistributable for Visual Studio 2015-2022 (x64, 14.40 or newer), "
        "so that Windows' own msvcp140.dll, the one found when no package ships its own, is current.",
        f"For the authors of {_packages(needing, places)}: build with `_DISABLE_CONSTEXPR_MUTEX_CONSTRUCTOR` defined, "
        "or ship msvcp140.dll 14.40+ under a name of its own (as delvewheel does), so that an older msvcp140.dll "
        "loaded by another package cannot break it.",
    )
    unknown: List[str] = []
    if maybe and not users:
        unknown.append(
            f"Whether {_names(maybe)} locks a std::mutex through {runtime.name} is not known: its import table "
            "could not be read in full (the image dumpkit found lacks it); with the module's file (--image-path) it can be told."
        )
    if current:
        unknown.append(
            f"A current {current[0].name} is loaded too ({_where(current[0], places)}); which copy each module "
            "was bound to the module list does not say."
        )
    if without:
        unknown.append(
            f"{len(without)} other module{'s' if len(without) != 1 else ''} had no image to read "
            f"(e.g. {without[0].name}): whether {'they need' if len(without) != 1 else 'it needs'} msvcp140.dll "
            "14.40 is not known."
        )
    confidence = Confidence.LOW if not users else Confidence.MEDIUM if current else Confidence.HIGH
    return RuntimeCollision(
        CollisionKind.MSVCP140_MUTEX, confidence, title, tuple(modules), leads_to, ways_out, tuple(unknown)
    )


# ----------------------------------------------------------------------------- OpenMP
# (file name, runtime, whether it is Intel's code: Intel's runtime and LLVM's, built from
# it, register themselves per process and stop a second copy with "OMP: Error #15")
_OPENMP = (
    (re.compile(r"^libiomp5md(?:-[0-9a-f]+)?\.dll$", re.I), "Intel OpenMP", True),
    (re.compile(r"^libomp(?:140\.x86_64)?(?:-[0-9a-f]+)?\.dll$", re.I), "LLVM OpenMP", True),
    (re.compile(r"^vcomp\d+d?(?:-[0-9a-f]+)?\.dll$", re.I), "Microsoft OpenMP (vcomp)", False),
    (re.compile(r"^libgomp-1(?:-[0-9a-f]+)?\.dll$", re.I), "GNU OpenMP (libgomp)", False),
)


@functools.lru_cache(maxsize=4096)  # asked of every module of every dump; fleets share names
def _openmp_runtime(name: str) -> Optional[Tuple[str, bool]]:
    for pattern, runtime, intel in _OPENMP:
        if pattern.match(name):
            return runtime, intel
    return None


def _openmp(modules: Sequence[Module], versions: Versions, places: _Places) -> List[RuntimeCollision]:
    found: List[Tuple[Module, str, bool]] = []
    for m in modules:
        kind = _openmp_runtime(m.name)
        if kind is not None:
            found.append((m, *kind))
    if len(found) < 2:
        return []
    intel = [m for m, _, is_intel in found if is_intel]
    mods = []
    for m, runtime, _ in found:
        role = f"{runtime}, loaded at {m.base:#x}"
        if _package(m.path, places) == LIBRARY_BIN:
            role += f"; Library\\bin is {LIBRARY_BIN_OWNERS}"
        mods.append(_colliding(m, versions, places, role))
    shown = intel if len(intel) >= 2 else [m for m, _, _ in found]
    where = "; ".join(f"{m.name} from {_where(m, places)}" for m in shown)
    if len(intel) >= 2:
        same = len({runtime for _, runtime, is_intel in found if is_intel}) == 1  # Intel's twice, renamed or not
        title = (
            f"Two copies of Intel's OpenMP runtime are loaded: {where}"
            if same
            else f"Two OpenMP runtimes of Intel's code (LLVM's libomp is built from it) are loaded: {where}"
        )
        leads_to = (
            "Intel's OpenMP runtime registers itself in the process when it starts; the second copy to start "
            'finds the first and stops the process: it prints "OMP: Error #15: Initializing '
            f'{intel[-1].name}, but found {intel[0].name} already initialized." and ends with exit code 3 '
            "(raise(SIGABRT)), with no exception, so no crash dump unless a debugger stops at the exit."
        )
        confidence = Confidence.HIGH
    else:
        title = f"Two OpenMP runtimes are loaded: {where}"
        leads_to = (
            "Each OpenMP runtime keeps its own thread pool and settings (`OMP_NUM_THREADS` applies to each): "
            "together they oversubscribe the cores, and OpenMP state handed from code of one runtime to code "
            "of the other can hang or crash."
        )
        confidence = Confidence.LOW
    ways_out = (
        f"Load one OpenMP runtime, not the copies of {_packages(shown, places)}: install the packages from one "
        "source (all from conda, or pip wheels that share one runtime), or remove one copy so that its package "
        "loads the other.",
        "`KMP_DUPLICATE_LIB_OK=TRUE` lets the process go on, but it only silences Intel's check: both runtimes "
        "then run side by side and may still give wrong results or crash; use it only to confirm the diagnosis.",
    )
    return [RuntimeCollision(CollisionKind.OPENMP, confidence, title, tuple(mods), leads_to, ways_out)]


# ----------------------------------------------------------------------------- Python
_BUILT_FOR = r"(?i)\.cp(\d)(\d+)[-\w]*\.pyd$"  # compiled at first use, as _SITE; the tag a wheel's extension carries


def _python(modules: Sequence[Module], versions: Versions, images: _Images, places: _Places) -> List[RuntimeCollision]:
    pythons = [m for m in modules if python_dll_family(m.name) is not None]
    if len(pythons) < 2:
        return []
    same = len({m.name.lower() for m in pythons}) == 1  # one version from two folders
    interpreter = _interpreter(modules, pythons, images)
    others = [m for m in pythons if m is not interpreter]
    culprits: List[Tuple[Module, str]] = []  # (extension, what shows it was built for another Python)
    unread = 0
    if interpreter is not None and not same:
        other_names = {m.name.lower() for m in others}
        other_families = {python_dll_family(m.name) for m in others}
        for m in _own_code(modules, places):
            if python_dll_family(m.name) is not None or is_python_executable(m.name):
                continue
            facts = images(m)
            table = facts.imports() if facts is not None else None
            hit = next((d.dll for d in table.dlls if d.dll.lower() in other_names), None) if table else None
            tag = re.search(_BUILT_FOR, m.name)
            if hit is not None:
                culprits.append((m, f"imports {hit}"))
            elif (table is None or not table.complete) and tag and f"{tag.group(1)}.{tag.group(2)}" in other_families:
                culprits.append((m, f"named for CPython {tag.group(1)}.{tag.group(2)}"))
            unread += table is None
    listed = [(interpreter, "the interpreter's Python DLL")] if interpreter is not None else []
    listed += [(m, "a second Python DLL" if interpreter is not None else "a Python DLL") for m in others]
    listed += [(m, f"an extension built for another Python: {why}") for m, why in culprits]
    mods = tuple(_colliding(m, versions, places, role) for m, role in listed)
    loaded = "; ".join(f"{_python_named(m, versions)} from {_where(m, places)}" for m in pythons)
    title = f"Two Python DLLs are loaded: {loaded}"
    if culprits:
        title += f"; {_names([m for m, _ in culprits])} pulled the second in"
    leads_to = (
        "Only one Python DLL can serve a process: "
        + (
            "two copies of the same one each keep their own interpreter state, and code bound to the copy that "
            "was never initialised"
            if same
            else "an extension built for another Python calls its own Python DLL, which was never initialised,"
        )
        + " with objects of the running interpreter; it fails at its first call, typically with "
        '"Fatal Python error: PyThreadState_Get" or an access violation inside that DLL, or corrupts memory.'
    )
    ways_out: List[str] = []
    if culprits and interpreter is not None:
        family = python_dll_family(interpreter.name) or ""
        ways_out.append(
            f"Reinstall (or rebuild) {_packages([m for m, _ in culprits], places)} for this interpreter (Python "
            f"{family}): run pip with the python.exe that crashed; a wheel's tag (cp{family.replace('.', '')}) must "
            "match it."
        )
    folders = ", ".join(sorted({ntpath.dirname(m.path) for m in others}))
    ways_out.append(
        f"Keep the other Python's folder ({folders}) off PATH and out of `os.add_dll_directory`, so that its "
        "DLL cannot be found: the import then fails with an ImportError instead of crashing."
    )
    unknown: List[str] = []
    if interpreter is None:
        unknown.append("Which of them is the interpreter's is not known: the executable's imports could not be read.")
    elif same:
        unknown.append("Which module loaded the second copy is not known: both copies have the same name.")
    elif not culprits:
        unknown.append(
            "Which module loaded the second Python DLL is not known"
            + (f": {unread} modules had no image to read their imports from." if unread else ".")
        )
    return [
        RuntimeCollision(CollisionKind.PYTHON, Confidence.HIGH, title, mods, leads_to, tuple(ways_out), tuple(unknown))
    ]


def _python_named(m: Module, versions: Versions) -> str:
    """ "python310.dll 3.10.11", or the name alone when its version is not known."""
    fv = _version(m, versions)
    exact = python_version_from_file_version(fv) if fv else None
    return f"{m.name} {exact}" if exact else m.name


def _interpreter(modules: Sequence[Module], pythons: Sequence[Module], images: _Images) -> Optional[Module]:
    """The Python DLL the executable imports (python.exe, or a program embedding Python);
    else the one beside python.exe; None when neither tells."""
    exe = next((m for m in modules if is_python_executable(m.name)), None)
    exe = exe or next((m for m in modules if m.name.lower().endswith(".exe")), None)
    if exe is None:
        return None
    facts = images(exe)
    if facts is not None:
        table = facts.imports()
        imported = [m for m in pythons if table.from_dll(m.name)]
        if len({m.name.lower() for m in imported}) == 1 and len(imported) == 1:
            return imported[0]
    beside = [m for m in pythons if _folder(m.path) == _folder(exe.path)]
    return beside[0] if len(beside) == 1 and is_python_executable(exe.name) else None


# ----------------------------------------------------------------------------- CUDA and cuDNN
def _cuda(modules: Sequence[Module], versions: Versions, places: _Places) -> List[RuntimeCollision]:
    runtimes: List[Tuple[Module, str]] = []  # (module, "11.8", or "11.x" from its name alone)
    cudnns: List[Tuple[Module, str]] = []  # (module, "9.10.2", or "8" from its name alone)
    for m in modules:
        lib = cuda_library(m.name)
        tag = lib[1] if lib is not None else None
        if lib is None or tag is None:
            continue
        component = lib[0]
        fv = _version(m, versions)
        if component == "CUDA runtime":
            runtimes.append((m, cuda_toolkit_version(fv) or cudart_name_family(tag)))
        elif component == "cuDNN":
            g = version_groups(fv)
            cudnns.append((m, ".".join(map(str, g[:3])) if g and len(g) >= 3 and str(g[0]) == tag else tag))
    several_runtimes = _several(runtimes)
    several_cudnn = _several(cudnns)
    if not several_runtimes and not several_cudnn:
        return []
    parts: List[str] = []
    sentences: List[str] = []
    newest = max((v for _, v in runtimes), key=_version_key, default=None)
    if several_runtimes:
        parts.append("CUDA runtimes " + " and ".join(sorted({v for _, v in runtimes}, key=_version_key)))
        sentences.append(
            "Each CUDA runtime keeps its own state on the GPU and both share its memory; the NVIDIA driver must "
            f"support the newest loaded (CUDA {newest})."
        )
    if several_cudnn:
        parts.append("cuDNN " + " and ".join(sorted({v for _, v in cudnns}, key=_version_key)))
        sentences.append(
            "cuDNN's front DLL loads its sub-libraries by file name: one that finds another copy's first (the "
            "other major's, or another package's) fails to load them or mixes two versions."
        )
    mods = [_colliding(m, versions, places, f"CUDA {v} runtime") for m, v in runtimes]
    mods += [_colliding(m, versions, places, f"cuDNN {v}") for m, v in cudnns]
    title = f"{', and '.join(parts)}{',' if len(parts) > 1 else ''} are loaded together: " + "; ".join(
        f"{m.name} from {_where(m, places)}" for m, _ in runtimes + cudnns
    )
    leads_to = "Each package calls the CUDA runtime and cuDNN it was built for, by file name. " + " ".join(sentences)
    folders = ", ".join(sorted({ntpath.dirname(m.path) for m, _ in runtimes + cudnns}))
    ways_out = (
        "Give the process one CUDA major: install the builds of its packages made for the same CUDA (their "
        "-cu11 / -cu12 variants) and the cuDNN that CUDA's builds use.",
        f"Keep folders of other copies ({folders}) off PATH and out of `os.add_dll_directory` where they are not "
        "the package's own, so that each library finds only its own DLLs.",
    )
    return [RuntimeCollision(CollisionKind.CUDA, Confidence.MEDIUM, title, tuple(mods), leads_to, ways_out)]


def _several(found: Sequence[Tuple[Module, str]]) -> bool:
    """More than one DLL of a kind: two names (two majors), or one name from two folders."""
    return len({m.name.lower() for m, _ in found}) > 1 or len({m.path.lower() for m, _ in found}) > 1


def _version_key(v: str) -> Tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v))
