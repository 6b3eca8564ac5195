"""Overlapping memory ranges (issue #13, item 3).

Dump writers save some bytes twice: every Wine MiniDumpNormal dump of python.exe has
thousands of MemoryList ranges inside others (a stack, and the memory around each pointer
found on it), all holding the same bytes. Copies that agree are one memory, silently;
only different bytes for one address are a problem, reported once with the number of
ranges that disagree and the first address where they do."""

from __future__ import annotations

import json
import lzma
import shutil
import struct
import zipfile
from pathlib import Path

import pytest

from dumpkit.sources.minidump import open_dump
from tests.support.samples import SAMPLES, python_bundle

from tests.support.synth_dump import Range, SynthDump, x64_context

PYTHON_DUMPS = SAMPLES / "python"

DATA = bytes((i * 7 + 3) & 0xFF for i in range(0x400))
BASE = 0x2605E0000


def _dump(tmp_path: Path, pieces, name="overlap.dmp"):
    """A dump whose MemoryList holds `pieces`: (address, bytes), in the order given."""
    d = SynthDump()
    d.thread(1, context=x64_context(rip=0x1000, rsp=BASE + 0x100))
    d.module("C:\\app\\app.exe", 0x1_4000_0000, 0x5000)
    for address, data in pieces:
        d.memory(address, data)
    return open_dump(d.write(tmp_path / name))


def _copy(lo: int, hi: int) -> tuple:
    """A range holding the true bytes of [BASE+lo, BASE+hi)."""
    return (BASE + lo, DATA[lo:hi])


@pytest.mark.parametrize(
    "pieces",
    [
        [_copy(0, 0x400), _copy(0x100, 0x200)],  # wholly inside
        [_copy(0x100, 0x200), _copy(0, 0x400)],  # wholly inside, listed first
        [_copy(0, 0x300), _copy(0x200, 0x400)],  # partial: the second's head overlaps
        [_copy(0, 0x400), _copy(0, 0x400)],  # the same range twice, two copies in the file
        [_copy(0, 0x100), _copy(0x80, 0x200), _copy(0xC0, 0x380), _copy(0x300, 0x400)],  # across kept pieces
        [_copy(0x10, 0x20)] * 50 + [_copy(0, 0x400)],  # Wine's habit: many small copies inside a large one
    ],
    ids=["contained", "contained-first", "partial", "duplicate", "spanning", "many"],
)
def test_agreeing_copies_are_one_memory_and_no_problem(tmp_path, pieces):
    t = _dump(tmp_path, pieces)
    assert t.soft_errors.items == []
    assert t.read(BASE, 0x400) == DATA  # every byte readable, from whichever copy
    for address, data in pieces:
        assert t.read(address, len(data)) == data
    assert t.memory_ranges()[0][0] == BASE and t.memory_ranges()[-1][1] == BASE + 0x400


def _changed(lo: int, hi: int, at: int) -> tuple:
    """A copy of [lo, hi) whose byte at `at` differs from the truth."""
    data = bytearray(DATA[lo:hi])
    data[at - lo] ^= 0xFF
    return (BASE + lo, bytes(data))


@pytest.mark.parametrize(
    "pieces, conflicts, first",
    [
        ([_copy(0, 0x300), _changed(0x200, 0x400, 0x2F0)], 1, 0x2F0),  # partial overlap
        ([_copy(0, 0x400), _changed(0x100, 0x200, 0x180)], 1, 0x180),  # contained
        ([_copy(0, 0x400), _changed(0, 0x400, 0x3FF)], 1, 0x3FF),  # same range, last byte differs
        (
            # kept: [0, 0x100) and the tail [0x100, 0x200) of the second range; the third
            # spans both and differs in the second; the fourth differs in the kept tail
            [_copy(0, 0x100), _copy(0x80, 0x200), _changed(0xC0, 0x180, 0x140), _changed(0x1F0, 0x400, 0x1F8)],
            2,
            0x140,
        ),
        ([_copy(0, 0x400), _changed(0x200, 0x210, 0x205), _changed(0x40, 0x50, 0x41)], 2, 0x41),
    ],
    ids=["partial", "contained", "last-byte", "spanning", "lowest-first"],
)
def test_different_bytes_for_one_address_are_one_problem_line(tmp_path, pieces, conflicts, first):
    t = _dump(tmp_path, pieces)
    assert t.soft_errors.items == [
        f"memory lists: {conflicts} overlapping range(s) hold different bytes for addresses another range "
        f"already gave (the first at {BASE + first:#x}); the lowest-starting range's bytes are used"
    ]
    # the copy kept is the lowest-starting one (here always the true bytes)
    assert t.read(BASE, 0x400) == DATA


