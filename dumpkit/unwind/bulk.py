"""Bulk walking of a recursion: learn a cycle of fixed frames once, verify a million
repetitions of it against the stack bytes at C speed, and keep them as one run.

A return address whose function's unwind is fixed offsets from SP (`FixedFrame`) always
gives the same step: the caller's return address at sp + return_offset, the caller's SP
at sp + return_offset + 8. When the walk has just followed the same few such return
addresses round and round, the rest of the recursion is predicted: repetition k of the
cycle sits `span` bytes above repetition k-1, and each member's return-address slot holds
the next member's address. `verified_repetitions` checks those slots for many
repetitions at once with strided memoryview comparisons (one per member); the walk loop
takes what matched and goes on one frame at a time from the first mismatch, so the frames
are exactly the ones the step-by-step walk finds.

The walk loop keeps what it has walked in a `Walked` (explicit frames, runs spliced in);
`Frames` holds a finished walk's frames as explicit `Frame` objects and such runs, and gives them
as a `Sequence[Frame]`, making a `Frame` only when one is asked for: a 1.4M-frame stack
costs a few objects, not 1.4M of them. Nothing here recurses; every loop is bounded by the
frames asked for or by the repetitions counted.
"""

from __future__ import annotations

import bisect
from array import array
from typing import Callable, Dict, Iterator, List, Optional, Protocol, Sequence, Tuple, TypeVar, Union, overload

from dumpkit.unwind.frames import SCANNED, Frame, Trust
from dumpkit.records import record

# Periods tried when looking for a cycle, and how many frames of fast steps in a row make
# it worth a look (below that the step-by-step walk is as quick).
MAX_PERIOD = 16
MIN_RUN = 64
# Repetitions verified per comparison: enough to amortise, small enough that a mismatch
# (the end of the recursion) costs little.
CHUNK = 1 << 16

T = TypeVar("T")
K = TypeVar("K")


@record
class Member:
    """One function of a cycle as the walk found it: every repetition has the same ip,
    names and frame size; `offset` is its SP's distance from the repetition's first SP."""

    ip: int
    module: Optional[str]
    rva: Optional[int]
    function_start: Optional[int]
    symbol: Optional[str]
    size: int
    offset: int
    source: Optional[str] = None  # "FILE:LINE" from the module's PDB, as the frame had it
    trust: Trust = Trust.UNWIND_INFO  # how every repetition of it was found


@record
class Run:
    """`repetitions` verified repetitions of `members` starting at frame `first` with SP
    `sp`; repetition k is `span` bytes above repetition 0. Each member's frames were found
    the same way (its `trust`): by unwind data, or all by scanning (`follow_scanned`)."""

    first: int
    sp: int
    members: Tuple[Member, ...]
    span: int
    repetitions: int

    def __len__(self) -> int:
        return self.repetitions * len(self.members)

    def frame(self, i: int) -> Frame:
        """The run's i-th frame (0-based within the run)."""
        k, j = divmod(i, len(self.members))
        m = self.members[j]
        sp = self.sp + k * self.span + m.offset
        return Frame(self.first + i, m.ip, sp, m.module, m.rva, m.function_start, m.symbol, m.size, m.trust, m.source)

    @property
    def end(self) -> int:
        """The SP after the run: the caller SP of its last frame."""
        return self.sp + self.repetitions * self.span

    @property
    def scanned(self) -> bool:
        """Its frames were found by scanning (no unwind data), not by unwind data."""
        return self.members[0].trust in SCANNED


Part = Union[List[Frame], Run]


