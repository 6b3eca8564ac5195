"""The verdict: one headline, a confidence, the evidence and what to do next.

`decide(case)` picks the module for the crash's exception code; each module (named after
the kind of crash) writes its own headline, evidence and steps. Pure over what the other
analyses established; the only outside call is `Case.read_code`, to show instructions."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Dict, List, Tuple

from dumpkit.analysis import codes
from dumpkit.analysis.coverage import rests_on_guesses
from dumpkit.analysis.model import Confidence, Finding, Verdict, VerdictKind
from dumpkit.analysis.pyentry import INTERPRETER, innermost_python
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
            VerdictKind.NO_EXCEPTION,
            f"No exception record could be read: the dump is damaged ({len(case.problems)} problem(s) listed below)",
            Confidence.LOW,
            tuple(case.problems[:5]),
            ("Get the dump again from the machine that crashed; check that the copy is complete.",),
        ), []
    if crash is None:
        return Verdict(
            VerdictKind.NO_EXCEPTION,
            "No exception in this dump: it was written on request (a hang, a live snapshot), not by a crash",
            Confidence.HIGH,
            ("the dump has no Exception stream",),
            ("Look at the threads' stacks for what each was waiting on.",),
        ), []
    evidence = [exception_line(crash, case.frame0)]
    # the table's steps minus "get a dump and run dumpkit analyze": this is that analysis
    steps = list(codes.steps_given_a_dump(codes.lookup_status(crash.code).next_steps))
    verdict, findings = _BY_CODE.get(crash.code, other.decide)(case, evidence, steps)
    verdict, findings = _from_python(verdict, findings, case)
    return _within_the_evidence(_for_what_is_loaded(verdict, case), case), findings


def _from_python(verdict: Verdict, findings: List[Finding], case: Case) -> Tuple[Verdict, List[Finding]]:
    """A native crash (not a stack overflow: those say it with their recursion) in a Python
    process names the Python code that led into it and how, from the C stack alone (a
    ctypes call, an extension module, the interpreter's own code) and, when the dump holds
    the Python stack, with the innermost Python frame (issue #29)."""
    entry = case.python_entry  # below the top frame: a stack overflow's verdicts say it themselves
    if verdict.kind.is_stack or entry is None or (entry.via == INTERPRETER and entry.python_frame is None):
        return verdict, findings
    headline = f"{verdict.headline}, {entry.words}"
    evidence = verdict.evidence + (entry.evidence,)
    return (
        replace(verdict, headline=headline, evidence=evidence),
        [replace(f, title=headline) if f.title == verdict.headline else f for f in findings],
    )


_PY_THREAD_STACK = "threading.stack_size(), or a larger /STACK reserve"
_NATIVE_THREAD_STACK = "the stack size passed to CreateThread or _beginthreadex, or a larger /STACK reserve"


def _for_what_is_loaded(verdict: Verdict, case: Case) -> Verdict:
    """Advice follows the process (issue #18): without a Python runtime loaded, the code
    tables' faulthandler step becomes its native counterpart (the debugger's stack with the
    module's PDB) and a thread's stack is sized without `threading`; without TensorFlow,
    TensorFlow/absl steps are dropped; page-heap commands name the process's executable."""
    env = case.environment
    python = case.python is not None or env.python is not None or env.python_module is not None
    tensorflow = bool(env.tensorflow)
    module = case.crash.module if case.crash is not None and case.crash.module else "the faulting module"
    native = (
        f"Open the dump in WinDbg or Visual Studio with {module}'s PDB (`.ecxr` then `kn`) "
        "for the faulting source line and its callers."
    )
    exe = case.executable
    stacks_read = case.python is not None and case.python.status == "read" and bool(case.python.threads)
    innermost = innermost_python(case.python_thread)
    have_stacks = (
        "The Python stack of every thread is in this report (read from the dump), so there is no need to rerun "
        "with faulthandler: start at the crashing thread's innermost Python frame"
        + (f", {innermost}." if innermost else ".")
    )
    kept: List[str] = []
    for step in verdict.next_steps:
        low = step.lower()
        if not python and "faulthandler" in low:
            step = native
        elif stacks_read and "faulthandler" in low:
            step = have_stacks
        elif not tensorflow and ("tensorflow" in low or "absl" in low):
            continue
        if not python:
            step = step.replace(_PY_THREAD_STACK, _NATIVE_THREAD_STACK)
        if exe and "gflags" in low:
            step = step.replace("python.exe", exe)
        if step not in kept:
            kept.append(step)
    return verdict if tuple(kept) == verdict.next_steps else replace(verdict, next_steps=tuple(kept))


FAULT_KINDS = (VerdictKind.ACCESS_VIOLATION, VerdictKind.ILLEGAL_INSTRUCTION)


def _evidence_span(verdict: Verdict, case: Case) -> Tuple[int, int]:
    """The frames (first, end) the verdict rests on: for a recursion, two repetitions of its
    cycle (the others repeat them; where on top it ran out does not change it); for an
    oversized frame, that frame and its caller; for a fault, the faulting frame; otherwise
    the top three frames (a fail-fast's raiser)."""
    cycles = case.thread.cycles if case.thread is not None else ()
    if verdict.kind is VerdictKind.RECURSION and cycles:
        c = cycles[0]
        return c.first_frame, c.first_frame + 2 * c.period
    if verdict.kind is VerdictKind.OVERSIZED_FRAME:
        big = stack_overflow.oversized_culprit(case)
        return (big.frame_index, big.frame_index + 2) if big is not None else (0, 3)
    if verdict.kind in FAULT_KINDS:
        return 0, 1  # the faulting frame (from the exception context) and its code
    return 0, 3


def _within_the_evidence(verdict: Verdict, case: Case) -> Verdict:
    """A verdict drawn from guessed frames is never "high" (issue #15): one of the frames it
    rests on was found by scanning without a confirming call site, or (for verdicts about
    the stack: cycles and frame sizes) lies in a module whose image was not found, so its
    size, callers and code are unknown. What the exception record alone proves (the
    access, the fail-fast code) does not need the images."""
    if verdict.confidence is not Confidence.HIGH:
        return verdict
    why = rests_on_guesses(
        case.coverage, case.frames, _evidence_span(verdict, case), images_matter=verdict.kind.is_stack
    )
    if why is None:
        return verdict
    return replace(
        verdict,
        confidence=Confidence.MEDIUM,
        evidence=verdict.evidence + (f"confidence is medium, not high: {why} (see Missing images)",),
    )
