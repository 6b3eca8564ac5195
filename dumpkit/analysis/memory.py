"""Was the process out of memory? What it and the machine had committed when the dump was
written, and the limits it was at, from the ProcessVmCounters and SystemMemoryInfo streams
(sources/memory_counters.py).

Windows does not overcommit: memory a program commits (the heap, malloc, new, a tensor's
buffer) is charged against the commit limit, RAM plus the paging files, when it is
committed, not when it is touched. Near the limit a commit is refused unless Windows can grow
a paging file in time; then VirtualAlloc and HeapAlloc fail, malloc returns NULL and `new`
throws std::bad_alloc. A Python program sees a MemoryError, an abort() (bad_alloc escaping a
C++ library) or an access violation at NULL (a malloc result used unchecked). A job object (a
container, a service, a CI runner) can set a lower limit on its processes' commit. None of
this is in the exception record; the counters show it.

Pure over the two records; verdict/memory.py says a limit in the verdicts it can explain.
A 32-bit process's own address space is not judged: the VirtualSize of a WOW64 process
counts its 64-bit side too, and a 64-bit writer records the 64-bit address space's top."""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from dumpkit.analysis.model import MemoryLimit, MemoryUse
from dumpkit.target import ProcessMemory, SystemMemory
from dumpkit.words import memory_size, percent_of

# A limit is "reached" at this share of it: the allocation that failed is not in the counters,
# and a large one (a tensor, a model's weights) fails with a few percent of the limit still free.
NEAR_LIMIT_PERCENT = 95
# RAM available (free or on standby) under this share of it: the memory manager is taking pages
# from working sets to the paging file, and threads that touch them wait on the disk
SHORT_OF_RAM_PERCENT = 5

# how a verdict and a triage group name each limit
LIMIT_WORDS: Dict[MemoryLimit, str] = {
    MemoryLimit.COMMIT_LIMIT: "the machine's commit limit",
    MemoryLimit.JOB_COMMIT_LIMIT: "its job object's commit limit",
}


def memory_use(process: Optional[ProcessMemory], system: Optional[SystemMemory]) -> Optional[MemoryUse]:
    """The process's and the machine's memory as the dump records them; None when it
    records neither."""
    if process is None and system is None:
        return None
    found: List[Tuple[MemoryLimit, str]] = []
    private = process.private_commit if process is not None else None
    committed = system.committed if system is not None else None
    limit = system.commit_limit if system is not None else None
    if committed is not None and limit and _near(committed, limit):
        found.append((MemoryLimit.COMMIT_LIMIT, _machine_at_limit(committed, limit, private)))
    job_commit, job_limit = _job(process)
    if job_commit is not None and job_limit is not None and _near(job_commit, job_limit):
        found.append((MemoryLimit.JOB_COMMIT_LIMIT, _job_at_limit(job_commit, job_limit)))
    paging = _short_of_ram(system) if system is not None else None
    return MemoryUse(
        private_commit=private,
        peak_private_commit=process.peak_private_commit if process is not None else None,
        working_set=process.working_set if process is not None else None,
        peak_working_set=process.peak_working_set if process is not None else None,
        virtual_size=process.virtual_size if process is not None else None,
        physical_memory=system.physical_memory if system is not None else None,
        available_memory=system.available_memory if system is not None else None,
        system_commit=committed,
        system_commit_limit=limit,
        job_commit=job_commit,
        job_commit_limit=job_limit,
        limits_reached=tuple(kind for kind, _ in found),
        findings=tuple(sentence for _, sentence in found) + ((paging,) if paging else ()),
    )


def limit_clause(memory: MemoryUse, limit: MemoryLimit) -> str:
    """'the machine's commit charge was at 99% of its limit': the clause a verdict ends with."""
    if limit is MemoryLimit.COMMIT_LIMIT and memory.system_commit is not None and memory.system_commit_limit:
        return f"the machine's commit charge was at {percent_of(memory.system_commit, memory.system_commit_limit)}% of its limit"
    if limit is MemoryLimit.JOB_COMMIT_LIMIT and memory.job_commit is not None and memory.job_commit_limit:
        return f"its job object's commit was at {percent_of(memory.job_commit, memory.job_commit_limit)}% of the job's limit"
    return f"it was at {LIMIT_WORDS[limit]}"


def _near(used: int, limit: int) -> bool:
    return 100 * used >= NEAR_LIMIT_PERCENT * limit


def _job(process: Optional[ProcessMemory]) -> Tuple[Optional[int], Optional[int]]:
    """(what the job counts, its limit) for the job limit the process was nearest, when it ran
    in a job that sets one: its processes' private commit against the private limit, and that
    with their shared commit against the total limit."""
    if process is None or process.job_private_commit is None:
        return None, None
    pairs = []
    if process.job_private_commit_limit:
        pairs.append((process.job_private_commit, process.job_private_commit_limit))
    if process.job_total_commit_limit:
        pairs.append((process.job_private_commit + (process.job_shared_commit or 0), process.job_total_commit_limit))
    if not pairs:
        return None, None
    return max(pairs, key=lambda p: p[0] / p[1])


def _short_of_ram(system: SystemMemory) -> Optional[str]:
    available, ram = system.available_memory, system.physical_memory
    if available is None or not ram or 100 * available >= SHORT_OF_RAM_PERCENT * ram:
        return None
    return (
        f"The machine was short of RAM when the dump was written: {memory_size(available)} of its {memory_size(ram)} "
        f"available ({percent_of(available, ram)}%). Windows then moves memory out to the paging file and back, and a "
        "thread that touches memory on disk waits for it: a process can seem stuck while it pages."
    )


def _share(used: int, limit: int) -> str:
    return f"{memory_size(used)} of {memory_size(limit)} ({percent_of(used, limit)}%)"


def _machine_at_limit(committed: int, limit: int, private: Optional[int]) -> str:
    held = ""
    if private:
        held = f", of which this process held {memory_size(private)}"
        held += " (other processes and the kernel the rest)" if 2 * private < committed else ""
    return (
        f"The machine's commit charge was at {percent_of(committed, limit)}% of its limit when the dump was written: "
        f"{memory_size(committed)} of {memory_size(limit)}{held}. The limit is RAM plus the paging files; near it, "
        "memory a program asks to commit is refused unless Windows can grow a paging file in time, so malloc "
        "returns NULL and new throws std::bad_alloc (in the program: a MemoryError, an abort(), or an access "
        "violation at or near address 0)."
    )


def _job_at_limit(committed: int, limit: int) -> str:
    return (
        "The process ran in a job object that limits its processes' commit (a container, a service or a CI runner "
        f"sets one), and the job was at its limit: {_share(committed, limit)}. There the job's allocations fail "
        "however much memory the machine has free."
    )
