"""`dumpkit stack` streamed (issue #16 item 6, #20 item 2): the JSON is the document
json_report writes, the `kf` rows are the rich table's, recursion is folded in text unless
--full, and the million-frame sample completes with every frame in the JSON."""

from __future__ import annotations

import io
import json
import re
from dataclasses import replace

import pytest
from rich.console import Console

from dumpkit.analysis.model import Stacks
from dumpkit.engine import Options, frame_record, stacks
from dumpkit.report.json_report import render_json
from dumpkit.report.stream import walk_support, write_kf_table, write_stacks_json
from dumpkit.report.text import stack_table as rich_table
from dumpkit.report.view.stacks import KF, pointer_digits, stack_table
from dumpkit.sources.minidump import open_dump
from tests.support.samples import SAMPLE_BIN, real_dump, run_cli, sample_facts, sample_path


def _walked(name: str):
    target = open_dump(str(sample_path(name)))
    return stacks(target, Options(image_paths=[str(SAMPLE_BIN)]), list(target.threads), problems=target.soft_errors)


def _whole(doc: Stacks, frames, supports) -> Stacks:
    """The document as `dumpkit stack` built it before streaming: every frame a record."""
    threads = tuple(
        replace(t, frames=tuple(frame_record(f, support) for f in walked), elided_frames=0)
        for t, walked, support in zip(doc.threads, frames, supports)
    )
    return replace(doc, threads=threads)


def test_streamed_json_is_the_document_json_dumps_writes():
    for name in ("recursion_cycle3.dmp", "fastfail_abort.dmp"):
        doc, frames, supports = _walked(name)
        out = io.StringIO()
        write_stacks_json(doc, frames, out, supports=supports)
        streamed = json.loads(out.getvalue())
        assert streamed == json.loads(render_json(_whole(doc, frames, supports), indent=1))
        assert [len(t["frames"]) for t in streamed["threads"]] == [len(w) for w in frames]


# Rows of a thread compared: rich lays out the 63,591 of the CPython sample's recursion in
# 75 s, and rows after the first few thousand are more of the same cycle
ROWS = 3000


@pytest.mark.parametrize(
    "dump",
    [
        "fastfail_abort.dmp",
        "breakpad/ascii_read_av.dmp",
        # the full suite's, not the fast tier's: seconds even for ROWS of its 63,591 frames
        pytest.param("python/thread_stack_size.dmp.xz", marks=pytest.mark.slow),
    ],
)
def test_streamed_kf_rows_are_the_rich_tables_rows(dump, plain):
    """Every column as the rich table laid it out: widths, alignment, hex Memory of the
    frame above, row 00 blank; 16-digit (x64 sample) and 8-digit (real x86 dump) pointers;
    a scanned frame's support beside its trust, as `analyze` writes it (the CPython sample
    without python38.dll: its recursion is found by scanning)."""
    if dump.startswith("python/"):
        path = plain(sample_path(dump))
    else:
        path = sample_path(dump) if "/" not in dump else real_dump(dump)
    target = open_dump(str(path))
    doc, frames, supports = stacks(
        target, Options(image_paths=[str(SAMPLE_BIN)]), list(target.threads), problems=target.soft_errors
    )
    frames = [walked[:ROWS] for walked in frames]
    digits = pointer_digits(doc.system)
    confirmed = 0
    for t, walked, support in zip(_whole(doc, frames, supports).threads, frames, supports):
        buf = io.StringIO()
        Console(file=buf, width=400, highlight=False, soft_wrap=False).print(
            rich_table(stack_table(replace(t, possible_frames=None), KF, digits, fold_cycles=False))
        )
        out = io.StringIO()
        write_kf_table(walked, (), digits, out, walk_support(support))  # the possible frames are a table of their own
        assert out.getvalue() == buf.getvalue()
        confirmed += out.getvalue().count("scan, recursion")
    assert confirmed or not dump.startswith("python/")


