"""Stacks as every format shows them: frame rows, recursion folded into one row per cycle,
frames the report did not keep marked, identical stacks grouped, pointers as wide as the
CPU's. The cell conventions of the layouts in use today are named here, in one place."""

from __future__ import annotations

from typing import Generic, Iterable, Iterator, List, Optional, Protocol, Sequence, Tuple, TypeVar, Union

from dumpkit.analysis.model import Cycle, FrameRecord, Stacks, SystemSummary, ThreadReport
from dumpkit.unwind.frames import Support, Trust
from dumpkit.report.view.inline import Line
from dumpkit.words import human_bytes, plural
from dumpkit.records import record, replace

# Cell conventions of a stack table, one per column across formats (issue #16 item 2):
REPORT = "report"  # `analyze` in every format: decimal frame numbers, each frame's own size in decimal bytes
KF = "kf"  # WinDbg's `kf`, where asked for (`dumpkit stack`, `!tfstack`): hex numbers, row N shows frame N-1's size in hex
# Markdown and HTML showed sizes in hex until issue #16 item 2; the name stays for callers.
DOCUMENT = REPORT


@record
class StackHeaders:
    """The column headers of a stack table: each states its convention."""

    number: str
    size: str
    child_sp: str
    ip: str
    call_site: str
    found_by: str


HEADERS = {
    REPORT: StackHeaders("#", "Frame size (B)", "Child-SP", "RetAddr/IP", "Call site", "Found by"),
    KF: StackHeaders("#", "Memory", "Child-SP", "RetAddr/IP", "Call site", "Found by"),
}

NO_FRAMES = "(no frames)"


def pointer_digits(system: Optional[SystemSummary]) -> int:
    """Hex digits of a pointer, as debuggers print them: 8 on 32-bit dumps, else 16."""
    return 8 if system is not None and system.arch == "x86" else 16


def frame_name(f: FrameLike) -> str:
    if f.symbol:
        return f.symbol
    if f.module is not None and f.rva is not None:
        return f"{f.module}+{f.rva:#x}"
    return f"{f.ip:#x}"


def call_site(f: FrameLike) -> str:
    """The frame's name and, when the PDB has lines, its source file's name and line:
    `module!name+0x1a [file.c:30]` (the folder is in the JSON's `source`)."""
    name = frame_name(f)
    source = f.source
    if not source:
        return name
    path, _, line = source.rpartition(":")
    return f"{name} [{path.replace(chr(92), '/').rsplit('/', 1)[-1]}:{line}]"


def kf_number(index: int) -> str:
    """A frame number as `kf` writes it: hex, two digits at least."""
    return f"{index:02x}" if index < 256 else f"{index:x}"


@record
class Fold:
    """A row standing for frames not shown: a cycle's further repetitions, or frames the
    report did not keep."""

    text: str


@record
class FrameRow:
    index: int  # the frame's number (DML links to `.frame index`)
    number: str  # as the table's convention writes it
    memory: str  # the size cell, by the convention (headers.size says which; "" when unknown)
    child_sp: str
    ip: str
    call_site: str  # the frame's name, as the dump and the walker give it (escape it)
    found_by: str  # how the walker found the frame
    scanned: bool  # found by stack scanning: shown dimmer


Row = Union[FrameRow, Fold]


@record
class StackTable:
    rows: Tuple[Row, ...]
    cut: bool  # frames beyond the rows asked for were left out
    number_width: int  # characters of the highest frame number (fixed-width layouts)
    headers: StackHeaders = HEADERS[REPORT]


class FrameLike(Protocol):
    """What folding and naming read of a frame: a report's FrameRecord or, when a
    million-frame stack is streamed, the walker's own Frame."""

    @property
    def index(self) -> int: ...
    @property
    def ip(self) -> int: ...
    @property
    def module(self) -> Optional[str]: ...
    @property
    def rva(self) -> Optional[int]: ...
    @property
    def symbol(self) -> Optional[str]: ...
    @property
    def source(self) -> Optional[str]: ...


class KfFrame(FrameLike, Protocol):
    """What a `kf` table row reads of a frame besides its name: a walk's Frame, or a
    report's FrameRecord (the possible frames a streamed stack lists apart)."""

    @property
    def sp(self) -> int: ...
    @property
    def size(self) -> Optional[int]: ...
    @property
    def trust(self) -> Trust: ...


F = TypeVar("F", bound=FrameLike)


