"""The memory-list reconcile (sources/memory.py `CapturedMemory`) was rewritten for speed: Wine
dumps of python.exe hold ~800,000 MemoryList ranges, half of them inside another. The
rewrite must decide exactly as before. `_reference` below is the algorithm as it was
(commit 7c3d054), kept here verbatim in behaviour; every sample dump, every Python sample
dump, shuffled and with tight comparison budgets, and seeded random overlapping (and
disagreeing) ranges must give the same kept ranges and the same counts."""

from __future__ import annotations

import bisect
import random
import shutil
import zipfile
from pathlib import Path
from typing import List, Optional, Tuple

import pytest

from dumpkit.sources.memory import _COMPARE_CHUNK, _PIECE_COST, OVERLAP_COMPARE_BUDGET, CapturedMemory, _first_mismatch
from dumpkit.sources.minidump import open_dump
from tests.support.samples import SAMPLES, plain_dump, python_bundle, python_manifest, real_dumps

Outcome = Tuple[List[int], List[int], List[int], int, Optional[int], int]


def _reference(data: bytes, ranges: List[Tuple[int, int, int]], budget: int) -> Outcome:
    """The reconcile before the rewrite: (starts, ends, offsets, conflicts, first_conflict, unchecked)."""
    ranges = sorted(ranges)
    starts: List[int] = []
    ends: List[int] = []
    offs: List[int] = []
    state = {"conflicts": 0, "first": None, "unchecked": 0, "budget": budget}

    def conflict(address: int) -> None:
        state["conflicts"] += 1
        if state["first"] is None or address < state["first"]:
            state["first"] = address

    def first_difference(a: int, b: int, size: int) -> Optional[int]:
        done = 0
        while done < size:
            if state["budget"] <= 0:
                return None
            n = min(size - done, _COMPARE_CHUNK, state["budget"])
            state["budget"] -= n
            x, y = data[a + done : a + done + n], data[b + done : b + done + n]
            if x != y:
                return done + _first_mismatch(x, y)
            done += n
        return -1

    def compare(lo: int, hi: int, off: int) -> None:
        if state["budget"] <= 0:
            state["unchecked"] += 1
            return
        i = bisect.bisect_right(starts, lo) - 1
        cur = lo
        while cur < hi:
            if i < 0 or i >= len(starts) or not starts[i] <= cur < ends[i]:
                return
            take = min(hi, ends[i]) - cur
            kept = offs[i] + (cur - starts[i])
            mine = off + (cur - lo)
            state["budget"] -= _PIECE_COST
            if kept != mine:
                differs = first_difference(kept, mine, take)
                if differs is None:
                    state["unchecked"] += 1
                    return
                if differs >= 0:
                    conflict(cur + differs)
                    return
            cur += take
            i += 1
            if state["budget"] <= 0 and cur < hi:
                state["unchecked"] += 1
                return

    last_end = -1
    for start, size, off in ranges:
        end = start + size
        if start >= last_end:
            starts.append(start)
            ends.append(end)
            offs.append(off)
            last_end = end
            continue
        hi = min(end, last_end)
        n = hi - start
        if start >= starts[-1] and n <= min(_COMPARE_CHUNK, state["budget"]):
            kept = offs[-1] + (start - starts[-1])
            state["budget"] -= n + _PIECE_COST
            if kept != off:
                a, b = data[kept : kept + n], data[off : off + n]
                if a != b:
                    conflict(start + _first_mismatch(a, b))
        else:
            compare(start, hi, off)
        if end > last_end:
            starts.append(last_end)
            ends.append(end)
            offs.append(off + (last_end - start))
            last_end = end
    return starts, ends, offs, state["conflicts"], state["first"], state["unchecked"]


def _current(data: bytes, ranges: List[Tuple[int, int, int]], budget: int) -> Outcome:
    m = CapturedMemory(data, list(ranges), budget)
    return m.starts, m.ends, m.offsets, m.conflicts, m.first_conflict, m.unchecked


def _assert_same(data: bytes, ranges: List[Tuple[int, int, int]], budget: int) -> Outcome:
    want = _reference(data, ranges, budget)
    got = _current(data, ranges, budget)
    for name, w, g in zip(("starts", "ends", "offsets", "conflicts", "first_conflict", "unchecked"), want, got):
        assert g == w, f"{name} differs (budget {budget})"
    return got


def _sample_paths() -> List[Path]:
    out = sorted(SAMPLES.glob("*.dmp")) + sorted(SAMPLES.glob("*.dmp.xz"))
    for facts in python_manifest():
        path = SAMPLES / "python" / facts["file"]
        if path.exists():
            out.append(path)
        elif python_bundle(facts) is not None:
            out.append(python_bundle(facts))  # type: ignore[arg-type]
    return out


def _readable(path: Path, tmp: Path) -> Path:
    if path.suffix == ".dkb":  # the dump is the bundle's member
        out = tmp / (path.stem + ".dmp")
        with zipfile.ZipFile(path) as zf, zf.open("dump.dmp") as fin, open(out, "wb") as fout:
            shutil.copyfileobj(fin, fout)
        return out
    return plain_dump(path, tmp)


