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

from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence, Set, Tuple, Union

from dumpkit.records import replace
from dumpkit.unwind.bulk import Frames, Part, Run
from dumpkit.unwind.frames import SCANNED, Frame, StackWalk, StopReason

MIN_WITNESSES = 2
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


def _parts(frames: Sequence[Frame]) -> Sequence[Part]:
    return frames.parts if isinstance(frames, Frames) else (list(frames),)


def _others(tids: Set[int], tid: int) -> int:
    """How many of `tids` are threads other than `tid` (counted, not made a new set: this
    is asked for every frame of every checked walk)."""
    return len(tids) - (tid in tids)


def _established_span(seen: Witnessed, ip: int, tid: int) -> Optional[FrameSpan]:
    """The span of ip's frame that other threads agree on, or None."""
    by_span = seen.spans.get(ip)
    if not by_span:
        return None
    agreeing: Optional[FrameSpan] = None
    witnesses = 0
    for span, tids in by_span.items():
        n = _others(tids, tid)
        if n:
            if agreeing is not None:
                return None  # other threads disagree
            agreeing, witnesses = span, n
    return agreeing if witnesses >= MIN_WITNESSES else None


def _is_thread_start(seen: Witnessed, key: TopFrame, tid: int) -> bool:
    ended = seen.outermost.get(key)
    if ended is None or _others(ended, tid) < MIN_WITNESSES:
        return False
    went_on = seen.inner.get(key)
    return went_on is None or not _others(went_on, tid)


Unit = Union[Frame, Run]  # an explicit frame, or a verified run kept whole


def _scanned(u: Unit) -> bool:
    return u.scanned if isinstance(u, Run) else u.trust in SCANNED


def _outer(u: Unit) -> Frame:
    """The unit's outermost frame: what the frames after it are checked against."""
    return u.frame(len(u) - 1) if isinstance(u, Run) else u


def _inner(u: Unit) -> Frame:
    return u.frame(0) if isinstance(u, Run) else u


def _units(frames: Sequence[Frame], seen: Witnessed, tid: int) -> List[Unit]:
    """The walk's explicit frames and runs in stack order, a scanned run that the check
    could touch given as its frames."""
    parts = _parts(frames)
    if not any(isinstance(p, Run) and p.scanned for p in parts):
        units: List[Unit] = []
        for part in parts:
            if isinstance(part, Run):
                units.append(part)
            else:
                units.extend(part)
        return units
    units = []
    reach = 0  # the furthest SP that a frame so far spans to, by its established span
    for part in parts:
        if isinstance(part, Run):
            if part.scanned and not _untouched(part, reach, seen, tid):
                units.extend(part.frame(k) for k in range(len(part)))
            else:
                units.append(part)
            last = [part.frame(len(part) - 1)]
        else:
            units.extend(part)
            last = part
        for f in last:
            span = _established_span(seen, f.ip, tid)
            if span is not None and f.sp + span[0] > reach:
                reach = f.sp + span[0]
    return units


def _untouched(run: Run, reach: int, seen: Witnessed, tid: int) -> bool:
    """Would checking a scanned run's frames one by one change nothing? Yes when no
    member's frame size is established by other threads (nothing inside the run is
    skipped), no thread ends at a member (no frame of it is a thread's start), and no frame
    before it is shown to span past its first frame (no skip reaches into it)."""
    ips = {m.ip for m in run.members}
    if any(_established_span(seen, ip, tid) is not None for ip in ips):
        return False
    if any(ip in ips for ip, _ in seen.outermost):
        return False
    return reach <= run.sp


def checked(walk: StackWalk, tid: int, top: int, seen: Witnessed) -> StackWalk:
    """`walk` (thread `tid`, stack top `top`) without the scanned frames other threads'
    walks prove wrong (see the module's docstring); the walk itself when none are.

    A bulk walk's runs stay whole: a run found by unwind data is never dropped and no
    scanned frame follows a frame inside it, so it is one unit whose outermost frame is
    checked like any other frame. A run found by scanning is one unit too when nothing the
    other threads show can touch it (`_untouched`), else its frames are checked one by one.
    """
    units = _units(walk.frames, seen, tid)
    first = next((k for k, u in enumerate(units) if _scanned(u)), None)
    if first is None:
        return walk
    tail = len(units)  # units[tail:] are all scanned frames
    while tail > first and _scanned(units[tail - 1]):
        tail -= 1
    # only scanned frames are dropped, so checking starts at the unit before the first
    # (never at frame 0, whose ip is not a return address; a run is never unit 0)
    i = max(1, first - 1)
    keep: List[Unit] = units[:i]
    stop = walk.stop
    while i < len(units):
        u = units[i]
        keep.append(u)
        f = _outer(u)
        if tail - 1 <= i < len(units) - 1 and _is_thread_start(seen, (f.ip, top - f.sp), tid):
            stop = StopReason.THREAD_START
            break
        span = _established_span(seen, f.ip, tid)
        if span is not None:
            size, caller = span
            j = i + 1
            # skip the scanned frames inside f's frame, up to the caller the others show
            while j < len(units) and _scanned(units[j]) and _inner(units[j]).sp < f.sp + size:
                j += 1
            if j > i + 1 and j < len(units):
                nxt = _inner(units[j])
                if nxt.sp == f.sp + size and nxt.ip == caller:
                    i = j
                    continue
        i += 1
    if len(keep) == len(units):
        return walk
    return StackWalk(walk.thread_id, renumbered(keep, stop), stop, walk.problems, walk.frame_limit)


def renumbered(keep: List[Unit], stop: StopReason) -> Sequence[Frame]:
    """The kept units as a walk's frames: indexes renumbered, each explicit frame's size
    the distance to the next kept frame (a run's sizes are its members' and stay true: a
    run's frames are never followed by a dropped frame inside the run)."""
    parts: List[Part] = []
    explicit: List[Frame] = []
    n = 0
    for k, u in enumerate(keep):
        if isinstance(u, Run):
            if explicit:
                parts.append(explicit)
                explicit = []
            parts.append(replace(u, first=n) if u.first != n else u)
            n += len(u)
            continue
        u.index = n
        u.size = _inner(keep[k + 1]).sp - u.sp if k + 1 < len(keep) else u.size
        explicit.append(u)
        n += 1
    if explicit:
        parts.append(explicit)
    last = keep[-1]
    if stop is StopReason.THREAD_START and not isinstance(last, Run):
        last.size = None
    if len(parts) == 1 and not isinstance(parts[0], Run):
        return parts[0]
    return Frames(parts)
