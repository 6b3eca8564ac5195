"""The minidump reader on Wine's raw dumps (as Wine wrote them) and their facts."""

from __future__ import annotations

import json
import lzma
import shutil
import struct

import pytest

from dumpkit.sources.minidump import open_dump
from dumpkit.target import DumpError, MemoryNotInDump
from tests.support.samples import SAMPLES, run_cli, sample_manifest, sample_path

CASES = [d for d in sample_manifest() if d["file"].endswith(".dmp")]


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_threads_modules_exception_match_the_manifest(case):
    t = open_dump(str(SAMPLES / case["file"]))
    ex = t.exception
    assert ex.code == case["exception_code"]
    assert list(ex.parameters) == case["exception_parameters"]
    assert ex.thread_id == case["crash_thread_tid"]
    assert ex.context.ip == case["rip"] and ex.context.sp == case["rsp"]
    assert ex.context.context_size == case["exception_context_size"]
    assert [th.tid for th in t.threads] == [th["tid"] for th in case["threads"]]
    for ours, want in zip(t.threads, case["threads"]):
        assert (ours.stack_start, ours.stack_size) == (want["stack_start"], want["stack_size"])
        assert ours.context.context_size == want["context_size"] and ours.context.ip == want["rip"]
    by_path = {m.path: m for m in t.modules}
    assert len(t.modules) == len(case["modules"])
    for m in case["modules"]:
        ours = by_path[m["name"]]
        assert (ours.base, ours.size) == (m["base"], m["size"])
    # Wine's own stream is listed and skipped, which is not a problem.
    assert t.soft_errors.items == []
    assert any(s.type == 0xFFF0 and not s.known for s in t.dump.streams) != case["file"].endswith("normalized.dmp")
    assert t.system.is_x64 and t.system.wine_version.startswith("wine-8.0")


def _memory_list(raw: bytes):
    """(start, size, file offset) of every MemoryList descriptor, parsed here with struct."""
    n, dir_rva = struct.unpack_from("<II", raw, 8)
    entries = [struct.unpack_from("<III", raw, dir_rva + 12 * i) for i in range(n)]
    _t, _s, rva = next(e for e in entries if e[0] == 5)
    (count,) = struct.unpack_from("<I", raw, rva)
    return sorted(struct.unpack_from("<QII", raw, rva + 4 + 16 * i) for i in range(count))


def test_memory_reads_cross_adjacent_ranges_and_gaps_say_not_in_dump():
    path = sample_path("recursion_one.dmp")
    raw = path.read_bytes()
    t = open_dump(str(path))
    ranges = _memory_list(raw)
    # Two ranges adjacent in memory whose bytes are NOT adjacent in the file: one slice of
    # the file cannot serve the read, the reader must join two. Wine's dumps have many.
    pairs = [
        (a, b)
        for a, b in zip(ranges, ranges[1:])
        if a[0] + a[1] == b[0] and a[2] + a[1] != b[2] and a[1] >= 4 and b[1] >= 4
    ]
    assert pairs, "the sample has no adjacent memory ranges: pick another dump for this test"
    for (_s1, n1, off1), (s2, _n2, off2) in pairs[:50]:
        want = raw[off1 + n1 - 4 : off1 + n1] + raw[off2 : off2 + 4]
        assert t.read(s2 - 4, 8) == want, hex(s2)
        assert t.read_available(s2 - 4, 8) == want
    gap = next((a[0] + a[1], b[0]) for a, b in zip(ranges, ranges[1:]) if b[0] > a[0] + a[1])
    with pytest.raises(MemoryNotInDump):
        t.read(gap[0] - 2, 4)
    assert len(t.read_available(gap[0] - 2, 4)) == 2
    assert t.read_available(gap[0], 4) == b""


def test_thread_list_context_is_not_the_crash_context_in_a_self_written_dump(tmp_path):
    """In-process dumps park the crashing thread in the handler; only the Exception
    stream's context shows the fault (DESIGN.md, 'Facts that matter')."""
    src = SAMPLES / "recursion_one.selfdump.dmp.xz"
    if not src.exists():
        pytest.skip("selfdump sample not present")
    dump = tmp_path / "self.dmp"
    with lzma.open(src) as fin, open(dump, "wb") as fout:
        shutil.copyfileobj(fin, fout)
    case = next(c for c in sample_manifest() if c["file"] == "recursion_one.selfdump.dmp.xz")
    t = open_dump(str(dump))
    crashing = next(th for th in t.threads if th.tid == t.exception.thread_id)
    assert crashing.context.ip != t.exception.context.ip
    assert t.exception.context.ip == case["rip"]


