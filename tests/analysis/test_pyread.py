"""The Python phase (analysis/pyread.py): only a CPython process has one, and one whose
interpreter's memory is absent says so instead of failing."""

from __future__ import annotations

from dumpkit.analysis.pyread import read_python
from dumpkit.images import ImageProvider
from dumpkit.problems import Problems
from dumpkit.target import Module
from tests.support.fakes.target import MemoryTarget


def test_a_process_without_cpython_has_no_python_side():
    target = MemoryTarget(modules=[Module("app.exe", r"C:\app.exe", 0x140000000, 0x10000)])
    assert read_python(target, ImageProvider(target, problems=target.soft_errors), Problems()) is None


def test_an_interpreter_without_image_or_memory_is_reported_as_not_found():
    target = MemoryTarget(modules=[Module("python311.dll", r"C:\py\python311.dll", 0x7FF800000000, 0x100000)])
    problems = Problems()
    report = read_python(target, ImageProvider(target, problems=target.soft_errors), problems)
    assert report is not None and report.status == "no_runtime" and report.threads == ()
    assert problems.items == []  # no export table to read is not a problem met reading one
