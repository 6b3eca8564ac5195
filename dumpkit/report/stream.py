"""`dumpkit stack` written as it is formatted: one frame row, one JSON frame at a time.

A stack overflow's walk holds a million frames; a rich Table or a JSON tree of them costs
minutes and gigabytes. Here the walk's own frames are read in place: columns get fixed
widths from one pass over the rows shown, then rows are written one by one, and the JSON
document is written around its frame lists, which are encoded a chunk at a time. Memory
stays what the walk itself holds, whatever the number of frames."""

from __future__ import annotations

import json
import secrets
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Optional,
    Sequence,
    TextIO,
    Tuple,
    Union,
)

from dumpkit.analysis.model import Cycle, FrameRecord, Stacks
from dumpkit.report.escape import clean
from dumpkit.report.json_report import report_dict
from dumpkit.report.text import print_python_section
from dumpkit.report.view import python_view, stacks_view
from dumpkit.report.view.stacks import (
    KfFrame,
    call_site,
    fold_frames,
    found_words,
    kf_number,
    pointer_digits,
    possible_heading,
    thread_view,
)

from dumpkit.unwind.bulk import Frames, Run
from dumpkit.unwind.confirm import support_of
from dumpkit.unwind.frames import Frame, Support

if TYPE_CHECKING:
    from rich.console import Console

CHUNK = 4096  # frames encoded per write
_CACHE_LIMIT = 65_536  # distinct names kept encoded; a recursion repeats a handful


class _Encoded:
    """Strings encoded once: a million frames name the same few functions."""

    def __init__(self, encode) -> None:
        self._encode = encode
        self.seen: Dict[object, Any] = {}

    def __call__(self, value: object) -> Any:
        out = self.seen.get(value)
        if out is None:
            out = self._encode(value)
            if len(self.seen) >= _CACHE_LIMIT:
                self.seen.clear()  # bounded, whatever the dump names
            self.seen[value] = out
        return out


# ----------------------------------------------------------------------------- JSON
def _frame_encoder(support: Optional[Dict[int, Support]] = None):
    """A frame as the one-line JSON object of its FrameRecord (same fields, same order,
    addresses as "0x..." strings: what json_report writes). What a frame shares with the
    other frames of its function and call site (module, RVA, name, how found) is encoded
    once. `support`: the walk's, by frame index, for its scanned frames."""
    text = _Encoded(lambda s: json.dumps(s, ensure_ascii=True))

    def number(v: Optional[int]) -> str:
        return "null" if v is None else str(v)

    FrameKey = Tuple[Optional[str], Optional[int], Optional[int], Optional[str], object, Optional[str], object]

    def middle(key: FrameKey) -> str:
        module, rva, start, symbol = key[:4]
        return (
            f'"module": {text(module)}, "rva": {number(rva)}, '
            f'"function_start": {number(start)}, "symbol": {text(symbol)}'
        )

    def last(key: FrameKey) -> str:
        source = f', "source": {text(key[5])}' if key[5] is not None else ""  # only when the PDB has lines
        confirmed = f', "support": {text(str(key[6]))}' if key[6] is not None else ""  # only scanned frames
        return f', "trust": {text(str(key[4]))}{source}{confirmed}}}'

    shared = _Encoded(lambda key: (middle(key) + ", ", last(key)))
    seen = shared.seen  # looked up inline: a method call per frame costs a tenth of the time

    def around_sp(f: Frame) -> Tuple[str, str]:
        """The line of `f` before its sp (after the index) and after it."""
        key = (f.module, f.rva, f.function_start, f.symbol, f.trust, f.source, support_of(f, support))
        same = seen.get(key) or shared(key)
        size = "null" if f.size is None else f.size
        return f', "ip": "{f.ip:#x}", "sp": "', f'", {same[0]}"size": {size}{same[1]}'

    def encode(f: Frame) -> str:
        key = (f.module, f.rva, f.function_start, f.symbol, f.trust, f.source, support_of(f, support))
        same = seen.get(key) or shared(key)
        size = "null" if f.size is None else f.size
        return f'{{"index": {f.index}, "ip": "{f.ip:#x}", "sp": "{f.sp:#x}", {same[0]}"size": {size}{same[1]}'

    encode.around_sp = around_sp  # type: ignore[attr-defined]
    return encode


