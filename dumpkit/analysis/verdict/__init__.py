"""The verdict: one headline, a confidence, the evidence and what to do next.

`decide(case)` picks the module for the crash's exception code; each module (named after
the kind of crash) writes its own headline, evidence and steps. Pure over what the other
analyses established; the only outside call is `Case.read_code`, to show instructions."""

from __future__ import annotations

from typing import Callable, Dict, List, Tuple

from dumpkit.analysis import codes
from dumpkit.analysis.model import Finding, Verdict
from dumpkit.analysis.verdict import (
    access_violation,
    cxx_exception,
    fail_fast,
    heap_corruption,
    illegal_instruction,
    other,
    stack_overflow,
)
from dumpkit.analysis.verdict.case import (
    ACCESS_VIOLATION,
    CXX_EXCEPTION,
    FAIL_FAST,
    HEAP_CORRUPTION,
    ILLEGAL_INSTRUCTION,
    STACK_OVERFLOW,
    Case,
    exception_line,
    frame_limit,
)

__all__ = ["Case", "decide", "frame_limit"]

Decider = Callable[[Case, List[str], List[str]], Tuple[Verdict, List[Finding]]]

_BY_CODE: Dict[int, Decider] = {
    STACK_OVERFLOW: stack_overflow.decide,
    FAIL_FAST: fail_fast.decide,
    ACCESS_VIOLATION: access_violation.decide,
    ILLEGAL_INSTRUCTION: illegal_instruction.decide,
    CXX_EXCEPTION: cxx_exception.decide,
    HEAP_CORRUPTION: heap_corruption.decide,
}


def decide(case: Case) -> Tuple[Verdict, List[Finding]]:
    crash = case.crash
    if crash is None and case.problems:
        return Verdict(
            "no_exception",
            f"No exception record could be read: the dump is damaged ({len(case.problems)} problem(s) listed below)",
            "low",
            tuple(case.problems[:5]),
            ("Get the dump again from the machine that crashed; check that the copy is complete.",),
        ), []
    if crash is None:
        return Verdict(
            "no_exception",
            "No exception in this dump: it was written on request (a hang, a live snapshot), not by a crash",
            "high",
            ("the dump has no Exception stream",),
            ("Look at the threads' stacks for what each was waiting on.",),
        ), []
    evidence = [exception_line(crash, case.frame0)]
    # the table's steps minus "get a dump and run dumpkit analyze": this is that analysis
    steps = list(codes.steps_given_a_dump(codes.lookup_status(crash.code).next_steps))
    return _BY_CODE.get(crash.code, other.decide)(case, evidence, steps)
