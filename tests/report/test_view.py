"""The view decides what every format shows; built here from plain model objects, no dump."""

from __future__ import annotations

import dataclasses

from dumpkit.analysis.model import CudaComponent, Environment, FrameSize
from dumpkit.report.view import DOCUMENT, KF, LITERAL, REPORT, Fold, FrameRow, plain, report_view, stacks_view
from dumpkit.report.view.stacks import stack_table
from tests.support.builders import budget, crash, cycle, frame, frames, report, system, thread


def _rows(table):
    return [r.text if isinstance(r, Fold) else r.call_site for r in table.rows]


def test_a_cycle_is_shown_once_and_its_repetitions_folded_into_one_row():
    stack = [frame(i, "m.dll!a" if i % 2 == 0 else "m.dll!b") for i in range(40)] + [frame(40, "m.dll!main")]
    t = thread(1, stack, crashing=True, cycles=[cycle(["m.dll!a", "m.dll!b"], first=0, repetitions=20)])
    assert _rows(stack_table(t, REPORT)) == [
        "m.dll!a",
        "m.dll!b",
        "... 38 more frames: the cycle above repeats 19 more times (2.5 KiB in all) ...",
        "m.dll!main",
    ]
    # `dumpkit stack` shows every frame.
    assert len(stack_table(t, KF, fold_cycles=False).rows) == 41


def test_frames_the_report_did_not_keep_are_marked_where_they_were_left_out():
    kept = frames(3) + frames(2, start=997)
    t = thread(1, kept, crashing=True, frame_count=999)
    rows = stack_table(t, REPORT).rows
    assert [r.text for r in rows if isinstance(r, Fold)] == ["... 994 frames not kept in the report ..."]
    assert isinstance(rows[3], Fold) and [r.number for r in rows if isinstance(r, FrameRow)][-2:] == ["997", "998"]


def test_max_rows_counts_frames_and_says_the_table_was_cut():
    t = thread(1, frames(10), crashing=True)
    table = stack_table(t, REPORT, max_rows=4)
    assert [r.number for r in table.rows] == ["0", "1", "2", "3"] and table.cut
    assert not stack_table(t, REPORT, max_rows=10).cut


def test_one_cell_convention_for_reports_and_kf_where_asked_for():
    """Every format of `analyze` numbers frames in decimal and gives each frame's own size
    in decimal bytes, as its header says; kf (`dumpkit stack`, `!tfstack`) stays WinDbg's."""
    stack = [dataclasses.replace(f, size=0x130 + f.index + (4096 if f.index == 11 else 0)) for f in frames(12)]
    t = thread(1, stack, crashing=True)
    report_table, doc_table, kf_table = (stack_table(t, c) for c in (REPORT, DOCUMENT, KF))
    report_row, doc_row, kf_row = (x.rows[11] for x in (report_table, doc_table, kf_table))
    assert (report_row.number, report_row.memory) == ("11", "4,411")  # own size, decimal
    assert doc_row == report_row and doc_table.headers == report_table.headers
    assert report_table.headers.size == "Frame size (B)"
    assert (kf_row.number, kf_row.memory) == ("0b", "13a")  # kf: frame N-1's size on row N
    assert kf_table.headers.size == "Memory"
    assert stack_table(t, KF).rows[0].memory == ""


def test_pointers_are_8_digits_on_x86_and_16_on_x64():
    stack = [dataclasses.replace(f, ip=0x401000, sp=0x19FF00) for f in frames(1)]
    for arch, sp in (("x86", "0019ff00"), ("AMD64", "000000000019ff00")):
        view = report_view(report([thread(1, stack, crashing=True)], system_summary=system(arch=arch)))
        assert view.crashing is not None and view.crashing.stack is not None
        row = view.crashing.stack.rows[0]
        assert isinstance(row, FrameRow) and row.child_sp == sp and view.pointer_digits == len(sp)


