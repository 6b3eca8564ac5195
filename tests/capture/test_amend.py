"""Memory added to a minidump after its writer (what `dumpkit capture` does where dbghelp
ignores the MemoryCallback): read back by dumpkit as the writer's own ranges, the rest of
the report unchanged, nothing added twice."""

from __future__ import annotations

import shutil

import pytest

from dumpkit.capture.amend import AmendError, add_memory
from dumpkit.engine import Options, analyze
from dumpkit.sources.minidump import open_dump
from dumpkit.target import MemoryNotInDump
from tests.support.samples import SAMPLE_BIN, sample_path

FAR = 0x7FF0_1234_0000  # no sample process had anything mapped there


def _verdict(path):
    target = open_dump(str(path))
    try:
        report = analyze(target, Options(image_paths=[str(SAMPLE_BIN)]), problems=target.soft_errors).report
        return report.verdict.headline, report.signature.text, [f.symbol for f in report.threads[0].frames[:20]]
    finally:
        target.close()


def test_added_ranges_read_back_and_the_report_is_unchanged(tmp_path):
    src = sample_path("recursion_one.dmp")
    dump = tmp_path / "amended.dmp"
    shutil.copyfile(src, dump)
    before = _verdict(dump)
    target = open_dump(str(dump))
    stack_lo = target.threads[0].stack_start
    stack = target.read(stack_lo, 0x100)
    target.close()
    pieces = [(FAR, b"python" * 700), (FAR + 0x3000, b"\x01" * 0x10), (stack_lo, stack)]
    done = add_memory(str(dump), pieces)
    assert done.ranges_added == 2 and done.bytes_added == 4200 + 0x10
    assert done.already_present == 0x100  # the stack bytes were in the dump already
    target = open_dump(str(dump))
    try:
        assert target.read(FAR, 4200) == b"python" * 700
        assert target.read(FAR + 0x3000, 0x10) == b"\x01" * 0x10
        assert target.read(stack_lo, 0x100) == stack
        with pytest.raises(MemoryNotInDump):
            target.read(FAR + 4200, 0x10)
        assert not target.soft_errors.items
    finally:
        target.close()
    assert _verdict(dump) == before
    again = add_memory(str(dump), pieces)
    assert again.ranges_added == 0 and again.already_present == 4200 + 0x10 + 0x100


def test_a_dump_without_a_memory_list_gets_one(tmp_path, plain):
    # a full-memory dump keeps its memory in a Memory64List
    src = plain(sample_path("python/py_recursion_full.trimmed.dmp.xz"))
    dump = tmp_path / "full.dmp"
    shutil.copyfile(src, dump)
    assert add_memory(str(dump), [(FAR, b"\xaa" * 64)]).ranges_added == 1
    target = open_dump(str(dump))
    try:
        assert target.read(FAR, 64) == b"\xaa" * 64
        assert target.threads and target.exception is not None
    finally:
        target.close()


def test_a_file_that_is_no_minidump_is_refused_in_one_line(tmp_path):
    bad = tmp_path / "x.dmp"
    bad.write_bytes(b"MZ" + b"\0" * 100)
    with pytest.raises(AmendError, match="not a minidump"):
        add_memory(str(bad), [(FAR, b"x")])
    assert bad.read_bytes() == b"MZ" + b"\0" * 100


def _memory(path):
    """Every range of the memory list and every thread's stack, as bytes, by address."""
    target = open_dump(str(path))
    try:
        ranges = {start: target.read(start, end - start) for start, end in target.memory_ranges()}
        stacks = {t.tid: target.read(t.stack_start, t.stack_size) for t in target.threads if t.stack_size}
        return ranges, stacks
    finally:
        target.close()


@pytest.mark.parametrize("name", ["recursion_one.dmp", "python/py_recursion.dmp.xz"])
def test_wines_memory_list_grows_where_it_is(tmp_path, plain, name):
    """Wine writes its memory list (a million entries for a TensorFlow process) just before
    the bytes it describes: the list grows in place, the first ranges after it move to the
    end, and nothing the dump held changes."""
    src = plain(sample_path(name))
    dump = tmp_path / "amended.dmp"
    shutil.copyfile(src, dump)
    before_size = dump.stat().st_size
    before = _memory(dump)
    verdict = _verdict(dump)
    done = add_memory(str(dump), [(FAR, b"Z" * 3000)])
    assert done.ranges_added == 1 and done.moved is not None
    grown = dump.stat().st_size - before_size
    assert grown <= done.moved + 3000 + 16, grown  # no second copy of the writer's list
    ranges, stacks = _memory(dump)
    assert stacks == before[1]
    assert {a: b for a, b in ranges.items() if a != FAR} == before[0]
    assert ranges[FAR] == b"Z" * 3000
    assert _verdict(dump) == verdict


def test_overlapping_pieces_are_added_once_and_the_list_still_grows_in_place(tmp_path, plain):
    """capture adds the Python stacks' memory and the command line's in one amend (a second
    amend could not grow Wine's list in place again); where the two overlap, each byte is
    added once."""
    dump = tmp_path / "amended.dmp"
    shutil.copyfile(plain(sample_path("python/py_recursion.dmp.xz")), dump)
    before_size = dump.stat().st_size
    before = _memory(dump)
    memory = bytes(range(256)) * 16  # 4 KiB of the process at FAR
    pieces = [(FAR, memory[:0x800]), (FAR + 0x100, memory[0x100:0x200]), (FAR + 0x700, memory[0x700:])]
    done = add_memory(str(dump), pieces)
    assert done.bytes_added == 0x1000 and done.already_present == 0 and done.moved is not None
    assert dump.stat().st_size - before_size <= done.moved + 0x1000 + 16 * done.ranges_added
    ranges, stacks = _memory(dump)
    assert stacks == before[1]
    assert {a: b for a, b in ranges.items() if not FAR <= a < FAR + 0x1000} == before[0]
    target = open_dump(str(dump))
    try:
        assert target.read(FAR, 0x1000) == memory
        assert not target.soft_errors.items
    finally:
        target.close()
