"""Other threads' walks as evidence against scanned frames (dumpkit/unwind/evidence.py):
a return address's frame has one size on every thread, and every thread starts in the
same routine at the same depth below its stack's top."""

from __future__ import annotations

from typing import List, Sequence, Tuple

from dumpkit.unwind.bulk import Frames, Member, Run
from dumpkit.unwind.evidence import checked, witness
from dumpkit.unwind.frames import Frame, StackWalk, StopReason, Trust

S, V, U, C = Trust.SCAN, Trust.SCAN_VALIDATED, Trust.UNWIND_INFO, Trust.CONTEXT
TOP = 0x10000  # every thread's stack top, relative: threads below sit at TOP + k * 0x100000
APP, THUNK, START, STALE, HANDLER = 0x1000, 0x2000, 0x3000, 0x4000, 0x5000


def walk(tid: int, frames: Sequence[Tuple[int, int, Trust]], stop=StopReason.NO_CALLER) -> Tuple[int, int, StackWalk]:
    """(tid, stack top, walk) for frames given as (ip, distance below the top, trust)."""
    top = TOP + tid * 0x100000
    fs: List[Frame] = []
    for n, (ip, depth, trust) in enumerate(frames):
        fs.append(Frame(n, ip, top - depth, None, None, None, None, None, trust))
    for a, b in zip(fs, fs[1:]):
        a.size = b.sp - a.sp
    return tid, top, StackWalk(tid, fs, stop, [])


# another thread: its code, then the thunk (frame 0x30 bytes) and the start routine at
# 0xa0 below the top, where its walk ends
def other(tid: int, ip: int = APP) -> Tuple[int, int, StackWalk]:
    return walk(tid, [(0x77, 0x400, C), (ip, 0x200, S), (THUNK, 0xD0, S), (START, 0xA0, S)])


def ips(result: StackWalk) -> List[int]:
    return [f.ip for f in result.frames]


def test_stale_words_inside_a_frame_others_show_whole_are_dropped():
    # thread 1 scanned a stale code word 0x10 into the thunk's frame, then the start
    # routine where the others have it; and a handler's address above the start routine
    mine = walk(1, [(0x77, 0x400, C), (APP, 0x200, U), (THUNK, 0xD0, S), (STALE, 0xC0, S), (START, 0xA0, S),
                    (HANDLER, 0x50, S)])  # fmt: skip
    seen = witness([mine, other(2), other(3), other(4)])
    tid, top, w = mine
    result = checked(w, tid, top, seen)
    assert ips(result) == [0x77, APP, THUNK, START]
    assert [f.index for f in result.frames] == [0, 1, 2, 3]
    assert result.frames[2].size == 0x30 and result.frames[3].size is None
    assert result.stop is StopReason.THREAD_START and result.stop.reached_the_end


def test_one_witness_is_not_enough_and_the_thread_is_never_its_own_witness():
    mine = walk(1, [(0x77, 0x400, C), (THUNK, 0xD0, S), (STALE, 0xC0, S), (START, 0xA0, S), (HANDLER, 0x50, S)])
    tid, top, w = mine
    # thread 1 agreeing with itself, plus one other thread
    assert checked(w, tid, top, witness([mine, mine, other(2)])) is w


def test_threads_that_disagree_prove_nothing():
    # thread 3's thunk frame is 0x20 bytes: the frame size is not established
    mine = walk(1, [(0x77, 0x400, C), (THUNK, 0xD0, S), (STALE, 0xC0, S), (START, 0xA0, S)])
    odd = walk(3, [(0x77, 0x400, C), (THUNK, 0xD0, S), (0x6000, 0xB0, S), (START, 0x80, S)])
    tid, top, w = mine
    # the start routine at 0xa0 ends threads 2 and 4, but thread 5 went on past it
    beyond = walk(5, [(0x77, 0x400, C), (START, 0xA0, S), (0x7000, 0x40, S)])
    result = checked(w, tid, top, witness([other(2), odd, other(4), beyond]))
    assert ips(result) == [0x77, THUNK, STALE, START]


def test_frames_found_by_unwind_data_are_never_dropped():
    # the same layout, but the word inside the thunk's frame was found by unwind data,
    # and so was the frame above the start routine
    mine = walk(1, [(0x77, 0x400, C), (THUNK, 0xD0, S), (STALE, 0xC0, U), (START, 0xA0, S), (HANDLER, 0x50, U)])
    tid, top, w = mine
    assert checked(w, tid, top, witness([other(2), other(3)])) is w


def test_the_caller_must_be_where_the_others_show_it():
    # thread 1 never reaches the start routine at the thunk frame's end: nothing is proven
    mine = walk(1, [(0x77, 0x400, C), (THUNK, 0xD0, S), (STALE, 0xC0, S), (0x6000, 0x90, S)])
    tid, top, w = mine
    assert checked(w, tid, top, witness([other(2), other(3)])) is w


