"""The numbers behind the HTML report's pictures, decided here so the drawing (report/svg.py)
only scales and lays them out: the crashing thread's stack budget with an oversized
request against it, each recursion cycle with its repetitions and bytes, the used stack
by function, and how each frame was found, in runs.

Everything is computed from the Report, whose long stacks keep only their head and tail:
a cycle's bytes come from its measured total, frames the report did not keep are
accounted for from the stack pointers around the gap, and the frame-trust strip is
aggregated into runs (a million-frame stack is a handful of runs, never a million)."""

from __future__ import annotations

from collections import Counter
from typing import Dict, List, Optional, Sequence, Tuple

from dumpkit.analysis.codes.model import STATUS_STACK_OVERFLOW
from dumpkit.analysis.model import Cycle, FrameRecord, Report, StackBudget, ThreadReport
from dumpkit.analysis.recursion import call_order
from dumpkit.report.view.report import shown_cycles
from dumpkit.unwind.frames import TRUST_LEVELS, Trust
from dumpkit.words import human_bytes, plural
from dumpkit.records import record

PAGE = 0x1000

MEMBERS_DRAWN = 8  # cycle members drawn; a longer cycle ends in "... N more"
FUNCTIONS_DRAWN = 8  # bars in the stack-by-function chart; the rest are one "other" bar
MAX_RUNS = 120  # trust-strip runs; a stack that alternates more is summed up in one last run

# kinds of a FunctionBar
RECURSION = "recursion"  # a member of a cycle
FUNCTION = "function"
NOT_KEPT = "not_kept"  # frames the report did not keep (outside any cycle)
OTHER = "other"  # the functions beyond FUNCTIONS_DRAWN, together

MIXED = "mixed"  # a trust run of frames the report did not keep, found in several ways
TRUST_ORDER = tuple(reversed(TRUST_LEVELS))  # strongest first: context, unwind_info, ... scan


def function_of(f: FrameRecord) -> str:
    """The frame's function without the offset (the name cycles use)."""
    if f.symbol:
        return f.symbol.split("+", 1)[0]
    if f.module is not None and f.rva is not None:
        return f"{f.module}+{f.rva:#x}"
    return f"{f.ip:#x}"


def _short_bytes(n: int) -> str:
    """'608 B', '1016.2 KiB': a picture's label."""
    return human_bytes(n).replace(" bytes", " B")


def _percent(part: int, whole: Optional[int]) -> str:
    return _share(part / whole) if whole else ""


def _share(share: float) -> str:
    """'16%'; never '0%' for a part that is there, nor '100%' for one that is not all."""
    if 0 < share < 0.005:
        return "<1%"
    return ">99%" if 0.995 <= share < 1 else f"{share:.0%}"


def _crashing(report: Report) -> Optional[ThreadReport]:
    return next((t for t in report.threads if t.is_crashing), None)


def stack_matters(report: Report) -> bool:
    """The stack pictures explain stack overflows, and any thread with an oversized frame."""
    return report.verdict.kind.is_stack or any(fs.oversized for fs in report.frame_sizes)


# --------------------------------------------------------------------------- stack budget


@record
class StackRequest:
    """A frame the thread died allocating: it asked for `bytes` below the used stack."""

    function: str
    bytes: int
    label: str  # "opkernels.dll!conv_big_kernel asked for 4.0 MiB more"
    versus: str  # "4.0x the whole reserve", or "" when it would have fit


@record
class BudgetPicture:
    """The crashing thread's stack as one band from its base: every figure is a distance in
    bytes below the base (the stack grows toward lower addresses)."""

    tid: int
    reserve: int
    reserve_estimated: bool  # the executable's default, not this thread's own
    used: int
    committed: Optional[int]  # down to the TEB's / memory map's StackLimit, when known
    guard: Optional[Tuple[int, int]]  # the guard region, from..to below the base
    guard_estimated: bool  # placed from the overflow's fault address, not read from the dump
    request: Optional[StackRequest]
    used_label: str  # "used 1016.2 KiB (99%)"
    reserve_label: str  # "1 MiB reserved"
    guard_label: str
    caption: str  # one sentence under the picture


def _fault_address(report: Report, tid: int) -> Optional[int]:
    c = report.crash
    if c is None or c.thread_id != tid or c.code != STATUS_STACK_OVERFLOW or len(c.parameters) < 2:
        return None
    return c.parameters[1]


