"""0xC000001D: a deliberate trap (ud2), or an instruction this CPU does not have (AVX...)."""

from __future__ import annotations

from typing import List, Optional, Sequence

from dumpkit.analysis.advice import Step
from dumpkit.analysis.model import Confidence, VerdictKind
from dumpkit.analysis.verdict.case import Case, Decision, conclude, instruction
from dumpkit.unwind.frames import Frame


def decide(case: Case, evidence: List[str], steps: List[Step]) -> Decision:
    crash = case.crash
    assert crash is not None
    at = case.at
    ins = instruction(case.read_code, crash.address, case.bits)
    vec = vector_extension(ins) if ins else None
    feats = case.environment.cpu_features or {}
    if ins and ins.startswith("ud2"):
        headline = f"Illegal instruction: ud2{at}, a deliberate trap (__builtin_trap / unreachable code), not a CPU feature problem"
        steps = _trap_steps(case.frames, crash.address)
    elif vec:
        known = {k: v for k, v in feats.items() if v is not None}
        cpu_says = (
            ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in known.items())
            or "the dump does not say which vector extensions the CPU has"
        )
        headline = f"Illegal instruction: {vec} instruction `{ins}`{at}; CPU: {cpu_says}"
        steps = [TENSORFLOW_NEEDS_AVX] + steps
    else:
        headline = f"Illegal instruction{at}" + (f": `{ins}`" if ins else "")
    if ins:
        evidence.append(f"faulting instruction: {ins}")
    if ins and ins.startswith("ud2"):
        evidence.append(
            "ud2 is the instruction compilers emit on purpose for __builtin_trap(), code they were "
            "told or proved unreachable, and trap-on-failure checks; it faults on every x86-64 CPU"
        )
    return conclude(
        VerdictKind.ILLEGAL_INSTRUCTION,
        headline,
        Confidence.HIGH if ins else Confidence.MEDIUM,
        evidence,
        steps,
        crash.thread_id,
    )


def vector_extension(text: str) -> Optional[str]:
    """Which vector extension an instruction needs, judged from its text; None for others."""
    t = text.lower()
    if "zmm" in t or "{k" in t:
        return "AVX-512"
    if "ymm" in t:
        return "AVX/AVX2"
    if t.startswith("v"):
        return "AVX (VEX-encoded)"
    return None


TENSORFLOW_NEEDS_AVX = Step(
    "illegal_instruction.tensorflow_needs_avx",
    "Prebuilt TensorFlow wheels need AVX (and newer ones AVX2); on a CPU without them use a build without "
    "those instructions.",
)
READ_BEFORE_THE_TRAP = Step(
    "illegal_instruction.read_before_the_trap",
    "Read the code just before the ud2 in {function} (WinDbg `ub {ip}`, or objdump): the branch that "
    "jumps to it is the check that failed (an assertion or bounds check in optimized code) or the path "
    "the compiler considered unreachable (__builtin_unreachable(), a non-void function falling off its "
    "end, other undefined behaviour).",
)
REBUILD_WITH_CHECKS = Step(
    "illegal_instruction.rebuild_with_checks",
    "Rebuild that code with -O0 -g (or /Od /Zi) and, with GCC/Clang, -fsanitize=undefined: the trap then "
    "shows as a named check with its source line.",
)
STACK_PROTECTOR = Step(
    "illegal_instruction.stack_protector",
    "This is GCC's stack protector / _FORTIFY_SOURCE failure path (libssp's __stack_chk_fail "
    "or __chk_fail ends in this trap after printing '*** stack smashing detected ***' or "
    "'*** buffer overflow detected ***'): look for a buffer overrun in its caller.",
)


def _trap_steps(frames: Sequence[Frame], ip: int) -> List[Step]:
    """What to do about a ud2: find the check that led to it (never CPU advice)."""
    fn = frames[0].function_name if frames else "the faulting function"
    steps = [READ_BEFORE_THE_TRAP.given(function=fn, ip=f"{ip:#x}"), REBUILD_WITH_CHECKS]
    names = " ".join(f.function_name.lower() for f in frames[:2])
    if "chk_fail" in names:
        steps.insert(0, STACK_PROTECTOR)
    return steps