def fold_frames(frames: Iterable[F], cycles: Sequence[Cycle], show_repeats: int = 1) -> Iterator[Union[F, str]]:
    """A stack's frames one at a time, with each cycle's repetitions beyond the first
    `show_repeats` folded into one marker string, and a marker where the report did not
    keep frames (long stacks keep their head and tail). A generator: a streamed
    million-frame stack is never copied."""
    spans = sorted(((c.first_frame, c.last_frame, c) for c in cycles), key=lambda s: s[0])
    skip_until = -1
    prev: Optional[int] = None  # index of the last frame shown or folded
    # a sequence is read by position, so a folded cycle is jumped over, not read through
    # (a bulk-walked recursion makes each frame it is asked for)
    cursor = _Cursor(frames) if isinstance(frames, Sequence) else None
    for f in cursor if cursor is not None else frames:
        if f.index <= skip_until:
            continue
        if prev is not None and f.index > prev + 1:
            yield f"... {plural(f.index - prev - 1, 'frame')} not kept in the report ..."
        span = next((s for s in spans if s[0] <= f.index <= s[1]), None)
        if span is not None:
            first, last, c = span
            keep_to = first + c.period * show_repeats - 1
            if f.index > keep_to:
                yield (
                    f"... {plural(last - keep_to, 'more frame')}: the cycle above repeats "
                    f"{plural(c.repetitions - show_repeats, 'more time')} "
                    f"({human_bytes(c.total_bytes)} in all) ..."
                )
                skip_until = prev = last
                if cursor is not None:
                    cursor.skip_through(last)
                continue
        yield f
        prev = f.index


class _Cursor(Generic[F]):
    """Frames of a sequence in order, able to skip the ones up to an index."""

    def __init__(self, frames: Sequence[F]):
        self.frames = frames
        self.pos = 0

    def __iter__(self) -> "_Cursor[F]":
        return self

    def __next__(self) -> F:
        if self.pos >= len(self.frames):
            raise StopIteration
        f = self.frames[self.pos]
        self.pos += 1
        return f

    def skip_through(self, index: int) -> None:
        """Go past the frames numbered up to `index`: a jump when the indices run on
        consecutively to it (a walk's do; a report's kept head and tail need not), checked
        at the landing frame; otherwise the fold loop skips them one by one."""
        if self.pos >= len(self.frames):
            return
        landing = self.pos + index - self.frames[self.pos].index
        if self.pos <= landing < len(self.frames) and self.frames[landing].index == index:
            self.pos = landing + 1


def collapse(frames: Sequence[FrameRecord], cycles: Sequence[Cycle], show_repeats: int = 1) -> List[object]:
    """`fold_frames` as a list."""
    return list(fold_frames(frames, cycles, show_repeats))


def kf_memory(rows: Sequence[object], frames: Sequence[FrameRecord]) -> List[Optional[int]]:
    """WinDbg's `kf` Memory column for each row: the distance from this frame's Child-SP
    to the one above it, i.e. the size of frame N-1 on row N (row 0 is blank). `rows` is
    `collapse()` output (marker strings get None); `frames` is sorted by index, and both
    are walked once, so a million-frame stack costs no lookup table."""
    out: List[Optional[int]] = []
    j = 0
    for r in rows:
        if not isinstance(r, FrameRecord) or r.index == 0:
            out.append(None)
            continue
        while j < len(frames) and frames[j].index < r.index - 1:
            j += 1
        above = frames[j] if j < len(frames) and frames[j].index == r.index - 1 else None
        out.append(above.size if above is not None else None)
    return out


def _memory(size: Optional[int], convention: str) -> str:
    if size is None:
        return ""
    return f"{size:,}" if convention == REPORT else f"{size:x}"


def stack_table(
    t: ThreadReport, convention: str, digits: int = 16, fold_cycles: bool = True, max_rows: Optional[int] = None
) -> StackTable:
    """The thread's stack in rows. `max_rows` bounds the frame rows (folds do not count)."""
    items = collapse(t.frames, t.cycles) if fold_cycles else list(t.frames)
    sizes = kf_memory(items, t.frames) if convention == KF else [None] * len(items)
    possible = t.possible_frames or ()
    if possible:
        # the possible frames apart, after a heading row; row N's kf Memory is frame N-1's
        # size, the first one's the stack's last frame's
        items += [possible_heading(t.possible_count or len(possible), len(possible)), *possible]
        sizes += [None] + (
            kf_memory(possible, list(t.frames[-1:]) + list(possible)) if convention == KF else [None] * len(possible)
        )
    rows: List[Row] = []
    shown = 0
    cut = False
    for item, above in zip(items, sizes):
        if max_rows is not None and shown >= max_rows:
            cut = True
            break
        if not isinstance(item, FrameRecord):
            rows.append(Fold(str(item)))
            continue
        rows.append(
            FrameRow(
                index=item.index,
                number=kf_number(item.index) if convention == KF else str(item.index),
                memory=_memory(above if convention == KF else item.size, convention),
                child_sp=f"{item.sp:0{digits}x}",
                ip=f"{item.ip:0{digits}x}",
                call_site=call_site(item),
                found_by=found_by(item),
                scanned=item.trust.startswith("scan"),
            )
        )
        shown += 1
    last = (possible or t.frames)[-1].index if t.frames else 0
    return StackTable(tuple(rows), cut, len(kf_number(last) if convention == KF else str(last)), HEADERS[convention])


