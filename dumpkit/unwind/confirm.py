"""What confirms a frame found by scanning, and where a walk's confirmed stack ends.

A scan takes the first word that can be a return address; a stale one left in a frame's
locals passes just as well (issue #32 item 9). A scanned frame is confirmed when
something beyond "a word that points into code" speaks for it:

- CALL_TARGET: the CALL just before its return address is a direct `call rel32` whose
  target is the function of the frame below it, which is what a real caller's call must
  have reached. A stale return address calls whatever it called back then; only by
  chance the function below. It reads only the bytes the call-site check read already
  (so a bundle made for the analysis holds them); a call through a register, an import
  thunk or a tail call leaves the frame unconfirmed, never rejected.
- RECURSION: it is part of a recursion: a scanned bulk run the walk verified repetition
  by repetition, or a stretch of explicit frames repeating a cycle (return addresses and
  frame sizes) RECURSION_REPEATS times in a row. A stale word repeated in every
  repetition rides along, but the repeated cycle is what the stack holds.

Frames found by unwind data, the frame-pointer chain or the context stand on their own.
The stack a report shows ends at the last confirmed frame; the unconfirmed scanned frames
after it are "possible" frames, shown apart and kept out of the verdict's evidence.
Unconfirmed frames between confirmed ones stay in the stack, marked by their support, but
only a strong confirmation (a frame found otherwise, a recursion, a call reaching the
function start the unwind data gives) carries the stack across more than SMALL_GAP of
them: a call landing near below the callee's IP, all that can be checked without the
callee's function start, happens by chance often enough among dozens of stale words.
Everything here is one pass over the walk's explicit frames (a bulk run counts as one).
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Protocol, Sequence, Set, Tuple

from dumpkit.unwind.bulk import MAX_PERIOD, Frames, Part, Run
from dumpkit.unwind.disasm import CALL_LOOKBACK, call_target
from dumpkit.unwind.frames import SCANNED, Frame, StackWalk, Support, Trust

# A cycle of frames repeated this many times in a row is a recursion.
RECURSION_REPEATS = 3
# Without the callee's function start, its IP must lie this close above the call's target.
NEAR_TARGET = 0x10000
# Unconfirmed frames a weak confirmation (a near call target) may carry the stack across.
SMALL_GAP = 2

ReadCode = Callable[[int, int], bytes]  # (address, size) -> the bytes available, maybe fewer


def confirmed(walk: StackWalk, read_code: ReadCode, bits: int = 64) -> StackWalk:
    """`walk` with each explicit scanned frame's support recorded and its unconfirmed
    scanned frames after the last confirmed one moved to `possible`."""
    parts: Sequence[Part] = walk.frames.parts if isinstance(walk.frames, Frames) else (list(walk.frames),)
    explicit = [f for p in parts if not isinstance(p, Run) for f in p]
    if not any(f.trust in SCANNED for f in explicit):
        return walk
    repeats = _recurring(parts)
    support: Dict[int, Support] = {}
    last_confirmed = -1
    gap = 0  # unconfirmed frames since the last confirmed one
    below: Optional[Frame] = None
    for part in parts:
        if isinstance(part, Run):
            last_confirmed = part.first + len(part) - 1
            gap = 0
            below = part.frame(len(part) - 1)
            continue
        for f in part:
            strong = True
            if f.trust in SCANNED:
                s, strong = _support(f, below, repeats, read_code, bits)
                support[f.index] = s
                confirmed_here = s is not Support.NONE
            else:
                confirmed_here = True
            # a weak confirmation does not carry the stack across a long run of
            # unconfirmed frames: a lone near call target below 70 stale words would
            # keep them all in the stack
            if confirmed_here and (strong or gap <= SMALL_GAP):
                last_confirmed = f.index
                gap = 0
            else:
                gap += 1
            below = f
    total = len(walk.frames)
    if last_confirmed >= total - 1:
        return StackWalk(walk.thread_id, walk.frames, walk.stop, walk.problems, walk.frame_limit, (), support)
    keep = last_confirmed + 1
    return StackWalk(
        walk.thread_id, _head(parts, keep), walk.stop, walk.problems, walk.frame_limit, walk.frames[keep:], support
    )


class Numbered(Protocol):
    """What `support_of` reads of a frame: a walk's Frame, or a row of one."""

    @property
    def index(self) -> int: ...
    @property
    def trust(self) -> Trust: ...


