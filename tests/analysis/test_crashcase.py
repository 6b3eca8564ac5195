"""The Case a verdict is decided on (analysis/crashcase.py), from the run's findings."""

from __future__ import annotations

from dumpkit.analysis.crashcase import crash_case, python_entry
from dumpkit.analysis.model import Environment, FrameSize
from dumpkit.analysis.threadreport import ThreadReports
from dumpkit.images import ImageProvider
from dumpkit.problems import Problems
from dumpkit.target import Module, Thread
from dumpkit.unwind.codemap import CodeMap
from dumpkit.unwind.frames import StackWalk, StopReason
from tests.support import builders
from tests.support.fakes.target import MemoryTarget


def _target():
    threads = [Thread(1, None, 0x10000, 0x1000), Thread(2, None, 0, 0), Thread(3, None, 0x20000, 0x2000)]
    modules = [
        Module("lib.dll", r"C:\lib.dll", 0x180000000, 0x1000),
        Module("app.exe", r"C:\app.exe", 0x140000000, 0x1000),
    ]
    return MemoryTarget(modules=modules, threads=threads)


def test_the_case_carries_the_crashing_thread_the_captured_stacks_and_the_problems_so_far():
    target = _target()
    crashing = builders.thread(1, builders.frames(3), crashing=True)
    threads = ThreadReports((crashing, builders.thread(3)), (FrameSize(0, "lib.dll!f0", 0x40),))
    walk = StackWalk(1, [], StopReason.FRAME_LIMIT, [], 5000)
    problems = Problems()
    problems.add("thread 3: no stack memory")
    case = crash_case(
        target,
        CodeMap(target, ImageProvider(target, problems=target.soft_errors)),
        builders.crash(),
        threads,
        walk,
        Environment(),
        None,
        None,
        problems,
        0x4000,
    )
    problems.add("met later")
    assert case.thread is crashing and case.sizes == threads.sizes
    assert case.frame_limit == 5000 and case.threshold == 0x4000
    assert case.stacks == ((1, 0x10000, 0x11000), (3, 0x20000, 0x22000))  # thread 2 has no stack captured
    assert case.problems == ("thread 3: no stack memory",)
    assert case.executable == "app.exe"


def test_without_a_crash_or_a_walk_there_is_no_python_entry():
    target = _target()
    threads = ThreadReports((builders.thread(1, crashing=True),))
    case = crash_case(
        target,
        CodeMap(target, ImageProvider(target, problems=target.soft_errors)),
        None,
        threads,
        None,
        Environment(),
        None,
        None,
        Problems(),
        0x4000,
    )
    assert (case.crash, case.frames, case.frame_limit, case.python_entry) == (None, (), None, None)
    assert python_entry(builders.crash(), builders.thread(1), None, None) is None
