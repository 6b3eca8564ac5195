"""`dumpkit triage` on the sample dumps: what groups with what, failures listed, exit codes,
the cache, the JSON schema and the HTML page with its per-dump reports."""

from __future__ import annotations

from dumpkit.analysis.signature import RULES

import importlib.metadata
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dumpkit.analysis.model import Confidence, VerdictKind
from dumpkit.cli import app
from dumpkit.triage.analyse import Job
from dumpkit.triage.cache import Cache
from dumpkit.triage.collect import collect
from dumpkit.triage.group import group
from dumpkit.triage.record import ANALYSED, DumpRecord, Status
from dumpkit.triage.run import run
from dumpkit.report.triage import render_triage_text
from dumpkit.report.view.triage import triage_document, triage_view
from tests.support.samples import SAMPLE_BIN, SAMPLES, sample_path
from tests.support.synth_dump import memory_hungry_dump

JOB = Job(image_paths=(str(SAMPLE_BIN),))
RECURSION = "STACK_OVERFLOW | recursion(opkernels.dll!visit) | tfhost.exe!run_scenario | tfhost.exe!op_worker_main"


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """A crash folder as users have them: one crash written by dbghelp, normalised, in
    process (xz'd, another stack depth) and copied under other names, two other crashes,
    and a file that is no dump."""
    root = tmp_path_factory.mktemp("crashes")
    (root / "a" / "b").mkdir(parents=True)
    shutil.copy(sample_path("recursion_one.dmp"), root / "a" / "run1.dmp")
    shutil.copy(sample_path("recursion_one.dmp"), root / "a" / "b" / "run2.DMP")
    shutil.copy(sample_path("recursion_one.normalized.dmp"), root / "normalized.dmp")
    shutil.copy(sample_path("recursion_one.selfdump.dmp.xz"), root / "selfdump.dmp.xz")
    shutil.copy(sample_path("null_deref.dmp"), root / "null.dmp")
    shutil.copy(sample_path("fastfail_gs.dmp"), root / "gs.dmp")
    (root / "broken.dmp").write_bytes(b"MDMP" + b"\0" * 10)
    (root / "notes.txt").write_text("not a dump")
    return root


@pytest.fixture(scope="module")
def records(folder):
    paths, missing = collect([str(folder)])
    assert not missing
    return sorted(run(paths, JOB, jobs=1), key=lambda r: r.path)


def test_folders_are_searched_recursively_for_dump_names_only(folder):
    paths, missing = collect([str(folder), str(folder / "nothing-*.dmp"), str(folder / "absent.dmp")])
    names = sorted(Path(p).name for p in paths)
    assert names == ["broken.dmp", "gs.dmp", "normalized.dmp", "null.dmp", "run1.dmp", "run2.DMP", "selfdump.dmp.xz"]
    assert missing == [str(folder / "nothing-*.dmp"), str(folder / "absent.dmp")]
    globbed, _ = collect([str(folder / "**" / "run*")])
    assert sorted(Path(p).name for p in globbed) == ["run1.dmp", "run2.DMP"]


def test_one_crash_is_one_group_whatever_the_name_writer_and_depth(records):
    groups = group(records)
    by_sig = {g.signature: g for g in groups}
    recursion = by_sig[RECURSION]
    members = sorted(Path(records[i].path).name for i in recursion.members)
    assert members == ["normalized.dmp", "run1.dmp", "run2.DMP", "selfdump.dmp.xz"]
    assert groups[0] is recursion and recursion.verdicts == ("recursion",)
    assert recursion.modules == ("opkernels.dll", "tfhost.exe")
    assert recursion.first_seen is not None and recursion.first_seen <= recursion.last_seen


def test_different_causes_never_share_a_group(records):
    groups = group(records)
    assert len(groups) == 3
    for g in groups:
        assert len(g.verdicts) == 1, g
    kinds = {g.kind for g in groups}
    assert kinds == {"STACK_OVERFLOW", "ACCESS_VIOLATION", "FAST_FAIL_STACK_COOKIE_CHECK_FAILURE"}


def test_a_dump_that_cannot_be_read_is_listed_with_its_error(records):
    broken = [r for r in records if not r.ok]
    assert [Path(r.path).name for r in broken] == ["broken.dmp"]
    assert broken[0].status == "error" and "too small for a minidump header" in broken[0].error
    assert all(r.ok for r in records if Path(r.path).name != "broken.dmp")


def test_a_dump_past_its_time_limit_is_listed_as_timed_out():
    record = next(run([str(sample_path("recursion_one.dmp"))], Job(image_paths=(str(SAMPLE_BIN),), timeout=0.01)))
    assert record.status == "timeout" and "longer than 0.01 s" in record.error


