"""`triage --memory-cap` on Windows: a job object that caps the committed memory of the
process that puts itself in it (a triage worker, from its initializer), through ctypes.

As Microsoft documents job objects: CreateJobObjectW, SetInformationJobObject with a
JOBOBJECT_EXTENDED_LIMIT_INFORMATION whose LimitFlags hold JOB_OBJECT_LIMIT_PROCESS_MEMORY
and ProcessMemoryLimit the cap, AssignProcessToJobObject on the current process (jobs nest
from Windows 8 on, so a worker already in its parent's job, a CI runner's or a terminal's,
can still get its own). Past the limit a commit fails: VirtualAlloc and so malloc return
NULL, Python raises MemoryError, as under Linux's RLIMIT_DATA; the process is not killed.
The dump is mapped read-only from its file, which commits nothing. The limit is read back
with QueryInformationJobObject, and only a limit read back counts as applied.

Under Wine (8.0, what the Windows lane runs) the calls succeed but nothing is enforced:
ntdll's NtSetInformationJobObject hands wineserver the LimitFlags alone (ProcessMemoryLimit
is dropped), and NtQueryInformationJobObject answers this class with zeros. A worker there
allocates past its cap unhindered; the read-back says so, and the cap counts as not applied.
Enforcement on Windows itself has not been observed here."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Optional

JOB_OBJECT_LIMIT_PROCESS_MEMORY = 0x00000100
JobObjectExtendedLimitInformation = 9


@dataclass(frozen=True)
class JobCap:
    """The job a process put itself in, and its limit as Windows reports it back."""

    handle: int
    cap: int  # what was asked: ProcessMemoryLimit
    flags_read_back: int  # LimitFlags, as QueryInformationJobObject answers
    limit_read_back: int  # ProcessMemoryLimit, likewise

    @property
    def confirmed(self) -> bool:
        return bool(self.flags_read_back & JOB_OBJECT_LIMIT_PROCESS_MEMORY) and self.limit_read_back == self.cap


if sys.platform == "win32":
    import ctypes
    from ctypes import wintypes as wt

    class _IO_COUNTERS(ctypes.Structure):
        _fields_ = [
            (name, ctypes.c_uint64)
            for name in (
                "ReadOperationCount",
                "WriteOperationCount",
                "OtherOperationCount",
                "ReadTransferCount",
                "WriteTransferCount",
                "OtherTransferCount",
            )
        ]

    class _BASIC_LIMIT(ctypes.Structure):  # JOBOBJECT_BASIC_LIMIT_INFORMATION (winnt.h)
        _fields_ = [
            ("PerProcessUserTimeLimit", ctypes.c_int64),
            ("PerJobUserTimeLimit", ctypes.c_int64),
            ("LimitFlags", wt.DWORD),
            ("MinimumWorkingSetSize", ctypes.c_size_t),
            ("MaximumWorkingSetSize", ctypes.c_size_t),
            ("ActiveProcessLimit", wt.DWORD),
            ("Affinity", ctypes.c_size_t),
            ("PriorityClass", wt.DWORD),
            ("SchedulingClass", wt.DWORD),
        ]

    class _EXTENDED_LIMIT(ctypes.Structure):  # JOBOBJECT_EXTENDED_LIMIT_INFORMATION: 144 bytes on x64
        _fields_ = [
            ("BasicLimitInformation", _BASIC_LIMIT),
            ("IoInfo", _IO_COUNTERS),
            ("ProcessMemoryLimit", ctypes.c_size_t),
            ("JobMemoryLimit", ctypes.c_size_t),
            ("PeakProcessMemoryUsed", ctypes.c_size_t),
            ("PeakJobMemoryUsed", ctypes.c_size_t),
        ]

    class _MEMORYSTATUSEX(ctypes.Structure):
        _fields_ = [("dwLength", wt.DWORD), ("dwMemoryLoad", wt.DWORD)] + [
            (name, ctypes.c_uint64)
            for name in (
                "ullTotalPhys",
                "ullAvailPhys",
                "ullTotalPageFile",
                "ullAvailPageFile",
                "ullTotalVirtual",
                "ullAvailVirtual",
                "ullAvailExtendedVirtual",
            )
        ]

    class _MEMORY_COUNTERS(ctypes.Structure):  # PROCESS_MEMORY_COUNTERS (psapi.h)
        _fields_ = [("cb", wt.DWORD), ("PageFaultCount", wt.DWORD)] + [
            (name, ctypes.c_size_t)
            for name in (
                "PeakWorkingSetSize",
                "WorkingSetSize",
                "QuotaPeakPagedPoolUsage",
                "QuotaPagedPoolUsage",
                "QuotaPeakNonPagedPoolUsage",
                "QuotaNonPagedPoolUsage",
                "PagefileUsage",  # the process's committed private bytes
                "PeakPagefileUsage",
            )
        ]

    _kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)

    def _declare(name, restype, *argtypes):
        fn = getattr(_kernel32, name)
        fn.restype = restype
        fn.argtypes = list(argtypes)
        return fn

    _CreateJobObjectW = _declare("CreateJobObjectW", wt.HANDLE, ctypes.c_void_p, wt.LPCWSTR)
    _SetInformationJobObject = _declare(
        "SetInformationJobObject", wt.BOOL, wt.HANDLE, ctypes.c_int, ctypes.c_void_p, wt.DWORD
    )
    _QueryInformationJobObject = _declare(
        "QueryInformationJobObject",
        wt.BOOL,
        wt.HANDLE,
        ctypes.c_int,
        ctypes.c_void_p,
        wt.DWORD,
        ctypes.POINTER(wt.DWORD),
    )
    _AssignProcessToJobObject = _declare("AssignProcessToJobObject", wt.BOOL, wt.HANDLE, wt.HANDLE)
    _GetCurrentProcess = _declare("GetCurrentProcess", wt.HANDLE)
    _IsProcessInJob = _declare("IsProcessInJob", wt.BOOL, wt.HANDLE, wt.HANDLE, ctypes.POINTER(wt.BOOL))
    _CloseHandle = _declare("CloseHandle", wt.BOOL, wt.HANDLE)
    _GlobalMemoryStatusEx = _declare("GlobalMemoryStatusEx", wt.BOOL, ctypes.POINTER(_MEMORYSTATUSEX))
    # kernel32's name for psapi's GetProcessMemoryInfo since Windows 7
    _GetProcessMemoryInfo = _declare(
        "K32GetProcessMemoryInfo", wt.BOOL, wt.HANDLE, ctypes.POINTER(_MEMORY_COUNTERS), wt.DWORD
    )

    def _error(step: str) -> OSError:
        code = ctypes.get_last_error()
        return OSError(f"{step}: {ctypes.FormatError(code).strip()} (error {code})")

    def cap_this_process(cap: int) -> JobCap:
        """Put this process in a new job whose per-process memory limit is `cap` bytes;
        OSError naming the step that failed. The job's handle stays open for the process's
        life (a job lives while a process is in it; the handle is for the read-back)."""
        job = _CreateJobObjectW(None, None)
        if not job:
            raise _error("CreateJobObjectW")
        info = _EXTENDED_LIMIT()
        info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_PROCESS_MEMORY
        info.ProcessMemoryLimit = cap
        try:
            if not _SetInformationJobObject(
                job, JobObjectExtendedLimitInformation, ctypes.byref(info), ctypes.sizeof(info)
            ):
                raise _error("SetInformationJobObject")
            if not _AssignProcessToJobObject(job, _GetCurrentProcess()):
                raise _error("AssignProcessToJobObject")
        except OSError:
            _CloseHandle(job)
            raise
        return read_back(job, cap)

    def read_back(job: int, cap: int) -> JobCap:
        back = _EXTENDED_LIMIT()
        size = wt.DWORD()
        if not _QueryInformationJobObject(
            job, JobObjectExtendedLimitInformation, ctypes.byref(back), ctypes.sizeof(back), ctypes.byref(size)
        ):
            return JobCap(job, cap, 0, 0)
        return JobCap(job, cap, back.BasicLimitInformation.LimitFlags, back.ProcessMemoryLimit)

    def in_job(job: int) -> bool:
        """Whether this process is in `job`."""
        answer = wt.BOOL()
        return bool(_IsProcessInJob(_GetCurrentProcess(), job, ctypes.byref(answer))) and bool(answer.value)

    def physical_memory() -> Optional[int]:
        status = _MEMORYSTATUSEX()
        status.dwLength = ctypes.sizeof(status)
        return status.ullTotalPhys if _GlobalMemoryStatusEx(ctypes.byref(status)) else None

    def committed_bytes() -> Optional[int]:
        """This process's committed private memory, what the job's cap counts."""
        counters = _MEMORY_COUNTERS()
        counters.cb = ctypes.sizeof(counters)
        ok = _GetProcessMemoryInfo(_GetCurrentProcess(), ctypes.byref(counters), counters.cb)
        return counters.PagefileUsage if ok else None
