"""The memory a minidump captured: its ranges (address, size, file offset) from the
MemoryList and Memory64List streams, reconciled and read by address.

Writers overlap ranges (Wine lists ~400,000 inside the range before them; a hostile list
repeats one range a million times): where two copies of an address exist, the range that
sorts first serves it, and copies that disagree are counted, within a comparison budget,
for the report's problems. Reads are O(log n), may span adjacent ranges, and can be
recorded page by page (what `bundle --only-used-memory` keeps); a bundle that kept only
some pages serves nothing else (`keep_only`)."""

from __future__ import annotations

import bisect
import mmap
from typing import List, Optional, Sequence, Set, Tuple, Union

from dumpkit.sources.pieced import PiecedFile
from dumpkit.target import MemoryNotInDump

# A mapped file, a dump already in memory, or the pieces of one a slim bundle kept. It is
# read by slicing only (struct reads take a slice), which all three support.
Buffer = Union[mmap.mmap, bytes, PiecedFile]

# A hostile list can repeat one large range a million times, so the comparing has a
# budget per dump: bytes compared, plus _PIECE_COST for each kept range a comparison visits.
OVERLAP_COMPARE_BUDGET = 64 << 20
_PIECE_COST = 64
_COMPARE_CHUNK = 1 << 20


def _first_mismatch(x: bytes, y: bytes) -> int:
    """Index of the first differing byte of two unequal, equally long strings: halving
    with C-speed comparisons, not a Python loop over up to a MiB."""
    lo, hi = 0, len(x)  # x[:lo] == y[:lo], and the difference lies before hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if x[lo:mid] == y[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


# A read this large (a stack window) is copied out of the mapped file and its pages are
# then dropped from the mapping: they would otherwise stay in the process's resident set
# (an 88 MiB recursion's stack counted twice in peak RSS). Reading them again maps them again.
RELEASE_AFTER = 1 << 20


