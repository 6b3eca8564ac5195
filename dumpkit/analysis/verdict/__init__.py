"""The verdict: one headline, a confidence, the evidence and what to do next.

`decide(case)` picks the module for the crash's exception code; each module (named after
the kind of crash) writes its own headline, evidence and steps. Pure over what the other
analyses established; the only outside call is `Case.read_code`, to show instructions."""

from __future__ import annotations

from typing import Callable, Dict, List, Sequence, Tuple

from dumpkit.analysis import codes
from dumpkit.analysis.advice import EXE, NATIVE_THREAD_STACK, THREAD_STACK, Step, texts
from dumpkit.analysis.codes import notes
from dumpkit.analysis.codes.model import DELAY_LOAD_CODES
from dumpkit.analysis.coverage import rests_on_guesses
from dumpkit.analysis.model import Confidence, EndingRoute, Finding, PythonStatus, Verdict, VerdictKind
from dumpkit.analysis.pyentry import INTERPRETER, innermost_python, installation_of
from dumpkit.analysis.verdict import (
    access_violation,
    cxx_exception,
    ended,
    fail_fast,
    hang,
    heap_corruption,
    illegal_instruction,
    other,
    stack_overflow,
)
from dumpkit.analysis.verdict.collision import with_collision
from dumpkit.analysis.verdict.memory import with_memory_limits, with_memory_said
from dumpkit.analysis.verdict.case import (
    ACCESS_VIOLATION,
    CXX_EXCEPTION,
    FAIL_FAST,
    HEAP_CORRUPTION,
    ILLEGAL_INSTRUCTION,
    STACK_OVERFLOW,
    Case,
    Decision,
    exception_line,
    frame_limit,
)
from dumpkit.records import replace

__all__ = ["Case", "decide", "frame_limit"]

Decider = Callable[[Case, List[str], List[Step]], Decision]


def _delay_load(case: Case, evidence: List[str], steps: List[Step]) -> Decision:
    """verdict/delay_load.py, imported when a dump needs it (it brings the Win32 error table)."""
    from dumpkit.analysis.verdict import delay_load

    return delay_load.decide(case, evidence, steps)


_BY_CODE: Dict[int, Decider] = {
    STACK_OVERFLOW: stack_overflow.decide,
    FAIL_FAST: fail_fast.decide,
    ACCESS_VIOLATION: access_violation.decide,
    ILLEGAL_INSTRUCTION: illegal_instruction.decide,
    CXX_EXCEPTION: cxx_exception.decide,
    HEAP_CORRUPTION: heap_corruption.decide,
    **dict.fromkeys(DELAY_LOAD_CODES, _delay_load),
}


_GET_IT_AGAIN = Step(
    "damaged.get_it_again", "Get the dump again from the machine that crashed; check that the copy is complete."
)


def decide(case: Case) -> Tuple[Verdict, List[Finding]]:
    crash = case.crash
    # Damaged by what reading it met: a walk's problems (a module without its image, a
    # stack that ends early) say nothing about whether an exception record was lost.
    if crash is None and case.read_problems:
        return Verdict(
            VerdictKind.NO_EXCEPTION,
            f"No exception record could be read: the dump is damaged ({len(case.read_problems)} problem(s) listed below)",
            Confidence.LOW,
            tuple(case.read_problems[:5]),
            texts((_GET_IT_AGAIN,)),
        ), []
    if crash is None:
        snapshot = hang.decide(case)
        said = with_memory_said(snapshot.verdict, case)
        return replace(said, next_steps=texts(snapshot.steps)), list(snapshot.findings)
    evidence = [exception_line(crash, case.frame0)]
    # the table's steps minus "get a dump and run dumpkit analyze": this is that analysis
    steps = list(codes.steps_given_a_dump(codes.lookup_status(crash.code).steps))
    decision = _BY_CODE.get(crash.code, other.decide)(case, evidence, steps) if not _ended(case) else None
    if decision is None:
        decision = ended.decide(case, evidence, steps)
    decision = with_collision(decision, case)
    verdict, findings = _from_python(decision.verdict, list(decision.findings), case)
    decision = with_memory_limits(Decision(verdict, decision.steps, tuple(findings)), case)
    verdict = replace(decision.verdict, next_steps=texts(_for_what_is_loaded(decision.steps, case)))
    return _within_the_evidence(verdict, case), list(decision.findings)


