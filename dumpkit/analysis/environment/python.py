"""The Python interpreter loaded in the process: pythonXY.dll's version and python.exe."""

from __future__ import annotations

import re
from typing import Optional, Sequence, Tuple

from dumpkit.analysis.environment.versions import Versions, version_groups
from dumpkit.target import Module


def python_version_from_file_version(file_version: str) -> Optional[str]:
    """pythonXY.dll's VS_FIXEDFILEINFO is major.minor.FIELD3.api, with
    FIELD3 = micro*1000 + release_level*10 + serial (CPython PC/field3.py / make_versioninfo.c;
    levels 0xA alpha, 0xB beta, 0xC candidate, 0xF final): 3.10.11150.1013 -> "3.10.11"."""
    g = version_groups(file_version)
    if not g or len(g) < 3:
        return None
    micro, rest = divmod(g[2], 1000)
    level, serial = divmod(rest, 10)
    suffix = {0xA: "a", 0xB: "b", 0xC: "rc", 0xF: ""}.get(level)
    if suffix is None:
        return None
    return f"{g[0]}.{g[1]}.{micro}" + (f"{suffix}{serial}" if suffix else "")


_PYDLL = re.compile(r"^python(\d)(\d{1,2})(_d)?\.dll$", re.I)


_PYEXE = re.compile(r"^pythonw?(_d)?\.exe$", re.I)


def python_dll_family(name: str) -> Optional[str]:
    """ "3.10" for python310.dll (and its debug build python310_d.dll); None for any other
    name, python3.dll (the stable ABI's forwarder) included."""
    mt = _PYDLL.match(name)
    return f"{mt.group(1)}.{mt.group(2)}" if mt else None


def is_python_executable(name: str) -> bool:
    return bool(_PYEXE.match(name))


def find_python(modules: Sequence[Module], vers: Versions) -> Tuple[Optional[str], Optional[str], Optional[str]]:
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