@pytest.mark.slow
def test_stack_text_folds_the_cycle_unless_full():
    facts = sample_facts("recursion_cycle3.dmp")
    dump = sample_path("recursion_cycle3.dmp")
    folded = run_cli("stack", dump, "--image-path", SAMPLE_BIN)
    assert folded.returncode == 0, folded.stderr
    more = facts["cycle_repetitions"] - 1
    assert f"the cycle above repeats {more:,} more times" in folded.stdout
    rows = re.findall(r"^\s*[0-9a-f]{2,}\s", folded.stdout, re.M)
    assert len(rows) < 20  # one repetition, the fold line, the entry path
    full = run_cli("stack", dump, "--full", "--image-path", SAMPLE_BIN)
    assert "cycle above" not in full.stdout
    assert len(re.findall(r"^\s*[0-9a-f]{2,}\s+[0-9a-f]*\s+[0-9a-f]{16}\s", full.stdout, re.M)) == facts["total_frames"]


@pytest.mark.slow
def test_million_frame_stack_text_completes_folded(plain):
    facts = sample_facts("deep_recursion_1m.dmp.xz")
    dump = plain(sample_path("deep_recursion_1m.dmp.xz"))
    r = run_cli("stack", dump, "--image-path", SAMPLE_BIN, timeout=120)
    assert r.returncode == 0, r.stderr
    more = facts["cycle_repetitions"] - 1
    assert f"the cycle above repeats {more:,} more times" in r.stdout
    assert f"{facts['total_frames']:,} frames" in r.stdout
    assert len(r.stdout.splitlines()) < 40


@pytest.mark.slow
def test_million_frame_stack_json_has_every_frame(plain):
    facts = sample_facts("deep_recursion_1m.dmp.xz")
    dump = plain(sample_path("deep_recursion_1m.dmp.xz"))
    r = run_cli("stack", dump, "--json", "--image-path", SAMPLE_BIN, timeout=120)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    (thread,) = doc["threads"]
    assert thread["tid"] == facts["crash_thread_tid"] and thread["elided_frames"] == 0
    assert len(thread["frames"]) == thread["frame_count"] == facts["total_frames"]
    assert [f["index"] for f in thread["frames"][:3]] == [0, 1, 2]
    assert thread["frames"][1]["symbol"].startswith("opkernels.dll!" + facts["fault_function"])


def test_unfolded_rows_of_a_bulk_walked_recursion_are_the_per_frame_rows():
    """`stack --full` writes a bulk-walked recursion from per-member templates (#34 item 3):
    the text must be what one row per Frame writes, row for row."""
    from dumpkit.unwind.bulk import Frames, Run

    doc, frames, _ = _walked("recursion_cycle3.dmp")
    digits = pointer_digits(doc.system)
    bulk = [w for w in frames if isinstance(w, Frames) and any(isinstance(p, Run) for p in w.parts)]
    assert bulk, "the sample's recursion is expected to be walked in bulk"
    for walked in bulk:
        templated, per_frame = io.StringIO(), io.StringIO()
        write_kf_table(walked, (), digits, templated)
        write_kf_table(list(walked), (), digits, per_frame)
        assert templated.getvalue() == per_frame.getvalue()
        assert templated.getvalue().count("\n") == len(walked) + 1


@pytest.mark.slow
def test_million_frame_stack_text_full_has_every_row(plain):
    facts = sample_facts("deep_recursion_1m.dmp.xz")
    dump = plain(sample_path("deep_recursion_1m.dmp.xz"))
    r = run_cli("stack", dump, "--full", "--image-path", SAMPLE_BIN, timeout=120)
    assert r.returncode == 0, r.stderr
    rows = r.stdout.splitlines()[2 : 2 + facts["total_frames"]]
    numbers = [int(line.split(None, 1)[0], 16) for line in rows]
    assert numbers == list(range(facts["total_frames"]))
    assert "cycle above" not in r.stdout
