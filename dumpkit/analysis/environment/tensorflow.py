"""TensorFlow's modules and version: from version resources, else from the process's own
`tensorflow.__version__` (a full dump's heap), else from the installed package that owns the
module (its dist-info RECORD, or the wheel --fetch-images took that very build from), else
from the install path."""

from __future__ import annotations

import re
from typing import Optional, Sequence, Tuple

from dumpkit.analysis.environment.pypackages import PackageLookup, owner_source
from dumpkit.analysis.environment.versions import Versions, trim_version, version_groups
from dumpkit.target import Module


_TF_NAME = re.compile(
    r"^(_pywrap_tensorflow\w*\.pyd|tensorflow_framework[\w.]*\.dll|"
    r"tensorflow_cc[\w.]*\.dll|tensorflow\.dll)$",
    re.I,
)


_TF_DIR = re.compile(r"[\\/]tensorflow(?:_core)?[\\/]", re.I)


# These two only read a TensorFlow found: strings that re compiles (and caches) at their
# first use, not at every start-up's import
_TF_PATH_VERSION = (
    r"(?i)tensorflow(?:[-_](?:gpu|cpu|base|intel|directml))?[-_](\d+\.\d+(?:\.\d+)?(?:rc\d+)?)(?=[-_\\/.]|$)"
)


_VERSION_TEXT = r"(?i)^\d+\.\d+(?:\.\d+)?(?:[-.]?(?:rc|dev|a|b)\d*)?$"


def find_tensorflow(
    modules: Sequence[Module], vers: Versions, package: Optional[PackageLookup] = None, loaded: Optional[str] = None
) -> Tuple[Tuple[str, ...], Optional[str], Optional[str]]:
    """TensorFlow's module paths (the main extension first), its version and where the
    version came from. `loaded`: `tensorflow.__version__` as the process held it (a full
    dump's heap), taken after the modules' own version records and before any installation's."""
    found = [
        m
        for m in modules
        if _TF_NAME.match(m.name) or (_TF_DIR.search(m.path) and m.name.lower().endswith((".pyd", ".dll")))
    ]
    from_memory = "tensorflow.__version__ in the dump's memory (sys.modules)"
    loaded = loaded if loaded and re.match(_VERSION_TEXT, loaded) else None
    if not found:
        return ((), loaded, from_memory) if loaded else ((), None, None)
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
            if v and re.match(_VERSION_TEXT, v) and "tensorflow" in product.lower():
                return tuple(m.path for m in found), v, f"version resource of {m.name} ({key} string)"
    for m in found[:3]:
        fv, pv, src = vers.fixed(m)
        fixed = pv or fv
        if fixed and m is primary:
            g = version_groups(fixed)
            if g and g[0] in (1, 2, 3) and len(g) >= 3:
                text = trim_version(fixed, 3) if len(g) == 4 and g[3] == 0 else fixed
                return (
                    tuple(x.path for x in found),
                    text,
                    f"VS_FIXEDFILEINFO of {m.name} ({'dump' if src == 'module record' else 'image'})",
                )
    if loaded:
        return tuple(x.path for x in found), loaded, from_memory
    if package is not None:
        owner = package(primary)
        if owner is not None and re.match(_VERSION_TEXT, owner.version):
            return tuple(x.path for x in found), owner.version, owner_source(owner, primary)
    for m in found:
        hint = re.search(_TF_PATH_VERSION, m.path)
        if hint:
            return tuple(x.path for x in found), hint.group(1), f"path hint ({m.path})"
    return tuple(m.path for m in found), None, None
