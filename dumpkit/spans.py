"""Address spans, (start, end) with end exclusive: joined, subtracted, the gaps between.
One implementation for everything that reasons about which bytes a dump or a debugger
holds (the pykd source, slim bundles, dumpkit capture's amend and Python memory)."""

from __future__ import annotations

from bisect import bisect_right
from typing import Iterable, List, Sequence, Tuple

Span = Tuple[int, int]  # (start, end)


def join(spans: Iterable[Span]) -> List[Span]:
    """Sorted spans with overlapping and touching ones joined (dbgeng reads across touching
    ranges of a dump as one region)."""
    out: List[Span] = []
    for start, end in spans:
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def merge(spans: Iterable[Span]) -> List[Span]:
    """Any spans: sorted, empty ones dropped, overlapping or touching ones joined."""
    return join(sorted(s for s in spans if s[1] > s[0]))


def gaps(start: int, end: int, held: Sequence[Span]) -> List[Span]:
    """The parts of [start, end) outside the sorted, merged `held` spans."""
    out: List[Span] = []
    pos = start
    i = max(bisect_right(held, (start, 1 << 64)) - 1, 0)
    while pos < end and i < len(held):
        lo, hi = held[i]
        if hi <= pos:
            i += 1
            continue
        if lo >= end:
            break
        if lo > pos:
            out.append((pos, lo))
        pos = max(pos, hi)
        i += 1
    if pos < end:
        out.append((pos, end))
    return out


def subtract(spans: Sequence[Span], minus: Sequence[Span]) -> List[Span]:
    """`spans` without `minus` (both merged, sorted)."""
    out: List[Span] = []
    j = 0
    for lo, hi in spans:
        while j < len(minus) and minus[j][1] <= lo:
            j += 1
        k = j
        cur = lo
        while k < len(minus) and minus[k][0] < hi:
            if minus[k][0] > cur:
                out.append((cur, minus[k][0]))
            cur = max(cur, minus[k][1])
            k += 1
        if cur < hi:
            out.append((cur, hi))
    return out