def write_stacks_json(
    doc: Stacks,
    frames: Sequence[Sequence[Frame]],
    out: TextIO,
    indent: int = 1,
    supports: Optional[Sequence[Optional[Dict[int, Support]]]] = None,
) -> None:
    """The document json_report would write for `doc` with every frame of `frames[i]` in
    thread i (elided_frames 0), streamed: the small rest of the document is encoded whole
    with a unique placeholder where each frame list goes. `supports[i]`: thread i's walk's
    support of its scanned frames."""
    tree = report_dict(doc)
    token = secrets.token_hex(16)  # no dump-controlled string can guess it
    markers: List[str] = []
    for i, t in enumerate(tree["threads"]):
        marker = f"dumpkit-frames-{token}-{i}"
        t["frames"] = marker
        t["elided_frames"] = 0
        markers.append(json.dumps(marker))
    text = json.dumps(tree, indent=indent, ensure_ascii=True)
    pos = 0
    for i, (marker, walked) in enumerate(zip(markers, frames)):
        encode = _frame_encoder(supports[i] if supports is not None and i < len(supports) else None)
        at = text.index(marker, pos)
        out.write(text[pos:at])
        line = text[text.rfind("\n", 0, at) + 1 : at]
        pad = line[: len(line) - len(line.lstrip(" "))]
        _write_list(out, walked, encode, pad + " " * indent, pad)
        pos = at + len(marker)
    out.write(text[pos:])
    out.write("\n")


def _write_list(out: TextIO, walked: Sequence[Frame], encode, item_pad: str, close_pad: str) -> None:
    if not walked:
        out.write("[]")
        return
    out.write("[\n")
    sep = ",\n" + item_pad
    head = item_pad
    for lines in _line_chunks(walked, encode):
        out.write(head + sep.join(lines))
        head = sep
    out.write("\n" + close_pad + "]")


