"""The versions of the Python packages a bug report asks about: as the process held them
(`__version__` in a full dump's heap, read by the Python phase), else from the distribution
that installed the package's main extension module (its dist-info RECORD beside the
module's file, or the wheel --fetch-images took that very build from)."""

from __future__ import annotations

import re
from typing import Callable, List, Mapping, Optional, Sequence, Tuple

from dumpkit.analysis.model import IN_MEMORY, PythonPackage
from dumpkit.target import InstalledPackage, Module

PackageLookup = Callable[[Module], Optional[InstalledPackage]]

# sys.modules name -> its main extension module (what the dump's module list shows of it),
# for the packages whose installation can name the version when the heap is not in the dump
_EXTENSIONS: Tuple[Tuple[str, str], ...] = (
    ("numpy", r"(?i)[\\/]numpy[\\/]_?core[\\/]_multiarray_umath\.[\w.-]*pyd$"),  # 1.x core, 2.x _core
)

# compiled (and cached by re) at the first use, not at every start-up's import
_VERSION = r"\d+(?:\.\d+)+(?:(?:a|b|rc|\.post|\.dev)\d+)*(?:\+[\w.]+)?"


def owner_source(owner: InstalledPackage, module: Module) -> str:
    """How a distribution's version is known: the wheel a fetched image came from, or the
    installed dist-info whose RECORD lists the module."""
    if owner.record.lower().endswith(".whl"):
        return f"the wheel {owner.record} holds this build of {module.name} (--fetch-images took it from there)"
    return f"installed package {owner.name} {owner.version}, whose RECORD lists {module.name} ({owner.record})"


def _installed(name: str, pattern: str, modules: Sequence[Module], package: PackageLookup) -> Optional[PythonPackage]:
    module = next((m for m in modules if re.search(pattern, m.path)), None)
    owner = package(module) if module is not None else None
    if owner is None or module is None or not re.fullmatch(_VERSION, owner.version):
        return None
    # the distribution that installed the package's files (intel-numpy's are numpy's): the
    # source names it
    return PythonPackage(name, owner.version, owner_source(owner, module))


def python_packages(
    modules: Sequence[Module], loaded: Mapping[str, str], package: Optional[PackageLookup] = None
) -> Tuple[PythonPackage, ...]:
    """Every package with a version: those the heap gave, in their order, then those an
    installation names that the heap did not."""
    found: List[PythonPackage] = [PythonPackage(n, v, f"{n}.__version__ {IN_MEMORY}") for n, v in loaded.items()]
    for name, pattern in _EXTENSIONS:
        if name not in loaded and package is not None:
            installed = _installed(name, pattern, modules, package)
            if installed is not None:
                found.append(installed)
    return tuple(found)
