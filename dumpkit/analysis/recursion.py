"""Unbounded recursion: repeating cycles of frames on one stack.

Frames are compared by FUNCTION identity (`Frame.function_key`), never by return
address: a function that recurses from two call sites is still one function.

How it stays linear in the number of frames (a stack can hold 10^6 frames):
every function key is mapped to a small integer and the sequence is packed into
bytes (1, 2 or 4 bytes per frame). For each candidate period p (1..max_period) the
packed sequence is XORed with itself shifted by p frames, as one big integer; a run
of zero elements in the result is a run of positions i with key[i] == key[i+p], i.e. a
p-periodic stretch of the stack. The runs are found with `bytes.find` (a run of zero
bytes at least as long as the repetitions asked for) and growing windows compared with
zeros for the run's end. Each period is therefore a handful of C-level passes over the
bytes, and the Python work is proportional to the number of runs found, not to the number of frames.

Nothing here recurses.
"""

from __future__ import annotations

import heapq
from array import array
from collections import Counter
from typing import Dict, Hashable, List, Optional, Sequence, Tuple

from dumpkit.analysis.model import Cycle
from dumpkit.unwind.bulk import Frames
from dumpkit.unwind.frames import Frame, Trust

__all__ = ["find_cycles", "function_codes"]

_ZEROS = bytes(1 << 16)

# candidates kept per period before the final selection (the longest ones)
_KEEP_PER_PERIOD = 32


def function_codes(frames: Sequence[Frame]) -> List[int]:
    """Each frame's function identity as a small integer (first seen = 0).

    Same identity as `Frame.function_key` ((module, function_start) when both are known),
    built without formatting a string per frame."""
    ids: Dict[Hashable, int] = {}
    code_of = ids.setdefault

    def code(f: Frame) -> int:
        # len(ids) is evaluated before setdefault inserts: a new key gets the next code
        return code_of(
            (f.module, f.function_start) if f.module is not None and f.function_start is not None else f.function_key,
            len(ids),
        )

    # a bulk-walked recursion: each member's code once, not once per repetition
    return frames.per_frame(code) if isinstance(frames, Frames) else [code(f) for f in frames]


def _size(f: Frame) -> Optional[int]:
    return f.size


def _pack(codes: List[int]) -> Tuple[bytes, int]:
    distinct = (max(codes) + 1) if codes else 0
    if distinct <= 0xFF:
        return bytes(codes), 1
    if distinct <= 0xFFFF:
        return array("H", codes).tobytes(), 2
    arr = array("I", codes)
    if arr.itemsize != 4:  # pragma: no cover - exotic platforms
        arr = array("L", codes)
    return arr.tobytes(), arr.itemsize


