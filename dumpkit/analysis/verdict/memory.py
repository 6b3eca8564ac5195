"""A memory limit in the verdict: when the dump shows that the process was at the machine's
commit limit, its job object's, or the end of its 32-bit address space
(analysis/memory.py), an allocation had no room. That is what most likely led to an access
violation at a NULL from malloc, an abort() over std::bad_alloc, a fail-fast, a heap error
or a stack page that could not be committed. The headline says "while", not "because": the
dump shows the limit, not the failed allocation. A verdict whose cause the stack or the CPU
already shows (a recursion, an oversized frame, an illegal instruction, a missing DLL)
keeps its headline, and the limit stays an environment finding."""

from __future__ import annotations

from typing import Dict, Tuple

from dumpkit.analysis.advice import Step
from dumpkit.analysis.model import Evidence, MemoryLimit, VerdictKind
from dumpkit.analysis.verdict.case import Case, Decision
from dumpkit.records import replace

# verdicts whose cause is not an allocation that failed
_OWN_CAUSE = frozenset(
    {VerdictKind.RECURSION, VerdictKind.OVERSIZED_FRAME, VerdictKind.ILLEGAL_INSTRUCTION, VerdictKind.DELAY_LOAD}
)

_WHILE: Dict[MemoryLimit, str] = {
    MemoryLimit.COMMIT_LIMIT: "while the machine was out of memory (its commit limit reached)",
    MemoryLimit.JOB_COMMIT_LIMIT: "while the process was at its job object's memory limit",
    MemoryLimit.ADDRESS_SPACE: "while the 32-bit process's address space was used up",
}

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
    MemoryLimit.ADDRESS_SPACE: Step(
        "memory.address_space",
        "Run a 64-bit Python: a 32-bit process has 2 GiB of address space (4 GiB when /LARGEADDRESSAWARE on 64-bit "
        "Windows), and TensorFlow and most ML wheels have no 32-bit builds.",
    ),
}


def with_memory_limits(decision: Decision, case: Case) -> Decision:
    """`decision` with the memory limits the process had reached said: the headline ends
    with the first, the evidence gives each with its numbers, their ways out come first."""
    memory = case.environment.memory
    v = decision.verdict
    if memory is None or not memory.limits_reached or v.kind in _OWN_CAUSE:
        return decision
    headline = f"{v.headline}, {_WHILE[memory.limits_reached[0]]}"
    evidence = v.evidence + memory.findings
    steps: Tuple[Step, ...] = tuple(_STEPS[kind] for kind in memory.limits_reached) + decision.steps
    verdict = replace(v, headline=headline, evidence=evidence)
    said = tuple(Evidence(e) for e in memory.findings)
    findings = tuple(
        replace(f, title=headline, evidence=f.evidence + said) if f.title == v.headline else f
        for f in decision.findings
    )
    return Decision(verdict, steps, findings)
