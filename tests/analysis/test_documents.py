"""The documents a run hands back (analysis/documents.py): the Contents of a dump read but
not walked, and the Report assembled from a decided Case."""

from __future__ import annotations

from dumpkit.analysis.documents import contents_document, report_document
from dumpkit.analysis.environment.versions import Versions
from dumpkit.analysis.model import Environment, FrameSize, NotWalked
from dumpkit.analysis.verdict import Case, decide
from dumpkit.images import ImageProvider
from dumpkit.problems import Problems
from dumpkit.target import ExceptionInfo, Module, Thread
from tests.support import builders
from tests.support.fakes.target import MemoryTarget

LIB = Module("lib.dll", r"C:\lib.dll", 0x180000000, 0x1000)


def _target():
    ex = ExceptionInfo(0xC0000005, 0, LIB.base + 0x10, (0, 0x10), 2, None)
    return MemoryTarget(modules=[LIB], threads=[Thread(1, None), Thread(2, None)], exception=ex)


def test_contents_list_every_thread_unwalked_and_the_problems_it_is_given():
    target = _target()
    problems = Problems()
    problems.add("ModuleList: truncated")
    doc = contents_document(target, problems)
    assert [(t.tid, t.is_crashing, t.stop) for t in doc.threads] == [
        (1, False, NotWalked.SKIPPED),
        (2, True, NotWalked.SKIPPED),
    ]
    assert doc.crash is not None and doc.crash.thread_id == 2
    assert [m.name for m in doc.modules] == ["lib.dll"]
    assert doc.soft_errors == ("ModuleList: truncated",)


def test_a_report_carries_the_case_its_verdict_and_the_problems_as_they_stand():
    target = _target()
    crashing = builders.thread(2, builders.frames(2), crashing=True)
    sizes = (FrameSize(0, "lib.dll!f0", 0x40),)
    case = Case(crash=builders.crash(2), thread=crashing, sizes=sizes, environment=Environment(), threshold=0x4000)
    verdict, findings = decide(case)
    problems = Problems()
    problems.add("thread 1: no register context")
    threads = (crashing, builders.thread(1))
    report = report_document(
        target,
        case,
        verdict,
        findings,
        threads,
        ImageProvider(target, problems=target.soft_errors),
        problems,
        None,
        Versions(None),
        None,
    )
    assert (report.verdict, report.findings) == (verdict, tuple(findings))
    assert report.threads == threads and report.frame_sizes == sizes and report.oversized_threshold == 0x4000
    assert report.crash is case.crash and report.signature is not None
    assert report.soft_errors == ("thread 1: no register context",)
