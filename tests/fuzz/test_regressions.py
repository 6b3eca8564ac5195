"""Inputs the fuzzer found, kept so they stay fixed. Each must end with exit 1 or 2,
no traceback, well inside the hang guard."""

from __future__ import annotations

import lzma
from pathlib import Path

import pytest

from tests.support.samples import run_cli

pytestmark = pytest.mark.slow  # the full run's (CI's); `-m "not slow"` leaves it out

HERE = Path(__file__).resolve().parent / "regressions"
CASES = sorted(HERE.glob("*.dmp.xz"))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_fuzz_finding_stays_fixed(case, tmp_path):
    dump = tmp_path / case.name[:-3]
    dump.write_bytes(lzma.decompress(case.read_bytes()))
    r = run_cli("analyze", str(dump), "--format", "json", timeout=60)
    assert "Traceback" not in r.stderr
    assert r.returncode in (1, 2)


def test_thread_limits_are_reported():
    """many-threads-many-streams: 5,278 threads (a mutated x86 dump); the other threads
    are walked up to the engine's limits and the rest are listed as not walked."""
    case = HERE / "many-threads-many-streams.dmp.xz"
    if not case.exists():
        pytest.skip("regression input missing")
    import json
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        dump = Path(d) / "x.dmp"
        dump.write_bytes(lzma.decompress(case.read_bytes()))
        r = run_cli("analyze", str(dump), "--format", "json", timeout=60)
    doc = json.loads(r.stdout)
    assert any("not walked" in e for e in doc["soft_errors"])
    walked = [t for t in doc["threads"] if t["frame_count"]]
    assert len(walked) <= 513


def test_huge_module_names_do_not_blow_up_the_report(tmp_path):
    """huge-module-names: thousands of modules named by 64 KiB strings, 6,508 threads.
    Names are cut at the NTFS component limit and the string budget, so the JSON report
    stays tens of MB instead of half a GB."""
    case = HERE / "huge-module-names.dmp.xz"
    if not case.exists():
        pytest.skip("regression input missing")
    dump = tmp_path / "x.dmp"
    dump.write_bytes(lzma.decompress(case.read_bytes()))
    out = tmp_path / "r.json"
    r = run_cli("analyze", str(dump), "--format", "json", "-o", str(out), timeout=60)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert out.stat().st_size < 64 << 20
    assert "cut to 255" in out.read_text()


def test_repeated_thread_ids_are_walked_once(tmp_path):
    """repeated-thread-ids (fuzz campaign 4): a thread list whose id 0 repeats 1,327
    times, one of them the crashing thread. Each repeat used to carry and re-analyse the
    crashing thread's stack (10 s, 790 MB); now only the first entry of an id is walked and
    the repeats are listed as such."""
    case = HERE / "repeated-thread-ids.dmp.xz"
    if not case.exists():
        pytest.skip("regression input missing")
    import json

    dump = tmp_path / "x.dmp"
    dump.write_bytes(lzma.decompress(case.read_bytes()))
    r = run_cli("analyze", str(dump), "--format", "json", timeout=60)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    doc = json.loads(r.stdout)
    assert any("repeat an earlier thread id" in e for e in doc["soft_errors"])
    by_tid = {}
    for t in doc["threads"]:
        by_tid.setdefault(t["tid"], []).append(t)
    repeated = [ts for ts in by_tid.values() if len(ts) > 1]
    assert repeated
    for ts in repeated:
        assert sum(1 for t in ts if t["stop_reason"] != "not walked (repeats an earlier thread id)") <= 1
        assert sum(1 for t in ts if t["is_crashing"]) <= 1
        assert all(not t["frames"] for t in ts if t["stop_reason"].startswith("not walked (repeats"))
