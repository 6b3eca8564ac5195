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


class _Cell:
    """An object the collector counts when it is made."""


def test_no_collection_runs_during_a_dump_and_the_collector_resumes_after(tmp_path):
    damaged = tmp_path / "damaged.dmp"
    damaged.write_bytes(b"MDMP" + b"\xff" * 60)
    passes = []

    def count(phase, info):
        if phase == "start":
            passes.append(info["generation"])

    job = Job(image_paths=(str(SAMPLES / "bin"),))
    threshold = gc.get_threshold()
    gc.set_threshold(1, 1, 1)  # a pass at every allocation, were the collector running
    gc.callbacks.append(count)
    try:
        for dump in (str(SAMPLES / "recursion_cycle3.dmp"), str(damaged)):
            before = len(passes)
            record = analyse_one(job, dump)
            during = len(passes) - before
            # paused, the allocations of a dump's analysis start no pass (the ones counted are
            # the resumed collector's first, as analyse_one returns); running, thousands
            assert during <= 10, (dump, during)
            assert gc.isenabled() and record.path == dump
        after = len(passes)
        _ = [_Cell() for _ in range(10)]  # allocations (not from a free list): the collector runs
        assert len(passes) > after
    finally:
        gc.callbacks.remove(count)
        gc.set_threshold(*threshold)