def possible_heading(count: int, kept: Optional[int] = None) -> str:
    """The row that sets a walk's possible frames (unwind/confirm.py) apart from its stack;
    `kept`: how many of them the report kept, when not all."""
    shown = f" (the first {kept:,} shown)" if kept is not None and kept < count else ""
    return (
        f"--- {plural(count, 'possible frame')} below{shown}: found by stack scanning past the last confirmed "
        f"frame (a stale word in a frame's locals looks the same) ---"
    )


def found_by(f: FrameRecord) -> str:
    """How the frame was found, and for a scanned frame what confirms it, when anything
    does: `scan_validated, call target`."""
    return found_words(f.trust, f.support)


def found_words(trust: Trust, support: Optional[Support]) -> str:
    """A frame's "how found" cell from its trust and, for a scanned frame, its support:
    `scan_validated, call target`; the trust alone when nothing confirms it."""
    if support is None or support is Support.NONE:
        return str(trust)
    return f"{trust}, {support.replace('_', ' ')}"


def cut_table(table: StackTable, max_rows: int) -> StackTable:
    """The table's first `max_rows` frame rows (folds among them kept), marked cut when
    frames were left out: how a report shortens a stack to fit its page."""
    rows: List[Row] = []
    shown = 0
    for r in table.rows:
        if isinstance(r, FrameRow):
            if shown >= max_rows:
                return replace(table, rows=tuple(rows), cut=True)
            shown += 1
        rows.append(r)
    return table


@record
class ThreadView:
    tid: int
    name: Optional[str]  # from the dump: escape it
    is_crashing: bool
    frames: str  # "7 frames": how many the walk found
    trust: str  # "context 1, unwind_info 6": how they were found
    stop_reason: str
    top: str  # the top frame's name, or NO_FRAMES
    has_frames: bool
    stack: Optional[StackTable]  # None when this view does not show the thread's frames


def thread_view(t: ThreadReport, stack: Optional[StackTable] = None) -> ThreadView:
    return ThreadView(
        tid=t.tid,
        name=t.name,
        is_crashing=t.is_crashing,
        frames=plural(t.frame_count, "frame") + (f" (+{t.possible_count:,} possible)" if t.possible_count else ""),
        trust=", ".join(f"{k} {n}" for k, n in sorted(t.trust_counts.items())),
        stop_reason=t.stop_reason,
        top=frame_name(t.frames[0]) if t.frames else NO_FRAMES,
        has_frames=bool(t.frames),
        stack=stack,
    )


@record
class ThreadGroup:
    """Threads with identical stacks, like `!uniqstack`: the first, and the others."""

    lead: ThreadView  # with its stack, when the view shows the groups' stacks
    same: Tuple[ThreadView, ...]
    summary: Line  # the group in one line: lead, name, frames, top frame, the others with its stack


def stack_groups(threads: Sequence[ThreadReport]) -> List[Tuple[ThreadReport, Tuple[ThreadReport, ...]]]:
    """The threads other than the crashing one, those with identical stacks folded into
    one entry: (the first such thread, the others with its stack)."""
    others = [t for t in threads if not t.is_crashing]
    by_tid = {t.tid: t for t in others}
    seen = set()
    groups = []
    for t in others:
        if t.tid in seen:
            continue
        same = tuple(by_tid[x] for x in sorted(t.same_stack_as) if x in by_tid and x not in seen and x != t.tid)
        seen.add(t.tid)
        seen.update(x.tid for x in same)
        groups.append((t, same))
    return groups


@record
class ModuleImage:
    name: str
    source: str  # where its PE image came from


@record
class StacksView:
    """`dumpkit stack`: each thread asked for with every frame (kf layout), then where each
    module image came from."""

    threads: Tuple[ThreadView, ...]
    images: Tuple[ModuleImage, ...]


def stacks_view(doc: Stacks) -> StacksView:
    digits = pointer_digits(doc.system)
    threads = tuple(thread_view(t, stack_table(t, KF, digits, fold_cycles=False)) for t in doc.threads)
    images = sorted((m.name, m.image_source) for m in doc.modules if m.image_source is not None)
    return StacksView(threads, tuple(ModuleImage(n, s) for n, s in images))
