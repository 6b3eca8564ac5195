"""Python stacks as reports carry them: head and tail of a deep stack, and Python functions
that recurse found the way native cycles are (`recursion.find_cycles`, linear in frames)."""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple

from dumpkit.analysis.model import PythonCycle, PythonFrameRecord, PythonReport, PythonThreadReport
from dumpkit.analysis.recursion import find_cycles

if TYPE_CHECKING:  # annotations only: cpython.model is ~1.7 ms of start-up, needed by Python processes alone
    from dumpkit.cpython import PythonFrame, PythonState, PythonThread

KEEP_FRAMES = 200  # per thread in the report: 3/4 innermost, 1/4 outermost


def frame_label(f: PythonFrame) -> str:
    """'visit (C:\\scripts\\job.py:39)': function, file and the line being executed."""
    line = "?" if f.line is None else str(f.line)
    return f"{f.function or '?'} ({f.filename or '?'}:{line})"


class _Keyed:
    """A Python frame as `find_cycles` reads frames: identity is the code object (function,
    file, first line), whatever line a repetition is on."""

    __slots__ = ("index", "function_key", "function_name")
    module = None
    function_start = None
    size = 0
    trust = None  # read from the interpreter's own frames, never guessed by scanning

    def __init__(self, index: int, function_key: str, function_name: str):
        self.index = index
        self.function_key = function_key
        self.function_name = function_name


def _cycles(frames: Sequence[PythonFrame], first_index: int) -> Tuple[PythonCycle, ...]:
    keyed = [
        _Keyed(first_index + i, f"{f.filename}\0{f.first_line}\0{f.function}", frame_label(f))
        for i, f in enumerate(frames)
    ]
    return tuple(
        PythonCycle(c.functions, c.period, c.repetitions, c.first_frame, c.last_frame, c.entry_path[:8])
        for c in find_cycles(keyed, max_top_noise=16)  # type: ignore[arg-type]
    )


def _thread(t: PythonThread, keep: Optional[int]) -> PythonThreadReport:
    records = [
        PythonFrameRecord(i, f.function, f.filename, f.line, f.first_line, f.problem) for i, f in enumerate(t.frames)
    ]
    if t.omitted and t.omitted_at is not None:  # the reader kept innermost and outermost frames
        records = records[: t.omitted_at] + [
            PythonFrameRecord(i + t.omitted, r.function, r.filename, r.line, r.first_line, r.problem)
            for i, r in enumerate(records[t.omitted_at :], t.omitted_at)
        ]
    # cycles over the innermost run the reader kept whole (a recursion sits at the top)
    inner = t.frames[: t.omitted_at] if t.omitted and t.omitted_at is not None else t.frames
    cycles = _cycles(inner, 0)
    elided = 0
    if keep is not None and len(records) > keep:
        head = keep * 3 // 4
        elided = len(records) - keep + t.omitted
        records = records[:head] + records[-(keep - head) :]
    else:
        elided = t.omitted
    return PythonThreadReport(
        t.thread_id,
        t.depth,
        tuple(records),
        elided,
        t.truncated,
        cycles,
        tuple(t.problems),
        t.frame_addresses,
        t.thread_state,
    )


def python_report(state: Optional[PythonState], keep: Optional[int] = KEEP_FRAMES) -> Optional[PythonReport]:
    """The report's Python section; None when the process runs no CPython. `keep`: frames
    kept per thread (head and tail), None for every frame the reader kept."""
    if state is None or state.status.value == "no_python":
        return None
    return PythonReport(
        status=state.status,
        message=state.message,
        dll=state.dll,
        version=state.version,
        layout=state.layout,
        layout_verified=state.layout_verified,
        layout_note=state.layout_note,
        threads=tuple(_thread(t, keep) for t in state.threads),
        problems=tuple(state.problems),
        gil=state.gil,
    )


def innermost_frames(report: Optional[PythonReport], thread_id: int, n: int = 3) -> List[PythonFrameRecord]:
    """The innermost Python frames of a thread (what the C code was called from)."""
    t = report.thread(thread_id) if report is not None else None
    return list(t.frames[:n]) if t is not None else []


def cycle_text(c: PythonCycle) -> str:
    """The recursing Python functions in call order (caller first)."""
    return " -> ".join(reversed(c.functions))


def thread_of(report: Optional[PythonReport], thread_id: int) -> Optional[PythonThreadReport]:
    return report.thread(thread_id) if report is not None else None


def optional_line(f: PythonFrameRecord) -> Optional[str]:
    if f.function is None and f.filename is None:
        return None
    return f"{f.function or '?'} ({f.filename or '?'}:{'?' if f.line is None else f.line})"
