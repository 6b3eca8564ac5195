"""Triage analyses what its record needs (issue #45 item 2): the crashing thread, and the
other threads only where its scanned frames are checked against them (bounded by the
walker); every thread only when it writes a per-dump report, as `analyze` does. On every
dump of the repository and of ../shared the record is the one the full analysis gives,
and so are the groups."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import List

import pytest

from dumpkit.analysis.model import Report
from dumpkit.triage.analyse import Job, analyse_one
from dumpkit.triage.group import group
from dumpkit.triage.record import DumpRecord
from tests.support.samples import SAMPLE_BIN, SAMPLES, every_dump, real_dumps


def _headline(report: Report) -> str:
    """A per-dump report writer (module level, as the front door hands one in)."""
    return report.verdict.headline


def _records(path: Path, image_paths, reports: Path):
    """(the record triage makes, the record of the full analysis its per-dump report shows),
    each without its time and report name."""
    lean = analyse_one(Job(image_paths=image_paths), str(path))
    full = analyse_one(Job(image_paths=image_paths, report_dir=str(reports), report_writer=_headline), str(path))
    assert full.report is not None or not full.ok  # the full analysis did run
    return replace(lean, seconds=0.0), replace(full, seconds=0.0, report=None)


@pytest.mark.parametrize("path, image_paths", every_dump())
def test_the_record_is_the_full_analysis_record(path, image_paths, tmp_path):
    lean, full = _records(path, image_paths, tmp_path)
    assert lean == full


def test_the_groups_are_the_full_analysis_groups(tmp_path):
    paths = sorted(SAMPLES.glob("*.dmp")) + real_dumps()
    pairs = [_records(p, (str(SAMPLE_BIN),) if p.parent == SAMPLES else (), tmp_path) for p in paths]
    lean: List[DumpRecord] = [a for a, _ in pairs]
    full: List[DumpRecord] = [b for _, b in pairs]
    assert len(group(lean)) > 10
    assert group(lean) == group(full)
