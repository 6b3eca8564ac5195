"""Plain model objects for report tests: a Report built field by field, no dump needed."""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

from dumpkit.analysis.model import (
    SCHEMA_VERSION,
    CrashInfo,
    Cycle,
    DumpSummary,
    Environment,
    FrameRecord,
    FrameSize,
    Report,
    StackBudget,
    SystemSummary,
    ThreadReport,
    Verdict,
    VerdictKind,
    Confidence,
)
from dumpkit.unwind.frames import StopReason


def frame(
    index: int, name: Optional[str] = None, size: Optional[int] = 0x40, trust: str = "unwind_info"
) -> FrameRecord:
    """Frame `index` of a stack growing from 0x1000_0000 down, named `name` (or f{index})."""
    return FrameRecord(
        index=index,
        ip=0x7FF6_0000_1000 + index,
        sp=0x1000_0000 + 0x40 * index,
        module="m.dll",
        rva=0x1000 + index,
        function_start=None,
        symbol=name if name is not None else f"m.dll!f{index}+0x10",
        size=size,
        trust=trust,
    )


def frames(count: int, start: int = 0) -> Tuple[FrameRecord, ...]:
    return tuple(frame(i) for i in range(start, start + count))


def cycle(functions: Sequence[str], first: int, repetitions: int, entry: Sequence[str] = ()) -> Cycle:
    period = len(functions)
    return Cycle(
        functions=tuple(functions),
        period=period,
        repetitions=repetitions,
        bytes_per_repetition=0x40 * period,
        first_frame=first,
        last_frame=first + period * repetitions - 1,
        total_bytes=0x40 * period * repetitions,
        stack_share=0.5,
        entry_path=tuple(entry),
    )


def thread(
    tid: int,
    stack: Sequence[FrameRecord] = (),
    crashing: bool = False,
    cycles: Sequence[Cycle] = (),
    same: Sequence[int] = (),
    name: Optional[str] = None,
    budget: Optional[StackBudget] = None,
    frame_count: Optional[int] = None,
    trust: Optional[Dict[str, int]] = None,
) -> ThreadReport:
    return ThreadReport(
        tid=tid,
        name=name,
        is_crashing=crashing,
        frame_count=len(stack) if frame_count is None else frame_count,
        frames=tuple(stack),
        elided_frames=0 if frame_count is None else frame_count - len(stack),
        stop=StopReason.RETURN_ADDRESS_ZERO,
        trust_counts=trust if trust is not None else {"unwind_info": len(stack)},
        cycles=tuple(cycles),
        budget=budget,
        same_stack_as=tuple(same),
    )


def budget(
    used: Optional[int] = 0x8000, reserve: Optional[int] = 1 << 20, source: str = "teb", tid: int = 1
) -> StackBudget:
    return StackBudget(tid, 0x2000_0000, None, None, reserve, used, source, guard_hit=None)


def crash(tid: int = 1, code: int = 0xC00000FD, name: str = "STATUS_STACK_OVERFLOW", **more) -> CrashInfo:
    return CrashInfo(
        code=code,
        code_name=name,
        summary="the thread ran out of stack",
        headline="stack overflow",
        thread_id=tid,
        address=0x7FF6_0000_1000,
        parameters=(),
        **more,
    )


def system(arch: str = "AMD64", processors: int = 8, wine: Optional[str] = None) -> SystemSummary:
    return SystemSummary(
        arch=arch, os_version="10.0.19045", os_build="19045", cpu="Intel64 family 6", processors=processors, wine=wine
    )


def report(
    threads: Sequence[ThreadReport] = (),
    kind: str = "recursion",
    frame_sizes: Sequence[FrameSize] = (),
    crash_info: Optional[CrashInfo] = None,
    system_summary: Optional[SystemSummary] = None,
    environment: Optional[Environment] = None,
    threshold: Optional[int] = 64 * 1024,
    soft_errors: Sequence[str] = (),
) -> Report:
    return Report(
        schema_version=SCHEMA_VERSION,
        dumpkit_version="0.test",
        dump=DumpSummary("crash.dmp", 1000, 0, (), (), len(threads), 0, 0),
        system=system_summary if system_summary is not None else system(),
        crash=crash_info if crash_info is not None else crash(),
        verdict=Verdict(
            VerdictKind(kind), "Stack overflow: `m.dll!f0` recursed", Confidence.HIGH, ("evidence one",), ("step one",)
        ),
        findings=(),
        threads=tuple(threads),
        frame_sizes=tuple(frame_sizes),
        environment=environment if environment is not None else Environment(),
        modules=(),
        soft_errors=tuple(soft_errors),
        oversized_threshold=threshold,
    )
