"""`triage --memory-cap` on Windows (dumpkit/triage/winjob.py): what counts as applied. The
job object itself is made by real workers in the Windows lane
(tests/windows_lane: test_memory_cap_puts_each_worker_in_a_job_whose_limit_wine_drops)."""

from __future__ import annotations

from dumpkit.triage.winjob import JOB_OBJECT_LIMIT_PROCESS_MEMORY, JobCap

CAP = 150 << 20


def test_a_limit_read_back_as_set_counts_as_applied():
    assert JobCap(4, CAP, JOB_OBJECT_LIMIT_PROCESS_MEMORY, CAP).confirmed


def test_a_limit_read_back_as_zeros_does_not():
    """What Wine 8 answers: its QueryInformationJobObject zeroes this class."""
    assert not JobCap(4, CAP, 0, 0).confirmed


def test_a_limit_read_back_without_its_flag_or_at_another_size_does_not():
    assert not JobCap(4, CAP, 0, CAP).confirmed
    assert not JobCap(4, CAP, JOB_OBJECT_LIMIT_PROCESS_MEMORY, CAP // 2).confirmed
