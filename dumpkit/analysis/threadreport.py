"""A walked thread as reports carry it: its frame records (head and tail of a long stack),
its possible frames apart, how the walk ended, and what the per-thread analyses found.

`thread_reports` is the analyse phase's loop over the process's threads: each thread's
walk and findings (`analysis/threads.py`) made into one `ThreadReport`, the crashing
thread first."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Set, Tuple

from dumpkit.analysis import facts
from dumpkit.analysis.model import FrameRecord, FrameSize, NotWalked, PythonReport, ThreadReport
from dumpkit.analysis.threads import analyse_thread, identical_stacks
from dumpkit.records import record, replace
from dumpkit.problems import Problems
from dumpkit.target import Target, Thread
from dumpkit.unwind.bulk import Frames
from dumpkit.unwind.codemap import CodeMap
from dumpkit.unwind.confirm import support_of
from dumpkit.unwind.frames import Frame, StackWalk, Support


def with_possible(w: StackWalk) -> Sequence[Frame]:
    """A walk's stack and its possible frames, as one sequence of frames."""
    if not w.possible:
        return w.frames
    parts = list(w.frames.parts) if isinstance(w.frames, Frames) else [list(w.frames)]
    return Frames(parts + [list(w.possible)])


def frame_record(f: Frame, support: Optional[Dict[int, Support]] = None) -> FrameRecord:
    """A walked frame as reports carry it (`support`: the walk's, by frame index)."""
    return FrameRecord(
        f.index,
        f.ip,
        f.sp,
        f.module,
        f.rva,
        f.function_start,
        f.symbol,
        f.size,
        f.trust,
        f.source,
        support_of(f, support),
    )


def frame_records(
    frames: Sequence[Frame], keep: Optional[int], support: Optional[Dict[int, Support]] = None
) -> Tuple[Tuple[FrameRecord, ...], int]:
    """(records, frames left out): head and tail of a long stack (the fault and the
    thread's entry both matter); every frame when `keep` is None, none when it is 0."""

    def rec(f: Frame) -> FrameRecord:
        return frame_record(f, support)

    if keep == 0:
        return (), len(frames)
    if keep is None or len(frames) <= keep:
        return tuple(rec(f) for f in frames), 0
    head = keep * 3 // 4
    tail = keep - head
    kept = list(frames[:head]) + list(frames[-tail:])
    return tuple(rec(f) for f in kept), len(frames) - keep


def thread_report(
    t: Thread,
    w: Optional[StackWalk],
    is_crash: bool,
    keep: Optional[int],
    unwalked: NotWalked = NotWalked.SKIPPED,
    **more,
) -> ThreadReport:
    """`more`: the analyses' fields (cycles, budget, same_stack_as); `unwalked`: why there
    is no walk, when there is none."""
    frames, elided = frame_records(w.frames, keep, w.support) if w else ((), 0)
    # the first `keep` possible frames; every one where the stack's are streamed instead
    # (keep 0: `dumpkit stack`)
    possible = tuple(frame_record(f, w.support) for f in w.possible[: keep or None]) if w and w.possible else None
    return ThreadReport(
        tid=t.tid,
        name=t.name,
        is_crashing=is_crash,
        frame_count=len(w.frames) if w else 0,
        frames=frames,
        elided_frames=elided,
        stop=w.stop if w else unwalked,
        frame_limit=w.frame_limit if w else None,
        trust_counts=w.trust_counts if w else {},
        possible_frames=possible,
        possible_count=len(w.possible) if w and w.possible else None,
        **more,
        **facts.thread_record_fields(t),  # type: ignore[arg-type]
    )


@record
class ThreadReports:
    """Every thread's report, the crashing thread first, then by id (the order people read
    them in); and the crashing thread's frame sizes."""

    threads: Tuple[ThreadReport, ...]
    sizes: Tuple[FrameSize, ...] = ()

    @property
    def crashing(self) -> Optional[ThreadReport]:
        return next((r for r in self.threads if r.is_crashing), None)


def thread_reports(
    target: Target,
    code: CodeMap,
    walks: Dict[int, StackWalk],
    crash_tid: Optional[int],
    keep: Optional[int],
    oversized_threshold: int,
    exe_reserve: Optional[int],
    problems: Problems,
) -> ThreadReports:
    """Each of the target's threads with its walk (`walks`, by id) and what the per-thread
    analyses find in it; `keep`: frame records kept per thread (`frame_records`)."""
    same = identical_stacks(walks)
    reports: List[ThreadReport] = []
    sizes: Tuple[FrameSize, ...] = ()
    seen: Set[int] = set()
    repeated = 0
    for t in target.threads:
        # A damaged or hostile thread list can repeat one id thousands of times: the walk
        # (keyed by id) belongs to its first entry only, or every repeat would carry and
        # re-analyse the crashing thread's stack.
        if t.tid in seen:
            repeated += 1
            reports.append(thread_report(t, None, False, None, unwalked=NotWalked.REPEATED_TID))
            continue
        seen.add(t.tid)
        is_crash = t.tid == crash_tid
        walk = walks.get(t.tid)
        found = analyse_thread(target, code, t, walk, is_crash, oversized_threshold, exe_reserve, problems)
        reports.append(
            thread_report(
                t, walk, is_crash, keep, cycles=found.cycles, budget=found.budget, same_stack_as=same.get(t.tid, ())
            )
        )
        if is_crash:
            sizes = found.sizes
    if repeated:
        problems.add(
            f"thread list: {repeated} entries repeat an earlier thread id; only the first entry of each id was walked"
        )
    reports.sort(key=lambda r: (not r.is_crashing, r.tid))
    return ThreadReports(tuple(reports), sizes)


def with_python_names(reports: ThreadReports, python: Optional[PythonReport]) -> ThreadReports:
    """Each thread's name: its Windows thread description (the dump's thread-name stream),
    else its threading.Thread name where the interpreter's memory records one."""
    named = {t.thread_id: t.name for t in python.threads if t.name} if python is not None else {}
    if not named:
        return reports
    threads = tuple(t if t.name else replace(t, name=named.get(t.tid)) for t in reports.threads)
    return replace(reports, threads=threads)
