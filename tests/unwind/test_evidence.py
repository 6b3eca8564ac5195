"""Other threads' walks as evidence against scanned frames (dumpkit/unwind/evidence.py):
a return address's frame has one size on every thread, and every thread starts in the
same routine at the same depth below its stack's top."""

from __future__ import annotations

from typing import List, Sequence, Tuple

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