def test_the_cache_answers_for_dumps_already_analysed(tmp_path):
    dump = tmp_path / "one.dmp"
    shutil.copy(sample_path("null_deref.dmp"), dump)
    cache = Cache(str(tmp_path / "cache"))
    first = list(run([str(dump)], JOB, cache=cache))
    assert [r.cached for r in first] == [False]
    # the same bytes under another name: the content hash finds them
    copy = tmp_path / "copy.dmp"
    shutil.copy(dump, copy)
    second = list(run([str(copy)], JOB, cache=cache))
    assert [r.cached for r in second] == [True]
    assert second[0].path == str(copy) and second[0].signature == first[0].signature
    assert second[0].seconds == first[0].seconds  # the record of the first run, not a new analysis
    # read back from JSON as the model's words, not as their strings
    assert second[0].verdict is first[0].verdict is VerdictKind.ACCESS_VIOLATION
    assert second[0].confidence is first[0].confidence and isinstance(second[0].confidence, Confidence)
    # options that change the answer miss it
    other = Job(image_paths=(str(SAMPLE_BIN),), oversized_threshold=1024)
    assert [r.cached for r in run([str(copy)], other, cache=cache)] == [False]


def test_a_cold_cache_gives_the_first_record_before_every_dump_is_looked_up(tmp_path, monkeypatch):
    """With --cache each dump is hashed and looked up as the work reaches it: the first
    analyses do not wait for the whole folder to be read (a fleet's cold run did), and the
    hits found on the way come out with the analysed records."""
    import dumpkit.triage.run as triage_run

    for k in range(12):
        shutil.copy(sample_path("null_deref.dmp"), tmp_path / f"crash{k:02d}.dmp")
    paths = sorted(str(p) for p in tmp_path.glob("*.dmp"))
    cache = Cache(str(tmp_path / "cache"))
    assert [r.cached for r in run(paths[-1:], JOB, cache=cache)] == [False]  # crash11's bytes: a hit now
    # the others made unique (the header's CheckSum, which no reader checks): misses
    for k, path in enumerate(paths[:-1], 1):
        data = bytearray(Path(path).read_bytes())
        data[16:20] = k.to_bytes(4, "little")
        Path(path).write_bytes(bytes(data))
    hashed = []
    real_hash = triage_run.content_hash
    monkeypatch.setattr(triage_run, "content_hash", lambda path: hashed.append(path) or real_hash(path))
    stream = run(paths, JOB, cache=cache)
    first = next(stream)
    assert not first.cached and first.path == paths[0] and len(hashed) < len(paths)
    rest = list(stream)
    assert sorted(r.path for r in [first] + rest) == paths
    assert [r.cached for r in [first] + rest].count(True) == 1 and len(hashed) == len(paths)


def test_a_cached_record_with_words_not_of_this_version_is_refused():
    good = DumpRecord("a.dmp", 1, "00", ANALYSED, verdict=VerdictKind.RECURSION, confidence=Confidence.HIGH)
    d = json.loads(json.dumps(good.to_dict()))
    assert d["verdict"] == "recursion" and d["confidence"] == "high"
    assert DumpRecord.from_dict(d) == good
    assert DumpRecord.from_dict({**d, "confidence": "certain"}) is None
    assert DumpRecord.from_dict({**d, "verdict": ["recursion"]}) is None
    assert DumpRecord.from_dict({**d, "verdict": None, "confidence": None}) == DumpRecord("a.dmp", 1, "00", ANALYSED)
    assert DumpRecord.from_dict(d).status is Status.ANALYSED  # the status is a word too
    assert DumpRecord.from_dict({**d, "status": "crashed"}) is None


def _cli(*args):
    return CliRunner().invoke(app, ["triage", "--no-progress", "-j", "1", "-i", str(SAMPLE_BIN), *args])