def _sample_cases():
    """The samples, the TensorFlow bundle's ~800,000 ranges in the full run only: its pure
    Python reference takes 25 s here (30 s on the py38 lane), a tenth of the fast tier."""
    for path in _sample_paths():
        big = path.name == "tf_nest_flatten.dkb"
        yield pytest.param(path, id=path.name, marks=[pytest.mark.slow] if big else [])


@pytest.mark.parametrize("path", list(_sample_cases()))
def test_every_sample_dump_reconciles_exactly_as_before(path, tmp_path):
    """The ranges the parser collected (memory lists and thread stacks), as the file
    lists them sorted, shuffled, and under budgets that run out part way: identical."""
    readable = _readable(path, tmp_path)
    data = readable.read_bytes()
    with open_dump(str(readable)) as t:
        ranges = list(t._mem_ranges)
        kept = len(t._memory)
    starts, *_rest = _assert_same(data, ranges, OVERLAP_COMPARE_BUDGET)
    assert len(starts) == kept
    shuffled = list(ranges)
    random.Random(1).shuffle(shuffled)
    _assert_same(data, shuffled, OVERLAP_COMPARE_BUDGET)
    for budget in (0, 1, 4096, 1 << 20):
        _assert_same(data, ranges, budget)


def test_the_wine_python_dumps_are_the_large_case_this_is_about(tmp_path):
    """Guard that the comparison above ran on the shape that matters: the TensorFlow
    sample's MemoryList has ~800,000 ranges, about half inside another."""
    bundle = SAMPLES / "python" / "tf_nest_flatten.dkb"
    if not bundle.exists():
        pytest.skip("tf_nest_flatten.dkb not present")
    with open_dump(str(_readable(bundle, tmp_path))) as t:
        assert len(t._mem_ranges) > 800_000
        assert len(t._memory) < len(t._mem_ranges) * 0.6


@pytest.mark.parametrize("path", real_dumps(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_real_dumps_ranges_reconcile_exactly_as_before(path):
    """Writers other than Wine list their ranges apart (../shared's dumps, a Unity player's
    62,000), where the reference and CapturedMemory must keep every one as listed."""
    data = path.read_bytes()
    try:
        t = open_dump(str(path))
    except Exception:  # the ones no reader can use (a cut header)
        pytest.skip(f"{path.name} does not open")
    with t:
        ranges = list(t._mem_ranges)
    _assert_same(data, ranges, OVERLAP_COMPARE_BUDGET)
    _assert_same(data, ranges[::-1], 0)


@pytest.mark.parametrize("seed", range(20))
def test_random_disjoint_ranges_and_one_overlap_reconcile_exactly_as_before(seed):
    """Apart, adjacent, empty, in any order: kept as listed; then one range made to reach
    into the next, which the loop decides."""
    rng = random.Random(seed)
    data = bytes(rng.randrange(256) for _ in range(1 << 13))
    ranges: List[Tuple[int, int, int]] = []
    at = 0x1_0000_0000 * rng.randrange(1, 3)
    for _ in range(rng.randrange(1, 400)):
        at += rng.choice((0, 0, 1, 0x1000, rng.randrange(1 << 20)))
        size = rng.randrange(0, 64)
        ranges.append((at, size, rng.randrange(0, (1 << 13) - size)))
        at += size
    rng.shuffle(ranges)
    _assert_same(data, ranges, OVERLAP_COMPARE_BUDGET)
    start, size, off = ranges[0]
    ranges[0] = (start, size + 200, min(off, (1 << 13) - size - 200))
    for budget in (0, 100, OVERLAP_COMPARE_BUDGET):
        _assert_same(data, ranges, budget)


@pytest.mark.parametrize("seed", range(40))
def test_random_overlapping_ranges_reconcile_exactly_as_before(seed):
    """Seeded random ranges over a small address space: contained, partial, spanning,
    duplicate, adjacent; some copies disagree; budgets from nothing to plenty."""
    rng = random.Random(seed)
    data = bytes(rng.randrange(4) for _ in range(1 << 14))  # few values: copies often agree
    truth = bytes(rng.randrange(4) for _ in range(1 << 12))
    ranges: List[Tuple[int, int, int]] = []
    base = 0x7FF0_0000_0000
    for _ in range(rng.randrange(1, 300)):
        lo = rng.randrange(0, 1 << 12)
        size = rng.randrange(1, min(600, (1 << 12) - lo) + 1)
        if rng.random() < 0.5:  # a file offset holding the true bytes (maybe reused)...
            off = rng.randrange(0, (1 << 14) - size)
            data = data[:off] + truth[lo : lo + size] + data[off + size :]
        else:  # ...or arbitrary bytes that may disagree
            off = rng.randrange(0, (1 << 14) - size)
        ranges.append((base + lo, size, off))
    for budget in (0, 1, 64, 100, 500, 5000, OVERLAP_COMPARE_BUDGET):
        _assert_same(data, ranges, budget)