def _guard(report: Report, b: StackBudget) -> Tuple[Optional[Tuple[int, int]], bool]:
    """The guard page below the committed stack when the dump says where that is; else, on
    a stack overflow, the bottom of the reserve up to the page that faulted (estimated)."""
    if b.base is None:
        return None, False
    if b.limit is not None and b.limit <= b.base:
        top = b.base - b.limit
        return (top, top + PAGE), False
    fault = _fault_address(report, b.thread_id)
    if b.reserve_low is not None and fault is not None and b.reserve_low <= fault < b.base:
        page_top = (fault & ~(PAGE - 1)) + PAGE
        return (b.base - min(page_top, b.base), b.base - b.reserve_low), True
    return None, False


def _request(report: Report, used: int, reserve: int) -> Optional[StackRequest]:
    fs = next((f for f in report.frame_sizes if f.not_yet_allocated and f.requested), None)
    if fs is None or fs.requested is None:
        return None
    versus = ""
    if used + fs.requested > reserve:
        ratio = fs.requested / reserve
        versus = (
            f"{ratio:.1f}x the whole reserve" if ratio >= 1 else f"{_percent(fs.requested, reserve)} of the reserve"
        )
        versus += f", {_short_bytes(used + fs.requested - reserve)} past its end"
    label = f"{fs.function} asked for {_short_bytes(fs.requested)} more"
    return StackRequest(fs.function, fs.requested, label, versus)


def budget_picture(report: Report) -> Optional[BudgetPicture]:
    t = _crashing(report)
    b = t.budget if t is not None else None
    if b is None or not b.reserve_size or b.used is None or b.used < 0 or not stack_matters(report):
        return None
    reserve, used = b.reserve_size, b.used
    guard, guard_estimated = _guard(report, b)
    committed = b.base - b.limit if b.base is not None and b.limit is not None and b.limit <= b.base else None
    estimated = b.source == "captured+image"
    request = _request(report, used, reserve)
    reserve_label = f"{'~' if estimated else ''}{_short_bytes(reserve)} reserved"
    if guard is None:
        guard_label = ""
    elif guard_estimated:
        guard_label = "guard region (the overflow faulted here)"
    else:
        guard_label = "guard page" + (" (the fault hit it)" if b.guard_hit else "")
    caption = f"Thread {b.thread_id}'s stack: used {_short_bytes(used)} of {reserve_label}"
    caption += f" ({_percent(used, reserve)})" if used <= reserve else ""
    if request is not None:
        caption += f"; {request.label}" + (f", {request.versus}" if request.versus else "")
    if estimated:
        caption += "; the reserve is the executable's default (a thread created with its own size has another)"
    return BudgetPicture(
        tid=b.thread_id,
        reserve=reserve,
        reserve_estimated=estimated,
        used=used,
        committed=committed,
        guard=guard,
        guard_estimated=guard_estimated,
        request=request,
        used_label=f"used {_short_bytes(used)} ({_percent(used, reserve)})",
        reserve_label=reserve_label,
        guard_label=guard_label,
        caption=caption + ".",
    )


# --------------------------------------------------------------------------- recursion


@record
class CycleMember:
    function: str
    bytes: Optional[int]  # its frame's size in one repetition (the most common), None when unknown
    label: str  # "304 B", or "?"


@record
class CyclePicture:
    tid: int
    members: Tuple[CycleMember, ...]  # in call order (caller first), at most MEMBERS_DRAWN
    more: int  # members not drawn
    repetitions: int
    repetitions_label: str  # "x 1,710"
    per_repetition: int
    per_repetition_label: str  # "608 B per repetition"
    total_label: str  # "1015.3 KiB in all"
    share_label: str  # ">99% of the used stack", or ""
    caption: str


def _position_sizes(t: ThreadReport, c: Cycle) -> List[Optional[int]]:
    """The most common frame size at each position of the cycle (position 0 = first_frame),
    from the frames the report kept."""
    counts: List[Counter] = [Counter() for _ in range(c.period)]
    for f in t.frames:
        if c.first_frame <= f.index <= c.last_frame and f.size is not None:
            counts[(f.index - c.first_frame) % c.period][f.size] += 1
    return [cnt.most_common(1)[0][0] if cnt else None for cnt in counts]


def _call_order_positions(c: Cycle) -> List[int]:
    """Positions of the cycle's members in the order call_order() names them."""
    positions = list(reversed(range(c.period)))
    wanted = list(call_order(c))
    for r in range(c.period):
        turned = positions[r:] + positions[:r]
        if [c.functions[j] for j in turned] == wanted:
            return turned
    return positions


def _member(function: str, size: Optional[int]) -> CycleMember:
    return CycleMember(function, size, _short_bytes(size) if size is not None else "?")