def test_cli_json_has_a_record_per_dump_and_groups_by_index(folder):
    result = _cli(str(folder / "a"), str(folder / "null.dmp"), "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["schema"] == "dumpkit-triage" and doc["schema_version"] == 1 and doc["signature_rules"] == RULES
    assert len(doc["dumps"]) == 3 and doc["interrupted"] is False
    assert [g["count"] for g in doc["groups"]] == [2, 1]
    first = doc["groups"][0]
    assert first["signature"] == RECURSION
    assert {doc["dumps"][i]["path"] for i in first["dumps"]} == {
        str(folder / "a" / "run1.dmp"),
        str(folder / "a" / "b" / "run2.DMP"),
    }
    assert set(doc["dumps"][0]) >= {"path", "sha256", "status", "error", "signature", "verdict", "written", "modules"}


def test_a_bundle_is_triaged_like_a_dump(tmp_path):
    """A .dkb among the inputs is opened by triage itself (a bundle is a source) and
    analysed from the images it carries: the NumPy recursion is named, not an error."""
    bundle = tmp_path / "numpy.dkb"
    shutil.copyfile(SAMPLES / "python" / "numpy_object_recursion.dkb", bundle)
    result = _cli(str(tmp_path), "--format", "json")
    assert result.exit_code == 0, result.output
    (record,) = json.loads(result.stdout)["dumps"]
    assert record["path"] == str(bundle) and record["status"] == "analysed", record
    assert record["verdict"] == "recursion"


@pytest.mark.skipif(
    tuple(int(n) for n in importlib.metadata.version("click").split(".")[:2]) < (8, 2),
    reason="reads stderr apart from stdout, which click's CliRunner does from 8.2 (8.1.8 is the newest on Python 3.8)",
)
def test_cli_exit_codes_say_whether_every_dump_was_analysed(folder, tmp_path):
    bad = _cli(str(folder / "broken.dmp"), str(folder / "null.dmp"))
    assert bad.exit_code == 1
    assert "broken.dmp: error:" in bad.stdout and "1 of 2 dumps not analysed" in bad.stderr
    nothing = _cli(str(tmp_path / "absent"))
    assert nothing.exit_code == 2 and "no dump files found" in nothing.stderr


def test_cli_html_page_links_each_group_to_a_report_written_beside_it(folder, tmp_path):
    out = tmp_path / "site"
    result = _cli(str(folder / "null.dmp"), str(folder / "gs.dmp"), "-o", str(out))
    assert result.exit_code == 0, result.output
    page = (out / "index.html").read_text()
    links = sorted(re.findall(r'href="(reports/[^"]+)"', page))
    assert len(links) == 2
    reports = [(out / link).read_text() for link in links]
    assert all(r.startswith("<!DOCTYPE html>") for r in reports)
    assert sorted("null_deref" in r for r in reports) == [False, True]
    assert sorted("gs_check_fail" in r for r in reports) == [False, True]


@pytest.mark.slow
def test_worker_processes_give_the_records_one_process_gives(folder, records):
    paths, _ = collect([str(folder)])
    parallel = sorted(run(paths, JOB, jobs=2), key=lambda r: r.path)
    strip = lambda rs: [(r.path, r.status, r.signature, r.verdict) for r in rs]  # noqa: E731
    assert strip(parallel) == strip(records)


def test_workers_are_replaced_every_few_dumps_and_the_run_still_ends(tmp_path, monkeypatch):
    """A fleet's run replaces its workers every TASKS_PER_CHILD dumps each. CPython 3.11's
    own replacement (max_tasks_per_child) loses a worker that leaves while a result is on
    its way; near the end of a run both could go and triage waited forever on no workers
    (seen on 2,000 dumps at 32 a worker; at 3 a worker nearly every run hung)."""
    import threading

    import dumpkit.triage.run as triage_run

    monkeypatch.setattr(triage_run, "TASKS_PER_CHILD", 3)
    for k in range(40):
        shutil.copy(sample_path("null_deref.dmp"), tmp_path / f"crash{k:02d}.dmp")
    paths, _ = collect([str(tmp_path)])
    got: list = []
    runner = threading.Thread(target=lambda: got.extend(run(paths, JOB, jobs=2)), daemon=True)
    runner.start()
    runner.join(180)
    assert not runner.is_alive(), f"triage still waiting after {len(got)} of {len(paths)} records"
    assert sorted(r.path for r in got) == sorted(paths)
    assert len({(r.status, r.signature) for r in got}) == 1 and got[0].status == ANALYSED


_LEAKED: list = []


def _pid_and_leak(report) -> str:
    """A per-dump report writer that says which worker wrote it and, for *leak.dmp, keeps
    64 MiB for the rest of the worker's life, as an analysis leaving memory behind would."""
    if os.path.basename(report.dump.path).endswith("leak.dmp"):
        _LEAKED.append(bytearray(64 << 20))
    return f"pid {os.getpid()}"


@pytest.mark.parametrize("growth,replaced", [(16 << 20, True), (1 << 40, False)])
def test_a_worker_whose_memory_grows_is_replaced(tmp_path, monkeypatch, growth, replaced):
    """Workers are replaced when one reports its memory has grown (REPLACE_GROWTH), not
    every few hundred dumps: a new worker starts cold."""
    import dumpkit.triage.run as triage_run
    from dumpkit.triage.memory import private_bytes

    before = private_bytes()
    blob = bytearray(64 << 20)
    after = private_bytes()
    del blob
    if before is None or after is None or after - before < 32 << 20:
        pytest.skip("this platform does not report a process's private memory as it grows")
    monkeypatch.setattr(triage_run, "REPLACE_GROWTH", growth)
    for k in range(24):
        name = "crash12-leak.dmp" if k == 12 else f"crash{k:02d}.dmp"
        shutil.copy(sample_path("null_deref.dmp"), tmp_path / name)
    paths, _ = collect([str(tmp_path)])
    out = tmp_path / "out"
    job = Job(image_paths=(str(SAMPLE_BIN),), report_dir=str(out), report_writer=_pid_and_leak)
    records = list(run(paths, job, jobs=2))
    assert len(records) == 24 and {r.status for r in records} == {ANALYSED}
    reports = [p.read_text() for p in out.rglob("*") if p.is_file()]
    assert len(reports) == 24
    pids = set(reports)
    assert len(pids) > 2 if replaced else len(pids) <= 2, pids


def _die_at_killer(report) -> str:
    """A per-dump report writer that ends its worker process, as a crash in a native
    library or the out-of-memory killer would, on the dump named *killer.dmp."""
    if os.path.basename(report.dump.path).endswith("killer.dmp"):
        os.kill(os.getpid(), signal.SIGKILL) if os.name == "posix" else os._exit(3)
    return "report"


def test_a_worker_that_dies_costs_only_the_dump_it_died_on(tmp_path):
    """Dumps go to the workers in batches; a worker dying mid-batch breaks the pool. The
    dumps the pool held are tried again, each alone, and only the one that kills a worker
    again is listed as failed: the 20 others of its batches are analysed."""
    for k in range(20):
        shutil.copy(sample_path("null_deref.dmp"), tmp_path / f"crash{k:02d}.dmp")
    shutil.copy(sample_path("null_deref.dmp"), tmp_path / "crash02-killer.dmp")  # in the first batch
    paths, _ = collect([str(tmp_path)])
    job = Job(image_paths=(str(SAMPLE_BIN),), report_dir=str(tmp_path / "out"), report_writer=_die_at_killer)
    got = {os.path.basename(r.path): r for r in run(paths, job, jobs=2)}
    assert sorted(got) == sorted(os.path.basename(p) for p in paths)
    assert got.pop("crash02-killer.dmp").error == "the worker process analysing it died"
    assert {r.status for r in got.values()} == {ANALYSED}


@pytest.mark.slow
def test_a_dask_cluster_gives_the_records_one_process_gives(folder, records):
    distributed = pytest.importorskip("distributed")
    paths, _ = collect([str(folder)])
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None) as cluster:
        remote = sorted(run(paths, JOB, scheduler=cluster.scheduler_address), key=lambda r: r.path)
    strip = lambda rs: [(r.path, r.status, r.signature, r.verdict) for r in rs]  # noqa: E731
    assert strip(remote) == strip(records)


