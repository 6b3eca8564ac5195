"""A dump's dynamic function tables (JIT code's unwind entries) are decoded as lookups need
them (dumpkit/function_tables.py): every lookup must answer what a bisection of the one
sorted list of all entries answered before, whatever the tables hold (interleaved tables,
empty or backwards entries, duplicates, the indirect bit)."""

from __future__ import annotations

import bisect
import struct
from typing import List, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dumpkit.function_tables import FunctionTable
from dumpkit.problems import Problems
from dumpkit.sources.minidump import open_dump
from tests.support.samples import real_dump

Entry = Tuple[int, int, int, int]


def _stream(tables: List[Tuple[int, List[Tuple[int, int, int]]]]) -> Tuple[bytes, list]:
    """The entries' bytes as a FunctionTable stream lays them out (a 32-byte descriptor
    before each run), and the runs (offset, count, base)."""
    out = bytearray(struct.pack("<6I", 24, 32, 0, 12, len(tables), 0))
    runs = []
    for base, entries in tables:
        out += struct.pack("<QQQII", 0, 0, base, len(entries), 0)
        runs.append((len(out), len(entries), base))
        for entry in entries:
            out += struct.pack("<III", *entry)
    return bytes(out), runs


def _reference(tables) -> List[Entry]:
    return sorted((base + b, base + e, base + u, base) for base, entries in tables for b, e, u in entries)


def _entry_at(flat: List[Entry], ip: int):
    i = bisect.bisect_right([e[0] for e in flat], ip) - 1
    return flat[i] if i >= 0 and flat[i][0] <= ip < flat[i][1] else None


def _reaches(flat: List[Entry], lo: int, hi: int) -> bool:
    return any(e[0] <= hi and e[1] > lo for e in flat)


_RVA = st.integers(0, 0x400)
_ENTRY = st.tuples(_RVA, _RVA, st.integers(0, 0xFFFF))
# JIT-like tables (sorted, disjoint code chunks) and arbitrary ones, at nearby bases so
# that tables interleave or not
_TABLE = st.tuples(st.sampled_from([0x10000, 0x10200, 0x10400, 0x20000]), st.lists(_ENTRY, max_size=12))


def _jit_like(draw_rng, n_tables: int):
    tables, at = [], 0x7FF000000000
    for _ in range(n_tables):
        entries, rva = [], 0
        for _ in range(draw_rng.randint(1, 20)):
            size = draw_rng.randint(1, 0x80)
            entries.append((rva, rva + size, 0x8000 + rva | draw_rng.randint(0, 1)))
            rva += size + draw_rng.randint(0, 0x20)
        tables.append((at, entries))
        at += rva + draw_rng.randint(0, 0x100)
    return tables


def _check(tables, points) -> None:
    data, runs = _stream(tables)
    table = FunctionTable(data, runs)
    flat = _reference(tables)
    assert len(table) == len(flat) and bool(table) == bool(flat)
    for ip in points:
        assert table.entry_at(ip) == _entry_at(flat, ip), hex(ip)
        for width in (0, 1, 0x40, 0x1000):
            assert table.reaches(ip, ip + width) == _reaches(flat, ip, ip + width), (hex(ip), width)
    assert list(table) == flat  # as a sequence: every entry, sorted


def _points(tables) -> List[int]:
    out = {0, 1 << 63}
    for base, entries in tables:
        for b, e, _ in entries:
            out.update((base + b - 1, base + b, base + b + 1, base + e - 1, base + e, base + e + 1))
    return sorted(out)


@settings(max_examples=300, deadline=None)
@given(st.lists(_TABLE, max_size=6))
def test_lookups_answer_as_the_sorted_list_of_every_entry(tables):
    _check(tables, _points(tables))


@settings(max_examples=50, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(1, 60))
def test_jit_like_tables_answer_as_the_sorted_list_too(rng, n_tables):
    tables = _jit_like(rng, n_tables)
    rng.shuffle(tables)  # registered in any order
    _check(tables, _points(tables))


def test_tables_whose_starts_meet_are_looked_up_as_one_list():
    """Two tables with an entry starting at the same address: the sorted list's answer is
    the larger entry, which sits in the table sorted first."""
    tables = [(0x1000, [(0x10, 0x40, 5)]), (0x1000, [(0x10, 0x20, 0), (0x18, 0x19, 0)])]
    _check(tables, _points(tables))
    assert FunctionTable(*_stream(tables)).entry_at(0x1012) == (0x1010, 0x1040, 0x1005, 0x1000)


def test_a_lookup_decodes_only_the_table_it_falls_in():
    import random

    tables = _jit_like(random.Random(7), 500)
    data, runs = _stream(tables)
    table = FunctionTable(data, runs)
    base, entries = tables[250]
    b, e, u = entries[0]
    assert table.entry_at(base + b) == (base + b, base + e, base + u, base)
    assert len(table._decoded) == 1 and table._all is None


def test_a_lookup_past_a_tables_end_decodes_nothing():
    """A heap or stack word above a table's code (most of the words a scan asks about)
    is answered from the tables' summaries."""
    import random

    tables = _jit_like(random.Random(7), 500)
    data, runs = _stream(tables)
    table = FunctionTable(data, runs)
    ends = sorted(base + max(e for _, e, _ in entries) for base, entries in tables)
    starts = sorted(base + min(b for b, _, _ in entries) for base, entries in tables)
    gaps = [end for end, nxt in zip(ends, starts[1:]) if end < nxt] + [ends[-1] + 0x1000]
    assert gaps and all(table.entry_at(ip) is None for ip in gaps)
    assert not table._decoded and table._all is None


def test_entries_given_decoded_are_looked_up_the_same():
    flat = [(0x3000, 0x3010, 0x9000, 0x1000), (0x2000, 0x2100, 0x9100, 0x1000)]
    table = FunctionTable.of(flat)
    assert table.entry_at(0x2050) == flat[1] and table.entry_at(0x3010) is None
    assert table.reaches(0x2F00, 0x3000) and not table.reaches(0x3010, 0x4000)
    assert FunctionTable.of(table) is table


@pytest.mark.parametrize("name", ["sentry-native/minidump.dmp", "node-minidump/windows.dmp"])
def test_a_real_dumps_tables_read_as_before(name):
    """The entries as the stream reader decoded them before tables were decoded lazily."""
    path = real_dump(name)
    target = open_dump(str(path), Problems())
    try:
        table = target.function_table_entries()
        data = path.read_bytes()
        expected = _decode_stream(data)
        assert list(table) == expected and len(table) == len(expected) > 0
        for entry in expected:
            assert table.entry_at(entry[0]) == _entry_at(expected, entry[0])
    finally:
        target.close()


def _decode_stream(data: bytes) -> List[Entry]:
    """Every entry of the dump's FunctionTable stream (type 13), read as a plain loop."""
    _sig, _ver, count, rva = struct.unpack_from("<IIII", data, 0)
    for i in range(count):
        kind, size, offset = struct.unpack_from("<III", data, rva + 12 * i)
        if kind != 13:
            continue
        stream = data[offset : offset + size]
        hsize, dsize, nsize, fsize, ndesc, pad = struct.unpack_from("<6I", stream, 0)
        off, out = hsize + pad, []
        for _ in range(ndesc):
            _lo, _hi, base, n, align = struct.unpack_from("<QQQII", stream, off)
            off += dsize + nsize
            for j in range(n):
                b, e, u = struct.unpack_from("<III", stream, off + fsize * j)
                out.append((base + b, base + e, base + u, base))
            off += n * fsize + align
        return sorted(out)
    return []
