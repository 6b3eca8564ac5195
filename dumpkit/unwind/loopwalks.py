"""Each thread's walk from its own registers, taken once (issue #45).

A walk with scanned frames is checked against what the other threads' walks show
(unwind/evidence.py), and those threads are walked from their own registers: the very
walks the engine asks for when it reports them. So the walk loop's result for a thread is
kept (`LoopWalk`, before the checks: evidence is what the loop found) and serves twice, as
the evidence and as that thread's stack, when it is the walk the second request would
take:

- a walk ends where the stack does or where its frame limit cuts it; one that ended within
  a request's limit, or was taken with that very limit, is the walk that request would
  take, frame for frame (`LoopWalk.serves`);
- the evidence reads each frame's IP and SP and how the walk ended, nothing else; a walk
  cut by a larger limit serves as evidence cut at the evidence's own limit
  (`LoopWalk.cut`), because the walk loop finds the same frames whatever its limit.

The checks after the loop renumber and resize the frames they keep, in place
(`evidence.renumbered`), so a kept walk is handed to them once (`KeptWalks.take`); the
evidence reads only what they never change."""

from __future__ import annotations

from typing import Dict, Optional, Tuple

from dumpkit.records import record
from dumpkit.target import Thread
from dumpkit.unwind.frames import StackWalk, StopReason


@record
class LoopWalk:
    """A thread's walk as the walk loop found it, before the checks: `scanned` says a caller
    was found by scanning, `limit` the frame limit it was walked with."""

    walk: StackWalk
    scanned: bool
    limit: int

    def serves(self, limit: int) -> bool:
        """Is this the walk a request for at most `limit` frames takes?"""
        return self.limit == limit or (self.walk.stop is not StopReason.FRAME_LIMIT and len(self.walk.frames) <= limit)

    def cut(self, limit: int) -> Optional[StackWalk]:
        """The walk a request for at most `limit` frames takes, as the evidence reads it
        (frames' IPs and SPs, how it ended); None when this one stopped short of it."""
        if self.serves(limit):
            return self.walk
        if self.limit < limit:
            return None
        w = self.walk
        return StackWalk(w.thread_id, w.frames[:limit], StopReason.FRAME_LIMIT, w.problems, limit)


class KeptWalks:
    """The loop walks of threads from their own registers, by thread (the Thread record
    the walk was asked for: a damaged thread list can repeat an id with other registers).
    `evidence`: those of the threads the evidence is made from, until it is made;
    `untaken`: those not yet handed to the checks, which a later request may take."""

    def __init__(self) -> None:
        self.evidence: Dict[int, Tuple[Thread, LoopWalk]] = {}
        self.untaken: Dict[int, Tuple[Thread, LoopWalk]] = {}

    def take(self, thread: Thread, limit: int) -> Optional[LoopWalk]:
        """The kept walk of `thread` that a request for `limit` frames takes, handed out
        once; None when there is none."""
        kept = self.untaken.get(id(thread))
        if kept is None or kept[0] is not thread or not kept[1].serves(limit):
            return None
        del self.untaken[id(thread)]
        return kept[1]

    def keep(self, thread: Thread, loop: LoopWalk, evidence: bool, untaken: bool) -> None:
        if evidence:
            self.evidence[id(thread)] = (thread, loop)
        if untaken:
            self.untaken[id(thread)] = (thread, loop)

    def for_evidence(self, thread: Thread, limit: int) -> Optional[StackWalk]:
        """`thread`'s kept walk as evidence cut at `limit` frames, or None."""
        kept = self.evidence.get(id(thread))
        if kept is None or kept[0] is not thread:
            return None
        return kept[1].cut(limit)
