"""The HTML report's pictures (issue #16 item 1): drawn from the real sample reports, their
numbers are the ones sample_dumps/manifest.json derives independently (own parser and
unwinder): the stack reserve and the oversized request, each cycle's members, order,
repetitions and bytes, the bytes each function holds. Then the edges: a million-frame
stack drawn as a handful of runs, frames the report did not keep, hostile names."""

from __future__ import annotations

import re

import pytest

from dumpkit.analysis.model import Cycle
from dumpkit.report.html import render_html
from dumpkit.report.svg import WIDTH, budget_svg, fit, text_width, trust_svg
from dumpkit.report.view.pictures import (
    MAX_RUNS,
    MIXED,
    NOT_KEPT,
    RECURSION,
    pictures_view,
    stack_by_function,
    trust_runs,
    trust_strip,
)
from tests.support.builders import budget, frame, report, thread
from tests.report.pictures_support import STACK_CLASSES, manifest_cases, part, rects, sample_report, svgs, texts

MiB = 1 << 20


@pytest.fixture(scope="module")
def tmp_root(tmp_path_factory):
    return tmp_path_factory.mktemp("pictures")


def _short(name: str) -> str:
    return name.split("!", 1)[-1]


@pytest.mark.parametrize("facts", manifest_cases())
def test_the_dumps_that_call_for_stack_pictures_have_them_and_the_others_do_not(facts, tmp_root):
    page = render_html(sample_report(facts["file"], tmp_root))
    drawn = svgs(page)
    stack_crash = facts["expected_class"] in STACK_CLASSES
    assert ("budget" in drawn) == stack_crash
    # which functions hold the stack matters when they filled it, not when one frame asked
    # for more than all of it on a nearly empty stack
    assert ("by-function" in drawn) == (stack_crash and not facts["oversized_bytes"])
    assert ("cycle" in drawn) == bool(facts["cycle_functions"])
    assert "trust" in drawn  # every crashing thread with frames says how they were found
    assert "<script" not in page.lower() and "http" not in re.sub(r'xmlns="http://www.w3.org/2000/svg"', "", page)


@pytest.mark.parametrize("facts", manifest_cases(lambda f: f["expected_class"] in STACK_CLASSES))
def test_budget_picture_shows_the_reserve_and_any_request_against_it(facts, tmp_root):
    pics = pictures_view(sample_report(facts["file"], tmp_root))
    b = pics.budget
    assert b is not None and b.reserve == facts["stack_reserve_requested"]
    assert b.guard is not None and b.guard[1] == b.reserve  # the guard sits at the bottom of the reserve
    if facts["oversized_bytes"]:
        assert b.request is not None and b.request.bytes == facts["oversized_bytes"]
        assert _short(b.request.function) == facts["oversized_function"]
        # drawn to scale: the request bar is as many times the reserve band as the bytes say
        svg = svgs(render_html(sample_report(facts["file"], tmp_root)))["budget"]
        band, asked = part(svg, "reserve"), part(svg, "request")
        ratio = float(asked.get("width")) / float(band.get("width"))
        assert ratio == pytest.approx(facts["oversized_bytes"] / facts["stack_reserve_requested"], rel=0.02)
        assert "4.0x the whole reserve" in " ".join(texts(svg)) or facts["oversized_bytes"] < 2 * b.reserve
    else:
        assert b.request is None
        assert b.used > 0.95 * b.reserve  # a recursion that overflowed filled its stack


@pytest.mark.parametrize("facts", manifest_cases(lambda f: bool(f["cycle_functions"])))
def test_cycle_picture_has_the_members_in_call_order_with_their_bytes(facts, tmp_root):
    pics = pictures_view(sample_report(facts["file"], tmp_root))
    c = pics.cycles[0]
    assert [_short(m.function) for m in c.members] == facts["cycle_functions_call_order"]
    assert c.repetitions == facts["cycle_repetitions"]
    assert c.per_repetition == facts["cycle_bytes_per_repetition"]
    for m in c.members:
        assert m.bytes == facts["frame_bytes_by_function"][m.function]
    svg = svgs(render_html(sample_report(facts["file"], tmp_root)))["cycle"]
    drawn = texts(svg)
    assert f"x {facts['cycle_repetitions']:,}" in drawn
    assert f"{facts['cycle_bytes_per_repetition']} B per repetition" in drawn
    assert [t for t in drawn if t.endswith(" B") and t[:-2].isdigit()] == [f"{m.bytes} B" for m in c.members]


@pytest.mark.parametrize("facts", manifest_cases(lambda f: bool(f["cycle_functions"])))
def test_bytes_by_function_puts_the_recursion_on_top(facts, tmp_root):
    r = sample_report(facts["file"], tmp_root)
    bars = stack_by_function(r).bars
    members = {f"opkernels.dll!{n}" for n in facts["cycle_functions"]}
    top = bars[: len(members)]
    assert {b.name for b in top} == members and all(b.kind == RECURSION for b in top)
    crash = next(t for t in r.threads if t.is_crashing)
    assert sum(b.bytes for b in top) > 0.99 * crash.budget.used
    # each member holds its frame size times the repetitions, give or take one frame (a
    # partial repetition below the cycle, a frame 0 that faulted in its prologue)
    for b in top:
        size = facts["frame_bytes_by_function"][b.name]
        assert b.bytes == pytest.approx(size * facts["cycle_repetitions"], abs=size)


@pytest.mark.parametrize("facts", manifest_cases())
def test_trust_strip_counts_every_frame_in_few_runs(facts, tmp_root):
    strip = pictures_view(sample_report(facts["file"], tmp_root)).trust
    assert strip.frames == facts["total_frames"]
    assert sum(r.frames for r in strip.runs) == facts["total_frames"]
    # the samples unwind wholly from unwind data below the context frame: two runs,
    # whatever the depth (a million frames draw as two rectangles)
    assert [r.trust for r in strip.runs][0] == "context" and len(strip.runs) <= 3
    assert len(rects(svgs(render_html(sample_report(facts["file"], tmp_root)))["trust"], "#0072B2")) <= 3


