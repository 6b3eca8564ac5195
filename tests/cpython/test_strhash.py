"""A dict in a dump is searched as the interpreter searches it (dumpkit/cpython/strhash.py,
Objects.dict_get): checked against SipHash's published test vector, and on every committed
full-memory dump of CPython 3.8-3.13 against the process itself: each sys.modules key's hash
as the interpreter cached it in the str object, and each key found by probing, reading a
few pages, to the value a scan of every key finds."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import List, Set

import pytest

from dumpkit.cpython.objects import PAGE, open_objects
from dumpkit.cpython.strhash import siphash, str_hash
from dumpkit.sources.minidump import open_dump
from tests.support.samples import SAMPLES, interpreter_exports

FULL = sorted(SAMPLES.glob("*/*full*.dmp.xz"))
ABSENT = ("tensorflow", "numpy.never", "zz_not_imported", "", "\u00e9t\u00e9", "\u4e2d\u6587", "\U0001f40d")


def test_siphash_24_gives_the_published_test_vector():
    """SipHash-2-4, key 00..0f, message 00..0e: the reference's 64-bit vector."""
    key = (int.from_bytes(bytes(range(8)), "little"), int.from_bytes(bytes(range(8, 16)), "little"))
    assert siphash(key, bytes(range(15)), 2, 4) == 0xA129CA6149BE45E5
    assert siphash(key, b"", 2, 4) == 0x726FDB47DD0E0E31


def test_the_empty_str_and_minus_one():
    assert str_hash("", (1, 2), (3, 11)) == 0


class _Counting:
    """The dump, with the pages read counted."""

    def __init__(self, target):
        self._target = target
        self.modules = target.modules
        self.pages: Set[int] = set()

    def _note(self, address: int, size: int) -> None:
        self.pages.update(range(address // PAGE, (address + max(size, 1) - 1) // PAGE + 1))

    def read(self, address: int, size: int) -> bytes:
        self._note(address, size)
        return self._target.read(address, size)

    def read_available(self, address: int, size: int) -> bytes:
        data = self._target.read_available(address, size)
        self._note(address, len(data))
        return data


def _keys(objects, modules: int) -> List[tuple]:
    return [(objects.text(k), k, v) for k, v in objects.dict_items(modules)]


@pytest.mark.slow  # 26 full dumps, every key probed: the full run's, not the py38 lane's budget
@pytest.mark.parametrize("dump", FULL, ids=lambda p: p.name.split(".")[0])
def test_every_sys_modules_key_is_found_by_its_hash(dump: Path, plain):
    target = open_dump(str(plain(dump)))
    try:
        exports, interp = interpreter_exports(target, [])
        scan = open_objects(target, exports, interp)
        assert scan is not None
        modules = scan.pointer(scan.interpreters()[-1] + scan.layout.interp_modules)
        keys = _keys(scan, modules)
        assert len(keys) > 40
        secret = struct.unpack("<QQ", target.read(exports("_Py_HashSecret"), 16))
        for text, key, value in keys:
            (cached,) = struct.unpack("<Q", target.read(key + scan.layout.unicode_length + 8, 8))
            assert str_hash(text, secret, interp.version) == cached, text  # the interpreter's own hash
            counted = _Counting(target)
            probe = open_objects(counted, exports, interp)  # type: ignore[arg-type]
            assert probe is not None
            assert probe.dict_get(modules, text) == value, text
            assert len(counted.pages) <= 12, (text, len(counted.pages))  # not a scan of every key
        for text in ABSENT:
            counted = _Counting(target)
            probe = open_objects(counted, exports, interp)  # type: ignore[arg-type]
            if text not in {k for k, _, _ in keys}:
                assert probe.dict_get(modules, text) is None
                assert len(counted.pages) <= 12, (text, len(counted.pages))
    finally:
        target.close()
