"""Thread-report assembly (analysis/threadreport.py): which frames a report keeps, its
possible frames apart, and the loop over the process's threads."""

from __future__ import annotations

from dumpkit.analysis.model import NotWalked
from dumpkit.analysis.threadreport import frame_record, frame_records, thread_report, thread_reports, with_possible
from dumpkit.images import ImageProvider
from dumpkit.problems import Problems
from dumpkit.target import Registers, Thread
from dumpkit.unwind.bulk import Frames
from dumpkit.unwind.codemap import CodeMap
from dumpkit.unwind.frames import Frame, StackWalk, StopReason, Support, Trust
from tests.support.fakes.target import MemoryTarget


def _frames(count: int, first: int = 0, trust: Trust = Trust.UNWIND_INFO):
    return [
        Frame(i, 0x1000 + i, 0x8000 + 0x40 * i, "m.dll", 0x10 + i, None, f"m.dll!f{i}", 0x40, trust, None)
        for i in range(first, first + count)
    ]


def test_a_long_stack_keeps_three_quarters_head_and_a_quarter_tail():
    records, elided = frame_records(_frames(100), keep=8)
    assert [r.index for r in records] == [0, 1, 2, 3, 4, 5, 98, 99]
    assert elided == 92


def test_keep_none_keeps_every_frame_and_keep_zero_none():
    assert frame_records(_frames(5), keep=None) == (tuple(frame_record(f) for f in _frames(5)), 0)
    assert frame_records(_frames(5), keep=0) == ((), 5)


def test_a_frame_record_carries_what_confirms_a_scanned_frame():
    scanned = _frames(1, trust=Trust.SCAN)[0]
    record = frame_record(scanned, {0: Support.CALL_TARGET})
    assert (record.ip, record.symbol, record.trust) == (0x1000, "m.dll!f0", Trust.SCAN)
    assert record.support is Support.CALL_TARGET


def test_possible_frames_follow_the_stack_in_one_sequence():
    stack = Frames([_frames(3)])
    walk = StackWalk(1, stack, StopReason.NO_CALLER, [], None, _frames(2, first=3, trust=Trust.SCAN))
    assert [f.index for f in with_possible(walk)] == [0, 1, 2, 3, 4]
    plain = StackWalk(1, _frames(3), StopReason.NO_CALLER, [])
    assert with_possible(plain) is plain.frames


def test_a_thread_report_says_its_walk_and_keeps_possible_frames_apart():
    t = Thread(7, None, stack_start=0x8000, stack_size=0x1000, name="worker")
    walk = StackWalk(7, _frames(10), StopReason.FRAME_LIMIT, [], 10, _frames(3, first=10, trust=Trust.SCAN))
    report = thread_report(t, walk, True, 4)
    assert (report.tid, report.name, report.is_crashing) == (7, "worker", True)
    assert (report.frame_count, len(report.frames), report.elided_frames) == (10, 4, 6)
    assert (report.stop, report.frame_limit) == (StopReason.FRAME_LIMIT, 10)
    assert [f.index for f in report.possible_frames] == [10, 11, 12] and report.possible_count == 3
    unwalked = thread_report(t, None, False, 4, unwalked=NotWalked.REPEATED_TID)
    assert (unwalked.frame_count, unwalked.frames, unwalked.stop) == (0, (), NotWalked.REPEATED_TID)


def test_the_crashing_thread_comes_first_and_a_repeated_id_is_reported_once_unwalked():
    context = Registers({"rip": 0, "rsp": 0})
    threads = [Thread(9, context), Thread(3, context), Thread(5, context), Thread(3, context)]
    target = MemoryTarget(threads=threads)
    problems = Problems()
    walks = {t: StackWalk(t, [], StopReason.NO_CALLER, []) for t in (3, 5, 9)}
    found = thread_reports(
        target,
        CodeMap(target, ImageProvider(target, problems=target.soft_errors)),
        walks,
        5,
        200,
        0x10000,
        None,
        problems,
    )
    assert [(r.tid, r.is_crashing) for r in found.threads] == [(5, True), (3, False), (3, False), (9, False)]
    assert found.crashing is found.threads[0]
    assert [r.stop for r in found.threads if r.tid == 3] == [StopReason.NO_CALLER, NotWalked.REPEATED_TID]
    assert problems.items == [
        "thread list: 1 entries repeat an earlier thread id; only the first entry of each id was walked"
    ]
    assert target.soft_errors.items == []  # the run's collector, not the target's


def test_what_the_analyses_meet_goes_to_the_collector_they_are_handed():
    t = Thread(3, Registers({"rip": 0x1000, "rsp": 0x8000}), stack_start=0x8000, stack_size=0x1000)
    target = MemoryTarget(threads=[t])
    walk = StackWalk(3, _frames(2), StopReason.NO_CALLER, ["stack range unknown; assuming 1 MiB above SP"])
    problems = Problems()
    thread_reports(
        target,
        CodeMap(target, ImageProvider(target, problems=target.soft_errors)),
        {3: walk},
        3,
        200,
        0x10000,
        None,
        problems,
    )
    assert "thread 3: stack range unknown; assuming 1 MiB above SP" in problems.items
    assert target.soft_errors.items == []