class Frames(Sequence[Frame]):
    """A walk's frames: lists of explicit frames and verified runs, in stack order."""

    def tally(self, fn: Callable[[Frame], K]) -> Dict[K, int]:
        """How many frames give each value of fn (frames.Tallied): see `tally`."""
        return tally(self, fn)

    def __init__(self, parts: Sequence[Part]):
        self.parts: Tuple[Part, ...] = tuple(p for p in parts if len(p))
        starts = []
        total = 0
        for p in self.parts:
            starts.append(total)
            total += len(p)
        self._starts = starts
        self._len = total

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, i: int) -> Frame: ...

    @overload
    def __getitem__(self, i: slice) -> List[Frame]: ...

    def __getitem__(self, i: Union[int, slice]) -> Union[Frame, List[Frame]]:
        if isinstance(i, slice):
            return [self._one(k) for k in range(*i.indices(self._len))]
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError("frame index out of range")
        return self._one(i)

    def _one(self, i: int) -> Frame:
        p = bisect.bisect_right(self._starts, i) - 1
        part = self.parts[p]
        if isinstance(part, Run):
            return part.frame(i - self._starts[p])
        return part[i - self._starts[p]]

    def __iter__(self) -> Iterator[Frame]:
        for part in self.parts:
            if isinstance(part, Run):
                for i in range(len(part)):
                    yield part.frame(i)
            else:
                yield from part

    def per_frame(self, fn: Callable[[Frame], T]) -> List[T]:
        """[fn(f) for f in self], computing fn once per member of a run: fn must depend only
        on what every repetition shares (ip, names, size, trust), not on index or sp."""
        out: List[T] = []
        for part in self.parts:
            if isinstance(part, Run):
                out.extend([fn(part.frame(j)) for j in range(len(part.members))] * part.repetitions)
            else:
                out.extend([fn(f) for f in part])
        return out

    def first_repetitions(self) -> Iterator[Frame]:
        """The frames, but of each run only its first repetition: for what a repetition
        cannot change (the largest frame of each function, ties to the first)."""
        for part in self.parts:
            if isinstance(part, Run):
                for j in range(len(part.members)):
                    yield part.frame(j)
            else:
                yield from part

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Frames, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __repr__(self) -> str:
        return f"Frames({self._len} frames in {len(self.parts)} parts)"


class Walked:
    """What a walk has walked so far, as its loop adds it: `frames`, the explicit frames
    since the last verified run, appended one at a time, after `parts`, the lists and runs
    before them. `splice` adds a run; `walk` gives the finished walk's frames."""

    __slots__ = ("parts", "frames", "before")

    def __init__(self) -> None:
        self.parts: List[Part] = []
        self.frames: List[Frame] = []
        self.before = 0  # frames in `parts`

    def __len__(self) -> int:
        return self.before + len(self.frames)

    def splice(self, run: Run) -> None:
        """Add `run`, verified from the frame after the last one walked. `frames` starts
        again empty, the same list, so an `append` bound to it stays good (the explicit
        frames are copied to `parts` once: each frame at most once in a walk)."""
        self.parts += [self.frames.copy(), run]
        self.frames.clear()
        self.before = run.first + len(run)

    def walk(self) -> Sequence[Frame]:
        """The frames: a plain list when no run was spliced in, else a `Frames`."""
        return Frames(self.parts + [self.frames]) if self.parts else self.frames


class Window(Protocol):
    """The stack bytes the walk copied (`walk.StackWindow`): from address `lo` to `hi`, as
    64-bit words in `words` (None when the walk does not verify in bulk). `hi` is at most
    the stack's end, so a run that stays below it stays in the stack."""

    lo: int
    hi: int
    words: Optional[memoryview]


