"""The two streams that say how much memory the process and the machine had committed:
ProcessVmCountersStream (22) and SystemMemoryInfoStream (21), which Windows 10's dbghelp
writes into every minidump (Wine's writes neither).

Layouts are minidumpapiset.h's, packed to 4 bytes. MINIDUMP_PROCESS_VM_COUNTERS_1 is not
a prefix of _2: revision 1 has no Flags, and its PrivateUsage sits where revision 2 keeps
PeakVirtualSize. A stream shorter than its revision's record, or with a page size that is
no power of two, raises ValueError (the reader's soft error for that stream); a record of
zeros (what an older bundle holds for bytes it did not keep) is no record: None.
"""

from __future__ import annotations

import struct
import re
from typing import Dict, Optional, Tuple

from dumpkit.target import ProcessMemory, SystemMemory

VM_COUNTERS_1_SIZE = 80
VM_COUNTERS_2_SIZE = 152
# MINIDUMP_PROCESS_VM_COUNTERS_2.Flags
_VIRTUALSIZE = 0x2
_JOB = 0x10

SYSTEM_MEMORY_INFO_SIZE = 148  # through the basic performance part; the full record is 492 bytes
_BASIC_INFO = 4  # MINIDUMP_SYSTEM_BASIC_INFORMATION after Revision and Flags
_BASIC_PERF = 116  # after the basic (52 bytes) and file-cache (60 bytes) parts
_BASICPERF_FLAG = 0x2  # MINIDUMP_SYSMEMINFO1_BASICPERF


def parse_vm_counters(data: bytes) -> Optional[ProcessMemory]:
    if len(data) < 2:
        raise ValueError(f"{len(data)} bytes, need at least {VM_COUNTERS_1_SIZE}")
    (revision,) = struct.unpack_from("<H", data, 0)
    if revision == 1:
        if len(data) < VM_COUNTERS_1_SIZE:
            raise ValueError(f"{len(data)} bytes, revision 1 needs {VM_COUNTERS_1_SIZE}")
        peak_ws, ws, _qpp, _qp, _qpnp, _qnp, _pagefile, peak_private, private = struct.unpack_from("<9Q", data, 8)
        if not any((peak_ws, ws, peak_private, private)):
            return None
        return ProcessMemory(private, peak_private, ws, peak_ws)
    if revision != 2:
        raise ValueError(f"revision {revision}, expected 1 or 2")
    if len(data) < VM_COUNTERS_2_SIZE:
        raise ValueError(f"{len(data)} bytes, revision 2 needs {VM_COUNTERS_2_SIZE}")
    (flags,) = struct.unpack_from("<H", data, 2)
    counters = struct.unpack_from("<18Q", data, 8)
    peak_ws, ws, _qpp, _qp, _qpnp, _qnp, _pagefile, peak_private, peak_virtual, virtual, private = counters[:11]
    _pws, _shared, _job_shared, job_private, job_peak, job_limit, job_total_limit = counters[11:]
    if not any(counters):
        return None
    job = bool(flags & _JOB) and bool(job_limit or job_total_limit)  # the job's counters matter under a limit
    return ProcessMemory(
        private_commit=private,
        peak_private_commit=peak_private,
        working_set=ws,
        peak_working_set=peak_ws,
        virtual_size=virtual if flags & _VIRTUALSIZE else None,
        peak_virtual_size=peak_virtual if flags & _VIRTUALSIZE else None,
        job_private_commit=job_private if job else None,
        job_peak_private_commit=job_peak if job else None,
        job_private_commit_limit=job_limit if job and job_limit else None,
        job_total_commit_limit=job_total_limit if job and job_total_limit else None,
    )


# -- the same counters as Microsoft's debugger engine prints them (`.dumpdebug`) -------------
# In a WinDbg session dbgeng reads the file; PykdTarget reads its words. Each stream is a
# `Stream N: type NAME (21), ...` line, then `  Field  :  value` lines under section lines
# (`  BasicInfo`, `  Process Counters`...); values are decimal with thousands commas or hex.
# The VM counters' Flags are not printed: a counter the engine leaves out is None.

_STREAM = re.compile(r"^Stream \d+: type (\S+)")
_FIELD = re.compile(r"^\s+(\w+)\s*:\s*(0x[0-9a-fA-F]+|[0-9][0-9,]*)\s*$")
_SECTION = re.compile(r"^  (\w[\w ]*?)\s*$")

Fields = Dict[Tuple[str, str], int]  # (section, field) -> value; the stream's own fields under ""