def run_lines(run: Run, templates: Sequence[Tuple[int, str]]) -> Iterator[List[str]]:
    """A bulk-walked run's lines, about CHUNK at a time, in frame order: member j's
    `templates[j]` is (its SP in the first repetition, a %-template of frame index and
    SP); each member's lines are made in C (map over two ranges) and interleaved by slice.
    No Frame is made per repetition."""
    p, span = len(run.members), run.span
    step = max(1, CHUNK // p)
    for k0 in range(0, run.repetitions, step):
        m = min(step, run.repetitions - k0)
        lines: List[str] = [""] * (m * p)
        for j, (sp, template) in enumerate(templates):
            first = run.first + k0 * p + j
            low = sp + k0 * span
            lines[j::p] = map(template.__mod__, zip(range(first, first + m * p, p), range(low, low + m * span, span)))
        yield lines


def _line_chunks(walked: Sequence[Frame], encode) -> Iterator[List[str]]:
    """The frames' JSON lines, up to CHUNK at a time. A bulk-walked recursion's lines are
    made from each member's text around its SP, with no Frame made per repetition."""
    parts: Sequence[Union[Sequence[Frame], Run]] = walked.parts if isinstance(walked, Frames) else (walked,)
    for part in parts:
        if not isinstance(part, Run):
            for start in range(0, len(part), CHUNK):
                yield [encode(f) for f in part[start : start + CHUNK]]
            continue
        templates = []  # (the member's first sp, its line as a %-template of index and sp)
        for j in range(len(part.members)):
            f = part.frame(j)
            mid, tail = encode.around_sp(f)
            templates.append((f.sp, '{"index": %d' + mid.replace("%", "%%") + "%#x" + tail.replace("%", "%%")))
        yield from run_lines(part, templates)


# ----------------------------------------------------------------------------- text
HEADERS = ("#", "Memory", "Child-SP", "RetAddr/IP", "Call site", "Found by")
GAP = "  "  # between columns, as the rich tables of the other reports lay them out


def _width(text: str) -> int:
    if text.isascii():
        return len(text)
    from rich.cells import cell_len  # rich is imported for text output only: not for JSON's

    return cell_len(text)


def _left(text: str, width: int) -> str:
    return text + " " * (width - _width(text))


def _rows(walked: Sequence[KfFrame], cycles: Sequence[Cycle]) -> Iterable[Union[KfFrame, str]]:
    return fold_frames(walked, cycles) if cycles else walked


def _above(walked: Sequence[KfFrame], i: int) -> Optional[int]:
    """Row i's Memory: frame i-1's size (the distance between their Child-SPs). `walked`
    may start past frame 0 (a walk's possible frames)."""
    k = i - (walked[0].index if walked else 0)
    if 0 < k <= len(walked):
        f = walked[k - 1]
        if f.index == i - 1:
            return f.size
    return None


def write_kf_table(
    walked: Sequence[KfFrame],
    cycles: Sequence[Cycle],
    digits: int,
    out: TextIO,
    support: Callable[[KfFrame], Optional[Support]] = lambda f: None,
) -> None:
    """WinDbg `kf` columns, laid out as rich lays out a table (right-aligned numbers, two
    spaces between columns, every cell padded to its column's width), written a row at
    a time. The last column is how a frame was found and, for a scanned frame, what
    confirms it (`support`), as `analyze` writes it. Two passes over the rows: the first finds each column's width. A folded
    cycle is one row holding only its call-site text. Unfolded (`--full`), a bulk-walked
    recursion's rows come from one %-template per member of its cycle, as the JSON's do:
    a million rows without a Frame made for each."""
    parts: Sequence[Union[Sequence[KfFrame], Run]]
    if not cycles and isinstance(walked, Frames):
        parts = walked.parts
    else:
        parts = (walked,)
    names: Dict[str, str] = {}  # a frame's name, cleaned; a stack names few functions
    widths = [len(h) for h in HEADERS]
    widths[2] = max(widths[2], digits)
    widths[3] = max(widths[3], digits)
    last = 0

    def see_size(size: Optional[int]) -> None:
        if size is not None and size > 0xFFFFFF:  # wider than the header
            widths[1] = max(widths[1], len(f"{size:x}"))

    founds: Dict[Tuple[str, Optional[str]], str] = {}  # (trust, support) -> the cell's words

    def found(f: KfFrame) -> str:
        key = (f.trust, support(f))
        words = founds.get(key)
        if words is None:
            words = founds[key] = found_words(f.trust, key[1])
        return words

    def see(f: KfFrame, size: Optional[int]) -> None:
        see_size(size)
        raw = call_site(f)
        if raw not in names:
            names[raw] = cell = clean(raw)
            widths[4] = max(widths[4], _width(cell))
        widths[5] = max(widths[5], len(found(f)))

    for part in parts:
        if isinstance(part, Run):
            # every repetition shows what the first does, but the Memory of member 0,
            # which is the previous part's last frame's size only in the run's first row
            see(part.frame(0), _above(walked, part.first))
            for j in range(1, len(part.members)):
                see(part.frame(j), part.members[j - 1].size)
            if part.repetitions > 1:
                see_size(part.members[-1].size)
            last = part.first + len(part) - 1
            continue
        for row in _rows(part, cycles):
            if isinstance(row, str):
                widths[4] = max(widths[4], _width(clean(row)))
                continue
            last = row.index
            see(row, _above(walked, last))
    widths[0] = max(widths[0], len(kf_number(last)))
    w0, w1, w2, w3, w4, w5 = widths
    out.write(
        GAP.join(
            (HEADERS[0].rjust(w0), HEADERS[1].rjust(w1), HEADERS[2].rjust(w2), HEADERS[3].rjust(w3))
            + (_left(HEADERS[4], w4), _left(HEADERS[5], w5))
        )
        + "\n"
    )
    blank = " " * (w0 + w1 + w2 + w3 + 4 * len(GAP))
    no_size = " " * w1
    sp_pad = " " * (w2 - digits)
    ip_pad = " " * (w3 - digits)
    sites: Dict[str, str] = {}  # padded cells
    found_cells: Dict[str, str] = {}

    def cells_after_sp(f: KfFrame) -> str:
        """The row's text after its Child-SP: IP, call site, how found (a run member's
        repetitions share it)."""
        name = call_site(f)
        site = sites.get(name)
        if site is None:
            site = sites[name] = _left(names.get(name) or clean(name), w4)
        words = found(f)
        cell = found_cells.get(words)
        if cell is None:
            cell = found_cells[words] = _left(words, w5)
        return f"{GAP}{ip_pad}{f.ip:0{digits}x}{GAP}{site}{GAP}{cell}\n"

    def size_cell(size: Optional[int]) -> str:
        return no_size if size is None else format(size, f">{w1}x")

    def row_text(f: KfFrame, size: Optional[int]) -> str:
        return f"{kf_number(f.index):>{w0}}{GAP}{size_cell(size)}{GAP}{sp_pad}{f.sp:0{digits}x}{cells_after_sp(f)}"

    def write_run(run: Run) -> None:
        """A run's rows from one %-template per member (see run_lines); `%w0.2x` is
        kf_number's spelling (two hex digits at least), right-aligned."""
        templates = []
        for j in range(len(run.members)):
            f = run.frame(j)
            above = run.members[j - 1].size  # member p-1 of the previous repetition, for j == 0
            cells = f"{GAP}{size_cell(above)}{GAP}{sp_pad}".replace("%", "%%")
            templates.append((f.sp, f"%{w0}.2x{cells}%0{digits}x" + cells_after_sp(f).replace("%", "%%")))
        for n, lines in enumerate(run_lines(run, templates)):
            if n == 0:  # its Memory is the frame before the run's
                lines[0] = row_text(run.frame(0), _above(walked, run.first))
            out.write("".join(lines))

    for part in parts:
        if isinstance(part, Run):
            write_run(part)
            continue
        for row in _rows(part, cycles):
            if isinstance(row, str):
                out.write(blank + GAP + _left(clean(row), w4) + GAP + " " * w5 + "\n")
                continue
            out.write(row_text(row, _above(walked, row.index)))


def walk_support(given: Optional[Dict[int, Support]]) -> Callable[[KfFrame], Optional[Support]]:
    """A walk's frame's support, from the walk's record of its scanned frames."""
    return lambda f: support_of(f, given)


def _own_support(f: KfFrame) -> Optional[Support]:
    """A report's frame carries its own support (FrameRecord.support)."""
    return f.support if isinstance(f, FrameRecord) else None


def write_stacks_text(
    doc: Stacks,
    frames: Sequence[Sequence[Frame]],
    console: "Console",
    out: TextIO,
    full: bool = False,
    supports: Optional[Sequence[Optional[Dict[int, Support]]]] = None,
) -> None:
    """`dumpkit stack`: each thread asked for in WinDbg's `kf` layout, its recursion
    folded as `analyze` folds it (unless `full`), then where each module image came from.
    Headings go through `console` (styled on a terminal); rows straight to `out`.
    `supports[i]`: thread i's walk's support of its scanned frames (`StackWalk.support`),
    shown beside their trust as `analyze` shows it."""
    from rich.text import Text

    crash = next((t.tid for t in doc.threads if t.is_crashing), None)
    py = python_view(doc.python, crash, tids=[t.tid for t in doc.threads])
    if py is not None:
        print_python_section(console, py, max_rows=None)
    digits = pointer_digits(doc.system)
    for i, (t, walked) in enumerate(zip(doc.threads, frames)):
        v = thread_view(t)
        given = supports[i] if supports is not None and i < len(supports) else None
        console.print(
            Text(f"Thread {t.tid}" + (f' "{clean(t.name, 80)}"' if t.name else ""), style="bold")
            + Text(f"  {v.frames}; walk ended: {v.stop_reason}", style="dim")
        )
        write_kf_table(walked, () if full else t.cycles, digits, out, walk_support(given))
        if t.possible_frames:
            out.flush()
            console.print(Text(possible_heading(len(t.possible_frames)), style="dim"))
            write_kf_table(t.possible_frames, (), digits, out, _own_support)
        out.flush()
        console.print()
    images = stacks_view(doc).images
    if images:
        console.print(Text("Module images", style="bold"))
        for m in images:
            console.print(Text(f"  {clean(m.name)}: {clean(m.source)}"))
    for note in doc.notes:
        console.print(Text(f"Note: {clean(note, 1000)}"))