@pytest.mark.skipif(not hasattr(signal, "SIGINT") or os.name != "posix", reason="POSIX process groups")
@pytest.mark.slow
def test_ctrl_c_writes_the_dumps_finished_so_far_and_stops_the_workers(tmp_path):
    """Two quick dumps and four that take many seconds each: Ctrl-C once the cache shows a
    finished one leaves a JSON document of the finished dumps, marked interrupted."""
    for name in ("null_deref.dmp", "heap_oob.dmp"):
        shutil.copy(sample_path(name), tmp_path / f"0-{name}")  # analysed first (path order)
    for i in range(4):
        shutil.copy(sample_path("deep_recursion_1m.dmp.xz"), tmp_path / f"deep{i}.dmp.xz")
    out, cache = tmp_path / "out.json", tmp_path / "cache"
    cmd = [sys.executable, "-m", "dumpkit", "triage", str(tmp_path), "-i", str(SAMPLE_BIN), "-j", "2"]
    child = subprocess.Popen(
        cmd + ["--format", "json", "-o", str(out), "--cache", str(cache), "--no-progress"],
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # a background shell ignores it
    )
    deadline = time.monotonic() + 120
    while not list(cache.glob("*/*.json")) and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.1)
    os.killpg(child.pid, signal.SIGINT)
    stopped = time.monotonic()
    _, err = child.communicate(timeout=60)
    assert child.returncode == 130, err
    assert time.monotonic() - stopped < 15  # the workers were stopped, not waited for
    doc = json.loads(out.read_text())
    assert doc["interrupted"] is True
    finished = {Path(d["path"]).name for d in doc["dumps"]}
    assert finished and finished < {"0-null_deref.dmp", "0-heap_oob.dmp"} | {f"deep{i}.dmp.xz" for i in range(4)}
    assert b"interrupted:" in err