def _ended(case: Case) -> bool:
    """The process ended itself (analysis/ending.py) and that is the verdict: every exit a
    debugger stopped; a fail-fast from abort() only when the ending says more than the
    fail-fast verdict would (the reason, a Fatal Python error), which keeps its account of
    unnamed frames that may be a statically linked abort()."""
    end = case.ending
    if end is None or case.crash is None:
        return False
    if case.crash.code != FAIL_FAST:
        return True
    return end.reason is not None or end.route is EndingRoute.FATAL_PYTHON_ERROR


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


# The steps that send the reader to rerun under faulthandler for the Python stack, and the
# steps about TensorFlow (or its absl logging): chosen by id, wherever they were written.
# The WOW64 step is among them because it was dropped with them when the rule read words
# ("consider a 64-bit Python (TensorFlow has no 32-bit builds)"); kept so, not re-decided.
_ASKS_FOR_FAULTHANDLER = frozenset(
    s.id
    for s in (
        notes.FAULTHANDLER_ACCESS_VIOLATION,
        notes.FAULTHANDLER_DIVIDE_BY_ZERO,
        stack_overflow.FIND_THE_PYTHON_RECURSION,
        stack_overflow.FIND_THE_PROTOCOL_RECURSION,
    )
)
_ABOUT_TENSORFLOW = frozenset(
    s.id
    for s in (
        notes.BUILD_FOR_THE_CPU,
        notes.WOW64_DEBUGGER,
        fail_fast.TENSORFLOW_STDERR,
        illegal_instruction.TENSORFLOW_NEEDS_AVX,
        stack_overflow.LIMIT_CHECKED_ON_THE_WAY_DOWN,
    )
)
_NATIVE_STACK = Step(
    "native.debugger_stack",
    "Open the dump in WinDbg or Visual Studio with {module}'s PDB (`.ecxr` then `kn`) "
    "for the faulting source line and its callers.",
)
_PYTHON_STACKS_HERE = Step(
    "python.stacks_in_report",
    "The Python stack of every thread is in this report (read from the dump), so there is no need to rerun "
    "with faulthandler: start at the crashing thread's innermost Python frame{innermost}.",
)


def _for_what_is_loaded(steps: Sequence[Step], case: Case) -> Tuple[Step, ...]:
    """Advice follows the process (issue #18): without a Python runtime loaded, a
    faulthandler step becomes its native counterpart (the debugger's stack with the
    module's PDB) and a thread's stack is sized without `threading`; with the Python stacks
    read from the dump, it points to them; without TensorFlow, TensorFlow/absl steps are
    dropped; page-heap commands name the process's executable."""
    env = case.environment
    python = case.python is not None or env.python is not None or env.python_module is not None
    tensorflow = bool(env.tensorflow)
    module = case.crash.module if case.crash is not None and case.crash.module else "the faulting module"
    exe = case.executable
    stacks_read = case.python is not None and case.python.status == PythonStatus.READ and bool(case.python.threads)
    innermost = innermost_python(case.python_thread, installation_of(env.python_module))
    kept: List[Step] = []
    for step in steps:
        if step.id in _ASKS_FOR_FAULTHANDLER and not python:
            step = _NATIVE_STACK.given(module=module)
        elif step.id in _ASKS_FOR_FAULTHANDLER and stacks_read:
            step = _PYTHON_STACKS_HERE.given(innermost=f", {innermost}" if innermost else "")
        elif step.id in _ABOUT_TENSORFLOW and not tensorflow:
            continue
        if not python:
            step = step.given(**{THREAD_STACK: NATIVE_THREAD_STACK})
        if exe:
            step = step.given(**{EXE: exe})
        kept.append(step)
    return tuple(kept)


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
