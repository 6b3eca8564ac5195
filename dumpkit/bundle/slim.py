"""`dumpkit bundle --only-used-memory`: which bytes of the dump a bundle keeps when it keeps
only the memory its analysis read.

The manifest lists the file ranges that are kept (`dump.kept`) and the member holds just
those bytes, back to back; a reader serves them at their places in the dump (every stream
and RVA stays valid) and answers a read of the memory left out "not in the bundle". So a
multi-GB full-memory dump's bundle holds a few MB, and nothing of the rest is ever read.
Kept: every page of memory read, every address two ranges capture (the reader compares
overlapping copies, and must find what the original held), the header, the stream
directory and every stream. Pure functions over ranges."""

from __future__ import annotations

import bisect
import struct
from typing import List, Optional, Sequence, Set, Tuple

from dumpkit.problems import Problems
from dumpkit.sources.bundle_format import MAX_RANGES, BundleError
from dumpkit.sources.memory import MEMORY_PAGE
from dumpkit.sources.minidump import open_dump_pieces
from dumpkit.spans import merge as _merge
from dumpkit.spans import subtract as _subtract
from dumpkit.target import DumpFile, Target

__all__ = ["kept_ranges", "check_same_dump"]

Span = Tuple[int, int]  # (start, end)


def _used_addresses(pages: Set[int], pieces: Sequence[Tuple[int, int, int]]) -> List[Span]:
    """Address spans kept: the pages read, and every address more than one range captures."""
    spans = [(p * MEMORY_PAGE, (p + 1) * MEMORY_PAGE) for p in pages]
    last_end = -1
    for start, size, _ in pieces:  # sorted by address
        if start < last_end:
            spans.append((start, min(start + size, last_end)))
        last_end = max(last_end, start + size)
    return _merge(spans)


def _protected(target: Target, file: DumpFile) -> List[Span]:
    """File spans that are not memory: the header, the stream directory, every stream."""
    head = next(file.file_chunks(32), b"")
    spans = [(0, 32)]
    if len(head) >= 16:
        nstreams, dir_rva = struct.unpack_from("<II", head, 8)
        spans.append((dir_rva, dir_rva + 12 * nstreams))
    spans.extend((e.offset, e.offset + e.size) for e in target.dump.streams)
    return _merge(spans)


def kept_ranges(
    target: Target, file: DumpFile, pages: Set[int], previous: Optional[Sequence[Tuple[int, int]]] = None
) -> Tuple[Tuple[int, int], ...]:
    """The (file offset, length) ranges of `target`'s dump `file` a bundle keeps when the
    analysis read the memory pages `pages`: all but the bytes of memory nothing read. Runs of fewer than a page
    of zeroable bytes are kept (real bytes cost little), and longer ones while the list
    would exceed what a manifest may hold. `previous`: what the bundle being bundled again
    kept (its zeros stay left out)."""
    pieces = file.memory_pieces()
    used = _used_addresses(pages, pieces)
    starts = [lo for lo, _ in used]
    drop: List[Span] = []
    keep: List[Span] = []
    for start, size, off in pieces:
        end = start + size
        cur = start
        i = max(0, bisect.bisect_right(starts, start) - 1)
        while i < len(used) and used[i][0] < end:
            lo, hi = max(start, used[i][0]), min(end, used[i][1])
            if hi > lo:
                if lo > cur:
                    drop.append((off + cur - start, off + lo - start))
                keep.append((off + lo - start, off + hi - start))
                cur = hi
            i += 1
        if cur < end:
            drop.append((off + cur - start, off + end - start))
    # A file byte that some range needs, or that is not memory, stays.
    zero = _subtract(_merge(drop), _merge(keep + _protected(target, file)))
    size = file.file_size
    if previous is not None:
        zero = _merge(zero + _subtract([(0, size)], _merge((o, o + n) for o, n in previous)))
    least = MEMORY_PAGE
    while True:
        runs = [z for z in zero if z[1] - z[0] >= least]
        if len(runs) < MAX_RANGES:
            break
        least *= 2
    kept = _subtract([(0, size)], runs)
    return tuple((lo, hi - lo) for lo, hi in kept)


def _facts(t: Target) -> tuple:
    return (
        t.dump.streams,
        t.system,
        t.process,
        t.threads,
        t.modules,
        t.unloaded_modules,
        t.exception,
        t.memory_regions,
        t.function_table_entries(),
        t.build_string,
        t.memory_range_count,
    )


def check_same_dump(
    original: Target, problems: Problems, file: DumpFile, packed: bytes, kept: Sequence[Tuple[int, int]]
) -> None:
    """Raise BundleError unless the kept pieces of `original`'s dump `file` (`packed`, back
    to back) read as the original does, but for the memory left out (a dump whose records
    lie inside its memory ranges would not). `problems`: the run's collector, which
    `original` was opened with."""
    read = Problems()  # what reading the copy meets, and nothing else
    copy = open_dump_pieces(file.file_size, kept, packed, file.path, read)
    try:
        said = read.items  # the run's go on with what its analysis added
        if _facts(copy) != _facts(original) or problems.items[: len(said)] != said:
            raise BundleError(
                "the dump's records share bytes with its memory ranges: --only-used-memory cannot leave any out"
            )
    finally:
        copy.close()
