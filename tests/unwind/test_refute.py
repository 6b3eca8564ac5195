"""Scanned frames that the code at their own return address refutes (dumpkit/unwind/refute.py):
the code after a real return address runs to a RET whose slot holds the caller's return
address; a stale word's frame ends on whatever the stack holds there."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import pytest

from dumpkit.engine import Options, crashing_thread, make_walker
from dumpkit.sources.minidump import open_dump
from dumpkit.unwind.bulk import Frames, Member, Run
from dumpkit.unwind.frames import SCANNED, Frame, StackWalk, StopReason, Trust
from dumpkit.unwind.refute import refuted
from dumpkit.unwind.walk import walk_thread
from tests.support.samples import PY_SAMPLES, SAMPLE_BIN, SAMPLES, WINPYTHON

S, V, C, U = Trust.SCAN, Trust.SCAN_VALIDATED, Trust.CONTEXT, Trust.UNWIND_INFO
HELD, REAL, OTHER = 0x1000, 0x2000, 0x3000  # HELD's code is at hand and ends its frame 0x28 up
ENDS = {HELD: 0x28}


def _walk(frames: Sequence[Tuple[int, int, Trust]]) -> StackWalk:
    fs = [Frame(n, ip, sp, None, None, None, None, None, t) for n, (ip, sp, t) in enumerate(frames)]
    for a, b in zip(fs, fs[1:]):
        a.size = b.sp - a.sp
    return StackWalk(1, fs, StopReason.END_OF_STACK, [])


def _refuted(walk: StackWalk, stack: Dict[int, int]) -> StackWalk:
    return refuted(walk, ENDS.get, stack.get, lambda w: w in (HELD, REAL, OTHER))


def _ips(walk: StackWalk) -> List[Tuple[int, int, Optional[int]]]:
    return [(f.index, f.ip, f.size) for f in walk.frames]


def test_a_scanned_word_whose_code_ends_its_frame_on_a_non_address_is_dropped():
    walk = _walk([(0x77, 0x100, C), (HELD, 0x140, V), (REAL, 0x180, S), (OTHER, 0x200, S)])
    out = _refuted(walk, {0x140 + 0x28: 0xFFFFFFFFFFFFFFFF})
    # the frames after it renumbered, the frame before it spanning to the next one kept
    assert _ips(out) == [(0, 0x77, 0x80), (1, REAL, 0x80), (2, OTHER, None)]


def test_agreeing_code_an_unreadable_slot_or_the_end_of_a_chain_keep_the_frame():
    walk = _walk([(0x77, 0x100, C), (HELD, 0x140, V), (REAL, 0x168, S)])
    assert _refuted(walk, {0x168: REAL}) is walk  # the caller is where the code says
    assert _refuted(walk, {}) is walk  # the dump does not hold the slot
    assert _refuted(walk, {0x168: 0}) is walk  # 0: the end of a chain


def test_frame_zero_and_frames_found_otherwise_are_never_dropped():
    junk = {0x100 + 0x28: 0x1234, 0x140 + 0x28: 0x1234}
    assert _refuted(_walk([(HELD, 0x100, C), (REAL, 0x180, S)]), junk).frames[0].ip == HELD
    walk = _walk([(0x77, 0x100, C), (HELD, 0x140, U), (REAL, 0x200, S)])
    assert _refuted(walk, junk) is walk


def _member(ip: int, offset: int) -> Member:
    return Member(ip, None, None, None, None, size=0x40, offset=offset, trust=S)


def test_a_verified_run_is_checked_frame_by_frame_only_when_its_code_is_at_hand():
    members = (_member(REAL, 0), _member(OTHER, 0x40))
    run = Run(first=1, sp=0x140, members=members, span=0x80, repetitions=3)
    walk = StackWalk(
        1, Frames([[Frame(0, 0x77, 0x100, None, None, None, None, 0x40, C)], run]), StopReason.END_OF_STACK, []
    )
    # nothing in the run has code at hand: passed whole, whatever the stack holds
    assert _refuted(walk, {}) is walk
    with_held = (members[0], _member(HELD, 0x40))
    run = Run(first=1, sp=0x140, members=with_held, span=0x80, repetitions=3)
    walk = StackWalk(
        1, Frames([[Frame(0, 0x77, 0x100, None, None, None, None, 0x40, C)], run]), StopReason.END_OF_STACK, []
    )
    stack = {0x180 + 0x80 * k + 0x28: 0xFFFF for k in range(3)}
    assert [f.ip for f in _refuted(walk, stack).frames] == [0x77, REAL, REAL, REAL]


# -- on the real samples: the walk with the modules' unwind data is the truth ------------

KEEP = 1000


def _frames(path, images, recorded) -> List[Tuple[int, int, Trust]]:
    target = open_dump(str(path))
    try:
        walker = make_walker(target, Options(image_paths=images), problems=target.soft_errors)
        walker.code.images._locator.use_recorded_path = recorded
        walk = walk_thread(walker, crashing_thread(target), target.exception.context)
        return [(f.sp, f.ip, f.trust) for f in walk.frames[:KEEP]]
    finally:
        target.close()


@pytest.mark.slow
def test_without_images_no_sample_shows_a_held_code_word_that_is_not_a_true_frame(plain):
    """Every sample walked from the dump alone: a scanned frame whose return address has
    code the dump holds is a true frame (Wine keeps the code around the crash IP, and in a
    stack overflow the stale word there is the return address of the call that overflowed,
    left in every repetition of the recursion: 1 in 5 frames of the thread_stack_size
    sample's stack before). And in the Python recursions stale frames shown never
    outnumber true ones."""
    if not WINPYTHON.is_dir():
        pytest.skip("../shared/winpython not here: no truth for the Python samples")
    images = [str(SAMPLE_BIN), str(PY_SAMPLES), str(WINPYTHON)]
    cases = [(p.name, p) for p in sorted(SAMPLES.glob("*.dmp"))]
    cases += [(p.name, plain(p)) for p in sorted(PY_SAMPLES.glob("*.dmp*")) if "full" not in p.name]
    held = 0
    for name, path in cases:
        truth = {(sp, ip) for sp, ip, _ in _frames(path, images, True)}
        target = open_dump(str(path))
        try:
            code = make_walker(target, Options(), problems=target.soft_errors).code
            alone = _frames(path, [], False)
            for k, (sp, ip, trust) in enumerate(alone[1:], start=1):
                if trust in SCANNED and code.frame_end(ip) is not None:
                    held += 1
                    assert (sp, ip) in truth, f"{name}: frame {k} at {ip:#x} (held code) is not a true frame"
        finally:
            target.close()
        if "recursion" in name or "stack_size" in name:
            real = sum(1 for sp, ip, _ in alone if (sp, ip) in truth)
            assert len(alone) - real <= real, f"{name}: {len(alone) - real} stale frames beside {real} true ones"
    assert held > 0  # the check looked at something
