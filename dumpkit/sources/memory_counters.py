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
from typing import Optional

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
    job = bool(flags & _JOB)
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
