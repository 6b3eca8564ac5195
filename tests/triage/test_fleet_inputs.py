"""A fleet's dumps as they come (issue #45 item 5): a folder's zip archives that hold a
dump are triaged as `analyze` reads them, whatever they are called; a zip of other files
is passed over; one that cannot be read is listed with why."""

from __future__ import annotations

import shutil
import zipfile
from dataclasses import replace
from pathlib import Path

from dumpkit.triage.analyse import Job, analyse_one
from dumpkit.triage.collect import collect
from dumpkit.triage.group import group
from dumpkit.triage.run import run
from tests.support.samples import SAMPLE_BIN, sample_path

PLAIN = "recursion_cycle3.dmp"
JOB = Job(image_paths=(str(SAMPLE_BIN),))


def _folder(root: Path) -> Path:
    raw = sample_path(PLAIN).read_bytes()
    (root / "uploads" / "2026-11").mkdir(parents=True)
    with zipfile.ZipFile(root / "uploads" / "2026-11" / "crash.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("README.txt", "what the user did\n")
        zf.writestr("crash/python.exe.1234.dmp", raw)
    with zipfile.ZipFile(root / "uploads" / "report.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("notes.txt", "steps\n")
        zf.writestr("memory.bin", raw)  # a minidump not named like one
    with zipfile.ZipFile(root / "uploads" / "logs.zip", "w") as zf:
        zf.writestr("log.txt", "no dump here\n")
    (root / "uploads" / "cut.zip").write_bytes(b"PK\x03\x04" + raw[:100])
    shutil.copy(sample_path(PLAIN), root / "plain.dmp")
    return root


def test_a_folders_zips_holding_dumps_are_taken_and_others_passed_over(tmp_path):
    paths, missing = collect([str(_folder(tmp_path))])
    assert not missing
    assert sorted(Path(p).name for p in paths) == ["crash.zip", "cut.zip", "plain.dmp", "report.zip"]


def test_a_zipped_dump_gets_the_record_of_the_dump_inside(tmp_path):
    paths, _ = collect([str(_folder(tmp_path))])
    records = {Path(r.path).name: r for r in run(paths, JOB)}
    plain = records["plain.dmp"]
    assert plain.ok
    for name in ("crash.zip", "report.zip"):
        r = records[name]
        assert replace(r, path=plain.path, size=plain.size, sha256=plain.sha256, seconds=0.0) == replace(
            plain, seconds=0.0
        )
    cut = records["cut.zip"]
    assert not cut.ok and "not a usable zip archive" in (cut.error or "")
    groups = group(list(records.values()))
    assert [len(g.members) for g in groups] == [3]


def test_a_zipped_dump_is_unpacked_in_memory_as_analyze_does(tmp_path, monkeypatch):
    """A dump that fits in memory is unpacked there: it is read even where no temporary
    copy could be written."""
    import tempfile

    report = _folder(tmp_path) / "uploads" / "report.zip"
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no such folder"))
    record = analyse_one(JOB, str(report))
    assert record.ok, record.error