def _periodic_segments(whole: int, width: int, n: int, p: int, min_len: int):
    """Maximal p-periodic segments (start, length) of at least `min_len` frames.

    A segment [s, s+L) is p-periodic when key[i] == key[i+p] for s <= i < s+L-p."""
    m = n - p  # number of comparisons key[i] vs key[i+p]
    need = min_len - p  # equal comparisons needed in a row
    if m <= 0 or need > m:
        return
    if need < 1:
        need = 1
    # element i of the XOR is key[i] ^ key[i+p]; the top p elements (key ^ 0) are cut off
    diff = (whole ^ (whole >> (8 * p * width))).to_bytes(n * width, "little")[: m * width]
    needle = b"\x00" * (need * width)
    pos = 0
    while True:
        b = diff.find(needle, pos)  # fast skip over the non-matching stretches
        if b < 0:
            return
        e = _zero_run_end(diff, b + len(needle))
        pos = e
        js = -(-b // width)  # first element entirely inside the zero run
        je = e // width
        if je - js >= need:
            yield js, je - js + p


def _zero_run_end(diff: bytes, pos: int) -> int:
    """The first index at or after pos whose byte is not zero (len(diff) when none):
    windows growing to 64 KiB compared with zeros (memcmp), then the one that is not all
    zero stripped. A regular expression took ~15 ns a byte over a million-frame run."""
    n = len(diff)
    size = 64
    while pos < n:
        window = diff[pos : pos + size]
        if window != _ZEROS[: len(window)]:
            return pos + len(window) - len(window.lstrip(b"\x00"))
        pos += len(window)
        size = min(size * 2, len(_ZEROS))
    return n


def _primitive_period(codes: List[int], start: int, period: int) -> int:
    """Smallest d dividing `period` such that one repetition is itself d-periodic."""
    rep = codes[start : start + period]
    for d in range(1, period):
        if period % d == 0 and all(rep[i] == rep[i + d] for i in range(period - d)):
            return d
    return period


def _mode(values: List[Optional[int]]) -> int:
    first = values[0] if values else None
    if values and values.count(first) == len(values):
        # one size throughout (a recursion's usual case): a C-level count, not a Counter
        return first if first is not None else 0
    if first is not None and 2 * values.count(first) >= len(values):
        # at least half: the most common, and on a tie the first seen, as Counter's is
        return first
    counts = Counter(v for v in values if v is not None)
    if not counts:
        return 0
    return counts.most_common(1)[0][0]


def find_cycles(
    frames: Sequence[Frame],
    *,
    max_period: int = 64,
    min_repetitions: int = 3,
    max_top_noise: int = 8,
    used_stack: Optional[int] = None,
    secondary_min_repetitions: int = 10,
    max_cycles: int = 4,
    entry_path_length: int = 16,
) -> List[Cycle]:
    """Repeating cycles of functions on a walked stack (frame 0 = top), largest first.

    - A cycle is a maximal stretch of frames whose function keys repeat with some
      period p (1..max_period); the smallest period that explains the stretch is used,
      so a one-function recursion is period 1, never 2.
    - `repetitions` counts COMPLETE repetitions starting at the frame nearest the top
      (`first_frame`); `last_frame` ends the last complete one. A partial repetition
      below it is part of the entry path.
    - `functions` are the members in stack order from `first_frame` (callee first).
    - `bytes_per_repetition` sums, over one period, the most common `Frame.size` at each
      position (so a partial frame 0, e.g. a fault inside a prologue, does not skew it);
      `total_bytes` is the measured sum of the sizes of the frames in the cycle.
    - A cycle starting within `max_top_noise` frames of the top (the faulting helper,
      a probe...) needs `min_repetitions`; one deeper in the stack needs
      `secondary_min_repetitions`. Overlapping candidates are dropped in favour of the
      one covering more frames; at most `max_cycles` are returned.
    """
    n = len(frames)
    if n == 0 or max_period < 1 or max_cycles < 1:
        return []
    min_repetitions = max(2, min_repetitions)
    secondary_min_repetitions = max(min_repetitions, secondary_min_repetitions)
    codes = function_codes(frames)
    packed, width = _pack(codes)
    whole = int.from_bytes(packed, "little")  # the sequence as one integer, made once

    candidates: List[Tuple[int, int, int]] = []  # (start, period, covered frames)
    for p in range(1, min(max_period, n // min_repetitions) + 1):
        best: List[Tuple[int, int, int]] = []  # min-heap (covered, -start, start), bounded
        for start, length in _periodic_segments(whole, width, n, p, p * min_repetitions):
            reps = length // p
            if reps < min_repetitions:
                continue
            if start > max_top_noise and reps < secondary_min_repetitions:
                continue
            item = (reps * p, -start, start)
            if len(best) < _KEEP_PER_PERIOD:
                heapq.heappush(best, item)
            elif item > best[0]:
                heapq.heapreplace(best, item)
        for covered, _neg, start in best:
            candidates.append((start, p, covered))
    if not candidates:
        return []

    # largest first; on equal coverage the smaller period, then the one nearer the top
    candidates.sort(key=lambda c: (-c[2], c[1], c[0]))
    chosen: List[Tuple[int, int, int]] = []
    for start, p, covered in candidates:
        end = start + covered
        if any(min(end, s2 + c2) - max(start, s2) > covered // 2 for s2, _p2, c2 in chosen):
            continue  # mostly the same frames as a cycle already taken (e.g. a multiple period)
        chosen.append((start, p, covered))
        if len(chosen) >= max_cycles:
            break

    sizes = frames.per_frame(_size) if isinstance(frames, Frames) else [f.size for f in frames]
    out: List[Cycle] = []
    for start, p, covered in chosen:
        d = _primitive_period(codes, start, p)
        if d != p:  # safety net: never report a multiple of the true period
            p = d
        reps = covered // p
        end = start + reps * p  # exclusive
        per_rep = sum(_mode(sizes[start + j : end : p]) for j in range(p))
        total = sum(filter(None, sizes[start:end]))  # None (unknown) counts as 0
        # Frames found by scanning with no call site to confirm them are often stale return
        # addresses (what a missing image leaves): they do not make an entry path.
        below = [f for f in frames[end : end + 4 * max(0, entry_path_length)] if f.trust is not Trust.SCAN]
        below = below[: max(0, entry_path_length)]
        out.append(
            Cycle(
                functions=tuple(frames[start + j].function_name for j in range(p)),
                period=p,
                repetitions=reps,
                bytes_per_repetition=per_rep,
                first_frame=frames[start].index,
                last_frame=frames[end - 1].index,
                total_bytes=total,
                stack_share=(total / used_stack) if used_stack else None,
                entry_path=tuple(f.function_name for f in below),
                frames_above=start,
            )
        )
    return out


def call_order(c: Cycle) -> Tuple[str, ...]:
    """The cycle's members in call order (caller first), starting at the member the
    code outside the cycle called: how people read a recursion."""
    order = list(reversed(c.functions))
    members = set(order)
    entry = None
    for name in c.entry_path:  # a partial repetition may sit below the cycle
        if name not in members:
            break
        entry = name
    if entry is not None and entry in order:
        i = order.index(entry)
        order = order[i:] + order[:i]
    return tuple(order)


def outside_entry_path(c: Cycle) -> Tuple[str, ...]:
    """The entry path without the partial repetition of the cycle that may sit below it."""
    members = set(c.functions)
    path = list(c.entry_path)
    while path and path[0] in members:
        path.pop(0)
    return tuple(path)
