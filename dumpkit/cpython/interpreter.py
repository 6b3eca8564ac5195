"""Which CPython a process ran: python3X.dll among its modules, and the exact version from
the DLL's version resource when the dump recorded it."""

from __future__ import annotations

import re
from typing import Optional, Sequence, Tuple

from dumpkit.target import Module
from dumpkit.records import record

_DLL = re.compile(r"^python3(\d{1,2})(t?)(_d)?\.dll$", re.IGNORECASE)
_LEVELS = {0xA: "a", 0xB: "b", 0xC: "rc"}


@record
class Interpreter:
    module: Module
    minor: int
    free_threaded: bool  # python3Xt.dll
    debug: bool  # python3X_d.dll
    micro: Optional[str] = None  # "1", "0rc1": from the version resource, when it agrees

    @property
    def version(self) -> Tuple[int, int]:
        return (3, self.minor)

    @property
    def version_text(self) -> str:
        base = f"3.{self.minor}"
        return f"{base}.{self.micro}" if self.micro is not None else base


def _micro(file_version: Optional[str], minor: int) -> Optional[str]:
    # PC/python_ver_rc.h: FILEVERSION major, minor, micro*1000 + level*10 + serial, api
    # (level 0xA alpha, 0xB beta, 0xC candidate, 0xF final); 3.8.1 final is "3.8.1150.x".
    if not file_version:
        return None
    parts = file_version.split(".")
    if len(parts) < 3 or parts[0] != "3" or parts[1] != str(minor) or not parts[2].isdigit():
        return None
    field = int(parts[2])
    micro, level, serial = field // 1000, (field % 1000) // 10, field % 10
    if level == 0xF:
        return str(micro)
    return f"{micro}{_LEVELS[level]}{serial}" if level in _LEVELS else None


def interpreter_minor(name: str) -> Optional[int]:
    """12 for python312.dll (or a path ending in it); None for any other file, python3.dll
    (the stable-ABI forwarder) included."""
    match = _DLL.match(re.split(r"[\\/]", name)[-1])
    return int(match.group(1)) if match else None


def find_interpreter(modules: Sequence[Module]) -> Optional[Interpreter]:
    """The python3X.dll the process loaded (python3.dll, the stable-ABI forwarder, is not
    an interpreter). With several (embedding oddities), the newest minor wins."""
    found = []
    for m in modules:
        match = _DLL.match(m.name)
        if match:
            minor = int(match.group(1))
            found.append(
                Interpreter(m, minor, bool(match.group(2)), bool(match.group(3)), _micro(m.file_version, minor))
            )
    return max(found, key=lambda i: i.minor) if found else None
