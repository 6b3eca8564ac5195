"""Damaged and hostile dumps (tests/hostile/corpus.py) through the real CLI.

Every case: exit 1 (partial report; soft_errors in the JSON and warnings on stderr) or 2
(exactly one line on stderr naming the file); 0 only where the corpus says why the damage
does not matter. Never a traceback, never more than a few seconds, never more than a few
hundred MB, and the dump file is never modified. Cases run in parallel, once per session.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.hostile.corpus import SAMPLES, build_corpus
from tests.support.measured import MAX_RSS_KB, MAX_SECONDS, run_cli

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (SAMPLES / "null_deref.dmp").exists() or not (SAMPLES / "recursion_cycle3.dmp").exists(),
        reason="sample dumps not present",
    ),
]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    return build_corpus(tmp_path_factory.mktemp("hostile"))


@pytest.fixture(scope="session")
def results(corpus):
    """Every case analysed once (JSON to stdout), in parallel; dump made read-only first."""

    def one(case):
        os.chmod(case.path, 0o444)
        before = _sha(case.path)
        args = ["analyze", case.path, "--format", "json"]
        for d in case.image_paths:
            args += ["--image-path", d]
        r = run_cli(args)
        return case.name, (r, before == _sha(case.path))

    workers = max(2, min(8, os.cpu_count() or 2))
    with ThreadPoolExecutor(workers) as pool:
        return dict(pool.map(one, corpus))


def test_the_corpus_covers_what_it_should(corpus):
    names = {c.name for c in corpus}
    for must in (
        "bad_signature",
        "bad_version",
        "directory_past_end",
        "stream_count_max",
        "count_max_threads",
        "count_max_modules",
        "count_max_memory_ranges",
        "memory_overlapping",
        "memory_out_of_order",
        "stack_absent",
        "thread_context_zero",
        "exception_context_huge",
        "unwind_chain_loops",
        "stack_self_pointers",
        "stack_same_return_address",
        "hostile_names_null_deref",
        "names_64k",
        "synth_overlaps_agree",
        "synth_overlaps_conflict",
        "synth_overlap_flood",
    ):
        assert must in names
    assert sum(n.startswith("trunc_") for n in names) >= 60
    for c in corpus:
        if 0 in c.expect:
            assert c.why_ok, f"{c.name}: exit 0 allowed without a reason"


def pytest_generate_tests(metafunc):
    if "case_name" in metafunc.fixturenames:
        names = []
        if (SAMPLES / "null_deref.dmp").exists() and (SAMPLES / "recursion_cycle3.dmp").exists():
            with tempfile.TemporaryDirectory(prefix="dumpkit-hostile-ids-") as d:
                names = [c.name for c in build_corpus(Path(d))]
        metafunc.parametrize("case_name", names)


def test_case(case_name, corpus, results):
    case = next(c for c in corpus if c.name == case_name)
    r, unchanged = results[case_name]
    where = f"{case.name}: exit {r.code}, stderr:\n{r.stderr[-2000:]}"
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout, where
    assert r.code in case.expect, where
    assert r.seconds < MAX_SECONDS, f"{case.name} took {r.seconds:.1f} s"
    assert r.max_rss_kb < MAX_RSS_KB, f"{case.name} peaked at {r.max_rss_kb // 1024} MB"
    assert unchanged, f"{case.name}: the dump file changed"
    if r.code == 2:
        lines = r.stderr.splitlines()
        assert len(lines) == 1, where
        assert lines[0].startswith("dumpkit: error: ") and str(case.path) in lines[0], where
        assert r.stdout == ""
    else:
        doc = json.loads(r.stdout)
        if r.code == 1:
            assert doc["soft_errors"], where
            assert "dumpkit: warning: " in r.stderr, where
        else:
            assert not doc["soft_errors"]
        for t in doc["threads"]:
            assert t["stop_reason"], t  # every walk says how it ended


def test_walks_over_hostile_stacks_stay_bounded(results):
    for name in ("stack_self_pointers", "stack_same_return_address", "stack_pointing_down"):
        r, _ = results[name]
        doc = json.loads(r.stdout)
        crash = doc["threads"][0]
        assert crash["is_crashing"]
        # SP strictly increases inside a 1 MiB stack: at most one frame per 8 bytes.
        assert crash["frame_count"] <= (1 << 20) // 8, name


def test_looping_unwind_chain_is_reported_and_walk_falls_back(results, corpus):
    case = next(c for c in corpus if c.name == "unwind_chain_loops")
    assert set(case.notes["patched"]) == {"expand", "visit", "reduce"}
    r, _ = results["unwind_chain_loops"]
    doc = json.loads(r.stdout)
    errs = " | ".join(doc["soft_errors"])
    assert "loops" in errs or "too long" in errs, errs
    src = next(m["image_source"] for m in doc["modules"] if m["name"] == "opkernels.dll")
    assert src.startswith("image-path:") and "images_loop" in src
    assert doc["threads"][0]["frame_count"] >= 1


def test_partial_reports_keep_what_can_be_read(results):
    # A missing module list still leaves threads, the exception and the verdict.
    r, _ = results["entry_past_end_modules"]
    doc = json.loads(r.stdout)
    assert doc["crash"]["code"] == 0xC0000005 and doc["threads"]
    assert any("ModuleList" in e for e in doc["soft_errors"])
    # A thread list claiming 2^32-1 entries still gives the real ones.
    r, _ = results["count_max_threads"]
    doc = json.loads(r.stdout)
    assert len(doc["threads"]) == 5
    # Overlapping memory is named; the exception stays decoded.
    r, _ = results["memory_overlapping"]
    doc = json.loads(r.stdout)
    assert any("overlapping" in e for e in doc["soft_errors"]) and doc["crash"]
    # Overlapping copies that agree are no problem (issue #13); different bytes are one line.
    r, _ = results["synth_overlaps_agree"]
    assert r.code == 0 and json.loads(r.stdout)["soft_errors"] == [], r.stderr
    r, _ = results["synth_overlaps_conflict"]
    doc = json.loads(r.stdout)
    assert [e for e in doc["soft_errors"] if "overlapping" in e] == [
        "memory lists: 1 overlapping range(s) hold different bytes for addresses another range already gave "
        "(the first at 0x7ff000100800); the lowest-starting range's bytes are used"
    ]
    assert doc["crash"]["code"] == 0xC0000005 and doc["threads"][0]["frame_count"] >= 1
    r, _ = results["synth_overlap_flood"]
    assert any("not compared" in e for e in json.loads(r.stdout)["soft_errors"])
    # The crashing thread without its stack memory: the fault itself is still there.
    r, _ = results["stack_absent"]
    doc = json.loads(r.stdout)
    assert doc["crash"]["code"] == 0xC0000005 and doc["threads"][0]["frame_count"] >= 1


def test_64k_names_are_bounded_in_every_format(corpus, tmp_path):
    case = next(c for c in corpus if c.name == "names_64k")
    for fmt in ("text", "markdown", "html"):
        r = run_cli(["analyze", case.path, "--format", fmt])
        assert r.code == 1, r.stderr
        assert "A" * 600 not in r.stdout, fmt  # clipped for display
        assert len(r.stdout) < 200_000, fmt


# ------------------------------------------------------------------- limits exist
def test_limits_are_parameters_with_safe_defaults():
    from dumpkit import pe
    from dumpkit.engine import Options
    from dumpkit.sources import memory, minidump_streams
    from dumpkit.problems import Problems
    from dumpkit.unwind import walk

    o = Options()
    assert 0 < o.max_frames <= 10_000_000 and 0 < o.other_thread_max_frames <= o.max_frames
    assert 0 < o.scan_words <= 8192 and 0 < o.keep_frames <= 10_000  # a scan reads at most 64 KiB
    assert 0 < minidump_streams.MAX_RECORDS <= 1 << 24
    assert 0 < minidump_streams.MAX_STRING_BYTES <= 1 << 20
    assert 0 < memory.OVERLAP_COMPARE_BUDGET <= 1 << 30
    assert 0 < walk.MAX_STACK_BYTES <= 1 << 30
    assert 0 < pe.MAX_CHAIN <= 64 and 0 < pe.MAX_INDIRECT <= 16 and 0 < pe.MAX_SECTIONS
    assert 0 < walk.DEFAULT_SCAN_WORDS <= 8192
    assert 0 < Problems().limit <= 1000


# ------------------------------------------------------------------- dump never written
def test_dump_is_opened_read_only(tmp_path):
    dump = tmp_path / "ro.dmp"
    dump.write_bytes((SAMPLES / "null_deref.dmp").read_bytes())
    os.chmod(dump, 0o444)
    before = _sha(dump)
    mtime = dump.stat().st_mtime_ns
    from dumpkit.sources.minidump import open_dump

    with open_dump(str(dump)) as t:  # would raise PermissionError if it asked for write access
        assert t.threads
    r = run_cli(["analyze", dump, "--image-path", SAMPLES / "bin", "--format", "json", "--output", dump])
    assert r.code == 2 and "refusing to overwrite" in r.stderr and len(r.stderr.splitlines()) == 1
    assert _sha(dump) == before and dump.stat().st_mtime_ns == mtime


# ------------------------------------------------------------------- atomic output
@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root ignores directory permissions")
def test_output_into_read_only_dir_is_one_line_error(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, stat.S_IRUSR | stat.S_IXUSR)
    try:
        r = run_cli(["analyze", SAMPLES / "null_deref.dmp", "--output", ro / "report.md", "--format", "markdown"])
        assert r.code == 2, r.stderr
        lines = r.stderr.splitlines()
        assert len(lines) == 1 and "report.md" in lines[0] and "Traceback" not in r.stderr
        assert os.listdir(ro) == []
    finally:
        os.chmod(ro, stat.S_IRWXU)


def test_output_into_unwritable_place_is_one_line_error(tmp_path):
    # Works as root too: the "directory" is a regular file.
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = run_cli(["analyze", SAMPLES / "null_deref.dmp", "--output", blocker / "report.json", "--format", "json"])
    assert r.code == 2, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and "report.json" in lines[0] and "Traceback" not in r.stderr


def test_existing_output_is_replaced_whole(tmp_path):
    out = tmp_path / "report.json"
    out.write_text("OLD" * 200_000)  # longer than any report: a partial overwrite would show
    link = tmp_path / "hardlink"
    os.link(out, link)
    r = run_cli(
        ["analyze", SAMPLES / "null_deref.dmp", "--image-path", SAMPLES / "bin", "--format", "json", "--output", out]
    )
    assert r.code == 0, r.stderr
    text = out.read_text()
    assert "OLD" not in text and json.loads(text)["crash"]["code"] == 0xC0000005
    assert link.read_text().startswith("OLD")  # a new file was renamed in, not written through
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".dumpkit-")] == []
