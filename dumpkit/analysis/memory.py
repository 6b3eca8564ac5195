"""Was the process out of memory? What it and the machine had committed when the dump was
written, and the limits it had reached, from the ProcessVmCounters and SystemMemoryInfo
streams (sources/memory_counters.py).

Windows does not overcommit: every allocation is charged against the commit limit (RAM
plus the paging files) when it is made, not when it is touched. Past the limit, VirtualAlloc
and HeapAlloc fail, so malloc returns NULL and `new` throws std::bad_alloc. A Python
program sees a MemoryError, an abort() (bad_alloc escaping a C++ library), or an access
violation (a NULL from malloc used unchecked). A job object (a container, a service, a
CI runner) can set a lower limit, and a 32-bit process also runs out of its 2 or 4 GiB of
address space first. None of this is in the exception record. The counters show it.

Pure over the two records; the verdict uses `limits_reached` (verdict/memory.py)."""

from __future__ import annotations

from typing import List, Optional, Tuple

from dumpkit.analysis.model import MemoryLimit, MemoryUse
from dumpkit.target import ProcessMemory, SystemMemory
from dumpkit.words import memory_size

# A limit is "reached" at this share of it: the allocation that failed is gone from the
# counters, and a large one (a tensor, a model's weights) fails with a few percent still free.
NEAR_LIMIT_PERCENT = 95
LARGEST_32BIT_SPACE = 1 << 32  # a WOW64 process with /LARGEADDRESSAWARE: 4 GiB


def memory_use(process: Optional[ProcessMemory], system: Optional[SystemMemory]) -> Optional[MemoryUse]:
    """The process's and the machine's memory as the dump records them; None when it
    records neither."""
    if process is None and system is None:
        return None
    found: List[Tuple[MemoryLimit, str]] = []
    private = process.private_commit if process is not None else None
    if system is not None and system.committed is not None and system.commit_limit:
        if _near(system.committed, system.commit_limit):
            found.append((MemoryLimit.COMMIT_LIMIT, _machine_at_limit(system.committed, system.commit_limit, private)))
    job_commit, job_limit = _job(process)
    if job_commit is not None and job_limit is not None and _near(job_commit, job_limit):
        found.append((MemoryLimit.JOB_COMMIT_LIMIT, _job_at_limit(job_commit, job_limit)))
    space = _address_space(system)
    virtual = process.virtual_size if process is not None else None
    if space is not None and virtual is not None and space <= LARGEST_32BIT_SPACE and _near(virtual, space):
        found.append((MemoryLimit.ADDRESS_SPACE, _space_used_up(virtual, space)))
    return MemoryUse(
        private_commit=private,
        peak_private_commit=process.peak_private_commit if process is not None else None,
        working_set=process.working_set if process is not None else None,
        peak_working_set=process.peak_working_set if process is not None else None,
        virtual_size=virtual,
        address_space=space,
        physical_memory=system.physical_memory if system is not None else None,
        available_memory=system.available_memory if system is not None else None,
        system_commit=system.committed if system is not None else None,
        system_commit_limit=system.commit_limit if system is not None else None,
        job_commit=job_commit,
        job_commit_limit=job_limit,
        limits_reached=tuple(kind for kind, _ in found),
        findings=tuple(sentence for _, sentence in found),
    )


def _near(used: int, limit: int) -> bool:
    return 100 * used >= NEAR_LIMIT_PERCENT * limit


def _job(process: Optional[ProcessMemory]) -> Tuple[Optional[int], Optional[int]]:
    """The job's commit and its tighter limit, when the process ran in a job that sets one.
    The process's own commit counts too: a per-process limit is measured against it."""
    if process is None:
        return None, None
    limits = [n for n in (process.job_private_commit_limit, process.job_total_commit_limit) if n]
    if not limits:
        return None, None
    used = max(n for n in (process.job_private_commit, process.private_commit) if n is not None)
    return used, min(limits)


def _address_space(system: Optional[SystemMemory]) -> Optional[int]:
    if system is None or system.highest_user_address <= system.lowest_user_address:
        return None
    return system.highest_user_address - system.lowest_user_address + 1


def _share(used: int, limit: int) -> str:
    return f"{memory_size(used)} of {memory_size(limit)} ({min(100, 100 * used // limit)}%)"


def _machine_at_limit(committed: int, limit: int, private: Optional[int]) -> str:
    held = ""
    if private:
        held = f"; this process held {memory_size(private)} of it"
        held += ", other programs the rest" if 2 * private < committed else ""
    return (
        f"The machine's commit charge was at its limit when the dump was written: {_share(committed, limit)} "
        f"committed{held}. The limit is RAM plus the paging files; past it no allocation can be committed, "
        "so malloc returns NULL and new throws std::bad_alloc (a MemoryError, an abort() or an access "
        "violation at or near address 0 in the program)."
    )


def _job_at_limit(committed: int, limit: int) -> str:
    return (
        f"The process ran in a job object that limits its commit (a container, a service or a CI runner "
        f"sets one), and was at that limit: {_share(committed, limit)}. Past it, allocations fail "
        "however much memory the machine has free."
    )


def _space_used_up(virtual: int, space: int) -> str:
    return (
        f"The 32-bit process had used up its address space: {_share(virtual, space)} reserved or committed. "
        "A large allocation fails there even with memory free; a 64-bit Python has no such limit."
    )