def cycle_picture(t: ThreadReport, c: Cycle) -> CyclePicture:
    sizes = _position_sizes(t, c)
    members = tuple(_member(c.functions[j], sizes[j]) for j in _call_order_positions(c)[:MEMBERS_DRAWN])
    return CyclePicture(
        tid=t.tid,
        members=members,
        more=max(0, c.period - MEMBERS_DRAWN),
        repetitions=c.repetitions,
        repetitions_label=f"x {c.repetitions:,}",
        per_repetition=c.bytes_per_repetition,
        per_repetition_label=f"{_short_bytes(c.bytes_per_repetition)} per repetition",
        total_label=f"{_short_bytes(c.total_bytes)} in all",
        share_label=f"{_share(c.stack_share)} of the used stack" if c.stack_share is not None else "",
        caption=(
            f"Thread {t.tid}: "
            + (
                f"{c.functions[0]} calling itself"
                if c.period == 1
                else f"{c.period} functions calling each other in this order"
            )
            + f", {plural(c.repetitions, 'time')} over, {c.bytes_per_repetition:,} bytes each time"
            f" (frames {c.first_frame:,}-{c.last_frame:,})."
        ),
    )


# --------------------------------------------------------------------------- bytes by function


@record
class FunctionBar:
    name: str  # a function, or a description for NOT_KEPT / OTHER
    bytes: int
    kind: str  # RECURSION, FUNCTION, NOT_KEPT, OTHER
    label: str  # "1015.3 KiB, 99%"


@record
class StackByFunction:
    tid: int
    bars: Tuple[FunctionBar, ...]  # largest first; OTHER last
    caption: str


