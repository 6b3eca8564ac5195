"""`dumpkit wer`'s rules, on a registry kept in a dict: one executable's key set, shown,
removed; other programs' keys never touched; a missing right said in one line."""

from __future__ import annotations

from typing import Dict, List, Optional

import pytest

from dumpkit.capture.wer import LOCAL_DUMPS, WerError, disable, enable, key_for, status


class DictRegistry:
    def __init__(self, read_only: bool = False):
        self.keys: Dict[str, Dict[str, object]] = {}
        self.read_only = read_only

    def values(self, path: str) -> Optional[Dict[str, object]]:
        return dict(self.keys[path]) if path in self.keys else None

    def subkeys(self, path: str) -> List[str]:
        return sorted(k[len(path) + 1 :] for k in self.keys if k.startswith(path + "\\"))

    def set(self, path: str, name: str, kind: int, value: object) -> None:
        if self.read_only:
            raise PermissionError(5, "Access is denied")
        self.keys.setdefault(path, {})[name] = value

    def delete_key(self, path: str) -> None:
        if self.read_only:
            raise PermissionError(5, "Access is denied")
        del self.keys[path]


def test_enable_sets_the_three_values_for_that_executable_only():
    reg = DictRegistry()
    reg.keys[key_for("other.exe")] = {"DumpType": 1}
    settings = enable(reg, "python.exe", r"C:\dumps", "full", 5)
    assert reg.keys[LOCAL_DUMPS + "\\python.exe"] == {"DumpFolder": r"C:\dumps", "DumpType": 2, "DumpCount": 5}
    assert reg.keys[key_for("other.exe")] == {"DumpType": 1}
    assert settings.lines()[1] == "DumpType:   full (2)"


def test_disable_removes_that_key_and_no_other():
    reg = DictRegistry()
    reg.keys[LOCAL_DUMPS] = {"DumpType": 1}
    enable(reg, "python.exe", r"C:\dumps")
    enable(reg, "trainer.exe", r"C:\dumps")
    assert disable(reg, "python.exe")
    assert LOCAL_DUMPS + "\\python.exe" not in reg.keys
    assert LOCAL_DUMPS + "\\trainer.exe" in reg.keys and reg.keys[LOCAL_DUMPS] == {"DumpType": 1}
    assert not disable(reg, "python.exe")  # nothing left to remove


def test_status_shows_the_executable_the_global_values_and_which_programs_have_keys():
    reg = DictRegistry()
    reg.keys[LOCAL_DUMPS] = {"DumpFolder": r"C:\all"}
    enable(reg, "python.exe", r"C:\dumps", "mini")
    mine, every, names = status(reg, r"C:\Python312\python.exe")
    assert mine is not None and mine.dump_type == 1 and mine.folder == r"C:\dumps"
    assert every is not None and every.folder == r"C:\all"
    assert names == ["python.exe"]


def test_a_missing_administrator_right_is_one_line_saying_so():
    with pytest.raises(WerError, match="administrator rights"):
        enable(DictRegistry(read_only=True), "python.exe", r"C:\dumps")


@pytest.mark.parametrize("bad", ["", "C:\\dumps\\", ".."])
def test_a_path_that_names_no_executable_is_refused(bad):
    with pytest.raises(WerError):
        key_for(bad)


def test_an_unknown_dump_type_is_refused():
    with pytest.raises(WerError, match="full or mini"):
        enable(DictRegistry(), "python.exe", r"C:\dumps", "huge")