def test_not_a_minidump_is_a_one_line_dump_error(tmp_path):
    p = tmp_path / "x.dmp"
    p.write_bytes(b"MZ" + b"\0" * 100)
    with pytest.raises(DumpError) as e:
        open_dump(str(p))
    assert "not a minidump" in str(e.value) and "\n" not in str(e.value)


def test_repeated_problems_are_counted_not_listed():
    from dumpkit.problems import Problems

    se = Problems()
    for i in range(1000):
        se.add(f"thread {i}: no register context")
    se.add("header: something else")
    assert se.items[:3] == [
        "thread 0: no register context",
        "thread 1: no register context",
        "thread 2: no register context",
    ]
    assert se.items[3] == "... and 997 more like: thread 999: no register context"
    assert se.items[4] == "header: something else" and len(se.items) == 5


# ContextFlags groups (winnt.h, AMD64): CONTROL 1, INTEGER 2, SEGMENTS 4, FLOATING_POINT 8.
GPRS = ("rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15")


def _context_flags(raw: bytes, rva: int) -> int:
    return struct.unpack_from("<I", raw, rva + 0x30)[0]


def _thread_contexts(raw: bytes):
    """{tid: context rva} straight from the ThreadList stream."""
    n, dir_rva = struct.unpack_from("<II", raw, 8)
    entries = [struct.unpack_from("<III", raw, dir_rva + 12 * i) for i in range(n)]
    _t, _s, rva = next(e for e in entries if e[0] == 3)
    (count,) = struct.unpack_from("<I", raw, rva)
    return {
        struct.unpack_from("<I", raw, rva + 4 + 48 * i)[0]: struct.unpack_from("<I", raw, rva + 4 + 48 * i + 44)[0]
        for i in range(count)
    }


def test_registers_the_context_flags_leave_out_are_absent():
    path = sample_path("null_deref.dmp")
    raw = path.read_bytes()
    t = open_dump(str(path))
    rvas = _thread_contexts(raw)
    for th in t.threads:
        flags = _context_flags(raw, rvas[th.tid])
        assert th.context.context_flags == flags
        segs = {"ds", "es", "fs", "gs"} & set(th.context.values)
        assert bool(segs) == bool(flags & 4), (hex(flags), th.context.values)
        assert set(GPRS) <= set(th.context.values) and "rip" in th.context.values
    # Wine saves CONTROL | INTEGER | FLOATING_POINT for threads: the segment group is absent
    assert any(not _context_flags(raw, r) & 4 for r in rvas.values())


def _exception_context_rva(raw: bytes) -> int:
    n, dir_rva = struct.unpack_from("<II", raw, 8)
    entries = [struct.unpack_from("<III", raw, dir_rva + 12 * i) for i in range(n)]
    _t, _s, rva = next(e for e in entries if e[0] == 6)
    return struct.unpack_from("<I", raw, rva + 164)[0]


@pytest.mark.parametrize(
    "clear, gone, problem",
    [
        (0x2, GPRS, False),  # no INTEGER group: no rax..r15, rbp included
        (0x1, ("rip", "rsp", "eflags", "cs", "ss"), True),  # no CONTROL: said so
    ],
)
def test_an_unsaved_register_group_is_not_reported_as_values(tmp_path, clear, gone, problem):
    data = bytearray(sample_path("null_deref.dmp").read_bytes())
    at = _exception_context_rva(data) + 0x30
    struct.pack_into("<I", data, at, struct.unpack_from("<I", data, at)[0] & ~clear)
    dump = tmp_path / "flags.dmp"
    dump.write_bytes(bytes(data))
    t = open_dump(str(dump))
    assert not set(gone) & set(t.exception.context.values), t.exception.context.values
    assert any("CONTEXT_CONTROL" in e for e in t.soft_errors.items) == problem
    # the rest of dumpkit copes with the missing registers: a report, no traceback
    r = run_cli("analyze", dump, "--format", "json")
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert json.loads(r.stdout)["verdict"]["headline"]
