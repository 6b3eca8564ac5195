"""A runtime collision in the verdict, when the crash is where it strikes (issue #41 item
4): the module list shows two runtime DLLs that do not fit together
(analysis/environment/runtimes.py), and the crash, or the process's end, is in one of them.
Then the collision is the reason: the headline says it, its ways out are the next steps.
Elsewhere it stays an environment finding."""

from __future__ import annotations

from typing import Optional, Tuple

from dumpkit.analysis.advice import Step
from dumpkit.analysis.model import Confidence, Evidence, RuntimeCollision, Verdict
from dumpkit.analysis.verdict.case import Case, Decision
from dumpkit.records import replace

_WAY_OUT = Step("collision.way_out", "{text}")
_CONFIDENCE_ORDER = (Confidence.LOW, Confidence.MEDIUM, Confidence.HIGH)


def struck(case: Case) -> Optional[Tuple[RuntimeCollision, str]]:
    """The collision the crash is in, and the module it struck: frame 0's module for an
    exception, the caller of the way out for a process that ended itself."""
    collisions = case.environment.runtime_collisions
    if not collisions or case.crash is None:
        return None
    end = case.ending
    frames = case.frames
    if end is not None and end.caller_frame is not None and end.caller_frame < len(frames):
        where = frames[end.caller_frame].module
    else:
        where = case.crash.module or (frames[0].module if frames else None)
    if not where:
        return None
    for collision in collisions:
        if any(m.name.lower() == where.lower() for m in collision.modules):
            return collision, where
    return None


def with_collision(decision: Decision, case: Case) -> Decision:
    """`decision` with the collision it struck said: the headline ends with the collision's
    title, the evidence says what it leads to, the ways out come first among the next
    steps; confidence is at most the collision's."""
    found = struck(case)
    if found is None:
        return decision
    collision, where = found
    v: Verdict = decision.verdict
    headline = f"{v.headline}: {collision.title}"
    evidence = v.evidence + (
        f"{where} is part of a runtime collision: {collision.title}",
        f"what it leads to: {collision.leads_to}",
    )
    confidence = min(v.confidence, collision.confidence, key=_CONFIDENCE_ORDER.index)
    steps = tuple(_WAY_OUT.given(text=w) for w in collision.ways_out) + decision.steps
    verdict = replace(v, headline=headline, evidence=evidence, confidence=confidence)
    findings = tuple(
        replace(f, title=headline, evidence=tuple(Evidence(e) for e in evidence)) if f.title == v.headline else f
        for f in decision.findings
    )
    return Decision(verdict, steps, findings)
