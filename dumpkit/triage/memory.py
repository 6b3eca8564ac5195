"""`triage --memory-cap`: the most memory one worker process may take, so that one dump
whose analysis balloons (a million memory ranges, a hostile list) is reported as such
while the other workers and the run go on, instead of the machine swapping or the kernel's
OOM killer choosing a victim.

The cap is RLIMIT_DATA: on Linux (4.7+) it counts the heap and private writable mappings,
which is what an analysis allocates, and not the dump, which is mapped read-only from its
file (a 4 GiB full-memory dump costs its pages in the page cache, not data). An allocation
past it fails: Python raises MemoryError, which the worker turns into the dump's record;
native code that cannot cope kills its worker, which the pool reports for that dump and
replaces.

On Windows each worker puts itself in a job object with JOB_OBJECT_LIMIT_PROCESS_MEMORY
(winjob.py): committed memory, which again leaves out the read-only mapping of the dump.
The cap counts as applied only where Windows reads the limit back. Wine 8 accepts the job
and the limit but neither keeps nor enforces the limit (winjob.py says where), so under Wine
the cap is not applied, `applied_cap` says so, and a dump that eats memory is not stopped;
enforcement on Windows itself has not been observed here."""

from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING, Optional

from dumpkit.words import memory_size

if TYPE_CHECKING:
    from dumpkit.triage.winjob import JobCap

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
MIN_CAP = 64 << 20  # below this a worker cannot even import dumpkit
DEFAULT_FLOOR = 1 << 30

_applied: Optional[int] = None  # the cap set in this process by apply_cap
_job: Optional["JobCap"] = None  # Windows: the job apply_cap put this process in


def parse_size(text: str) -> int:
    """'800M', '4G', '4GiB', '1.5g', '123456' (bytes) -> bytes; ValueError with the reason."""
    m = _SIZE.match(text)
    if m is None:
        raise ValueError(f"{text!r} is not a size (examples: 800M, 4G)")
    value = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if value and value < MIN_CAP:
        raise ValueError(f"{text} is below the least a worker needs ({MIN_CAP >> 20} MiB); 0 means no cap")
    return value


def default_cap(jobs: int) -> Optional[int]:
    """Half the machine's memory shared by the workers, at least 1 GiB each; None where the
    machine's memory is not known."""
    if sys.platform == "win32":
        from dumpkit.triage.winjob import physical_memory

        total = physical_memory()
        if total is None:
            return None
    else:
        try:
            total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (AttributeError, ValueError, OSError):
            return None
    return max(DEFAULT_FLOOR, total // 2 // max(1, jobs))


def apply_cap(cap: Optional[int]) -> None:
    """Cap this process's memory at `cap` bytes (a worker's initializer): RLIMIT_DATA, or
    on Windows a job object. Where the platform refuses, or (Wine) does not read the limit
    back, applied_cap() stays None."""
    global _applied, _job
    if not cap:
        return
    if sys.platform == "win32":
        from dumpkit.triage.winjob import cap_this_process

        try:
            _job = cap_this_process(cap)
        except OSError:
            return
        if _job.confirmed:
            _applied = cap
        return
    try:
        import resource
    except ImportError:
        return
    try:
        _soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        limit = cap if hard == resource.RLIM_INFINITY else min(cap, hard)
        resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    except (ValueError, OSError):
        return
    _applied = limit


def applied_cap() -> Optional[int]:
    return _applied


def job() -> Optional["JobCap"]:
    """Windows: the job apply_cap put this process in, else None."""
    return _job


def describe(size: int) -> str:
    """A cap as the user wrote it, near enough: GiB from 1 GiB up, else as words writes sizes."""
    return memory_size(size)


def private_bytes() -> Optional[int]:
    """This process's private memory as the cap counts it, None where it cannot be read: on
    Linux the data segment's size (/proc/self/statm: heap and private writable mappings,
    what RLIMIT_DATA limits); on Windows committed private bytes; elsewhere the peak
    resident size. A triage worker reports it after each batch, and the run replaces its
    workers when it has grown (run.py): memory an analysis leaves behind (fragmentation)
    stays with the worker that made it."""
    if sys.platform == "win32":
        from dumpkit.triage.winjob import committed_bytes

        return committed_bytes()
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[5]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024
