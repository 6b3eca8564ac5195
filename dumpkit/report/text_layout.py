"""Fitting report text to a terminal's width: prose wrapped with hanging indents, and a
stack table whose addresses shorten, then give way, before a function name is cut.

Plain strings in, Styled lines out; every dump string has been through escape.clean
before it gets here (the caller's job), and none is ever split: a name longer than the
line is written whole and the terminal wraps it.

Styled holds a line the way rich.text.Text would, without importing rich (~25 ms of a
~100 ms run): a report into a pipe or a file is its lines' plain text; on a colour
terminal each line becomes the rich Text the same calls would have built."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, List, Optional, Sequence, Tuple, Union

if TYPE_CHECKING:
    from rich.text import Text

from dumpkit.report.escape import clean
from dumpkit.report.view import Fold, FrameRow, StackTable

GAP = "  "

# What rich.text.Text drops from every string it is given (rich.control.STRIP_CONTROL_CODES:
# BEL, BS, VT, FF, CR); escape.clean has removed them from dump strings already.
_STRIPPED = dict.fromkeys((7, 8, 11, 12, 13))

Part = Union[str, Tuple[str, str]]


class Styled:
    """A line of report text and its styles, built with rich.text.Text's calls (the
    constructor, assemble, append, rstrip) and recorded so that `rich()` makes the very
    Text those calls make. `plain` is that Text's plain text."""

    __slots__ = ("_ops", "plain")

    def __init__(self, text: str = "", style: str = "") -> None:
        self._ops: List[Tuple[Any, ...]] = [("text", text, style)]
        self.plain = text.translate(_STRIPPED)

    @classmethod
    def assemble(cls, *parts: Part) -> "Styled":
        out = cls()
        out._ops = [("assemble", parts)]
        out.plain = "".join(p if isinstance(p, str) else p[0] for p in parts).translate(_STRIPPED)
        return out

    def append(self, text: str, style: str = "") -> None:
        self._ops.append(("append", text, style))
        self.plain += text.translate(_STRIPPED)

    def rstrip(self) -> None:
        self._ops.append(("rstrip",))
        self.plain = self.plain.rstrip()

    @property
    def cell_len(self) -> int:
        """Terminal cells, as rich counts them (printable ASCII: one each)."""
        if self.plain.isascii() and self.plain.isprintable():
            return len(self.plain)
        from rich.cells import cell_len

        return cell_len(self.plain)

    def rich(self) -> "Text":
        """The rich Text the recorded calls make."""
        from rich.text import Text

        out = Text()
        for op in self._ops:
            if op[0] == "text":
                out = Text(op[1], style=op[2])
            elif op[0] == "assemble":
                out = Text.assemble(*op[1])
            elif op[0] == "append":
                out.append(op[1], style=op[2])
            else:
                out.rstrip()
        return out


# textwrap's whitespace other than the space itself (tab, newline, VT, FF, CR), each made a
# space before the split, as textwrap does
_TO_SPACE = dict.fromkeys(map(ord, "\t\n\x0b\x0c\r"), " ")
_SPACES = re.compile("( +)")


def words_wrapped(text: str, width: int) -> List[str]:
    """`textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)`, the
    same lines (tests/report/test_text_layout.py compares them), without importing textwrap:
    its TextWrapper compiles its word-splitting patterns at import, a millisecond of every
    text report's start-up, for the hyphen rules this never uses. Greedy: words and the
    spaces between them fill a line up to `width`; a line's trailing spaces are dropped, and
    so are a later line's leading ones; a word longer than `width` gets a line of its own."""
    chunks = [c for c in _SPACES.split(text.expandtabs().translate(_TO_SPACE)) if c]
    chunks.reverse()
    lines: List[str] = []
    while chunks:
        line: List[str] = []
        used = 0
        if lines and chunks[-1].strip() == "":
            chunks.pop()
        while chunks and used + len(chunks[-1]) <= width:
            used += len(chunks[-1])
            line.append(chunks.pop())
        if chunks and not line and len(chunks[-1]) > width:
            line.append(chunks.pop())
        if line and line[-1].strip() == "":
            line.pop()
        if line:
            lines.append("".join(line))
    return lines


def wrap(prefix: str, body: str, width: int, indent: Optional[int] = None, style: str = "", prefix_style: str = ""):
    """`prefix` then `body` word-wrapped to `width`, continuation lines indented by
    `indent` (default: the prefix's length). Words are never broken."""
    indent = len(prefix) if indent is None else indent
    room = max(20, width - indent)
    lines = words_wrapped(body, room) or [""]
    # the first line sits after the prefix, which may be longer or shorter than the indent
    first_room = max(20, width - len(prefix))
    if len(lines[0]) > first_room and first_room != room:
        lines = words_wrapped(body, first_room)
        rest = " ".join(lines[1:])
        lines = lines[:1] + (words_wrapped(rest, room) if rest else [])
    out = [Styled.assemble((prefix, prefix_style), (lines[0], style))]
    out += [Styled.assemble((" " * indent, ""), (line, style)) for line in lines[1:]]
    return out


