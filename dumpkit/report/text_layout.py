"""Fitting report text to a terminal's width: prose wrapped with hanging indents, and a
stack table whose addresses shorten, then give way, before a function name is cut.

Plain strings in, rich Text lines out; every dump string has been through escape.clean
before it gets here (the caller's job), and none is ever split: a name longer than the
line is written whole and the terminal wraps it."""

from __future__ import annotations

import textwrap
from typing import List, Optional, Sequence, Tuple

from rich.text import Text

from dumpkit.report.escape import clean
from dumpkit.report.view import Fold, FrameRow, StackTable
from dumpkit.records import record

GAP = "  "


def wrap(prefix: str, body: str, width: int, indent: Optional[int] = None, style: str = "", prefix_style: str = ""):
    """`prefix` then `body` word-wrapped to `width`, continuation lines indented by
    `indent` (default: the prefix's length). Words are never broken."""
    indent = len(prefix) if indent is None else indent
    room = max(20, width - indent)
    lines = textwrap.wrap(body, room, break_long_words=False, break_on_hyphens=False) or [""]
    # the first line sits after the prefix, which may be longer or shorter than the indent
    first_room = max(20, width - len(prefix))
    if len(lines[0]) > first_room and first_room != room:
        lines = textwrap.wrap(body, first_room, break_long_words=False, break_on_hyphens=False)
        rest = " ".join(lines[1:])
        lines = lines[:1] + (textwrap.wrap(rest, room, break_long_words=False, break_on_hyphens=False) if rest else [])
    out = [Text.assemble((prefix, prefix_style), (lines[0], style))]
    out += [Text.assemble((" " * indent, ""), (line, style)) for line in lines[1:]]
    return out


def trimmed(values: Sequence[str]) -> List[str]:
    """Hex columns without the leading zeros every value shares (at least one digit kept)."""
    shown = [v for v in values if v]
    if not shown:
        return list(values)
    common = min(len(v) - len(v.lstrip("0")) for v in shown)
    common = min(common, min(len(v) for v in shown) - 1)
    return [v[common:] for v in values]


@record
class _Layout:
    child_sp: Optional[List[str]]  # None: the column is left out
    ip: Optional[List[str]]
    name_last: bool  # Found by before the call site, whose names may run past the width


def _width(values: Optional[Sequence[str]], header: str) -> int:
    return 0 if values is None else max([len(header)] + [len(v) for v in values])


def stack_lines(table: StackTable, width: int, more: str) -> Tuple[List[Text], Optional[str]]:
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

    out: List[Text] = []
    head = line(h.number, h.size, h.child_sp, h.ip, h.call_site, h.found_by)
    out.append(Text("".join(c for c, _ in head).rstrip(), style="bold"))
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
        text = Text()
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