def test_a_range_adjacent_to_another_is_not_an_overlap(tmp_path):
    t = _dump(tmp_path, [_copy(0, 0x200), (BASE + 0x200, b"\xee" * 0x10)])
    assert t.soft_errors.items == [] and t.read(BASE + 0x1FE, 4) == DATA[0x1FE:0x200] + b"\xee\xee"


def test_a_thread_stack_missing_from_the_memory_list_is_compared_too(tmp_path):
    """A stack only the thread record holds joins the ranges after the first pass: a
    different copy of bytes the MemoryList also has is still found."""
    d = SynthDump()
    d.module("C:\\app\\app.exe", 0x1_4000_0000, 0x5000)
    d.memory(BASE + 0x100, DATA[0x100:0x200])
    stack = bytearray(DATA[0:0x180])
    stack[0x150] ^= 1
    d.thread(1, context=x64_context(rip=0x1000, rsp=BASE), stack=Range(BASE, bytes(stack)))
    t = open_dump(d.write(tmp_path / "stack.dmp"))
    assert len(t.soft_errors.items) == 1 and f"the first at {BASE + 0x150:#x}" in t.soft_errors.items[0]
    assert t.read(BASE + 0x150, 1) == bytes([DATA[0x150] ^ 1])  # the stack starts lower: its byte is used


def _python_dumps_with_overlaps():
    manifest = PYTHON_DUMPS / "manifest.json"
    if not manifest.exists():
        return []
    return [d for d in json.loads(manifest.read_text())["dumps"] if d["overlapping_ranges"]]


def _memory_list(raw: bytes):
    """(start, size, file offset) of every MemoryList descriptor, parsed here with struct."""
    n, dir_rva = struct.unpack_from("<II", raw, 8)
    entries = [struct.unpack_from("<III", raw, dir_rva + 12 * i) for i in range(n)]
    _t, _s, rva = next(e for e in entries if e[0] == 5)
    (count,) = struct.unpack_from("<I", raw, rva)
    return struct.iter_unpack("<QII", raw[rva + 4 : rva + 4 + 16 * count])


@pytest.mark.parametrize("case", _python_dumps_with_overlaps(), ids=lambda c: c["file"])
@pytest.mark.slow
def test_real_wine_python_dumps_reconcile_their_overlaps_silently(case, tmp_path):
    """The real MiniDumpNormal dumps of python.exe under Wine (sample_dumps/python): 213 to
    406,558 overlapping ranges each, all agreeing (the manifest's count comes from
    pyfacts.py, not from dumpkit). Opening them reports nothing, and every range the
    MemoryList holds reads back as its own bytes, whichever copy serves it (up to 20,000
    ranges spread over the list: tf_nest_flatten has 803,255)."""
    assert case["overlaps_with_equal_bytes"] == case["overlapping_ranges"]
    path = PYTHON_DUMPS / case["file"]
    if not path.exists():  # committed as a bundle (NumPy, TensorFlow): the dump is its member
        bundle = python_bundle(case)
        if bundle is None:
            pytest.skip(f"{case['file']} not present")
        path = tmp_path / "dump.dmp"
        with zipfile.ZipFile(bundle) as zf, zf.open("dump.dmp") as fin, open(path, "wb") as fout:
            shutil.copyfileobj(fin, fout)
    if path.suffix == ".xz":
        plain = tmp_path / path.stem
        with lzma.open(path) as fin, open(plain, "wb") as fout:
            shutil.copyfileobj(fin, fout)
        path = plain
    raw = path.read_bytes()
    with open_dump(str(path)) as t:
        assert t.soft_errors.items == []
        ranges = list(_memory_list(raw))
        for start, size, rva in ranges[:: max(1, len(ranges) // 20_000)]:
            if size and t.read(start, size) != raw[rva : rva + size]:
                pytest.fail(f"range at {start:#x} (+{size:#x}) reads other bytes than its own")