def dumpdebug_fields(text: str) -> Dict[str, Fields]:
    """The two streams' fields from `.dumpdebug`'s text, by stream name."""
    out: Dict[str, Fields] = {}
    current: Optional[Fields] = None
    section = ""
    for line in text.splitlines():
        m = _STREAM.match(line)
        if m:
            current = out.setdefault(m.group(1), {}) if m.group(1) in _ENGINE_STREAMS else None
            section = ""
            continue
        if current is None:
            continue
        f = _FIELD.match(line)
        if f:
            raw = f.group(2)
            current.setdefault(
                (section, f.group(1)), int(raw, 16) if raw.startswith("0x") else int(raw.replace(",", ""))
            )
            continue
        s = _SECTION.match(line)
        if s:
            section = s.group(1)
    return out


_ENGINE_STREAMS = ("SystemMemoryInfoStream", "ProcessVmCountersStream")


def from_dumpdebug(text: str) -> Tuple[Optional[ProcessMemory], Optional[SystemMemory]]:
    """What `parse_vm_counters` and `parse_system_memory` read from the file, read from the
    engine's words instead; None for a stream it does not print or prints incompletely."""
    streams = dumpdebug_fields(text)
    return _engine_process(streams.get("ProcessVmCountersStream", {})), _engine_system(
        streams.get("SystemMemoryInfoStream", {})
    )


def _engine_process(f: Fields) -> Optional[ProcessMemory]:
    c = "Process Counters"
    needed = [(c, n) for n in ("PrivateUsage", "PeakPagefileUsage", "WorkingSetSize", "PeakWorkingSetSize")]
    if not all(k in f for k in needed):
        return None
    job_limit = f.get(("Job Counters", "JobPrivateCommitLimit")) or None
    job_total = f.get(("Job Counters", "JobTotalCommitLimit")) or None
    job = job_limit is not None or job_total is not None
    private, peak_private, ws, peak_ws = (f[k] for k in needed)
    return ProcessMemory(
        private_commit=private,
        peak_private_commit=peak_private,
        working_set=ws,
        peak_working_set=peak_ws,
        virtual_size=f.get((c, "VirtualSize")),
        peak_virtual_size=f.get((c, "PeakVirtualSize")),
        job_private_commit=f.get(("Job Counters", "JobPrivateCommitUsage")) if job else None,
        job_peak_private_commit=f.get(("Job Counters", "JobPeakPrivateCommitUsage")) if job else None,
        job_private_commit_limit=job_limit,
        job_total_commit_limit=job_total,
    )


def _engine_system(f: Fields) -> Optional[SystemMemory]:
    b = "BasicInfo"
    names = ("PageSize", "NumberOfPhysicalPages", "NumberOfProcessors", "MinimumUserModeAddress")
    needed = [(b, n) for n in names + ("MaximumUserModeAddress",)]
    if not all(k in f for k in needed):
        return None
    page, pages, cpus, low, high = (f[k] for k in needed)
    if page == 0 or page & (page - 1):
        return None
    perf = [f.get(("BasicPerfInfo", n)) for n in ("AvailablePages", "CommittedPages", "CommitLimit", "PeakCommitment")]
    available, committed, limit, peak = (None if n is None else n * page for n in perf)
    return SystemMemory(page, pages * page, cpus, low, high, available, committed, limit, peak)


def parse_system_memory(data: bytes) -> Optional[SystemMemory]:
    if len(data) < SYSTEM_MEMORY_INFO_SIZE:
        raise ValueError(f"{len(data)} bytes, need at least {SYSTEM_MEMORY_INFO_SIZE}")
    revision, flags = struct.unpack_from("<HH", data, 0)
    if revision != 1:
        raise ValueError(f"revision {revision}, expected 1")
    _timer, page, pages, _low_page, _high_page, _granularity, low, high, _affinity, cpus = struct.unpack_from(
        "<6IQQQI", data, _BASIC_INFO
    )
    if not any((page, pages, high, cpus)):
        return None
    if page == 0 or page & (page - 1):
        raise ValueError(f"page size {page} is not a power of two")
    available = committed = limit = peak = None
    if flags & _BASICPERF_FLAG:
        available, committed, limit, peak = (n * page for n in struct.unpack_from("<4Q", data, _BASIC_PERF))
    return SystemMemory(
        page_size=page,
        physical_memory=pages * page,
        processors=cpus,
        lowest_user_address=low,
        highest_user_address=high,
        available_memory=available,
        committed=committed,
        commit_limit=limit,
        peak_commitment=peak,
    )
