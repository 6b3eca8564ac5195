"""A Python process's stack overflow analysed far from its machine: the raw CPython 3.8-3.11
dumps of sample_dumps/python and sample_dumps/pyversions with Windows' own DLLs only (Wine's,
committed), as a colleague without the crashed Python installation has them. Without
python3X.dll's image no function in the cycle has a name, so whether Python functions or the
interpreter's C code recursed cannot be told; the report must not claim either, and must say
what would tell them apart. The same dumps with their images are tested elsewhere
(test_python_recursion.py, test_pyversions_dumps.py)."""

from __future__ import annotations

import json
import re
from functools import lru_cache

import pytest

from dumpkit.analysis.model import Report
from dumpkit.commands.inputs import open_target
from dumpkit.engine import Options, analyze
from tests.support.samples import SAMPLES, python_manifest

pytestmark = pytest.mark.slow  # 17 raw dumps analysed: the full run's (and not the py38 lane's budget)

# (file, what recursed: True for Python code, False for C code on nested data)
_PYTHON_CODE = {
    "py_recursion": True,
    "slot_recursion": True,
    "getitem_recursion": True,
    "repr_recursion": False,
    "json_recursion": False,
    "pickle_recursion": False,
}
CASES = sorted(
    {
        ("python/" + d["file"], _PYTHON_CODE[d["scenario"]])
        for d in python_manifest()
        if d["scenario"] in _PYTHON_CODE and "full" not in d["file"]
    }
    | {
        ("pyversions/" + d["file"], _PYTHON_CODE[d["scenario"]])
        for d in json.loads((SAMPLES / "pyversions" / "manifest.json").read_text())["dumps"]
        if d["scenario"] in _PYTHON_CODE and not d["trimmed"] and int(d["python_minor"].split(".")[1]) < 12
    }
)


@lru_cache(maxsize=None)
def _report(path: str) -> Report:
    target, problems = open_target(str(SAMPLES / path))
    try:
        options = Options(image_paths=[str(SAMPLES / "bin" / "wine")], use_recorded_paths=False)
        return analyze(target, options, problems=problems).report
    finally:
        target.close()


@pytest.mark.parametrize("path", [c[0] for c in CASES])
def test_without_the_interpreters_image_python_and_c_recursion_are_not_told_apart(path):
    report = _report(path)
    crash = next(t for t in report.threads if t.is_crashing)
    kind = crash.cycles[0].kind
    headline = report.verdict.headline
    assert kind is not None and kind.kind == "interpreter", (kind, headline)
    assert "Python functions calling each other or the interpreter's own C code" in headline
    assert "cannot be told apart" in headline and report.verdict.confidence == "medium"
    # the claim the report made before, wrong for the Python recursions among them
    assert "not Python functions calling each other" not in headline
    assert any("--fetch-images" in s and "faulthandler" in s for s in report.verdict.next_steps)


def test_the_cases_hold_both_python_and_c_recursions():
    """The report must not pick a side because either can be the truth: both are here."""
    assert {python_code for _, python_code in CASES} == {True, False}


CTYPES_RAW = sorted(
    "pyversions/" + d["file"]
    for d in json.loads((SAMPLES / "pyversions" / "manifest.json").read_text())["dumps"]
    if d["scenario"] == "ctypes_recursion" and not d["trimmed"]
)


@pytest.mark.parametrize("path", CTYPES_RAW)
def test_a_stale_runtime_word_is_not_how_python_reached_the_recursion(path):
    """nativelib.dll recursing, called through ctypes (the program's own account). Without
    the images the frames below the recursion are stack words; one into ucrtbase.dll, left
    by a call that had returned, once read as 'called from Python through ucrtbase.dll'."""
    headline = _report(path).verdict.headline
    assert "recursion nativelib.dll" in headline
    said = headline.split("called from Python through ", 1)[1] if "called from Python through " in headline else ""
    assert not said.startswith(("ucrtbase", "kernel32", "kernelbase", "ntdll")), headline


def test_the_interpreter_below_the_native_code_is_not_claimed_from_a_bare_stack_word():
    """Without python3X.dll's image the interpreter's frames below the recursion are bare
    stack words (no code to show a call before them): a stale return address or a pointer
    into its data looks the same. A caller named from one says it is unconfirmed."""
    named = []
    for path in CTYPES_RAW:
        headline = _report(path).verdict.headline
        said = re.findall(r"\(called by python3\d+\.dll([^)]*)\)", headline)
        assert all(s == ", unconfirmed: a word found by stack scanning" for s in said), headline
        named += said
    assert named, "no headline names the interpreter below the native code: the check above checked nothing"
