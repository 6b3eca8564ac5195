"""The two streams that say how much memory the process and the machine had committed:
ProcessVmCountersStream (22) and SystemMemoryInfoStream (21). Windows 10's dbghelp writes
both; older ones (17 of the 24 third-party dumps in ../shared lack them) and Wine's do not.

Layouts are minidumpapiset.h's, packed to 4 bytes. MINIDUMP_PROCESS_VM_COUNTERS_1 is not
a prefix of _2: revision 1 has no Flags, and its PrivateUsage sits where revision 2 keeps
PeakVirtualSize. A record of zeros (what an older bundle holds for bytes it did not keep) is
no record: None. A stream shorter than its revision's record, or with a page size that is no
power of two, raises ValueError (the reader's soft error for that stream).
"""

from __future__ import annotations

import re
import struct
from typing import Dict, Optional, Tuple

from dumpkit.target import ProcessMemory, SystemMemory

VM_COUNTERS_1_SIZE = 80
VM_COUNTERS_2_SIZE = 152
# MINIDUMP_PROCESS_VM_COUNTERS_2.Flags: which counters the record holds
VM_BASIC = 0x1  # the working set, pool and paging-file counters
VM_VIRTUALSIZE = 0x2
VM_EX = 0x4  # PrivateUsage
VM_JOB = 0x10

SYSTEM_MEMORY_INFO_SIZE = 148  # through the basic performance part; the full record is 492 bytes
_BASIC_INFO = 4  # MINIDUMP_SYSTEM_BASIC_INFORMATION after Revision and Flags
_BASIC_PERF = 116  # after the basic (52 bytes) and file-cache (60 bytes) parts
SYSMEM_BASICPERF = 0x2  # MINIDUMP_SYSMEMINFO1_BASICPERF: the commit charge and limit are there


def parse_vm_counters(data: bytes) -> Optional[ProcessMemory]:
    if not any(data):
        return None
    if len(data) < 2:
        raise ValueError(f"{len(data)} bytes, need at least {VM_COUNTERS_1_SIZE}")
    (revision,) = struct.unpack_from("<H", data, 0)
    if revision == 1:
        if len(data) < VM_COUNTERS_1_SIZE:
            raise ValueError(f"{len(data)} bytes, revision 1 needs {VM_COUNTERS_1_SIZE}")
        peak_ws, ws, _qpp, _qp, _qpnp, _qnp, _pagefile, peak_private, private = struct.unpack_from("<9Q", data, 8)
        return ProcessMemory(private, peak_private, ws, peak_ws)
    if revision != 2:
        raise ValueError(f"revision {revision}, expected 1 or 2")
    if len(data) < VM_COUNTERS_2_SIZE:
        raise ValueError(f"{len(data)} bytes, revision 2 needs {VM_COUNTERS_2_SIZE}")
    (flags,) = struct.unpack_from("<H", data, 2)
    if not flags & VM_BASIC:
        return None
    counters = struct.unpack_from("<18Q", data, 8)
    peak_ws, ws, _qpp, _qp, _qpnp, _qnp, pagefile, peak_private, peak_virtual, virtual, private = counters[:11]
    _pws, _shared, job_shared, job_private, job_peak, job_limit, job_total_limit = counters[11:]
    # PagefileUsage is the process's commit charge too: what PrivateUsage (flag EX) says
    private = private if flags & VM_EX else pagefile
    job = bool(flags & VM_JOB) and bool(job_limit or job_total_limit)
    return ProcessMemory(
        private_commit=private,
        peak_private_commit=peak_private,
        working_set=ws,
        peak_working_set=peak_ws,
        virtual_size=virtual if flags & VM_VIRTUALSIZE else None,
        peak_virtual_size=peak_virtual if flags & VM_VIRTUALSIZE else None,
        job_private_commit=job_private if job else None,
        job_peak_private_commit=job_peak if job else None,
        job_shared_commit=job_shared if job else None,
        job_private_commit_limit=(job_limit or None) if job else None,
        job_total_commit_limit=(job_total_limit or None) if job else None,
    )


def parse_system_memory(data: bytes) -> Optional[SystemMemory]:
    if not any(data):
        return None
    if len(data) < SYSTEM_MEMORY_INFO_SIZE:
        raise ValueError(f"{len(data)} bytes, need at least {SYSTEM_MEMORY_INFO_SIZE}")
    revision, flags = struct.unpack_from("<HH", data, 0)
    if revision != 1:
        raise ValueError(f"revision {revision}, expected 1")
    _timer, page, pages, _low_page, _high_page, _granularity, low, high, _affinity, cpus = struct.unpack_from(
        "<6IQQQI", data, _BASIC_INFO
    )
    if page == 0 or page & (page - 1):
        raise ValueError(f"page size {page} is not a power of two")
    available = committed = limit = peak = None
    if flags & SYSMEM_BASICPERF:
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


