"""The Python section of the view, from plain model objects: recursion folded after its
first repetition, frames the report did not keep marked, the crashing thread first, and a
dump without the interpreter's memory saying so."""

from __future__ import annotations

from dumpkit.analysis.model import PythonCycle, PythonFrameRecord, PythonReport, PythonStatus, PythonThreadReport
from dumpkit.report.view import Fold, PythonFrameRow, python_view


def _frames(names, first=0):
    return tuple(PythonFrameRecord(first + i, n, "C:\\job.py", 10 + i, 1) for i, n in enumerate(names))


def _report(threads, verified=True):
    return PythonReport(PythonStatus.READ, "read", "python38.dll", "3.8.1", "3.8 layout", verified, tuple(threads))


def test_a_recursion_shows_one_repetition_then_one_fold_row():
    frames = _frames(["visit", "walk"] * 50 + ["main", "<module>"])
    cycle = PythonCycle(("visit (C:\\job.py:10)", "walk (C:\\job.py:11)"), 2, 50, 0, 99)
    view = python_view(_report([PythonThreadReport(7, 102, frames, 0, cycles=(cycle,))]), 7)
    rows = view.stacks[0].rows
    assert [r.function for r in rows if isinstance(r, PythonFrameRow)] == ["visit", "walk", "main", "<module>"]
    (fold,) = [r for r in rows if isinstance(r, Fold)]
    assert "98 more frames" in fold.text and "repeat 49 more times" in fold.text
    assert view.stacks[0].title == "Python stack of thread 7: 102 frames"


def test_frames_the_report_did_not_keep_are_marked_where_they_were():
    kept = _frames(["a", "b"]) + _frames(["y", "z"], first=500)
    view = python_view(_report([PythonThreadReport(7, 502, kept, 496)]), 7)
    folds = [r.text for r in view.stacks[0].rows if isinstance(r, Fold)]
    assert folds == ["... 498 frames not kept in the report ..."]


def test_the_crashing_thread_comes_first_and_an_unverified_layout_says_so():
    threads = [PythonThreadReport(3, 1, _frames(["idle"]), 0), PythonThreadReport(9, 1, _frames(["boom"]), 0)]
    view = python_view(_report(threads, verified=False), 9)
    assert [s.tid for s in view.stacks] == [9, 3]
    assert "not verified on a real dump" in view.summary


def test_without_the_interpreters_memory_the_summary_says_which_dump_has_it():
    py = PythonReport(
        "memory_missing", "_PyRuntime is not in the dump; a full-memory dump has it", "python38.dll", "3.8.1"
    )
    view = python_view(py, 1)
    assert view.stacks == () and "no Python stacks: _PyRuntime is not in the dump" in view.summary
    assert python_view(None, 1) is None