def trimmed(values: Sequence[str]) -> List[str]:
    """Hex columns without the leading zeros every value shares (at least one digit kept)."""
    shown = [v for v in values if v]
    if not shown:
        return list(values)
    common = min(len(v) - len(v.lstrip("0")) for v in shown)
    common = min(common, min(len(v) for v in shown) - 1)
    return [v[common:] for v in values]


class _Layout:
    """One way to lay the stack table out (a plain class: @record builds its methods at
    import, which the start-up of every text report would pay)."""

    __slots__ = ("child_sp", "ip", "name_last")

    def __init__(self, child_sp: Optional[List[str]], ip: Optional[List[str]], name_last: bool) -> None:
        self.child_sp = child_sp  # None: the column is left out
        self.ip = ip
        self.name_last = name_last  # Found by before the call site, whose names may run past the width


def _width(values: Optional[Sequence[str]], header: str) -> int:
    return 0 if values is None else max([len(header)] + [len(v) for v in values])


def stack_lines(table: StackTable, width: int, more: str) -> Tuple[List[Styled], Optional[str]]:
    """The table as terminal lines, and a note naming the columns left out to fit (None
    when every column fits). Tried in order until every call site fits whole: full
    addresses; addresses without their shared leading zeros; without Child-SP; without
    RetAddr/IP; and last, the call site as the last column (a longer name runs on)."""
    h = table.headers
    rows = [r for r in table.rows if isinstance(r, FrameRow)]
    names = [clean(r.call_site) for r in rows]
    number_w = max([len(h.number)] + [len(r.number) for r in rows])
    size_w = max([len(h.size)] + [len(r.memory) for r in rows])
    found_w = max([len(h.found_by)] + [len(r.found_by) for r in rows])
    name_w = max([len(h.call_site)] + [len(n) for n in names])
    sp = [r.child_sp for r in rows]
    ip = [r.ip for r in rows]
    layouts = (
        _Layout(sp, ip, False),
        _Layout(trimmed(sp), trimmed(ip), False),
        _Layout(None, trimmed(ip), False),
        _Layout(None, None, False),
        _Layout(None, None, True),
    )
    gap = len(GAP)
    chosen = layouts[-1]
    for layout in layouts[:-1]:
        used = number_w + size_w + found_w + 3 * gap + name_w
        used += sum(
            _width(v, hd) + gap for v, hd in ((layout.child_sp, h.child_sp), (layout.ip, h.ip)) if v is not None
        )
        if used <= width:
            chosen = layout
            break
    sp_w, ip_w = _width(chosen.child_sp, h.child_sp), _width(chosen.ip, h.ip)

    def line(number: str, size: str, child_sp: str, ipv: str, name: str, found: str) -> List[Tuple[str, str]]:
        cells = [(number.rjust(number_w), ""), (GAP + size.rjust(size_w), "")]
        if chosen.child_sp is not None:
            cells.append((GAP + child_sp.rjust(sp_w), ""))
        if chosen.ip is not None:
            cells.append((GAP + ipv.rjust(ip_w), ""))
        if chosen.name_last:
            cells += [(GAP + found.ljust(found_w), "found"), (GAP + name, "")]
        else:
            cells += [(GAP + name.ljust(name_w), ""), (GAP + found, "found")]
        return cells

    out: List[Styled] = []
    head = line(h.number, h.size, h.child_sp, h.ip, h.call_site, h.found_by)
    out.append(Styled("".join(c for c, _ in head).rstrip(), style="bold"))
    fold_at = number_w + size_w + 2 * gap  # folds start where the addresses do: the most room
    i = 0
    for r in table.rows:
        if isinstance(r, Fold):
            out += wrap(" " * fold_at, clean(r.text, 1000), width, style="yellow")
            continue
        cells = line(
            r.number,
            r.memory,
            chosen.child_sp[i] if chosen.child_sp is not None else "",
            chosen.ip[i] if chosen.ip is not None else "",
            names[i],
            r.found_by,
        )
        text = Styled()
        for content, role in cells:
            text.append(content, style="dim" if role == "found" and r.scanned else "")
        text.rstrip()
        out.append(text)
        i += 1
    if table.cut:
        out += wrap(" " * fold_at, more, width, style="dim")
    left_out = [hd for v, hd in ((chosen.child_sp, h.child_sp), (chosen.ip, h.ip)) if v is None]
    note = None
    if left_out:
        note = f"({' and '.join(left_out)} left out to fit {width} columns; `dumpkit stack` shows every column)"
    return out, note
