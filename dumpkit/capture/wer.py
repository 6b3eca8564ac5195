"""`dumpkit wer`: Windows Error Reporting's LocalDumps for one executable.

WER writes a dump of every crash of a program whose name has a key under
HKLM\\SOFTWARE\\Microsoft\\Windows\\Windows Error Reporting\\LocalDumps (values DumpFolder,
DumpType: 1 mini, 2 full; DumpCount). `enable` creates or updates the key of one
executable, `disable` deletes that key and nothing else, `status` shows it and the values
set on LocalDumps itself (which apply to every program). The key is under HKLM: changing
it needs an elevated prompt, which is said in one line when missing.

The registry is reached through a small interface (`Registry`), so the rules are tested
anywhere; registry.WindowsRegistry is winreg."""

from __future__ import annotations

from typing import Dict, List, Optional, Protocol, Tuple
from dumpkit.records import record

LOCAL_DUMPS = r"SOFTWARE\Microsoft\Windows\Windows Error Reporting\LocalDumps"
DUMP_TYPES = {"mini": 1, "full": 2}
TYPE_NAMES = {1: "mini (1)", 2: "full (2)", 0: "custom (0)"}
DEFAULT_COUNT = 10
DEFAULT_FOLDER_NOTE = "(not set: %LOCALAPPDATA%\\CrashDumps)"
REG_DWORD, REG_EXPAND_SZ = 4, 2


class WerError(Exception):
    """One line for the user: what could not be done and how to fix it."""


class Registry(Protocol):
    """HKLM, as far as LocalDumps needs it. Paths are below HKLM."""

    def values(self, path: str) -> Optional[Dict[str, object]]: ...  # None: no such key

    def subkeys(self, path: str) -> List[str]: ...

    def set(self, path: str, name: str, kind: int, value: object) -> None: ...

    def delete_key(self, path: str) -> None: ...


@record
class Settings:
    exe: str
    folder: Optional[str]
    dump_type: Optional[int]
    count: Optional[int]

    def lines(self) -> List[str]:
        kind = TYPE_NAMES.get(self.dump_type, str(self.dump_type)) if self.dump_type is not None else None
        return [
            "DumpFolder: " + (self.folder or DEFAULT_FOLDER_NOTE),
            f"DumpType:   {kind or '(not set: mini)'}",
            f"DumpCount:  {self.count if self.count is not None else '(not set: 10)'}",
        ]


def key_for(exe: str) -> str:
    name = exe.replace("/", "\\").rsplit("\\", 1)[-1]
    if not name or name in (".", ".."):
        raise WerError(f"{exe!r} is not an executable's name (e.g. python.exe)")
    return f"{LOCAL_DUMPS}\\{name}"


def _settings(exe: str, values: Dict[str, object]) -> Settings:
    folder = values.get("DumpFolder")
    kind = values.get("DumpType")
    count = values.get("DumpCount")
    return Settings(
        exe,
        folder if isinstance(folder, str) else None,
        kind if isinstance(kind, int) else None,
        count if isinstance(count, int) else None,
    )


def enable(registry: Registry, exe: str, folder: str, dump_type: str = "full", count: int = DEFAULT_COUNT) -> Settings:
    if dump_type not in DUMP_TYPES:
        raise WerError(f"unknown dump type {dump_type!r}: full or mini")
    key = key_for(exe)
    _write(registry, key, "DumpFolder", REG_EXPAND_SZ, folder)
    _write(registry, key, "DumpType", REG_DWORD, DUMP_TYPES[dump_type])
    _write(registry, key, "DumpCount", REG_DWORD, count)
    return _settings(exe, registry.values(key) or {})


def disable(registry: Registry, exe: str) -> bool:
    """Delete `exe`'s key; False when there was none."""
    key = key_for(exe)
    if registry.values(key) is None:
        return False
    try:
        registry.delete_key(key)
    except PermissionError:
        raise WerError(_ADMIN) from None
    return True


def status(registry: Registry, exe: Optional[str]) -> Tuple[Optional[Settings], Optional[Settings], List[str]]:
    """(exe's settings or None, LocalDumps' own settings or None, the executables that have a key)."""
    own = registry.values(LOCAL_DUMPS)
    mine = registry.values(key_for(exe)) if exe else None
    return (
        _settings(exe, mine) if exe and mine is not None else None,
        _settings("every program", own) if own else None,
        registry.subkeys(LOCAL_DUMPS) if own is not None else [],
    )


_ADMIN = "changing Windows Error Reporting's LocalDumps needs administrator rights: run it from an elevated prompt"


def _write(registry: Registry, key: str, name: str, kind: int, value: object) -> None:
    try:
        registry.set(key, name, kind, value)
    except PermissionError:
        raise WerError(_ADMIN) from None
