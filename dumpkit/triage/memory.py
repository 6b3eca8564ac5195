"""`triage --memory-cap`: the most memory one worker process may take, so that one dump
whose analysis balloons (a million memory ranges, a hostile list) is reported as such
while the other workers and the run go on, instead of the machine swapping or the kernel's
OOM killer choosing a victim.

The cap is RLIMIT_DATA: on Linux (4.7+) it counts the heap and private writable mappings,
which is what an analysis allocates, and not the dump, which is mapped read-only from its
file (a 4 GiB full-memory dump costs its pages in the page cache, not data). An allocation
past it fails: Python raises MemoryError, which the worker turns into the dump's record;
native code that cannot cope kills its worker, which the pool reports for that dump and
replaces. Windows would need a job object per worker (not done: the cap is not applied
there, and `applied_cap` says so)."""

from __future__ import annotations

import os
import re
from typing import Optional

from dumpkit.words import human_bytes

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
MIN_CAP = 64 << 20  # below this a worker cannot even import dumpkit
DEFAULT_FLOOR = 1 << 30

_applied: Optional[int] = None  # the cap set in this process by apply_cap


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
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None
    return max(DEFAULT_FLOOR, total // 2 // max(1, jobs))


def apply_cap(cap: Optional[int]) -> None:
    """Set this process's data limit to `cap` bytes (a worker's initializer). Where the
    platform has no RLIMIT_DATA, or refuses, nothing changes and applied_cap() stays None."""
    global _applied
    if not cap:
        return
    try:
        import resource
    except ImportError:  # Windows
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


def describe(size: int) -> str:
    """A cap as the user wrote it, near enough: GiB from 1 GiB up, else as words writes sizes."""
    return f"{size / (1 << 30):.1f} GiB" if size >= 1 << 30 else human_bytes(size)