def _release(data: Buffer, offset: int, size: int) -> None:
    madvise = getattr(data, "madvise", None)  # mmap.madvise: Python 3.8+, not on every OS
    dontneed = getattr(mmap, "MADV_DONTNEED", None)
    if madvise is None or dontneed is None:
        return
    page = mmap.PAGESIZE
    lo = -(-offset // page) * page  # whole pages inside the range only
    hi = (offset + size) // page * page
    if hi > lo:
        try:
            madvise(dontneed, lo, hi - lo)
        except (OSError, ValueError):
            pass


MEMORY_PAGE = 4096  # reads of memory are recorded page-granular (bundle --only-used-memory)


class MemoryNotInBundle(MemoryNotInDump):
    """A read of memory the dump captured but a bundle of it did not keep."""

    def __init__(self, address: int, size: int):
        super().__init__(address, size)
        self.args = (f"memory at {address:#x} (+{size:#x}) is not in the bundle",)


def keep_only(ranges: List[Tuple[int, int, int]], kept: Sequence[Tuple[int, int]]) -> List[Tuple[int, int, int]]:
    """The parts of memory ranges (address, size, file offset) whose bytes lie inside the
    `kept` file ranges (sorted, disjoint (offset, length)): a bundle that kept only the
    memory its analysis read serves nothing else, never its zeros."""
    starts = [off for off, _ in kept]
    out: List[Tuple[int, int, int]] = []
    for start, size, off in ranges:
        i = max(0, bisect.bisect_right(starts, off) - 1)
        end = off + size
        while i < len(kept) and kept[i][0] < end:
            lo, hi = max(off, kept[i][0]), min(end, kept[i][0] + kept[i][1])
            if hi > lo:
                out.append((start + lo - off, hi - lo, lo))
            i += 1
    return out


class CapturedMemory:
    """Captured memory ranges: O(log n) lookup, reads may span adjacent ranges.

    Overlapping ranges are reconciled: where two copies of an address exist, the range
    that sorts first (lowest start) serves it. `conflicts` counts ranges whose copy holds
    different bytes from the one kept (`first_conflict`: the lowest such address);
    `unchecked` counts overlapping ranges left uncompared once the budget was spent."""

    def __init__(self, data: Buffer, ranges: List[Tuple[int, int, int]], budget: int = OVERLAP_COMPARE_BUDGET):
        ranges.sort()
        self._data = data
        self.starts: List[int] = []
        self.ends: List[int] = []
        self.offsets: List[int] = []
        self.conflicts = 0
        self.first_conflict: Optional[int] = None
        self.unchecked = 0
        self.pages: Optional[Set[int]] = None  # the pages read, when recording
        self._budget = budget
        add_start, add_end, add_off = self.starts.append, self.ends.append, self.offsets.append
        budget_left = budget
        chunk = _COMPARE_CHUNK
        # The last range kept, in locals: Wine lists ~400,000 ranges inside the range before
        # them, and each is decided from these alone (no list indexing, no min() call).
        last_start = last_end = -1
        last_off = 0
        for start, size, off in ranges:
            end = start + size
            if start >= last_end:  # the common case: disjoint, in order
                add_start(start)
                add_end(end)
                add_off(off)
                last_start, last_end, last_off = start, end, off
                continue
            # Every earlier range starts at or below `start`, so what is kept already
            # covers [start, last_end) without a gap: compare that part, keep the tail.
            hi = end if end < last_end else last_end
            n = hi - start
            if start >= last_start and n <= chunk and n <= budget_left:
                # Inline, the common case (Wine: hundreds of thousands of small ranges
                # inside the last one kept): one slice comparison, no bisect, no call.
                kept = last_off + (start - last_start)
                budget_left -= n + _PIECE_COST
                if kept != off and data[kept : kept + n] != data[off : off + n]:
                    self._conflict(start + _first_mismatch(data[kept : kept + n], data[off : off + n]))
            else:
                self._budget = budget_left
                self._compare(start, hi, off)
                budget_left = self._budget
            if end > last_end:
                last_off = off + (last_end - start)
                add_start(last_end)
                add_end(end)
                add_off(last_off)
                last_start, last_end = last_end, end
        self._budget = budget_left

    def _compare(self, lo: int, hi: int, off: int) -> None:
        """Compare a range's copy of [lo, hi) (at file offset `off`) with the kept bytes."""
        if self._budget <= 0:
            self.unchecked += 1
            return
        i = bisect.bisect_right(self.starts, lo) - 1
        cur = lo
        while cur < hi:
            if i < 0 or i >= len(self.starts) or not self.starts[i] <= cur < self.ends[i]:
                return  # cannot happen while the kept ranges are contiguous; never loop
            take = min(hi, self.ends[i]) - cur
            kept = self.offsets[i] + (cur - self.starts[i])
            mine = off + (cur - lo)
            self._budget -= _PIECE_COST
            if kept != mine:  # the same file bytes need no comparing
                differs = self._first_difference(kept, mine, take)
                if differs is None:
                    self.unchecked += 1
                    return
                if differs >= 0:
                    self._conflict(cur + differs)
                    return
            cur += take
            i += 1
            if self._budget <= 0 and cur < hi:
                self.unchecked += 1
                return

    def _conflict(self, address: int) -> None:
        self.conflicts += 1
        if self.first_conflict is None or address < self.first_conflict:
            self.first_conflict = address

    def _first_difference(self, a: int, b: int, size: int) -> Optional[int]:
        """Offset of the first byte where file[a:] and file[b:] differ within `size`, -1
        when they agree, None when the budget ran out first."""
        done = 0
        while done < size:
            if self._budget <= 0:
                return None
            n = min(size - done, _COMPARE_CHUNK, self._budget)
            self._budget -= n
            x = self._data[a + done : a + done + n]
            y = self._data[b + done : b + done + n]
            if x != y:
                return done + _first_mismatch(x, y)
            done += n
        return -1

    def problems(self) -> List[str]:
        """What the reconciling found that a user should know, one line each."""
        out = []
        if self.conflicts:
            out.append(
                f"memory lists: {self.conflicts} overlapping range(s) hold different bytes for addresses "
                f"another range already gave (the first at {self.first_conflict:#x}); the lowest-starting "
                "range's bytes are used"
            )
        if self.unchecked:
            out.append(
                f"memory lists: {self.unchecked} overlapping range(s) not compared (over the "
                f"{OVERLAP_COMPARE_BUDGET >> 20} MiB comparison budget); the lowest-starting range's bytes are used"
            )
        return out

    def __len__(self) -> int:
        return len(self.starts)

    def read_available(self, address: int, size: int) -> bytes:
        if size <= 0 or address < 0:
            return b""
        i = bisect.bisect_right(self.starts, address) - 1
        if i < 0 or address >= self.ends[i]:
            return b""
        out = []
        want = size
        cur = address
        n = len(self.starts)
        while want > 0 and i < n and self.starts[i] <= cur < self.ends[i]:
            take = min(want, self.ends[i] - cur)
            off = self.offsets[i] + (cur - self.starts[i])
            out.append(self._data[off : off + take])
            if take >= RELEASE_AFTER:
                _release(self._data, off, take)
            cur += take
            want -= take
            i += 1
        if self.pages is not None and cur > address:
            self.pages.update(range(address // MEMORY_PAGE, (cur - 1) // MEMORY_PAGE + 1))
        return b"".join(out)

    def read(self, address: int, size: int) -> bytes:
        got = self.read_available(address, size)
        if len(got) != size:
            raise MemoryNotInDump(address, size)
        return got
