"""The Python side of a report, as every format shows it: which interpreter, and each
thread's Python stack (innermost first) with a recursion folded to its first repetition,
or, when the dump does not hold the interpreter's memory, what is missing and which dump
type would have it."""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple, Union

from dumpkit.analysis.model import PythonCycle, PythonFrameRecord, PythonReport, PythonStatus, PythonThreadReport
from dumpkit.report.view.stacks import Fold
from dumpkit.words import plural
from dumpkit.records import record

LAYOUT_CAVEAT = "structure layout from CPython's headers, not verified on a real dump"


@record
class PythonFrameRow:
    index: int
    function: str  # co_name ("?" when unreadable): escape it
    location: str  # "file:line" as the program named the file: escape it
    problem: Optional[str]  # what could not be read of this frame


PythonRow = Union[PythonFrameRow, Fold]


@record
class PythonStackView:
    tid: int
    title: str  # 'Python stack of thread 264 "loader": 3,829 frames' (the name: the dump's)
    rows: Tuple[PythonRow, ...]
    problems: Tuple[str, ...]


@record
class PythonView:
    summary: str  # one sentence: the interpreter and what was read, or what is missing
    stacks: Tuple[PythonStackView, ...]  # the crashing thread first


def _location(f: PythonFrameRecord) -> str:
    return f"{f.filename or '?'}:{'?' if f.line is None else f.line}"


def _rows(t: PythonThreadReport) -> Tuple[PythonRow, ...]:
    """The kept frames, a cycle's repetitions after the first folded into one row, and a
    row where the report did not keep frames. One pass over the frames."""
    spans: Sequence[PythonCycle] = sorted(t.cycles, key=lambda c: c.first_frame)
    out: List[PythonRow] = []
    prev: Optional[int] = None
    skip_until = -1
    for f in t.frames:
        if f.index <= skip_until:
            continue
        if prev is not None and f.index > prev + 1:
            out.append(Fold(f"... {plural(f.index - prev - 1, 'frame')} not kept in the report ..."))
        cycle = next((c for c in spans if c.first_frame <= f.index <= c.last_frame), None)
        if cycle is not None and f.index >= cycle.first_frame + cycle.period:
            out.append(
                Fold(
                    f"... {plural(cycle.last_frame - cycle.first_frame + 1 - cycle.period, 'more frame')}: "
                    f"the Python functions above repeat {plural(cycle.repetitions - 1, 'more time')} ..."
                )
            )
            skip_until = prev = cycle.last_frame
            continue
        out.append(PythonFrameRow(f.index, f.function or "?", _location(f), f.problem))
        prev = f.index
    return tuple(out)


def _gil_words(py: PythonReport) -> str:
    """'; the GIL is held by thread 276 "device"', as the interpreter's state records it."""
    gil = py.gil
    if gil is None or gil.problems or gil.held is None:
        return ""

    def thread(tid: Optional[int]) -> str:
        t = py.thread(tid) if tid is not None else None
        return f"thread {tid}" + (f' "{t.name[:60]}"' if t is not None and t.name else "")

    if gil.held and gil.holder_thread_id is not None:
        waiting = f", {plural(gil.waiters, 'thread')} waiting for it" if gil.waiters else ""
        return f"; the GIL is held by {thread(gil.holder_thread_id)}{waiting}"
    if gil.held is False:
        last = f" (last held by {thread(gil.last_holder_thread_id)})" if gil.last_holder_thread_id is not None else ""
        return f"; the GIL is free{last}"
    return ""


def python_view(
    py: Optional[PythonReport], crashing_tid: Optional[int], tids: Optional[Sequence[int]] = None
) -> Optional[PythonView]:
    """None when the process runs no CPython. `tids`: the threads to show (default: every
    thread running Python), the crashing one first."""
    if py is None:
        return None
    who = f"CPython {py.version}" if py.version else "CPython"
    who += f" ({py.dll})" if py.dll else ""
    if py.status != PythonStatus.READ:
        return PythonView(f"{who}: no Python stacks: {py.message}", ())
    threads = [t for t in py.threads if tids is None or t.thread_id in tids]
    threads.sort(key=lambda t: (t.thread_id != crashing_tid, t.thread_id))
    caveat = f" ({py.layout_note or ('' if py.layout_verified else LAYOUT_CAVEAT)})".replace(" ()", "")
    summary = f"{who}: {plural(len(py.threads), 'thread')} running Python, stacks read from the dump{caveat}"
    summary += _gil_words(py)
    stacks = tuple(
        PythonStackView(
            t.thread_id,
            f"Python stack of thread {t.thread_id}"
            + (f' "{t.name[:60]}"' if t.name else "")
            + f": {plural(t.depth, 'frame')}"
            + (" (the walk stopped at its cap: the outermost frames are unknown)" if t.truncated else ""),
            _rows(t),
            t.problems,
        )
        for t in threads
    )
    return PythonView(summary, stacks)