def test_identical_stacks_make_one_group_the_crashing_thread_apart():
    same = frames(2)
    threads = [
        thread(1, same, crashing=True, same=(2,)),
        thread(2, same, same=(1, 3, 4), name="tf_inter_op_0"),
        thread(3, same, same=(1, 2, 4)),
        thread(4, same, same=(1, 2, 3)),
        thread(5, frames(3)),
    ]
    others = report_view(report(threads)).threads
    assert others.title == "Other threads"
    assert [(g.lead.tid, [x.tid for x in g.same]) for g in others.groups] == [(2, [3, 4]), (5, [])]
    assert (
        plain(others.groups[0].summary)
        == '2 "tf_inter_op_0": 2 frames, top m.dll!f0+0x10 (+2 with the same stack: 3, 4)'
    )
    assert others.count == "4; 2 distinct stacks"


def test_threads_shown_in_full_leave_the_groups():
    same = frames(2)
    threads = [thread(1, frames(1), crashing=True), thread(2, same, same=(3,)), thread(3, same, same=(2,))]
    view = report_view(report(threads), KF, full_threads=[3])
    assert [t.tid for t in view.threads.full] == [3] and view.threads.full[0].stack is not None
    assert [(g.lead.tid, g.same) for g in view.threads.groups] == [(2, ())]


def test_the_oversized_legend_only_when_a_frame_carries_the_mark():
    small = FrameSize(0, "m.dll!f0", 304)
    big = FrameSize(1, "m.dll!big", 1 << 20, requested=(1 << 20) - 8, not_yet_allocated=True, oversized=True)
    t = [thread(1, frames(2), crashing=True)]
    plain_sizes = report_view(report(t, frame_sizes=[small])).frame_sizes
    assert plain_sizes is not None and plain_sizes.legend is None
    marked = report_view(report(t, frame_sizes=[big, small])).frame_sizes
    assert marked is not None
    assert marked.legend == "oversized: the frame, or what its prologue asks for, is at least 64 KiB (--threshold)"
    row = marked.rows[0]
    assert (row.size, row.asks, row.oversized) == ("1,048,576", "1,048,568", True)
    assert row.asks_noted == "1,048,568 (died in the stack probe)"
    assert row.how.endswith("(died in the probe before the frame existed)")


def test_frame_sizes_explain_stack_overflows_and_elsewhere_only_an_oversized_frame():
    t = [thread(1, frames(2), crashing=True)]
    small, big = FrameSize(0, "m.dll!f0", 304), FrameSize(0, "m.dll!f0", 1 << 20, oversized=True)
    assert report_view(report(t, kind="recursion", frame_sizes=[small])).frame_sizes is not None
    assert report_view(report(t, kind="access_violation", frame_sizes=[small])).frame_sizes is None
    assert report_view(report(t, kind="access_violation", frame_sizes=[big])).frame_sizes is not None


def test_recursion_summary_entry_path_and_healthy_threads_short_repeats():
    entry = [f"m.dll!caller{i}" for i in range(8)]
    crashing = thread(1, frames(2), crashing=True, cycles=[cycle(["m.dll!a", "m.dll!b"], 0, 20, entry)])
    short = thread(2, frames(2), cycles=[cycle(["m.dll!c"], 0, 9)])
    long = thread(3, frames(2), cycles=[cycle(["m.dll!d"], 0, 10)])
    recs = report_view(report([crashing, short, long])).recursions
    assert [r.tid for r in recs] == [1, 3]
    first = recs[0]
    assert first.summary == (
        "cycle of 2 functions in call order, 20 repetitions x 128 bytes = 2.5 KiB (50% of the used stack), frames 0-39"
    )
    assert first.entry_path == tuple(entry[:6]) and first.entry_more == 2