# --------------------------------------------------------------------------- edges


def _mixed_thread(count: int = 1000, kept_head: int = 150, kept_tail: int = 50, **more):
    """A deep stack the report kept the head and tail of, found partly by scanning."""
    head = [frame(i, trust="unwind_info" if i % 7 else "scan") for i in range(kept_head)]
    tail = [frame(i, trust="scan") for i in range(count - kept_tail, count)]
    return thread(1, head + tail, crashing=True, frame_count=count, trust={"unwind_info": 600, "scan": 400}, **more)


def test_frames_not_kept_become_one_run_with_their_counts():
    t = _mixed_thread()
    runs = trust_runs(t)
    gap = [r for r in runs if r.first <= 500 <= r.last]
    assert len(gap) == 1 and gap[0].trust == MIXED and gap[0].frames == 800
    kept_scan = sum(1 for f in t.frames if f.trust == "scan")
    assert f"scan {400 - kept_scan:,}" in gap[0].label
    assert sum(r.frames for r in runs) == 1000


def test_a_stack_that_alternates_endlessly_is_cut_to_max_runs_and_still_counts_every_frame():
    frames = tuple(frame(i, trust=("unwind_info", "scan")[i % 2]) for i in range(400))
    t = thread(1, frames, crashing=True, trust={"unwind_info": 200, "scan": 200})
    runs = trust_runs(t)
    assert len(runs) == MAX_RUNS + 1 and runs[-1].trust == MIXED
    assert sum(r.frames for r in runs) == 400
    svg = trust_svg(trust_strip(report([t])))
    assert svg.count("<rect") < MAX_RUNS + 20


def test_frames_not_kept_outside_a_cycle_are_one_bar_sized_from_the_stack_pointers():
    t = _mixed_thread(budget=budget(used=1000 * 0x40, reserve=1024 * 0x40))
    r = report([t], kind="stack_overflow")
    bars = stack_by_function(r).bars
    (gap,) = [b for b in bars if b.kind == NOT_KEPT]
    assert gap.bytes == 800 * 0x40 and gap.name == "800 frames not kept in the report"


def test_hostile_names_are_escaped_in_every_picture():
    evil = 'm.dll!<script>alert(1)</script>&"'
    frames = tuple(frame(i, name=evil + "+0x1") for i in range(30))
    cyc = Cycle((evil,), 1, 30, 0x40, 0, 29, 30 * 0x40, stack_share=0.9)
    t = thread(1, frames, crashing=True, cycles=(cyc,), budget=budget(used=31 * 0x40, reserve=32 * 0x40))
    page = render_html(report([t], kind="recursion"))
    assert "<script>" not in page
    drawn = svgs(page)
    assert {"cycle", "by-function", "trust"} <= set(drawn)  # each parsed as XML
    assert any(evil in s for s in texts(drawn["cycle"]))


def test_labels_are_cut_to_their_room_counting_wide_characters_as_wide():
    assert fit("m.dll!short", 12, 200) == "m.dll!short"
    cut = fit("m.dll!" + "n" * 3000, 12, 200)
    assert cut.endswith("\u2026") and text_width(cut, 12) <= 200
    wide = "\u6df1\u5ea6\u5b66\u7fd2" * 50  # CJK: a whole em each, not 0.6
    assert text_width(wide, 12) >= 1.6 * text_width("n" * len(wide), 12)
    assert text_width(fit(wide, 12, 200), 12) <= 200


def test_budget_picture_draws_a_request_far_beyond_the_reserve_to_scale():
    from dumpkit.report.view.pictures import BudgetPicture, StackRequest

    p = BudgetPicture(
        tid=1,
        reserve=MiB,
        reserve_estimated=False,
        used=600,
        committed=None,
        guard=(MiB - 8192, MiB),
        guard_estimated=True,
        request=StackRequest("m.dll!f", 100 * MiB, "m.dll!f asked for 100 MiB more", "100.0x the whole reserve"),
        used_label="used 600 B (<1%)",
        reserve_label="1 MiB reserved",
        guard_label="guard region",
        caption="c",
    )
    svg = budget_svg(p)
    widths = [float(w) for w in re.findall(r'<rect x="[\d.]+" y="[\d.]+" width="([\d.]+)"', svg)]
    assert max(widths) <= WIDTH
    assert "1 MiB reserved" in svg and "100.0x the whole reserve" in svg


def test_a_budget_read_from_the_teb_draws_the_committed_part_and_the_guard_page_below_it():
    from dumpkit.analysis.model import StackBudget
    from dumpkit.report.view.pictures import budget_picture

    base = 0x2000_0000
    b = StackBudget(1, base, base - 0x3000, base - MiB, MiB, 0x2F00, "teb", guard_hit=True)
    t = thread(1, tuple(frame(i) for i in range(4)), crashing=True, budget=b)
    p = budget_picture(report([t], kind="stack_overflow"))
    assert p.committed == 0x3000 and p.guard == (0x3000, 0x4000) and not p.guard_estimated
    assert p.guard_label == "guard page (the fault hit it)"
    svg = svgs(render_html(report([t], kind="stack_overflow")))["budget"]
    guard, band = part(svg, "guard"), part(svg, "reserve")
    # the guard page starts where the committed stack ends: 12 KiB into the 1 MiB band
    assert float(guard.get("x")) - float(band.get("x")) == pytest.approx(float(band.get("width")) * 0x3000 / MiB, abs=1)