# -- the same counters as Microsoft's debugger engine prints them (`.dumpdebug`) -------------
# In a WinDbg session dbgeng reads the file; PykdTarget reads its words. Each stream is a
# `Stream N: type NAME (21), ...` line, then `  Field  :  value` lines under section lines
# (`  BasicInfo`, `  Process Counters`...); values are decimal with thousands commas or hex.
# SystemMemoryInfo's Flags are printed; the VM counters' are not, and the engine prints every
# counter, 0 where the record leaves it out (tests/sources/dumpdebug): 0 reads as absent.

COUNTER_STREAMS = ("SystemMemoryInfoStream", "ProcessVmCountersStream")
DUMPDEBUG_STREAM = re.compile(r"^Stream \d+: type (\S+)")  # a stream's first line; PykdTarget's reader too
_FIELD = re.compile(r"^\s+(\w+)\s*:\s*(0x[0-9a-fA-F]+|[0-9][0-9,]*)\s*$")
_SECTION = re.compile(r"^  (\w[\w ]*?)\s*$")

Fields = Dict[Tuple[str, str], int]  # (section, field) -> value; the stream's own fields under ""


def dumpdebug_fields(text: str) -> Dict[str, Fields]:
    """The two streams' fields from `.dumpdebug`'s text, by stream name."""
    out: Dict[str, Fields] = {}
    current: Optional[Fields] = None
    section = ""
    for line in text.splitlines():
        m = DUMPDEBUG_STREAM.match(line)
        if m:
            current = out.setdefault(m.group(1), {}) if m.group(1) in COUNTER_STREAMS else None
            section = ""
            continue
        if current is None:
            continue
        f = _FIELD.match(line)
        if f:
            raw = f.group(2)
            value = int(raw, 16) if raw.startswith("0x") else int(raw.replace(",", ""))
            current.setdefault((section, f.group(1)), value)
            continue
        s = _SECTION.match(line)
        if s:
            section = s.group(1)
    return out


def from_dumpdebug(text: str) -> Tuple[Optional[ProcessMemory], Optional[SystemMemory]]:
    """What `parse_vm_counters` and `parse_system_memory` read from the file, read from the
    engine's words instead; None for a stream it does not print or prints incompletely."""
    streams = dumpdebug_fields(text)
    process = _engine_process(streams.get("ProcessVmCountersStream", {}))
    return process, _engine_system(streams.get("SystemMemoryInfoStream", {}))


def _engine_process(f: Fields) -> Optional[ProcessMemory]:
    def counter(section: str, name: str) -> Optional[int]:
        return f.get((section, name)) or None

    c, j = "Process Counters", "Job Counters"
    ws, peak_ws = counter(c, "WorkingSetSize"), counter(c, "PeakWorkingSetSize")
    private = counter(c, "PrivateUsage") or counter(c, "PagefileUsage")
    peak_private = counter(c, "PeakPagefileUsage")
    if ws is None or peak_ws is None or private is None or peak_private is None:
        return None
    job_limit, job_total = counter(j, "JobPrivateCommitLimit"), counter(j, "JobTotalCommitLimit")
    job = job_limit is not None or job_total is not None
    return ProcessMemory(
        private_commit=private,
        peak_private_commit=peak_private,
        working_set=ws,
        peak_working_set=peak_ws,
        virtual_size=counter(c, "VirtualSize"),
        peak_virtual_size=counter(c, "PeakVirtualSize"),
        job_private_commit=f.get((j, "JobPrivateCommitUsage")) if job else None,
        job_peak_private_commit=f.get((j, "JobPeakPrivateCommitUsage")) if job else None,
        job_shared_commit=f.get((j, "JobSharedCommitUsage")) if job else None,
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
    available = committed = limit = peak = None
    if f.get(("", "Flags"), SYSMEM_BASICPERF) & SYSMEM_BASICPERF:
        perf = [
            f.get(("BasicPerfInfo", n)) for n in ("AvailablePages", "CommittedPages", "CommitLimit", "PeakCommitment")
        ]
        available, committed, limit, peak = (None if n is None else n * page for n in perf)
    return SystemMemory(page, pages * page, cpus, low, high, available, committed, limit, peak)