def support_of(f: Numbered, support: Optional[Dict[int, Support]]) -> Optional[Support]:
    """What confirms frame `f` of a walk whose support is `support`: None for a frame not
    found by scanning; a scanned frame the walk did not record is a verified run's, whose
    repetitions confirm it."""
    if f.trust not in SCANNED:
        return None
    found = support.get(f.index) if support else None
    return found if found is not None else Support.RECURSION


def _recurring(parts: Sequence[Part]) -> Set[int]:
    """Indexes of explicit frames inside a recursion: a stretch where every frame has the
    return address and frame size of the frame `p` above it (a period p <= MAX_PERIOD), for
    at least RECURSION_REPEATS repetitions in a row. A run's repetitions were verified
    already; the frames just before an explicit part (a run's last repetitions) are looked
    at as its context, so frames that go on repeating a run's cycle after it are found as
    they are when the same walk is stepped frame by frame."""
    inside: Set[int] = set()
    context_size = MAX_PERIOD * RECURSION_REPEATS
    previous: Optional[Part] = None
    for part in parts:
        if isinstance(part, Run):
            previous = part
            continue
        context: List[Frame] = []
        if previous is not None:
            if isinstance(previous, Run):
                n = len(previous)
                context = [previous.frame(k) for k in range(max(0, n - context_size), n)]
            else:
                context = list(previous[-context_size:])
        frames = context + list(part)
        first = len(context)  # frames[first:] are this part's
        n = len(frames)
        for p in range(1, min(MAX_PERIOD, n // RECURSION_REPEATS) + 1):
            start = 0
            for i in range(p, n + 1):
                if i < n and frames[i].ip == frames[i - p].ip and frames[i].size == frames[i - p].size:
                    continue
                if i - start >= p * RECURSION_REPEATS:
                    inside.update(frames[k].index for k in range(max(start, first), i))
                start = i - p + 1
        previous = part
    return inside


def _support(
    f: Frame, below: Optional[Frame], repeats: Set[int], read_code: ReadCode, bits: int
) -> Tuple[Support, bool]:
    """The frame's support, and whether it is strong: a call reaching the function start
    the unwind data gives, or a recursion. A call landing near below the callee's IP
    (its function start unknown) is weak."""
    if f.index in repeats:
        return Support.RECURSION, True
    if below is not None:
        reach = calls_into(f.ip, below, read_code, bits)
        if reach is not None:
            return Support.CALL_TARGET, reach
    return Support.NONE, False


def calls_into(return_address: int, callee: Frame, read_code: ReadCode, bits: int) -> Optional[bool]:
    """Does the direct CALL ending at `return_address` reach the function of `callee`?
    True: its known entry; False: an address at most NEAR_TARGET below the callee's IP (the
    callee's function start is unknown); None: no, or no direct call to tell by."""
    before = read_code(return_address - CALL_LOOKBACK, CALL_LOOKBACK)
    if len(before) != CALL_LOOKBACK:
        return None
    target = call_target(before, return_address)
    if target is None:
        return None
    if bits == 32:
        target &= 0xFFFFFFFF
    if callee.function_start is not None and callee.rva is not None:
        return True if target == callee.ip - callee.rva + callee.function_start else None
    return False if 0 <= callee.ip - target < NEAR_TARGET else None


def _head(parts: Sequence[Part], keep: int) -> Sequence[Frame]:
    """The walk's first `keep` frames, its runs kept whole (a cut never falls inside a run:
    runs are confirmed)."""
    out: List[Part] = []
    n = 0
    for part in parts:
        if n >= keep:
            break
        if isinstance(part, Run):
            out.append(part)
            n += len(part)
        else:
            take = part[: keep - n]
            out.append(take)
            n += len(take)
    if len(out) == 1 and not isinstance(out[0], Run):
        return out[0]
    return Frames(out)
