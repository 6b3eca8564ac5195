"""0xC0000374: the Windows heap found its own structures damaged."""

from __future__ import annotations

from typing import List, Optional, Sequence

from dumpkit.analysis.advice import EXE, Step
from dumpkit.analysis.codes.notes import PAGE_HEAP
from dumpkit.analysis.model import Confidence, VerdictKind
from dumpkit.analysis.verdict.case import Case, Decision, conclude
from dumpkit.unwind.frames import Frame


def decide(case: Case, evidence: List[str], steps: List[Step]) -> Decision:
    crash = case.crash
    assert crash is not None
    caller = crash.raised_by
    op = _heap_operation(case.frames, caller)
    doing = f" while {op} a block" if op else ""
    headline = f"Heap corruption (0xC0000374): the Windows heap found its structures damaged{doing}" + (
        f", called from {caller}" if caller else case.at
    )
    if caller:
        evidence.append(f"first frame outside the heap and C runtime: {caller}")
        evidence.append(
            "the heap notices damage when a block next to the damaged one is freed or allocated; the "
            "code that overran the block, freed it twice or used it after free ran earlier"
        )
        # this step says how to enable page heap itself: the table's own page-heap step goes
        steps = [WHAT_IT_FREES.given(caller=caller)] + [s for s in steps if s.id != PAGE_HEAP.id]
    return conclude(
        VerdictKind.HEAP_CORRUPTION,
        headline,
        Confidence.HIGH if caller else Confidence.MEDIUM,
        evidence,
        steps,
        crash.thread_id,
    )


WHAT_IT_FREES = Step(
    "heap_corruption.what_it_frees",
    "Look at what {caller} frees or allocates and who wrote to that memory before; enable full page "
    "heap (gflags /p /enable {exe} /full) so the next overrun faults at the bad write.",
    ((EXE, "python.exe"),),
)


def _heap_operation(frames: Sequence[Frame], caller: Optional[str]) -> Optional[str]:
    """'freeing' / 'allocating' / 'resizing': what the heap was asked to do when it noticed,
    from the runtime frames above the caller."""
    for f in frames[:32]:
        name = f.function_name
        if caller is not None and name == caller:
            break
        short = name.split("!", 1)[-1].lower()
        if "realloc" in short:
            return "resizing"
        if "free" in short:
            return "freeing"
        if "alloc" in short:
            return "allocating"
    return None
