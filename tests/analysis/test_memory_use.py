"""What the process and the machine had committed when the dump was written, and the limits
it had reached (sources/memory_counters.py, analysis/memory.py, verdict/memory.py).

Windows' own dbghelp writes the two streams into every minidump; Wine's writes neither, so
the real dumps are those of ../shared/real_dumps (skipped without it). None of those
processes ran out of memory: the tests that need one set a real dump's counters to the
limit in a copy, as a machine at its limit would have written them, and read that copy
through the CLI as a user would."""

from __future__ import annotations

import json
import lzma
import struct
from pathlib import Path
from typing import Callable, List

import pytest

from dumpkit.analysis.memory import memory_use
from dumpkit.analysis.model import MemoryLimit
from dumpkit.sources.memory_counters import parse_vm_counters
from dumpkit.sources.minidump import open_dump
from dumpkit.records import replace
from dumpkit.target import ProcessMemory, SystemMemory

from tests.support.samples import real_dump, real_dumps, run_cli, sample_path

SYSTEM_MEMORY_INFO = 21
PROCESS_VM_COUNTERS = 22
GIB = 1 << 30


def _with_counters() -> List[Path]:
    found = []
    for path in real_dumps():
        types = {e.type for e in open_dump(str(path)).dump.streams}
        if {SYSTEM_MEMORY_INFO, PROCESS_VM_COUNTERS} <= types:
            found.append(path)
    return found


WITH_COUNTERS = _with_counters()
# the x64 electron crash of node-minidump's tests: Windows 10, 4 GiB of RAM
ELECTRON = "node-minidump/windows.dmp"


def _stream(data: bytearray, stream_type: int) -> int:
    """The file offset of a stream's data."""
    _sig, _ver, count, directory = struct.unpack_from("<IIII", data)
    for i in range(count):
        kind, _size, rva = struct.unpack_from("<III", data, directory + 12 * i)
        if kind == stream_type:
            return rva
    raise AssertionError(f"no stream {stream_type}")


def _edited(src: Path, out: Path, edit: Callable[[bytearray], None]) -> Path:
    data = bytearray(src.read_bytes())
    edit(data)
    out.write_bytes(bytes(data))
    return out