def _recursing(tid: int, bulk: bool, reps: int = 100) -> Tuple[int, int, StackWalk]:
    """Thread `tid` deep in a recursion of APP (0x20-byte frames) that the walk verified in
    bulk (`bulk`: a Run, else the same frames one by one), then the scanned frames of the
    layout above: a stale word in the thunk's frame and a handler above the start routine."""
    top = TOP + tid * 0x100000
    run_sp = top - 0xD0 - reps * 0x20
    run = Run(1, run_sp, (Member(APP, None, None, None, None, 0x20, 0),), 0x20, reps)
    head = [Frame(0, 0x77, run_sp - 0x40, None, None, None, None, 0x40, C)]
    tail = [
        Frame(1 + reps + n, ip, top - depth, None, None, None, None, None, S)
        for n, (ip, depth) in enumerate([(THUNK, 0xD0), (STALE, 0xC0), (START, 0xA0), (HANDLER, 0x50)])
    ]
    for a, b in zip(tail, tail[1:]):
        a.size = b.sp - a.sp
    frames: Sequence[Frame] = Frames([head, run, tail])
    if not bulk:
        frames = list(frames)
    return tid, top, StackWalk(tid, frames, StopReason.NO_CALLER, [])


def test_a_recursion_verified_in_bulk_is_checked_without_expanding_it():
    # what a deep recursion read without the system DLLs' unwind data looks like: a run of
    # a million frames, then frames found by scanning at the bottom of the stack
    seen = witness([other(2), other(3), other(4)])
    tid, top, bulk = _recursing(1, True)
    _, _, listed = _recursing(1, False)
    got, want = checked(bulk, tid, top, seen), checked(listed, tid, top, seen)
    assert ips(want) == [0x77] + [APP] * 100 + [THUNK, START]
    assert want.stop is StopReason.THREAD_START and got.stop is want.stop
    assert len(got.frames) == len(want.frames)
    assert all(a == b for a, b in zip(got.frames, want.frames))
    # the run is still one part, not 100 frames
    assert isinstance(got.frames, Frames) and any(isinstance(p, Run) for p in got.frames.parts)


def test_a_stale_frame_dropped_before_a_bulk_run_renumbers_the_run():
    # others show APP2's frame as 0x30 bytes with APP at its end; this thread scanned a
    # stale word inside it, then recursed in APP (a run of 10 frames)
    others = [walk(t, [(0x77, 0x400, C), (0x6000, 0x300, S), (APP, 0x2D0, S), (APP, 0x2B0, S)]) for t in (2, 3)]
    seen = witness(others)

    def mine(bulk: bool) -> StackWalk:
        top = TOP + 0x100000
        head = [
            Frame(0, 0x77, top - 0x380, None, None, None, None, 0x80, C),
            Frame(1, 0x6000, top - 0x300, None, None, None, None, 0x10, U),
            Frame(2, STALE, top - 0x2F0, None, None, None, None, 0x20, S),
        ]
        run = Run(3, top - 0x2D0, (Member(APP, None, None, None, None, 0x20, 0),), 0x20, 10)
        frames: Sequence[Frame] = Frames([head, run])
        return StackWalk(1, frames if bulk else list(frames), StopReason.NO_CALLER, [])

    top = TOP + 0x100000
    got, want = checked(mine(True), 1, top, seen), checked(mine(False), 1, top, seen)
    assert ips(want) == [0x77, 0x6000] + [APP] * 10
    assert [f.index for f in got.frames] == list(range(12))
    assert got.frames[1].size == 0x30
    assert all(a == b for a, b in zip(got.frames, want.frames)) and len(got.frames) == len(want.frames)
    assert isinstance(got.frames, Frames) and any(isinstance(p, Run) for p in got.frames.parts)


def test_a_scanned_run_that_other_threads_contradict_is_checked_frame_by_frame():
    # a recursion of APP found by scanning (0x10-byte frames), while the other threads show
    # APP's frame as 0x130 bytes with THUNK above: the frames in between are stale words,
    # as they would be had the walk listed them one by one
    def mine(bulk: bool) -> StackWalk:
        top = TOP + 0x100000
        reps = 40
        run_sp = top - 0xD0 - reps * 0x10
        run = Run(1, run_sp, (Member(APP, None, None, None, None, 0x10, 0, None, S),), 0x10, reps)
        head = [Frame(0, 0x77, run_sp - 0x40, None, None, None, None, 0x40, C)]
        tail = [Frame(1 + reps, THUNK, top - 0xD0, None, None, None, None, 0x30, S)]
        tail.append(Frame(2 + reps, START, top - 0xA0, None, None, None, None, None, S))
        frames: Sequence[Frame] = Frames([head, run, tail])
        return StackWalk(1, frames if bulk else list(frames), StopReason.NO_CALLER, [])

    top = TOP + 0x100000
    seen = witness([other(2), other(3), other(4)])
    got, want = checked(mine(True), 1, top, seen), checked(mine(False), 1, top, seen)
    assert len(ips(want)) < 43, "nothing was dropped"
    assert ips(got) == ips(want) and [f.sp for f in got.frames] == [f.sp for f in want.frames]
    assert [f.size for f in got.frames] == [f.size for f in want.frames]
    assert [f.index for f in got.frames] == list(range(len(want.frames)))


def test_a_scanned_run_no_thread_speaks_of_stays_whole():
    seen = witness([other(2, ip=0x6000), other(3, ip=0x6000)])
    top = TOP + 0x100000
    run = Run(1, top - 0x400, (Member(APP, None, None, None, None, 0x10, 0, None, S),), 0x10, 40)
    head = [Frame(0, 0x77, top - 0x440, None, None, None, None, 0x40, C)]
    w = StackWalk(1, Frames([head, run]), StopReason.NO_CALLER, [])
    assert checked(w, 1, top, seen) is w