def test_cli_markdown_keeps_each_signature_in_its_table_cell(folder):
    result = _cli(str(folder / "a"), str(folder / "null.dmp"), "--format", "md")
    assert result.exit_code == 0, result.output
    rows = [line for line in result.stdout.splitlines() if line.startswith(("| 1 |", "| 2 |"))]
    assert len(rows) == 2
    for row in rows:
        # GFM splits cells at every unescaped |, inside code spans too: 8 columns, 9 bars
        assert len(re.findall(r"(?<!\\)\|", row)) == 9, row
    assert "recursion(opkernels.dll!visit) \\| tfhost.exe!run_scenario" in result.stdout


def test_the_time_limit_holds_off_the_main_thread_too():
    """Dask runs tasks in threads (and Windows has no timer signal): the analysis runs in
    a thread that is abandoned at the limit, and closing the dump under it ends it."""
    import threading

    job = Job(image_paths=(str(SAMPLE_BIN),), timeout=0.01)
    box = {}
    caller = threading.Thread(target=lambda: box.update(record=next(run([str(sample_path("recursion_one.dmp"))], job))))
    caller.start()
    caller.join(30)
    assert box["record"].status == "timeout"
    deadline = time.monotonic() + 20
    while any(t.name == "dumpkit-triage-analysis" for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(t.name == "dumpkit-triage-analysis" for t in threading.enumerate())


def test_a_python_recursion_is_named_within_its_group_where_the_dump_holds_the_python_stack(tmp_path):
    """Every Python-level recursion has the eval loop's signature, whatever the Python code:
    a group lists the Python functions its full-memory dumps show recursing (file names
    without folders or lines), and a minidump of the same crash, which holds no Python
    stack, stays in the group (the signature does not change)."""
    from tests.support.samples import PY_SAMPLES, WINPYTHON

    for name in ("py_recursion_full.trimmed.dmp.xz", "py_recursion.dmp.xz", "repr_recursion_full.trimmed.dmp.xz"):
        shutil.copy(PY_SAMPLES / name, tmp_path / name)
    # python38.dll for the minidump, which does not hold it (the full dumps do)
    images = (str(WINPYTHON),) if (WINPYTHON / "python38.dll").is_file() else ()
    paths, _ = collect([str(tmp_path)])
    records = {Path(r.path).name: r for r in run(paths, Job(image_paths=images), jobs=1)}
    full = records["py_recursion_full.trimmed.dmp.xz"]
    assert full.python_recursion == "visit (py_recursion.py) > walk (py_recursion.py)"
    assert records["py_recursion.dmp.xz"].python_recursion is None  # a minidump: no Python stack
    assert records["repr_recursion_full.trimmed.dmp.xz"].python_recursion is None  # C recursion in repr()
    groups = {g.signature: g for g in group(list(records.values()))}
    mine = groups[full.signature]
    assert mine.python_recursions == (("visit (py_recursion.py) > walk (py_recursion.py)", 1),)
    if images:  # with its image the minidump's signature is the full dump's
        assert mine.count == 2
    assert groups[records["repr_recursion_full.trimmed.dmp.xz"].signature].python_recursions == ()


def test_cli_shows_the_python_recursion_under_its_group(tmp_path):
    from tests.support.samples import PY_SAMPLES

    shutil.copy(PY_SAMPLES / "py_recursion_full.trimmed.dmp.xz", tmp_path / "a.dmp.xz")
    text = _cli(str(tmp_path))
    assert text.exit_code == 0, text.output
    assert "python recursion: visit (py_recursion.py) > walk (py_recursion.py) in 1 of 1 dumps" in text.stdout
    doc = json.loads(_cli(str(tmp_path), "--format", "json").stdout)
    assert doc["groups"][0]["python_recursions"] == [
        {"functions": "visit (py_recursion.py) > walk (py_recursion.py)", "count": 1}
    ]
    assert doc["dumps"][0]["python_recursion"] == "visit (py_recursion.py) > walk (py_recursion.py)"


def _triage_json(folder: Path, cache: Path, out: Path, jobs: int = 1) -> "subprocess.Popen[str]":
    cmd = [sys.executable, "-m", "dumpkit", "triage", str(folder), "-i", str(SAMPLE_BIN), "-j", str(jobs)]
    return subprocess.Popen(
        cmd + ["--format", "json", "-o", str(out), "--cache", str(cache), "--no-progress"],
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(child: "subprocess.Popen[str]", out: Path):
    _, err = child.communicate(timeout=300)
    assert child.returncode == 0, err
    return json.loads(out.read_text()), err


@pytest.mark.slow
def test_damaged_cache_entries_are_recomputed_and_said_once(tmp_path):
    """A fleet's cache folder meets truncated writes, disks that filled up and other
    programs: such an entry is never a result; it is removed, the dump analysed again, and
    the run says so in one line, once (#34 item 4)."""
    dumps, cache = tmp_path / "dumps", tmp_path / "cache"
    dumps.mkdir()
    for name in ("null_deref.dmp", "fastfail_gs.dmp", "heap_oob.dmp"):
        shutil.copy(sample_path(name), dumps / name)
    first, _ = _finish(_triage_json(dumps, cache, tmp_path / "1.json"), tmp_path / "1.json")
    entries = sorted(cache.glob("*/*.json"))
    assert len(entries) == 3
    entries[0].write_text(entries[0].read_text()[:40])  # truncated
    entries[1].write_text("[1, 2]")  # JSON, but no record
    entries[2].write_text(json.dumps({**json.loads(entries[2].read_text()), "size": "large"}))  # wrong type
    second, err = _finish(_triage_json(dumps, cache, tmp_path / "2.json"), tmp_path / "2.json")
    assert err.count("3 cache entries were damaged") == 1, err
    assert [d["cached"] for d in second["dumps"]] == [False, False, False]
    strip = lambda doc: [(d["path"], d["status"], d["signature"]) for d in doc["dumps"]]  # noqa: E731
    assert strip(second) == strip(first)
    third, err = _finish(_triage_json(dumps, cache, tmp_path / "3.json"), tmp_path / "3.json")
    assert "damaged" not in err and [d["cached"] for d in third["dumps"]] == [True, True, True]


@pytest.mark.slow
def test_two_runs_sharing_one_cache_folder_lose_and_corrupt_nothing(tmp_path):
    """Two triage runs at once over the same dumps and the same --cache (two nightly jobs,
    two machines on a share): every entry they leave reads back, one per dump, and a third
    run takes every dump from the cache with the same answers."""
    dumps, cache = tmp_path / "dumps", tmp_path / "cache"
    dumps.mkdir()
    names = ("null_deref.dmp", "fastfail_gs.dmp", "heap_oob.dmp", "fastfail_abort.dmp", "big_frame.dmp")
    for name in names:
        shutil.copy(sample_path(name), dumps / name)
    a = _triage_json(dumps, cache, tmp_path / "a.json", jobs=2)
    b = _triage_json(dumps, cache, tmp_path / "b.json", jobs=2)
    doc_a, _ = _finish(a, tmp_path / "a.json")
    doc_b, _ = _finish(b, tmp_path / "b.json")
    entries = sorted(cache.glob("*/*.json"))
    assert len(entries) == len(names)
    assert all(json.loads(e.read_text())["status"] == "analysed" for e in entries)
    assert not list(cache.glob("*/.entry-*"))  # no temporary file left behind
    third, err = _finish(_triage_json(dumps, cache, tmp_path / "c.json"), tmp_path / "c.json")
    assert "damaged" not in err
    assert [d["cached"] for d in third["dumps"]] == [True] * len(names)
    strip = lambda doc: [(d["path"], d["status"], d["signature"]) for d in doc["dumps"]]  # noqa: E731
    assert strip(third) == strip(doc_a) == strip(doc_b)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the cap is RLIMIT_DATA, as Linux counts it")
def test_a_dump_that_eats_memory_is_reported_under_the_memory_cap_and_the_run_goes_on(tmp_path):
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    memory_hungry_dump(dumps / "hungry.dmp", 1_000_000)
    for name in ("null_deref.dmp", "heap_oob.dmp"):
        shutil.copy(sample_path(name), dumps / name)
    out = tmp_path / "out.json"
    cmd = [sys.executable, "-m", "dumpkit", "triage", str(dumps), "-i", str(SAMPLE_BIN), "-j", "2"]
    r = subprocess.run(
        cmd + ["--memory-cap", "150M", "--format", "json", "-o", str(out), "--no-progress"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 1, r.stderr  # a dump was not analysed
    by_name = {Path(d["path"]).name: d for d in json.loads(out.read_text())["dumps"]}
    assert by_name["hungry.dmp"]["status"] == "error"
    assert by_name["hungry.dmp"]["error"] == "needed more memory than a worker may take (--memory-cap 150 MiB)"
    assert by_name["null_deref.dmp"]["status"] == by_name["heap_oob.dmp"]["status"] == "analysed"
    # without the cap the same dump is analysed: the cap, not the dump, stopped it
    uncapped = tmp_path / "uncapped.json"
    r = subprocess.run(
        cmd + ["--memory-cap", "0", "--format", "json", "-o", str(uncapped), "--no-progress"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert all(d["status"] == "analysed" for d in json.loads(uncapped.read_text())["dumps"])


def test_a_memory_cap_that_is_no_size_is_refused_in_one_line(tmp_path):
    shutil.copy(sample_path("null_deref.dmp"), tmp_path / "a.dmp")
    r = _cli(str(tmp_path), "--memory-cap", "lots")
    assert r.exit_code == 2
    assert (
        r.output.strip().splitlines()[-1] == "dumpkit: error: --memory-cap: 'lots' is not a size (examples: 800M, 4G)"
    )


@pytest.mark.parametrize(
    "text, size", [("800M", 800 << 20), ("4G", 4 << 30), ("4GiB", 4 << 30), ("1.5g", 3 << 29), ("0", 0)]
)
def test_memory_cap_sizes_read_as_people_write_them(text, size):
    from dumpkit.triage.memory import parse_size

    assert parse_size(text) == size


def test_a_memory_cap_too_small_to_start_a_worker_is_refused():
    from dumpkit.triage.memory import parse_size

    with pytest.raises(ValueError, match="below the least a worker needs"):
        parse_size("10M")


@pytest.mark.parametrize("where", ["main thread", "worker thread"])
def test_a_timed_out_analysis_is_stopped_and_its_unpacked_copy_deleted(tmp_path, monkeypatch, where):
    """The time limit stops the analysis in its own thread (#34 item 4; the Windows lane's
    %TEMP% case), in a process's main thread as in a Dask worker's thread: it returns at
    once, no thread is left working, and the plain copy of the .xz dump it was unpacking
    is gone."""
    import tempfile
    import threading

    from dumpkit.triage.analyse import analyse_one

    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    threads = threading.active_count()
    job = Job(image_paths=(str(SAMPLE_BIN),), timeout=0.05)
    dump = str(sample_path("deep_recursion_1m.dmp.xz"))
    started = time.monotonic()
    if where == "main thread":
        record = analyse_one(job, dump)
    else:
        box = {}
        worker = threading.Thread(target=lambda: box.setdefault("record", analyse_one(job, dump)))
        worker.start()
        worker.join(30)
        record = box["record"]
    assert record.status == "timeout", record
    assert time.monotonic() - started < 1.0  # unpacking 64 MB alone takes longer
    assert list(temp.iterdir()) == []
    time.sleep(0.1)
    # nothing left working: no thread more than before (where an earlier test's watchdog
    # may still have lingered), and the watchdog itself gone (triage/watchdog.py)
    assert threading.active_count() <= threads
    assert not [t for t in threading.enumerate() if t.name == "dumpkit-watchdog"]


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="kills worker processes with SIGKILL")
def test_a_dask_worker_killed_mid_run_costs_no_record_and_doubles_none(tmp_path):
    """A fleet's Dask workers die (preempted, OOM-killed): the scheduler runs their tasks
    again elsewhere, and every dump still gets exactly one record (#34 item 4)."""
    distributed = pytest.importorskip("distributed")
    names = ["null_deref.dmp", "heap_oob.dmp", "fastfail_gs.dmp", "fastfail_abort.dmp", "big_frame.dmp"]
    for name in names:
        shutil.copy(sample_path(name), tmp_path / name)
    slow = [tmp_path / f"deep{i}.dmp.xz" for i in range(2)]  # seconds each: in flight when killed
    for path in slow:
        shutil.copy(sample_path("deep_recursion_1m.dmp.xz"), path)
    paths = sorted(str(p) for p in tmp_path.iterdir())
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            pids = list(client.run(os.getpid).values())
            records = []
            for record in run(paths, JOB, scheduler=cluster.scheduler_address):
                records.append(record)
                if len(records) == 1:
                    for pid in pids:  # both workers, whatever they hold; their nannies restart them
                        os.kill(pid, signal.SIGKILL)
            assert set(client.run(os.getpid).values()).isdisjoint(pids)  # they did die
    assert sorted(r.path for r in records) == paths  # each dump once: none lost, none doubled
    assert all(r.status == "analysed" for r in records), [(r.path, r.error) for r in records if not r.ok]


def test_openmps_error_15_is_one_group_across_programs_and_pythons_and_a_plain_abort_another(tmp_path):
    """Two OpenMP runtimes in one process (sample_dumps/collisions, 3.11 and 3.12) end the
    same way whatever the program: one group, signature ABORT(OMP: Error #15); the one-copy
    control that calls os.abort() is a group of its own (issue #41 item 7)."""
    for name in ("omp_duplicate_py311", "omp_duplicate_py312", "omp_single_py311"):
        shutil.copyfile(SAMPLES / "bundles" / f"{name}.dkb", tmp_path / f"{name}.dkb")
    result = _cli(str(tmp_path), "--format", "json", "--jobs", "1")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    groups = {g["signature"]: g["count"] for g in doc["groups"]}
    assert groups.get("ABORT(OMP: Error #15)") == 2, groups
    assert len(groups) == 2


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_pipe_given_to_triage_is_named_as_one(tmp_path):
    fifo = tmp_path / "crash.dmp"
    os.mkfifo(fifo)
    result = _cli(str(fifo), "--format", "json")
    assert result.exit_code == 2
    assert (
        f"{fifo}: a pipe or device, not a file (triage reads files; analyze reads a dump from a pipe)" in result.output
    )


def test_a_group_made_without_the_images_says_which_it_lacked(tmp_path):
    """Three different ways out of CPython 3.8 and 3.11 processes (a RecursionError's fatal
    error, os._exit(3), sys.exit(3)), triaged with Windows' own DLLs only and not their
    recorded paths (which a Windows machine, or Wine's prefix, may have): their frames below
    ExitProcess are stack words, so all three are EXIT(3); the group says which images its
    dumps lacked, in how many, which is what would tell them apart."""
    names = ("fatal_overflow_py311", "os_exit3_py311", "sys_exit3_py38")
    for name in names:
        shutil.copy(SAMPLES / "endings" / f"{name}.dmp.xz", tmp_path / f"{name}.dmp.xz")
    paths, _ = collect([str(tmp_path)])
    job = Job(image_paths=(str(SAMPLES / "bin" / "wine"),), use_recorded_paths=False)
    records = list(run(paths, job, jobs=1))
    doc = triage_document(records, "test", RULES)
    [only] = doc["groups"]
    assert (only["signature"], only["count"]) == ("EXIT(3)", 3)
    missing = {m["module"]: m["count"] for m in only["missing_images"]}
    assert missing["ucrtbase.dll"] == 3 and missing["python311.dll"] == 2 and missing["python38.dll"] == 1
    assert [m["count"] for m in only["missing_images"]] == sorted(missing.values(), reverse=True)
    assert all("ucrtbase.dll" in d["missing_images"] for d in doc["dumps"])
    text = render_triage_text(triage_view(records))
    line = next(x for x in text.splitlines() if "images missing" in x)
    assert line.strip().startswith("images missing (--image-path or --fetch-images would name more frames): ")
    assert "ucrtbase.dll in 3 of 3 dumps" in line and "python38.dll in 1 of 3 dumps" in line


def test_no_recorded_paths_triages_as_a_machine_without_the_crashed_programs_files(tmp_path):
    """A Wine prefix whose Z: drive holds the program's own files where the dump recorded
    them: triage finds them there, and with --no-recorded-paths it does not, as analyze."""
    dump = sample_path("recursion_cycle3.dmp")
    recorded = tmp_path / "prefix" / "drive_z" / "work" / "main" / "sample_dumps" / "bin"  # Z:\work\main\...
    recorded.mkdir(parents=True)
    for name in ("tfhost.exe", "opkernels.dll"):
        shutil.copy(SAMPLE_BIN / name, recorded / name)
    folder = tmp_path / "dumps"
    folder.mkdir()
    shutil.copy(dump, folder / dump.name)
    env = dict(os.environ, WINEPREFIX=str(tmp_path / "prefix"))

    def groups(*args: str) -> list:
        r = subprocess.run(
            [sys.executable, "-m", "dumpkit", "triage", str(folder), "--format", "json", "--jobs", "1", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert r.returncode in (0, 1), r.stderr
        return json.loads(r.stdout)["groups"]

    found, away = groups(), groups("--no-recorded-paths")
    assert len(found) == len(away) == 1
    assert "opkernels.dll!visit" in found[0]["signature"]
    assert "opkernels.dll" not in {m["module"] for m in found[0]["missing_images"]}
    assert "opkernels.dll!visit" not in away[0]["signature"]
    assert "opkernels.dll" in {m["module"] for m in away[0]["missing_images"]}
