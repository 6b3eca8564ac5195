"""What the analysis of a dump makes is freed by reference counting when its report is done:
no reference cycle keeps a dump's target, walks and frames until a garbage collection. A
triage worker analyses thousands of dumps; a cycle (the walker and its step held each other)
left each dump's objects to the collector, whose passes over them were ~10% of a worker's
time."""

from __future__ import annotations

import contextlib
import gc
import io
from pathlib import Path

import pytest

from dumpkit.commands.analyze import run_analyze
from dumpkit.triage.analyse import Job, analyse_one

REPO = Path(__file__).resolve().parent.parent.parent
SAMPLES = REPO / "sample_dumps"
DUMPS = [
    SAMPLES / "recursion_cycle3.dmp",  # mingw, images at hand: walked from unwind data
    SAMPLES / "null_deref.dmp",
    SAMPLES / "python" / "numpy_object_recursion.dkb",  # a bundle: NumPy's images travel with it
    SAMPLES / "python" / "faulthandler_null.dmp",  # CPython without its DLL: scanned
]


@contextlib.contextmanager
def _cyclic_garbage():
    """The objects only the cyclic collector would free, made inside the block."""
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    found: list = []
    try:
        yield found
        gc.collect()
        found.extend(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


def _names(objects: list) -> set:
    return {f"{type(o).__module__}.{type(o).__qualname__}" for o in objects}


@pytest.mark.parametrize("dump", DUMPS, ids=lambda p: p.name)
def test_a_triaged_dump_leaves_no_cycles(dump):
    job = Job(image_paths=(str(SAMPLES / "bin"),))
    analyse_one(job, str(dump))  # the first time: module-level caches fill
    with _cyclic_garbage() as garbage:
        record = analyse_one(job, str(dump))
    assert record is not None
    assert _names(garbage) == set(), f"{len(garbage)} objects in cycles"


@pytest.mark.parametrize("fmt", ["text", "json", "html"])
def test_an_analyzed_dump_leaves_no_cycles(fmt, capsys):
    dump = str(SAMPLES / "recursion_cycle3.dmp")
    run_analyze(dump, image_path=[str(SAMPLES / "bin")], fmt_name=fmt)
    with _cyclic_garbage() as garbage, contextlib.redirect_stdout(io.StringIO()) as out:
        run_analyze(dump, image_path=[str(SAMPLES / "bin")], fmt_name=fmt)
    assert "recursion" in out.getvalue().lower()
    assert _names(garbage) == set(), f"{len(garbage)} objects in cycles"