def test_facts_rows_and_their_terminal_wording():
    env = Environment(
        cpu_features={"AVX": True, "AVX512F": None},
        cpu_features_source="cpuid",
        tensorflow=(r"C:\tf\_pywrap_tensorflow_internal.pyd",),
        cuda=(CudaComponent("cuDNN", "cudnn64_8.dll", "8.1.0"),),
        notes=("ran under Wine",),
    )
    r = report(
        [thread(1, frames(1), crashing=True, budget=budget(used=None, reserve=None))],
        crash_info=crash(code=0xC0000409, name="STATUS_STACK_BUFFER_OVERRUN", raised_by="m.dll!abort"),
        system_summary=system(wine="wine-8.0"),
        environment=env,
    )
    facts = report_view(r).facts
    rows = {f.label: f for f in facts.rows}
    assert [f.label for f in facts.rows] == ["Exception", "Meaning", "OS", "CPU", "CPU features", "TensorFlow", "cuDNN"]
    assert (rows["Exception"].terminal_label, rows["OS"].terminal_label, rows["Meaning"].terminal_label) == (
        "Crash",
        "System",
        None,
    )
    assert plain(rows["OS"].value) == "AMD64, Windows 10.0.19045 (19045), under wine-8.0"
    assert plain(rows["CPU features"].value) == "AVX yes, AVX512F unknown"
    assert plain(rows["CPU features"].terminal_value or ()) == "AVX yes, AVX512F ? (from cpuid)"
    assert plain(rows["TensorFlow"].value) == r"version unknown (C:\tf\_pywrap_tensorflow_internal.pyd)"
    assert [s.kind for s in rows["cuDNN"].value if s.text == "cudnn64_8.dll"] == [LITERAL]
    assert [(m.text, m.note) for m in facts.remarks] == [("ran under Wine", True)]
    assert facts.raised_by == "m.dll!abort"
    assert report_view(r).budget == "used an unknown amount (reserve not known), from teb"


def test_stack_command_view_lists_every_frame_and_where_images_came_from():
    from dumpkit.analysis.model import ModuleRecord, Stacks

    mods = (
        ModuleRecord("b.dll", "b.dll", 0, 0, 0, None, None, None, "image-path: /x/b.dll"),
        ModuleRecord("a.dll", "a.dll", 0, 0, 0, None, None, None, "dump memory"),
        ModuleRecord("c.dll", "c.dll", 0, 0, 0, None, None, None, None),
    )
    t = thread(1, frames(300), crashing=True, cycles=[cycle(["m.dll!f0"], 0, 300)])
    doc = Stacks(1, "0.test", report([]).dump, system(arch="x86"), (t,), mods, ())
    view = stacks_view(doc)
    table = view.threads[0].stack
    assert table is not None and len(table.rows) == 300 and not table.cut  # never folded
    assert [r.number for r in table.rows][254:258] == ["fe", "ff", "100", "101"]
    assert [(m.name, m.source) for m in view.images] == [("a.dll", "dump memory"), ("b.dll", "image-path: /x/b.dll")]


def test_one_distinct_stack_is_singular():
    same = frames(2)
    threads = [thread(1, frames(1), crashing=True), thread(2, same, same=(3,)), thread(3, same, same=(2,))]
    assert report_view(report(threads)).threads.count == "2; 1 distinct stack"


def test_a_runtime_collision_under_the_facts():
    from dumpkit.analysis.model import CollidingModule, CollisionKind, Confidence, RuntimeCollision

    old = CollidingModule("MSVCP140.dll", r"C:\q\PyQt5\Qt5\bin\MSVCP140.dll", "14.26.28720.3", "PyQt5", "older")
    ext = CollidingModule("_core.pyd", r"C:\q\fastext\_core.pyd", None, None, "linked by MSVC 14.40")
    collision = RuntimeCollision(
        CollisionKind.MSVCP140_MUTEX, Confidence.HIGH, "title", (old, ext), "it crashes", ("one", "two"), ("unknown",)
    )
    r = report([thread(1, frames(1), crashing=True)], environment=Environment(runtime_collisions=(collision,)))
    (view,) = report_view(r).facts.collisions
    assert view.heading == "Runtime collision (high confidence)"
    assert [plain(m) for m in view.modules] == [
        r"MSVCP140.dll 14.26.28720.3 (PyQt5), C:\q\PyQt5\Qt5\bin\MSVCP140.dll: older",
        r"_core.pyd, C:\q\fastext\_core.pyd: linked by MSVC 14.40",  # no version, no package: not shown
    ]
    assert [s.kind for s in view.modules[0] if s.text.startswith("C:")] == [LITERAL]
    assert (view.leads_to, view.ways_out, view.unknown) == ("it crashes", ("one", "two"), ("unknown",))
    assert report_view(report([thread(1, frames(1), crashing=True)])).facts.collisions == ()
