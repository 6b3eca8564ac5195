"""Other threads' walks as evidence against frames found by scanning.

Without unwind data a walk scans for the next return address, and a stale code address
left in a frame's locals passes for one. The other threads of the same process ran the
same code, and two facts about code do not change from thread to thread:

- a return address's frame has one size: the function holding return address R had
  pushed and allocated the same bytes at that call on every thread (a function that
  allocates on the stack at run time, alloca, shows as threads disagreeing, and then
  nothing is established), so its caller's return address sits at the same distance
  above R's frame. When other
  threads agree on that distance and the caller found there, and this thread's walk
  reaches the same caller at the same distance, the scanned frames in between are
  stale words inside R's frame;
- every thread starts in the same start routine (ntdll's RtlUserThreadStart), whose
  frame the system builds at a fixed distance below the stack's top. When the walks of
  other threads end at the same return address at the same distance below their stack
  tops, this thread's frames beyond it are words above the thread's first frame.

A fact is established by MIN_WITNESSES other threads agreeing and none contradicting;
the thread being checked is never its own witness. Only scanned frames are ever
dropped: a frame found by unwind data or the frame-pointer chain stands. Everything
here is a pass over lists already bounded by the walks' frame limits.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence, Set, Tuple

from dumpkit.unwind.frames import Frame, StackWalk, StopReason, Trust

MIN_WITNESSES = 2
SCANNED = (Trust.SCAN, Trust.SCAN_VALIDATED)
# Walks ending like this got to the top of what could be walked (not cut by a limit).
_ENDED = (StopReason.END_OF_STACK, StopReason.RETURN_ADDRESS_ZERO, StopReason.NO_CALLER, StopReason.THREAD_START)

FrameSpan = Tuple[int, int]  # (size of a return address's frame, the caller's return address)
TopFrame = Tuple[int, int]  # (return address, distance of its frame below the stack's top)


class Witnessed(NamedTuple):
    """What other threads' walks showed, each observation with the threads that saw it."""

    spans: Dict[int, Dict[FrameSpan, Set[int]]]  # return address -> its frame's span -> thread ids
    outermost: Dict[TopFrame, Set[int]]  # the last frame of a walk that ended -> thread ids
    inner: Dict[TopFrame, Set[int]]  # the same pairs where a walk went on past them


def witness(walks: Iterable[Tuple[int, int, StackWalk]]) -> Witnessed:
    """Observations from (thread id, stack top, walk) triples."""
    spans: Dict[int, Dict[FrameSpan, Set[int]]] = {}
    outermost: Dict[TopFrame, Set[int]] = {}
    inner: Dict[TopFrame, Set[int]] = {}
    for tid, top, walk in walks:
        frames = walk.frames
        for f, nxt in zip(frames[1:], frames[2:]):  # frame 0's ip is not a return address
            spans.setdefault(f.ip, {}).setdefault((nxt.sp - f.sp, nxt.ip), set()).add(tid)
            inner.setdefault((f.ip, top - f.sp), set()).add(tid)
        if len(frames) > 1 and walk.stop in _ENDED:
            last = frames[-1]
            outermost.setdefault((last.ip, top - last.sp), set()).add(tid)
    return Witnessed(spans, outermost, inner)


def first_scanned(frames: Sequence[Frame]) -> Optional[int]:
    """Index of the first frame found by scanning, or None."""
    return next((k for k, f in enumerate(frames) if f.trust in SCANNED), None)


def _established_span(seen: Witnessed, ip: int, tid: int) -> Optional[FrameSpan]:
    """The span of ip's frame that other threads agree on, or None."""
    by_span = seen.spans.get(ip)
    if not by_span:
        return None
    others = {span: tids - {tid} for span, tids in by_span.items()}
    agreeing = [span for span, tids in others.items() if tids]
    if len(agreeing) == 1 and len(others[agreeing[0]]) >= MIN_WITNESSES:
        return agreeing[0]
    return None


def _is_thread_start(seen: Witnessed, key: TopFrame, tid: int) -> bool:
    return len(seen.outermost.get(key, set()) - {tid}) >= MIN_WITNESSES and not (seen.inner.get(key, set()) - {tid})


def checked(walk: StackWalk, tid: int, top: int, seen: Witnessed) -> StackWalk:
    """`walk` (thread `tid`, stack top `top`) without the scanned frames other threads'
    walks prove wrong (see the module's docstring); the walk itself when none are."""
    frames = walk.frames
    first = first_scanned(frames)
    if first is None:
        return walk
    tail = len(frames)  # frames[tail:] are all scanned
    while tail > first and frames[tail - 1].trust in SCANNED:
        tail -= 1
    # only scanned frames are dropped, so checking starts at the frame before the first
    i = max(1, first - 1)
    keep: List[Frame] = list(frames[:i])
    stop = walk.stop
    while i < len(frames):
        f = frames[i]
        keep.append(f)
        if tail - 1 <= i < len(frames) - 1 and _is_thread_start(seen, (f.ip, top - f.sp), tid):
            stop = StopReason.THREAD_START
            break
        span = _established_span(seen, f.ip, tid)
        if span is not None:
            size, caller = span
            j = i + 1
            # skip the scanned frames inside f's frame, up to the caller the others show
            while j < len(frames) and frames[j].trust in SCANNED and frames[j].sp < f.sp + size:
                j += 1
            if j > i + 1 and j < len(frames) and frames[j].sp == f.sp + size and frames[j].ip == caller:
                i = j
                continue
        i += 1
    if len(keep) == len(frames):
        return walk
    for n, f in enumerate(keep[:-1]):
        f.index = n
        f.size = keep[n + 1].sp - f.sp
    keep[-1].index = len(keep) - 1
    if stop is StopReason.THREAD_START:
        keep[-1].size = None
    return StackWalk(walk.thread_id, keep, stop, walk.problems, walk.frame_limit)
