"""A memory limit in the verdict: when the dump shows the process at the machine's commit
limit or its job object's (analysis/memory.py), and the crash is one a refused allocation
leads to, the verdict says so. Those crashes: an access violation in the NULL page (a malloc
result used unchecked), abort() (std::bad_alloc escaping to std::terminate) as a fail-fast
or an ending, a Fatal Python error (a MemoryError where none may be raised), an unhandled
C++ exception that is or may be std::bad_alloc, and STATUS_NO_MEMORY / STATUS_COMMITMENT_LIMIT.
The headline says "while", not "because": the dump shows the limit, not the refused
allocation. Any other verdict keeps its headline; the limit is then a line under the facts."""

from __future__ import annotations

from typing import Dict, Tuple

from dumpkit.analysis.advice import Step
from dumpkit.analysis.memory import limit_clause
from dumpkit.analysis.model import Evidence, MemoryLimit, Verdict, VerdictKind
from dumpkit.analysis.verdict.case import Case, Decision
from dumpkit.records import replace

NULL_PAGE_END = 0x10000  # Windows never maps the first 64 KiB: an access there is through NULL
FAST_FAIL_FATAL_APP_EXIT = 7  # abort()
STATUS_NO_MEMORY = 0xC0000017
STATUS_COMMITMENT_LIMIT = 0xC000012D

LESS_AT_ONCE = (
    "use less memory at once: a smaller batch, a smaller model or lower precision, fewer worker processes "
    "(each DataLoader worker or multiprocessing child commits memory of its own)"
)
_STEPS: Dict[MemoryLimit, Step] = {
    MemoryLimit.COMMIT_LIMIT: Step(
        "memory.commit_limit",
        "Raise the commit limit: a larger paging file, or one Windows manages (System > Advanced system settings "
        "> Performance > Advanced > Virtual memory), or close what else holds memory; or " + LESS_AT_ONCE + ".",
    ),
    MemoryLimit.JOB_COMMIT_LIMIT: Step(
        "memory.job_limit",
        "Raise the job object's memory limit (a container's --memory, the service's or the CI runner's setting), "
        "or " + LESS_AT_ONCE + ".",
    ),
}


def allocation_can_explain(case: Case, kind: VerdictKind) -> bool:
    """The crash is one a refused allocation leads to (the module docstring lists them)."""
    crash = case.crash
    if crash is None:
        return False
    if kind is VerdictKind.ACCESS_VIOLATION:
        return crash.access_address is not None and crash.access_address < NULL_PAGE_END
    if kind is VerdictKind.FASTFAIL:
        return crash.fastfail_code == FAST_FAIL_FATAL_APP_EXIT
    if kind is VerdictKind.CXX_EXCEPTION:
        return not crash.cxx_types or any("bad_alloc" in t for t in crash.cxx_types)
    if kind is VerdictKind.EXCEPTION:
        return crash.code in (STATUS_NO_MEMORY, STATUS_COMMITMENT_LIMIT)
    return kind in (VerdictKind.ABORT, VerdictKind.FATAL_PYTHON_ERROR)


def with_memory_said(verdict: Verdict, case: Case) -> Verdict:
    """A snapshot with no exception whose threads show no deadlock and no GIL holder: what
    the counters show (a limit, RAM so short the machine pages) goes into its evidence, for
    a process can seem stuck while it pages or while its allocations are refused."""
    memory = case.environment.memory
    if memory is None or not memory.findings or verdict.kind is not VerdictKind.NO_EXCEPTION:
        return verdict
    return replace(verdict, evidence=verdict.evidence + memory.findings)


def with_memory_limits(decision: Decision, case: Case) -> Decision:
    """`decision` with the memory limits the process was at said: the headline ends with the
    first, the evidence gives each with its numbers, and their ways out follow a runtime
    collision's (which names the module that struck) and come before the others."""
    memory = case.environment.memory
    v = decision.verdict
    if memory is None or not memory.limits_reached or not allocation_can_explain(case, v.kind):
        return decision
    headline = f"{v.headline}, while {limit_clause(memory, memory.limits_reached[0])}"
    verdict = replace(v, headline=headline, evidence=v.evidence + memory.findings)  # a short RAM too
    steps_so_far = decision.steps
    collision = next((i for i, s in enumerate(steps_so_far) if not s.id.startswith("collision.")), len(steps_so_far))
    ours: Tuple[Step, ...] = tuple(_STEPS[kind] for kind in memory.limits_reached)
    steps = steps_so_far[:collision] + ours + steps_so_far[collision:]
    said = tuple(Evidence(e) for e in memory.findings)
    findings = tuple(
        replace(f, title=headline, evidence=f.evidence + said) if f.title == v.headline else f
        for f in decision.findings
    )
    return Decision(verdict, steps, findings)