def _machine_at_its_limit(data: bytearray) -> None:
    """SystemMemoryInfo's basic performance part (available, committed, limit, peak pages):
    the commit charge at 99.5% of the limit, as it is when an allocation has just failed."""
    at = _stream(data, SYSTEM_MEMORY_INFO) + 116
    available, _committed, limit, _peak = struct.unpack_from("<4Q", data, at)
    struct.pack_into("<4Q", data, at, available, limit - limit // 200, limit, limit)


@pytest.mark.parametrize("dump", WITH_COUNTERS, ids=[p.name for p in WITH_COUNTERS])
def test_counters_of_real_windows_dumps_agree_with_the_rest_of_the_dump(dump):
    """A layout read one field off would not give these: the processor count the
    SystemInfo stream records, the address-space top Windows gives a 32- or 64-bit
    process, a 4 KiB page, each counter at or under its peak and the charge under its limit."""
    t = open_dump(str(dump))
    system, process = t.system_memory, t.process_memory
    assert system is not None and process is not None
    assert system.processors == t.system.number_of_processors
    assert system.page_size == 4096
    top = 0x7FFEFFFF if t.system.processor_architecture == 0 else 0x7FFFFFFEFFFF
    assert system.highest_user_address == top
    assert system.committed is not None and system.commit_limit is not None
    assert 0 < system.committed <= system.commit_limit
    assert 0 < system.physical_memory <= system.commit_limit
    assert system.available_memory is not None and system.available_memory <= system.physical_memory
    assert 0 < process.working_set <= process.peak_working_set
    assert 0 < process.private_commit <= process.peak_private_commit < system.commit_limit
    assert process.virtual_size is not None and process.peak_virtual_size is not None
    assert process.private_commit <= process.virtual_size <= process.peak_virtual_size


@pytest.mark.parametrize("dump", WITH_COUNTERS, ids=[p.name for p in WITH_COUNTERS])
def test_a_process_that_had_memory_to_spare_is_not_called_out_of_memory(dump):
    r = run_cli("analyze", dump, "--format", "json")
    doc = json.loads(r.stdout)
    memory = doc["environment"]["memory"]
    assert memory["limits_reached"] == [] and memory["findings"] == []
    assert "out of memory" not in doc["verdict"]["headline"]
    t = open_dump(str(dump))
    assert memory["private_commit"] == t.process_memory.private_commit
    assert memory["system_commit_limit"] == t.system_memory.commit_limit


def test_the_report_gives_the_process_and_the_machine_memory():
    r = run_cli("analyze", real_dump(ELECTRON))
    row = r.stdout[r.stdout.index("\nMemory ") :].split("\n\n")[0]
    row = " ".join(row.split())
    assert "this process: 39.8 MiB committed, 55.2 MiB working set" in row
    assert "the machine: 3.5 GiB committed of its 6.0 GiB commit limit (59%), 4.0 GiB RAM, 1.3 GiB available" in row
    for fmt in ("markdown", "html"):
        assert (
            "3.5 GiB committed of its 6.0 GiB commit limit (59%)"
            in run_cli("analyze", real_dump(ELECTRON), "--format", fmt).stdout
        )
    info = run_cli("info", real_dump(ELECTRON)).stdout
    assert "\nCommit   this process: 39.8 MiB committed" in info


def test_a_dump_without_the_counters_says_nothing_of_memory():
    """Wine writes neither stream: no row, and JSON leaves `memory` out."""
    dump = sample_path("null_deref.dmp")
    assert "\nMemory " not in run_cli("analyze", dump).stdout
    doc = json.loads(run_cli("analyze", dump, "--format", "json").stdout)
    assert "memory" not in doc["environment"]


def test_an_access_violation_at_null_at_the_commit_limit_says_so(tmp_path):
    src = real_dump(ELECTRON)
    before = json.loads(run_cli("analyze", src, "--format", "json").stdout)["verdict"]
    dump = _edited(src, tmp_path / "at_limit.dmp", _machine_at_its_limit)
    doc = json.loads(run_cli("analyze", dump, "--format", "json").stdout)
    verdict, memory = doc["verdict"], doc["environment"]["memory"]
    assert verdict["headline"] == before["headline"] + ", while the machine's commit charge was at 99% of its limit"
    assert memory["limits_reached"] == ["commit_limit"]
    (finding,) = memory["findings"]
    assert finding.startswith(
        "The machine's commit charge was at 99% of its limit when the dump was written: 5.9 GiB of 6.0 GiB, "
        "of which this process held 39.8 MiB (other processes and the kernel the rest)."
    )
    assert verdict["evidence"][-1] == finding
    assert verdict["next_steps"][0].startswith("Raise the commit limit: a larger paging file")
    assert verdict["kind"] == before["kind"] and verdict["confidence"] == before["confidence"]
    text = run_cli("analyze", dump).stdout
    assert text.count("The machine's commit charge was at 99%") == 1  # in the verdict, not again under the facts


@pytest.mark.parametrize(
    "name, said",
    [
        ("breakpad/tiny-exe-fastfail.dmp", True),  # abort(): FAST_FAIL_FATAL_APP_EXIT
        ("breakpad/write_av_non_canonical.dmp", False),  # a wild pointer, not NULL
        ("rust-minidump/invalid-parameter.dmp", False),  # STATUS_INVALID_PARAMETER
    ],
)
def test_only_a_crash_a_refused_allocation_leads_to_is_put_down_to_the_limit(tmp_path, name, said):
    src = real_dump(name)
    before = json.loads(run_cli("analyze", src, "--format", "json").stdout)["verdict"]["headline"]
    dump = _edited(src, tmp_path / "at_limit.dmp", _machine_at_its_limit)
    doc = json.loads(run_cli("analyze", dump, "--format", "json").stdout)
    assert doc["environment"]["memory"]["limits_reached"] == ["commit_limit"]
    clause = ", while the machine's commit charge was at 99% of its limit"
    assert doc["verdict"]["headline"] == (before + clause if said else before)
    if not said:  # the limit stays a line under the facts
        assert "The machine's commit charge was at 99% of its limit" in run_cli("analyze", dump).stdout


def test_a_job_at_its_limit_is_measured_by_the_jobs_own_commit(tmp_path):
    """Three processes' worth in the job against its private-commit limit: the job's count,
    not this process's own, is what the limit is on."""

    def job_of_three(data: bytearray) -> None:
        at = _stream(data, PROCESS_VM_COUNTERS)
        (flags,) = struct.unpack_from("<H", data, at + 2)
        (private,) = struct.unpack_from("<Q", data, at + 8 + 10 * 8)
        struct.pack_into("<H", data, at + 2, flags | 0x10)
        # JobSharedCommitUsage, JobPrivateCommitUsage, JobPeakPrivateCommitUsage, JobPrivateCommitLimit, JobTotalCommitLimit
        struct.pack_into("<5Q", data, at + 8 + 13 * 8, 0, 3 * private, 3 * private, 3 * private + private // 10, 0)

    dump = _edited(real_dump(ELECTRON), tmp_path / "job.dmp", job_of_three)
    doc = json.loads(run_cli("analyze", dump, "--format", "json").stdout)
    memory = doc["environment"]["memory"]
    assert memory["limits_reached"] == ["job_commit_limit"]
    assert memory["job_commit"] == 3 * memory["private_commit"] < memory["job_commit_limit"]
    assert doc["verdict"]["headline"].endswith(", while its job object's commit was at 96% of the job's limit")
    assert doc["verdict"]["next_steps"][0].startswith("Raise the job object's memory limit")


def _flags_cleared(stream_type: int, bits: int) -> Callable[[bytearray], None]:
    def edit(data: bytearray) -> None:
        at = _stream(data, stream_type) + 2
        (flags,) = struct.unpack_from("<H", data, at)
        struct.pack_into("<H", data, at, flags & ~bits)

    return edit


def test_counters_the_flags_leave_out_are_not_read(tmp_path):
    src = real_dump(ELECTRON)
    whole = open_dump(str(src))

    # VIRTUALSIZE and EX cleared: no virtual size, and the commit charge from PagefileUsage
    # (PrivateUsage overwritten to show it is not read)
    def no_virtual_no_ex(data: bytearray) -> None:
        _flags_cleared(PROCESS_VM_COUNTERS, 0x2 | 0x4)(data)
        struct.pack_into("<Q", data, _stream(data, PROCESS_VM_COUNTERS) + 8 + 10 * 8, 12345)

    t = open_dump(str(_edited(src, tmp_path / "vm.dmp", no_virtual_no_ex)))
    assert t.process_memory.virtual_size is None
    assert t.process_memory.private_commit == whole.process_memory.private_commit
    # BASICPERF cleared: RAM still known, the commit charge and limit not
    t = open_dump(str(_edited(src, tmp_path / "sys.dmp", _flags_cleared(SYSTEM_MEMORY_INFO, 0x2))))
    assert t.system_memory.physical_memory == whole.system_memory.physical_memory
    assert t.system_memory.committed is None and t.system_memory.commit_limit is None


def test_a_stream_of_zeros_is_no_counters_and_no_damage(tmp_path):
    def zeroed(data: bytearray) -> None:
        at = _stream(data, SYSTEM_MEMORY_INFO)
        data[at : at + 492] = bytes(492)

    dump = _edited(real_dump(ELECTRON), tmp_path / "zero.dmp", zeroed)
    doc = json.loads(run_cli("analyze", dump, "--format", "json").stdout)
    assert not any("SystemMemoryInfo" in p for p in doc["soft_errors"])
    assert doc["environment"]["memory"]["system_commit"] is None
    assert doc["environment"]["memory"]["private_commit"] is not None


def test_a_damaged_counter_stream_is_a_problem_and_the_rest_is_reported(tmp_path):
    def shorten(data: bytearray) -> None:
        _sig, _ver, count, directory = struct.unpack_from("<IIII", data)
        for i in range(count):
            if struct.unpack_from("<I", data, directory + 12 * i)[0] == SYSTEM_MEMORY_INFO:
                struct.pack_into("<I", data, directory + 12 * i + 4, 40)

    dump = _edited(real_dump(ELECTRON), tmp_path / "short.dmp", shorten)
    r = run_cli("analyze", dump, "--format", "json")
    doc = json.loads(r.stdout)
    assert "SystemMemoryInfoStream: unreadable (40 bytes, need at least 148)" in doc["soft_errors"]
    memory = doc["environment"]["memory"]
    assert memory["system_commit"] is None and memory["private_commit"] is not None
    assert doc["verdict"]["kind"] == "access_violation"


def _short_of_ram(data: bytearray) -> None:
    """SystemMemoryInfo's available pages at 1% of the machine's RAM."""
    at = _stream(data, SYSTEM_MEMORY_INFO)
    (pages,) = struct.unpack_from("<I", data, at + 4 + 8)  # BasicInfo.NumberOfPhysicalPages
    struct.pack_into("<Q", data, at + 116, pages // 100)


def test_a_snapshot_of_a_machine_short_of_ram_says_it_in_its_evidence(tmp_path):
    """A real hang dump (python.org's 3.11 under Wine, a thread stuck on queue.get) has no
    memory streams; Wine leaves an unused entry in its directory, which here points to the
    SystemMemoryInfo of a real Windows dump whose machine had 1% of its RAM available."""
    counters = bytearray(real_dump(ELECTRON).read_bytes())
    _short_of_ram(counters)
    at = _stream(counters, SYSTEM_MEMORY_INFO)
    stream = bytes(counters[at : at + 492])
    hang = bytearray(lzma.open(sample_path("hangs/queue_wait_py311.dmp.xz")).read())
    _sig, _ver, count, directory = struct.unpack_from("<IIII", hang)
    unused = next(i for i in range(count) if struct.unpack_from("<I", hang, directory + 12 * i)[0] == 0)
    struct.pack_into("<III", hang, directory + 12 * unused, SYSTEM_MEMORY_INFO, len(stream), len(hang))
    dump = tmp_path / "queue_wait_short_of_ram.dmp"
    dump.write_bytes(bytes(hang) + stream)
    doc = json.loads(run_cli("analyze", dump, "--format", "json").stdout)
    verdict = doc["verdict"]
    assert verdict["kind"] == "no_exception"
    (finding,) = doc["environment"]["memory"]["findings"]
    assert finding.startswith("The machine was short of RAM when the dump was written: ")
    assert "MiB of its 4.0 GiB available (0%)" in finding
    assert finding in verdict["evidence"]
    assert doc["environment"]["memory"]["limits_reached"] == []


def test_a_crash_on_a_machine_short_of_ram_keeps_its_headline(tmp_path):
    src = real_dump(ELECTRON)
    before = json.loads(run_cli("analyze", src, "--format", "json").stdout)["verdict"]
    dump = _edited(src, tmp_path / "short.dmp", _short_of_ram)
    doc = json.loads(run_cli("analyze", dump, "--format", "json").stdout)
    assert doc["verdict"]["headline"] == before["headline"] and doc["verdict"]["evidence"] == before["evidence"]
    assert doc["environment"]["memory"]["findings"][0].startswith("The machine was short of RAM")
    assert "The machine was short of RAM" in run_cli("analyze", dump).stdout  # a line under the facts


# -- the judgement itself, over the records the streams give -----------------------------


def _process(private: int) -> ProcessMemory:
    return ProcessMemory(private, private, private // 2, private // 2)


def _machine(committed: int, limit: int) -> SystemMemory:
    return SystemMemory(4096, 16 * GIB, 8, 0x10000, 0x7FFFFFFEFFFF, 4 * GIB, committed, limit, limit)


def test_a_limit_is_reached_at_95_percent_of_it():
    assert memory_use(_process(GIB), _machine(19 * GIB - 1, 20 * GIB)).limits_reached == ()
    at = memory_use(_process(GIB), _machine(19 * GIB, 20 * GIB))
    assert at.limits_reached == (MemoryLimit.COMMIT_LIMIT,)
    assert at.findings[0].startswith("The machine's commit charge was at 95% of its limit")


def test_a_job_is_held_to_each_of_its_limits_by_what_that_limit_counts():
    """The private limit is on the job's private commit; the total limit on that plus its
    shared commit. The nearer one is the one reported."""
    job = ProcessMemory(
        GIB,
        GIB,
        GIB,
        GIB,
        job_private_commit=6 * GIB,
        job_peak_private_commit=6 * GIB,
        job_shared_commit=3 * GIB,
        job_private_commit_limit=8 * GIB,
        job_total_commit_limit=9 * GIB,
    )
    use = memory_use(job, None)
    assert (use.job_commit, use.job_commit_limit) == (9 * GIB, 9 * GIB)
    assert use.limits_reached == (MemoryLimit.JOB_COMMIT_LIMIT,)
    private_only = memory_use(replace(job, job_total_commit_limit=None), None)
    assert (private_only.job_commit, private_only.job_commit_limit) == (6 * GIB, 8 * GIB)
    assert private_only.limits_reached == ()


def test_revision_1_counters_are_read_where_revision_1_keeps_them():
    """MINIDUMP_PROCESS_VM_COUNTERS_1 has no Flags and keeps PrivateUsage where revision 2
    keeps PeakVirtualSize."""
    raw = struct.pack("<HHI9Q", 1, 0, 77, 9 << 20, 8 << 20, 1, 2, 3, 4, 6 << 20, 7 << 20, 6 << 20)
    assert parse_vm_counters(raw) == ProcessMemory(6 << 20, 7 << 20, 8 << 20, 9 << 20)
    with pytest.raises(ValueError, match="revision 1 needs 80"):
        parse_vm_counters(raw[:60])


def test_triage_tells_the_dumps_written_at_the_commit_limit_within_a_group(tmp_path):
    """One crash, one signature: written once far from the limit and once at it. The group
    says how many of its dumps were out of memory; each record says whether it was."""
    folder = tmp_path / "fleet"
    folder.mkdir()
    src = real_dump(ELECTRON)
    (folder / "a_spare.dmp").write_bytes(src.read_bytes())
    _edited(src, folder / "b_at_limit.dmp", _machine_at_its_limit)
    doc = json.loads(run_cli("triage", folder, "--format", "json", "--jobs", "1").stdout)
    by_name = {Path(d["path"]).name: d for d in doc["dumps"]}
    assert by_name["a_spare.dmp"]["memory_limits"] == []
    assert by_name["b_at_limit.dmp"]["memory_limits"] == ["commit_limit"]
    (group,) = doc["groups"]
    assert group["count"] == 2 and group["memory_limits"] == [{"limit": "commit_limit", "count": 1}]
    text = run_cli("triage", folder, "--jobs", "1").stdout
    assert "out of memory when written: the machine's commit limit in 1 of 2 dumps" in text
