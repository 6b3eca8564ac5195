"""Scanned frames that the code at their own return address refutes.

A scan takes a stale return address as readily as a live one (issue #32 item 9). Where the
code after a candidate return address R is at hand (the image, or the bytes the dump
holds: Wine's dbghelp keeps 256 bytes around the crash IP, and a stale word there is
typically the return address of the very call that overflowed), that code says where R's
frame ends: after the call returns, the function runs on to a RET, and the pushes, pops and
RSP adjustments on the way are the frame it had when it made the call (x64 code outside a
prologue or epilogue keeps a fixed frame; a frame-pointer epilogue, `mov rsp, rbp` with rbp
unknown, is not followed). A real frame's caller's return address sits in that slot; when
the stack holds there a word that cannot be a return address (nor 0, the end of a chain),
R is a stale word and the frame is dropped, as the scan would have passed over it.

Only the refuting direction is used. A frame whose code agrees is not thereby confirmed:
a stale R's code gives its function's frame all the same, and the word found there may be
a return address by chance (`unwind/confirm.py` decides what confirms a frame). The path
is the simulator's (`CodeMap.frame_end`). Everything is one pass over the walk's frames;
each return address is simulated once per target.
"""

from __future__ import annotations

from typing import Callable, Iterable, List, Optional, Sequence, Tuple

from dumpkit.records import replace
from dumpkit.unwind.bulk import Frames, Part, Run
from dumpkit.unwind.evidence import Unit, renumbered
from dumpkit.unwind.frames import SCANNED, Frame, StackWalk

ReadWord = Callable[[int], Optional[int]]


def refuted(
    walk: StackWalk, frame_end: Callable[[int], Optional[int]], read_word: ReadWord, can_return: Callable[[int], bool]
) -> StackWalk:
    """`walk` without its scanned frames (never frame 0) whose code puts the caller's
    return address in a slot holding a word that cannot be one; the walk itself when
    there are none. `frame_end(R)`: the offset from R's frame SP to its caller's return
    address slot, or None; `can_return(word)`: can the word be a return address? A
    verified run is looked at frame by frame only when the code tells a frame end for one
    of its members (so a long recursion without code is passed whole)."""
    parts: Sequence[Part] = walk.frames.parts if isinstance(walk.frames, Frames) else (list(walk.frames),)
    if not any(_scanned(p) for p in parts):
        return walk

    def stale(f: Frame) -> bool:
        if f.index == 0 or f.trust not in SCANNED:
            return False
        end = frame_end(f.ip)
        if end is None:
            return False
        word = read_word(f.sp + end)
        return word is not None and word != 0 and not can_return(word)

    keep: List[Unit] = []
    dropped = 0
    # a run's frames keep their members' sizes, so a stale frame just after a run goes only
    # when the run's last frame spans to the unit after it: (where the run ends, the frame)
    pending: Optional[Tuple[int, Frame]] = None

    def settle(sp: int) -> None:
        nonlocal pending, dropped
        if pending is not None and sp != pending[0]:
            keep.append(pending[1])
            dropped -= 1
        pending = None

    for part in parts:
        frames: Iterable[Frame] = part if not isinstance(part, Run) else ()
        if isinstance(part, Run):
            units: Optional[List[Unit]] = [part]
            if part.scanned and any(frame_end(m.ip) is not None for m in part.members):
                units = _thinned(part, stale)
            if units is None:
                frames = (part.frame(k) for k in range(len(part)))
            else:
                dropped += len(part) - sum(len(u) if isinstance(u, Run) else 1 for u in units)
                for u in units:
                    settle(u.sp)
                    keep.append(u)
                continue
        for f in frames:
            settle(f.sp)
            if not stale(f):
                keep.append(f)
                continue
            dropped += 1
            last = keep[-1] if keep else None
            if isinstance(last, Run):
                end = last.frame(len(last) - 1)
                pending = (end.sp + (end.size or 0), f)
    settle(-1)
    if not dropped:
        return walk
    return StackWalk(walk.thread_id, renumbered(keep, walk.stop), walk.stop, walk.problems, walk.frame_limit)


def _thinned(run: Run, stale: Callable[[Frame], bool]) -> Optional[List[Unit]]:
    """The run without the members that are stale in every repetition (the same stale
    word repeats with the recursion, as bulk verification takes it), its last repetition
    given as frames: their sizes reach whatever follows the run, which the stale member's
    next repetition no longer stands before. The run itself when no member is stale; None
    when a member is stale in some repetitions only (then each frame is judged alone)."""
    n = len(run.members)
    gone = set()
    for j in range(n):
        verdicts = {stale(run.frame(k * n + j)) for k in range(run.repetitions)}
        if len(verdicts) > 1:
            return None
        if True in verdicts:
            gone.add(j)
    if not gone:
        return [run]
    kept = [m for j, m in enumerate(run.members) if j not in gone]
    if not kept:
        return []
    first = kept[0].offset
    members = []
    for j, m in enumerate(kept):
        upto = kept[j + 1].offset if j + 1 < len(kept) else run.span + first
        members.append(replace(m, offset=m.offset - first, size=upto - m.offset))
    thin = Run(run.first, run.sp + first, tuple(members), run.span, run.repetitions)
    whole = len(members) * (run.repetitions - 1)
    head: List[Unit] = [replace(thin, repetitions=run.repetitions - 1)] if whole else []
    return head + [thin.frame(k) for k in range(whole, len(thin))]


def _scanned(part: Part) -> bool:
    if isinstance(part, Run):
        return part.scanned
    return any(f.trust in SCANNED for f in part)


def stack_word_reader(read_available: Callable[[int, int], bytes]) -> ReadWord:
    """A 64-bit stack word at an address, or None where the dump holds none."""

    def read_word(address: int) -> Optional[int]:
        data = read_available(address, 8)
        return int.from_bytes(data, "little") if len(data) == 8 else None

    return read_word
