"""dumpkit's own fast tier on the oldest Python it claims: `python -m pytest -m "not slow"`
over SELECTION, run by the genuine Windows CPython 3.8 (the PSF's build, the interpreter
pykd's WinDbg side runs in) under Wine, in PROCESSES Wine processes at once over CHUNKS
chunks of the files; their outcome is read back here (results.py writes it) and reported as
one test per test file, failures listed with their tracebacks.

Tests that cannot run there for a reason that is not a dumpkit bug (Linux-only tools, the
checkers pinned for 3.10+, extras with wheels for 3.11+ only) skip themselves, with the
reason, in their own file; what is a dumpkit bug on 3.8 or Windows is fixed, or pinned there
by `xfail(strict=True)` naming the cause.

Runs only when asked for (conftest.py): `python -m pytest -q tests/py38_lane`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List

import pytest

from tests.support.samples import ROOT
from tests.py38_lane import py38
from tests.support import wine as lane
from tests.windows_lane import winpy

W = winpy.windows_path
# Every file with tests in the fast tier, but the lanes (each runs Wine itself). The rest
# (commands/test_cli.py, test_golden.py, test_code_checks.py, fuzz/...) is all `slow`.
SELECTION = (
    "tests/analysis",
    "tests/unwind",
    "tests/pe",
    "tests/cpython",
    "tests/sources",
    "tests/report",
    "tests/symbols",
    "tests/bundle",
    "tests/capture",
    "tests/triage",
    "tests/hostile",
    "tests/test_records.py",
    "tests/windbg",
    "tests/packages",
    "tests/test_full_memory.py",
    "tests/test_cli_output.py",
    "tests/images",
    "tests/test_frontdoor.py",
    "tests/test_conventions.py",
)
RUN_TIMEOUT = 1500
# Wine processes at once, each running pytest over one chunk of the files after another: the
# tests are written to run side by side (the main suite runs them under xdist), and one Wine
# process keeps one core busy, so two share CI's two cores. More chunks than
# processes, handed out in turn, keep one slow chunk from holding the lane up (a chunk's
# start-up, Wine, pytest and the imports, is a few seconds).
PROCESSES = 2
CHUNKS = 4
# Seconds for the Windows side, a tripwire for a lane that grew, not for a slow machine: one
# process took 6:22 on 2026-11-28 and 10:01 on a slower machine on 2026-11-29 (CI 47 minutes
# in all); two took 7:21 there (their tests run ~1.4x slower side by side, and Wine's start
# and the imports are paid per chunk). Raised on 2026-11-30 from 600, after two took 13:20
# in a run that shared the machine with other tests; on a quiet machine the same day they
# took 9:00 (540 s; report/test_report_schema.py 108 s of test time, of which naming C
# functions from CPython's tables, pe/pynames.py, is about 3% as measured on Linux).
BUDGET = 1200


def _test_files() -> List[str]:
    files: List[str] = []
    for entry in SELECTION:
        path = ROOT / entry
        found = [path] if path.is_file() else sorted(path.rglob("test_*.py"))
        files += [p.relative_to(ROOT).as_posix() for p in found]
    return files


@dataclass
class Outcome:
    failed: List[dict] = field(default_factory=list)  # failed or errored, and collection errors
    skipped: List[dict] = field(default_factory=list)
    passed: int = 0
    xfailed: int = 0
    seconds: float = 0.0


@dataclass
class Run:
    doc: dict
    seconds: float
    stdout: str
    files: Dict[str, Outcome]


def _chunks(files: List[str], count: int) -> List[List[str]]:
    """`files` dealt into `count` chunks: a folder's slow files (tests/report's schema checks,
    tests/triage) go to different chunks, which then take about as long as each other."""
    return [files[i::count] for i in range(count)]


@dataclass
class _Chunk:
    files: List[str]
    results: Path
    proc: "subprocess.CompletedProcess[str]"

    def doc(self) -> dict:
        if not self.results.exists():
            raise AssertionError(
                f"the Windows side wrote no results for its chunk of {len(self.files)} files, {self.files[0]} first (exit "
                f"{self.proc.returncode}):\n{self.proc.stdout[-3000:]}\n{self.proc.stderr[-3000:]}"
            )
        return json.loads(self.results.read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def py38_run(tmp_path_factory) -> Run:
    try:
        env, runner = py38.build(log=lambda line: print(line, file=sys.stderr))
    except lane.Unavailable as e:
        pytest.skip(f"py38 lane unavailable here: {e}")
    tmp = tmp_path_factory.mktemp("py38-lane")
    python = winpy.interpreter(env, tmp / "py38", extra=[runner])

    def run(index: int, files: List[str]) -> _Chunk:
        results = tmp / f"results-{index}.json"
        environ = winpy.environ(env)
        environ["DUMPKIT_PY38_RESULTS"] = W(results)
        # hypothesis keeps its example database in the working folder (the checkout) otherwise
        environ["HYPOTHESIS_STORAGE_DIRECTORY"] = W(tmp / f"hypothesis-{index}")
        argv = ["timeout", "-k", "10", str(RUN_TIMEOUT), env.wine, str(python), "-m", "pytest", "-q", "-m", "not slow"]
        argv += ["-p", "no:cacheprovider", "-p", "tests.py38_lane.results", *files]
        return _Chunk(files, results, lane._run(argv, RUN_TIMEOUT + 30, cwd=ROOT, env=environ))

    started = time.monotonic()
    try:
        with ThreadPoolExecutor(PROCESSES) as pool:
            jobs = [pool.submit(run, i, files) for i, files in enumerate(_chunks(_test_files(), CHUNKS))]
            chunks = [job.result() for job in jobs]
    finally:
        winpy.stop(env)
    seconds = time.monotonic() - started
    docs = [chunk.doc() for chunk in chunks]
    doc = dict(docs[0], records=[r for d in docs for r in d["records"]], collected=sum(d["collected"] for d in docs))
    stdout = "\n".join(chunk.proc.stdout for chunk in chunks)
    files: Dict[str, Outcome] = {}
    for record in doc["records"]:
        outcome = files.setdefault(record["nodeid"].split("::", 1)[0], Outcome())
        outcome.seconds += record["seconds"]
        if record["outcome"] == "failed":
            outcome.failed.append(record)
        elif record["xfail"]:
            outcome.xfailed += 1
        elif record["outcome"] == "skipped":
            outcome.skipped.append(record)
        else:
            outcome.passed += 1
    slowest = sorted(files.items(), key=lambda item: -item[1].seconds)[:5]
    print(
        f"py38 lane: {doc['collected']} tests collected on {doc['version'].split()[0]} under Wine in {seconds:.0f} s; "
        + "; ".join((chunk.proc.stdout.strip().splitlines() or ["no output"])[-1] for chunk in chunks)
        + "; slowest: "
        + ", ".join(f"{path} {o.seconds:.0f} s" for path, o in slowest),
        file=sys.stderr,
    )
    return Run(doc=doc, seconds=seconds, stdout=stdout, files=files)


def test_it_ran_on_the_genuine_windows_cpython_38(py38_run):
    assert py38_run.doc["version"].startswith("3.8."), py38_run.doc["version"]
    assert "MSC" in py38_run.doc["version"] and py38_run.doc["platform"] == "win32"
    assert py38_run.doc["machine"] == "AMD64"
    assert py38_run.doc["collected"] > 0, py38_run.stdout[-3000:]


def test_the_lane_stays_within_its_time_budget(py38_run):
    assert py38_run.seconds < BUDGET, f"{py38_run.seconds:.0f} s: make SELECTION smaller, CI's run is bounded"


def test_every_result_belongs_to_a_selected_file(py38_run):
    assert set(py38_run.files) <= set(_test_files()), "SELECTION and the files reported here disagree"


@pytest.mark.parametrize("path", _test_files())
def test_file_passes_on_windows_cpython_38(py38_run, path):
    outcome = py38_run.files.get(path)
    if outcome is None:
        pytest.skip(f"{path}: nothing of it is in the fast tier")
    if not (outcome.failed or outcome.passed or outcome.xfailed):
        reasons = sorted({r["longrepr"].strip().splitlines()[-1] for r in outcome.skipped if r["longrepr"].strip()})
        pytest.skip(f"{path} skipped itself on Windows CPython 3.8: " + "; ".join(reasons[:3]))
    if outcome.failed:
        details = "\n\n".join(f"--- {r['nodeid']} ({r['when']})\n{r['longrepr']}" for r in outcome.failed)
        pytest.fail(
            f"{len(outcome.failed)} failed on Windows CPython 3.8 ({outcome.passed} passed):\n"
            + "\n".join(r["nodeid"] for r in outcome.failed)
            + "\n\n"
            + details,
            pytrace=False,
        )
