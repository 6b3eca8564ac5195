"""One problems collector per run (issue #33 item 1): the run makes it and hands it to the
source it opens, which adds what reading meets, and to the engine, whose phases add the
rest. Two runs, two collectors: neither sees the other's problems."""

from __future__ import annotations

from dumpkit.engine import Options, analyze, contents
from dumpkit.problems import Problems
from dumpkit.sources.minidump import open_dump

from tests.support.synth_dump import MODULE_LIST, SynthDump, x64_context

APP = 0x1_4000_0000
STACK = 0x10000
HELD = "ModuleList: claims 3 entries but holds only 1"  # what reading meets
# what the walk phase meets when no thread but the crashing one may be walked
LIMITED = Options(use_recorded_paths=False, max_other_threads=0)


def _dump(tmp_path) -> str:
    """Three threads on one stack, and a module list that claims more modules than it holds."""
    d = SynthDump()
    stack = d.memory(STACK, bytes(0x1000))
    for tid in (7, 8, 9):
        d.thread(tid, context=x64_context(rip=APP + 0x1000, rsp=STACK + 0x100 * tid), stack=stack)
    d.module("C:\\app\\app.exe", APP, 0x5000)
    return d.build().lie_count(MODULE_LIST, 3).write(tmp_path / "problems.dmp")


def test_a_runs_problems_land_in_the_collector_it_hands_in(tmp_path):
    problems = Problems()
    with open_dump(_dump(tmp_path), problems) as target:
        assert target.soft_errors is problems
        read = list(problems.items)
        assert any(HELD in p for p in read)
        report = analyze(target, LIMITED, problems=problems).report
    assert report.soft_errors == tuple(problems.items)
    assert problems.items[: len(read)] == read  # what reading met comes first
    assert any("not walked" in p for p in problems.items[len(read) :])


def test_two_runs_do_not_share_problems(tmp_path):
    path = _dump(tmp_path)
    first, second = Problems(), Problems()
    with open_dump(path, first) as a, open_dump(path, second) as b:
        read = list(second.items)
        analyze(a, LIMITED, problems=first)
        assert second.items == read  # the first run's walk added nothing to the second's
        done = list(first.items)
        report = analyze(b, Options(use_recorded_paths=False), problems=second).report
        assert first.items == done
    assert any("not walked" in p for p in first.items)
    assert not any("not walked" in p for p in report.soft_errors)


def test_info_shows_what_reading_met_in_the_runs_collector(tmp_path):
    problems = Problems()
    with open_dump(_dump(tmp_path), problems) as target:
        doc = contents(target, problems=problems)
    assert doc.soft_errors == tuple(problems.items) and any(HELD in p for p in doc.soft_errors)


def test_a_source_opened_alone_has_a_collector_of_its_own(tmp_path):
    path = _dump(tmp_path)
    with open_dump(path) as a, open_dump(path) as b:
        assert a.soft_errors is not b.soft_errors
        assert a.soft_errors.items == b.soft_errors.items and any(HELD in p for p in a.soft_errors.items)