def _bytes_by_function(t: ThreadReport) -> Tuple[Dict[str, int], Dict[str, bool], int, int]:
    """(bytes per function, which are cycle members, frames not kept outside cycles, their
    bytes). A cycle's bytes are its measured total, shared by its members in proportion
    to their frames; frames outside cycles count their own sizes; what the kept frames do
    not account for between the first and the last frame is the frames not kept."""
    totals: Dict[str, int] = {}
    members: Dict[str, bool] = {}
    spans = [(c.first_frame, c.last_frame) for c in t.cycles]
    for c in t.cycles:
        sizes = _position_sizes(t, c)
        known = sum(s for s in sizes if s is not None)
        for j, s in enumerate(sizes):
            name = c.functions[j]
            share = (c.total_bytes * s // known) if known and s is not None else 0
            totals[name] = totals.get(name, 0) + share
            members[name] = True
    kept_outside = 0
    for f in t.frames:
        if any(lo <= f.index <= hi for lo, hi in spans):
            continue
        kept_outside += 1
        name = function_of(f)
        totals[name] = totals.get(name, 0) + (f.size or 0)
        members.setdefault(name, False)
    in_cycles = sum(hi - lo + 1 for lo, hi in spans)
    missing = max(0, t.frame_count - in_cycles - kept_outside)
    missing_bytes = 0
    if missing and t.frames:
        first, last = t.frames[0], t.frames[-1]
        whole = last.sp - first.sp + (last.size or 0)  # every frame's size, summed by the SPs
        missing_bytes = max(0, whole - sum(totals.values()))
    return totals, members, missing, missing_bytes


FILLED = 0.25  # the used stack explains the crash only when it fills this share of the reserve


def stack_by_function(report: Report) -> Optional[StackByFunction]:
    """Shown when the stack matters and its contents do: a thread that died asking for a
    frame on a nearly empty stack is told by the budget picture alone."""
    t = _crashing(report)
    if t is None or not t.frames or not stack_matters(report):
        return None
    b = t.budget
    if b is not None and b.reserve_size and b.used is not None and b.used < FILLED * b.reserve_size:
        return None
    totals, members, missing, missing_bytes = _bytes_by_function(t)
    used = t.budget.used if t.budget is not None and t.budget.used else sum(totals.values()) + missing_bytes
    ranked = sorted(((b, n) for n, b in totals.items() if b > 0), key=lambda x: (-x[0], x[1]))
    bars = [
        FunctionBar(n, b, RECURSION if members.get(n) else FUNCTION, f"{_short_bytes(b)}, {_percent(b, used)}")
        for b, n in ranked[:FUNCTIONS_DRAWN]
    ]
    if missing and missing_bytes:
        bars.append(
            FunctionBar(
                f"{plural(missing, 'frame')} not kept in the report",
                missing_bytes,
                NOT_KEPT,
                f"{_short_bytes(missing_bytes)}, {_percent(missing_bytes, used)}",
            )
        )
    rest = ranked[FUNCTIONS_DRAWN:]
    if rest:
        rest_bytes = sum(x[0] for x in rest)
        bars.append(
            FunctionBar(
                f"{plural(len(rest), 'other function')}",
                rest_bytes,
                OTHER,
                f"{_short_bytes(rest_bytes)}, {_percent(rest_bytes, used)}",
            )
        )
    if not bars:
        return None
    caption = f"Which functions hold thread {t.tid}'s {_short_bytes(used)} of used stack"
    if any(bar.kind == RECURSION for bar in bars):
        caption += " (members of a recursion are marked)"
    return StackByFunction(t.tid, tuple(bars), caption + ".")


# --------------------------------------------------------------------------- how frames were found


@record
class TrustRun:
    trust: str  # a trust level, or MIXED
    frames: int
    first: int  # frame numbers, inclusive
    last: int
    label: str  # "frames 1-5,135: unwind_info"


@record
class TrustStrip:
    tid: int
    frames: int
    runs: Tuple[TrustRun, ...]  # top of the stack first
    legend: Tuple[Tuple[str, int], ...]  # (trust level, frames), strongest first, levels present only
    caption: str


def _run(trust: str, first: int, last: int, detail: str = "") -> TrustRun:
    where = f"frame {first:,}" if first == last else f"frames {first:,}-{last:,}"
    return TrustRun(trust, last - first + 1, first, last, f"{where}: {detail or trust}")


def _gap(first: int, last: int, counts: Dict[Trust, int], what: str = "not kept in the report") -> TrustRun:
    """Frames not drawn one by one: of one level if the counts say they all share it."""
    present = [(k, n) for k, n in counts.items() if n > 0]
    if len(present) == 1:
        return _run(present[0][0], first, last)
    detail = ", ".join(f"{k} {n:,}" for k, n in sorted(present, key=lambda x: _rank(x[0])))
    return _run(MIXED, first, last, f"{what} ({detail or 'how, not recorded'})")


def _rank(trust: str) -> int:
    return TRUST_ORDER.index(trust) if trust in TRUST_ORDER else len(TRUST_ORDER)


def _merge(runs: List[TrustRun], run: TrustRun) -> None:
    if runs and runs[-1].trust == run.trust != MIXED and runs[-1].last + 1 == run.first:
        prev = runs.pop()
        run = _run(run.trust, prev.first, run.last)
    runs.append(run)


def trust_runs(t: ThreadReport, max_runs: int = MAX_RUNS) -> List[TrustRun]:
    """The thread's frames as runs of one trust level, top first; the frames the report did
    not keep become a run too (of their level when the counts show only one). Past
    `max_runs`, the rest of the stack is one run with its counts."""
    kept = Counter(f.trust for f in t.frames)
    not_kept = {k: n - kept.get(k, 0) for k, n in t.trust_counts.items()}
    drawn: Counter = Counter()  # frames already in runs, by level
    runs: List[TrustRun] = []
    prev: Optional[int] = None
    for f in t.frames:
        if len(runs) >= max_runs:
            rest = {k: n - drawn.get(k, 0) for k, n in t.trust_counts.items()}
            runs.append(_gap(f.index, t.frame_count - 1, rest, "the rest"))
            return runs
        if prev is not None and f.index > prev + 1:
            _merge(runs, _gap(prev + 1, f.index - 1, not_kept))
            drawn.update({k: n for k, n in not_kept.items() if n > 0})
        _merge(runs, _run(f.trust, f.index, f.index))
        drawn[f.trust] += 1
        prev = f.index
    return runs


def trust_strip(report: Report) -> Optional[TrustStrip]:
    t = _crashing(report)
    if t is None or not t.frames:
        return None
    legend = tuple(sorted(((k, n) for k, n in t.trust_counts.items() if n > 0), key=lambda x: _rank(x[0])))
    return TrustStrip(
        tid=t.tid,
        frames=t.frame_count,
        runs=tuple(trust_runs(t)),
        legend=legend,
        caption=f"How each of thread {t.tid}'s {plural(t.frame_count, 'frame')} was found, top of the stack first.",
    )


# --------------------------------------------------------------------------- all of them


@record
class Pictures:
    budget: Optional[BudgetPicture]
    cycles: Tuple[CyclePicture, ...]
    by_function: Optional[StackByFunction]
    trust: Optional[TrustStrip]


def pictures_view(report: Report) -> Pictures:
    cycles: Sequence[Tuple[ThreadReport, Cycle]] = shown_cycles(report)
    return Pictures(
        budget=budget_picture(report),
        cycles=tuple(cycle_picture(t, c) for t, c in cycles),
        by_function=stack_by_function(report),
        trust=trust_strip(report),
    )