def cycle_at(
    frames: List[Frame], next_ip: int, found_by: Tuple[Trust, ...] = (Trust.UNWIND_INFO,)
) -> Optional[Tuple[Frame, ...]]:
    """The smallest cycle (period <= MAX_PERIOD) that the last frames repeat twice, each
    member found the same way both times, one of `found_by`, whose first member has
    `next_ip` (the frame the walk is about to take): its members, in stack order, or None."""
    n = len(frames)
    for p in range(1, min(MAX_PERIOD, n // 2) + 1):
        if frames[n - p].ip != next_ip:
            continue
        if all(
            frames[i].ip == frames[i - p].ip
            and frames[i].size == frames[i - p].size
            and frames[i].trust is frames[i - p].trust
            and frames[i].trust in found_by
            for i in range(n - p, n)
        ):
            return tuple(frames[n - p :])
    return None


def verified_repetitions(
    words: memoryview, word_lo: int, sp: int, slots: Sequence[Tuple[int, int]], span: int, most: int
) -> int:
    """How many repetitions, from the one at `sp`, hold the expected return addresses:
    `slots` is (offset from the repetition's SP, expected value) per member; `words` the
    stack as 64-bit words from address `word_lo`. At most `most`."""
    stride = span // 8
    good = 0
    while good < most:
        m = min(CHUNK, most - good)
        base = sp + good * span
        ok = m
        for offset, value in slots:
            start = (base + offset - word_lo) // 8
            got = words[start : start + (ok - 1) * stride + 1 : stride]
            if got == array("Q", [value]) * ok:
                continue
            ok = _first_mismatch(got, value)  # fewer repetitions for the next members
            if ok == 0:
                return good
        good += ok
        if ok < m:
            return good
    return good


def _first_mismatch(got: memoryview, value: int) -> int:
    """Index of the first element of `got` that is not `value` (there is one): a binary
    search over prefixes, each compared in C."""
    lo, hi = 0, len(got)  # got[:lo] all equal; got[:hi] not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if got[:mid] == array("Q", [value]) * mid:
            lo = mid
        else:
            hi = mid
    return lo


# a cached FixedFrame as the walk loop keeps it: (place, return_offset, saved, module, function_start)
FixedTuple = Tuple[object, int, Tuple[Tuple[str, int], ...], str, Optional[int]]


def follow(
    walked: Walked, ip: int, sp: int, fixed_of: Callable[[int], Optional[FixedTuple]], window: Window, limit: int
) -> Optional[Tuple[Run, Tuple[Tuple[int, Tuple[Tuple[str, int], ...]], ...]]]:
    """The run of the cycle the last `walked` frames repeat, from the frame at (ip, sp) on
    (the next frame, at index len(walked)), as far as the stack bytes confirm it, and the
    last repetition's (sp, saved registers) per member (for the registers the walk carries
    on with); None when there is no cycle of fixed frames here or not one repetition
    verifies. No frame's caller SP goes past the window's end, and the walk keeps to
    `limit` frames."""
    words = window.words
    if words is None:
        return None
    frames = walked.frames
    first = len(walked)
    cycle = cycle_at(frames, ip)
    if cycle is None:
        return None
    members: List[Member] = []
    slots: List[Tuple[int, int]] = []
    saved: List[Tuple[int, Tuple[Tuple[str, int], ...]]] = []
    offset = 0
    for j, f in enumerate(cycle):
        fixed = fixed_of(f.ip)
        if fixed is None or f.size is None or fixed[1] + 8 != f.size or f.size % 8:
            return None
        members.append(Member(f.ip, f.module, f.rva, f.function_start, f.symbol, f.size, offset, f.source))
        slots.append((offset + fixed[1], cycle[(j + 1) % len(cycle)].ip))
        saved.append((offset, fixed[2]))
        offset += f.size
    span = offset
    most = _most(window, sp, span, (limit - first) // len(members))
    if most < 1:
        return None
    reps = verified_repetitions(words, window.lo, sp, slots, span, most)
    if reps < 1:
        return None
    last = sp + (reps - 1) * span
    return Run(first, sp, tuple(members), span, reps), tuple((last + o, s) for o, s in saved)


def follow_scanned(
    walked: Walked,
    ip: int,
    sp: int,
    window: Window,
    limit: int,
    maybe_return: Callable[[int], bool],
    no_code_in: Callable[[int, int], bool],
    aligned: bool = False,
) -> Optional[Run]:
    """`follow` for a recursion through code without unwind data, whose every caller was
    found by scanning up from the frame's SP to the first word that can be a return
    address (the walker's `scan`; registers only lose their volatile values, the same at
    every repetition). A repetition is then what the last one was when each member's
    return slot holds the next member's address (as in `follow`) and no word between a
    member's SP and its slot can be a return address: words equal in every repetition
    are asked once, words that differ (stack pointers, counters) are asked by their
    range (`no_code_in(lo, hi)`: no module or JIT code between) and, failing that, one by
    one (`maybe_return`). The scans read no further than the window's end. `aligned`:
    the scans took return addresses only 8 bytes above a 16-byte boundary (`Walker.scan`,
    with no JIT code in the process), so other words are not asked about."""
    words = window.words
    if words is None:
        return None
    frames = walked.frames
    first = len(walked)
    cycle = cycle_at(frames, ip, SCANNED)
    if cycle is None:
        return None
    members: List[Member] = []
    slots: List[Tuple[int, int]] = []
    gaps: List[int] = []  # offsets, from a repetition's SP, of words the scans pass over
    offset = 0
    for j, f in enumerate(cycle):
        if f.size is None or f.size < 8 or f.size % 8:
            return None
        members.append(Member(f.ip, f.module, f.rva, f.function_start, f.symbol, f.size, offset, f.source, f.trust))
        slots.append((offset + f.size - 8, cycle[(j + 1) % len(cycle)].ip))
        gaps.extend(range(offset, offset + f.size - 8, 8))
        offset += f.size
    span = offset
    if aligned and span % 16 == 0:
        # every repetition sits at the same alignment: the words a scan passes over
        # without asking are the same in each
        gaps = [g for g in gaps if (sp + g) & 15 == 8]
    most = _most(window, sp, span, (limit - first) // len(members))
    if most < 1:
        return None
    reps = verified_repetitions(words, window.lo, sp, slots, span, most)
    stride = span // 8
    for gap in gaps:
        if reps < 1:
            return None
        start = (sp + gap - window.lo) // 8
        reps = _passed_over(words[start : start + (reps - 1) * stride + 1 : stride], maybe_return, no_code_in)
    if reps < 1:
        return None
    return Run(first, sp, tuple(members), span, reps)


def _most(window: Window, sp: int, span: int, most: int) -> int:
    """At most `most` repetitions of `span` bytes from `sp`, as many as end in the window
    (0 when sp is not at one of its words)."""
    if (sp - window.lo) % 8 or sp < window.lo:
        return 0
    return min((window.hi - sp) // span, most)


def _passed_over(got: memoryview, maybe_return: Callable[[int], bool], no_code_in: Callable[[int, int], bool]) -> int:
    """How many of `got` (one stack word per repetition), from the first, a scan passes
    over: words that cannot be a return address."""
    first = got[0]
    if got == array("Q", [first]) * len(got):
        return 0 if maybe_return(first) else len(got)
    if no_code_in(min(got), max(got)):
        return len(got)
    known: Dict[int, bool] = {}
    for k, value in enumerate(got):
        bad = known.get(value)
        if bad is None:
            bad = known[value] = maybe_return(value)
        if bad:
            return k
    return len(got)


def tally(frames: Sequence[Frame], fn: Callable[[Frame], K]) -> Dict[K, int]:
    """How many frames give each value of fn, counting a run's members once each times its
    repetitions (fn as for `Frames.per_frame`)."""
    out: Dict[K, int] = {}
    parts: Sequence[Part] = frames.parts if isinstance(frames, Frames) else (list(frames),)
    for part in parts:
        if isinstance(part, Run):
            for j in range(len(part.members)):
                k = fn(part.frame(j))
                out[k] = out.get(k, 0) + part.repetitions
        else:
            for f in part:
                k = fn(f)
                out[k] = out.get(k, 0) + 1
    return out
