"""The terminal view of a report, and of `dumpkit stack`. What is shown comes from
report.view; this module only lays it out. Every dump-derived string goes through
escape.clean and into Styled lines (rich Text objects on a colour terminal), never into
markup, so a hostile module name cannot style or inject.

Without colour (into a pipe or a file, or --no-color) the report is its lines' plain
text, which is what rich writes for them there: rich is imported only for colour, for a
line rich would change (a tab, a newline) and for `dumpkit stack`'s table."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Callable, Iterable, List, Optional, Sequence

from dumpkit.console import shell_quote
from dumpkit.analysis.model import Report
from dumpkit.report.escape import clean
from dumpkit.report.text_layout import GAP, Styled, stack_lines, trimmed, wrap
from dumpkit.report.view import (
    REPORT,
    WORDS,
    CodeView,
    CollisionView,
    WaitsView,
    Fact,
    FrameSizeTable,
    Fold,
    Line,
    PythonView,
    StackTable,
    report_view,
)

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

LABEL_WIDTH = 15  # "CUDA runtime", "NVIDIA driver", "CPU features" fit whole


def inline(line: Line, style: str = "") -> "Text":
    """A view line as terminal text: values cleaned, no markup."""
    from rich.text import Text

    return Text(_plain(line), style=style)


def _plain(line: Line) -> str:
    return "".join(s.text if s.kind == WORDS else clean(s.text, s.limit) for s in line)


def stack_table(table: StackTable, more: str = "... (more frames: use `dumpkit stack`)") -> "Table":
    """`dumpkit stack`'s table (rich lays it out at the console's width)."""
    from rich.table import Table
    from rich.text import Text

    h = table.headers
    out = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
    out.add_column(h.number, justify="right")
    out.add_column(h.size, justify="right")
    out.add_column(h.child_sp, justify="right")
    out.add_column(h.ip, justify="right")
    out.add_column(h.call_site)
    out.add_column(h.found_by)
    for r in table.rows:
        if isinstance(r, Fold):
            out.add_row("", "", "", "", Text(r.text, style="yellow"), "")
            continue
        out.add_row(
            r.number,
            r.memory,
            r.child_sp,
            r.ip,
            Text(clean(r.call_site)),
            Text(r.found_by, style="dim" if r.scanned else ""),
        )
    if table.cut:
        out.add_row("", "", "", "", Text(more, style="dim"), "")
    return out


class _Out:
    """Lines for a console of `width` columns, each given to `emit` (the console never
    wraps them)."""

    def __init__(self, emit: Callable[[Styled], None], width: int):
        self.emit = emit
        self.width = width

    def line(self, text: Optional[Styled] = None) -> None:
        self.emit(text if text is not None else Styled(""))

    def lines(self, texts: Iterable[Styled]) -> None:
        for t in texts:
            self.line(t)

    def para(self, prefix: str, body: str, indent: Optional[int] = None, style: str = "", prefix_style: str = ""):
        self.lines(wrap(prefix, body, self.width, indent, style, prefix_style))


def print_python_section(console: "Console", view: PythonView, max_rows: Optional[int] = 40) -> None:
    """The Python stacks section on a console of its own width (`dumpkit stack --python`)."""
    python_section(_Out(lambda t: console.print(t.rich(), soft_wrap=True), console.width), view, max_rows=max_rows)


def python_section(out: _Out, py: PythonView, max_rows: Optional[int] = 40) -> None:
    """The interpreter, and each thread's Python stack, innermost first (`max_rows` rows
    each; None: all). A location that does not fit beside its function goes under it."""
    out.para("Python stacks".ljust(LABEL_WIDTH), clean(py.summary, 1000), prefix_style="bold")
    for s in py.stacks:
        out.line(Styled(s.title, style="bold"))
        rows = s.rows if max_rows is None else s.rows[:max_rows]
        frames = [r for r in rows if not isinstance(r, Fold)]
        index_w = max([1] + [len(str(r.index)) for r in frames])
        function_w = max([8] + [len(clean(r.function, 200)) for r in frames])
        out.line(Styled(f"{'#'.rjust(index_w)}{GAP}{'Function'.ljust(function_w)}{GAP}File:line", style="bold"))
        for r in rows:
            if isinstance(r, Fold):
                out.para(" " * (index_w + len(GAP)), r.text, style="yellow")
                continue
            where = clean(r.location, 300) + (f"  ({clean(r.problem)})" if r.problem else "")
            head = f"{str(r.index).rjust(index_w)}{GAP}{clean(r.function, 200).ljust(function_w)}{GAP}"
            if len(head) + len(where) <= out.width:
                out.line(Styled(head + where))
            else:
                out.line(Styled(head.rstrip()))
                out.para(" " * (index_w + 2 * len(GAP)), where)
        if max_rows is not None and len(s.rows) > max_rows:
            out.line(Styled(" " * (index_w + len(GAP)) + "... (every frame: dumpkit stack --python)", style="dim"))
        for p in s.problems:
            out.para("  problem: ", clean(p, 1000), indent=4, style="dim", prefix_style="dim")
    out.line()


def _items(out: _Out, title: str, items: Iterable[str], numbered: bool = False) -> None:
    items = list(items)
    if not items:
        return
    out.line(Styled(title, style="bold"))
    for i, it in enumerate(items, 1):
        prefix = f"  {i}. " if numbered else "  - "
        out.para(prefix, clean(it, 2000))


def _collision(out: _Out, c: CollisionView) -> None:
    out.line(Styled(c.heading, style="bold"))
    out.para("  ", clean(c.title, 2000), style="bold")
    for m in c.modules:
        out.para("  - ", _plain(m), indent=6)
    out.para("  leads to: ", clean(c.leads_to, 2000), indent=4)
    out.line(Styled("  ways out:"))
    for i, way in enumerate(c.ways_out, 1):
        out.para(f"    {i}. ", clean(way, 2000))
    for u in c.unknown:
        out.para("  not known: ", clean(u, 2000), indent=4, style="dim")
    out.line()


def _waits(out: _Out, w: WaitsView) -> None:
    out.line(Styled("Who waits for whom", style="bold"))
    for d in w.deadlocks:
        out.para("  deadlock: ", clean(d, 2000), indent=4, style="bold")
    for r in w.rows:
        held = f"; held by {r.held_by}" if r.held_by and r.held_by != "not known" else ""
        held = held or ("; who holds it is not known" if r.held_by == "not known" else "")
        out.para(f"  thread {clean(r.thread, 200)}: ", clean(f"{r.what}{held}", 2000), indent=4)
        if r.where:
            out.para("      at ", clean(r.where, 1000), indent=8, style="dim")
    out.line()


def _fact(out: _Out, f: Fact) -> None:
    value = _plain(f.terminal_value or f.value)
    if f.terminal_label is None:
        out.para(" " * LABEL_WIDTH, value, style="dim")
    else:
        out.para(clean(f.terminal_label, LABEL_WIDTH - 1).ljust(LABEL_WIDTH), value, prefix_style="bold")


def _frame_sizes(out: _Out, sizes: FrameSizeTable) -> None:
    """#, sizes and the function on one line; the prologue (`how`) beside it when it fits,
    else under the function."""
    h = sizes.headers
    out.line(Styled("Largest frames (crashing thread)", style="bold"))
    index_w = max([len(h.index)] + [len(str(fs.index)) for fs in sizes.rows])
    size_w = max([len(h.size)] + [len(fs.size) for fs in sizes.rows])
    asks_w = max([len(h.asks)] + [len(fs.asks) for fs in sizes.rows])
    lead = index_w + size_w + asks_w + 3 * len(GAP)
    header = f"{h.index.rjust(index_w)}{GAP}{h.size.rjust(size_w)}{GAP}{h.asks.rjust(asks_w)}{GAP}{h.function}"
    out.line(Styled(header + (f"{GAP}{h.how}" if any(fs.how for fs in sizes.rows) else ""), style="bold"))
    for fs in sizes.rows:
        text = Styled(f"{str(fs.index).rjust(index_w)}{GAP}{fs.size.rjust(size_w)}{GAP}{fs.asks.rjust(asks_w)}{GAP}")
        text.append(clean(fs.function))
        if fs.oversized:
            text.append("  oversized", style="bold red")
        how = clean(fs.how)
        if how and text.cell_len + len(GAP) + len(how) <= out.width:
            text.append(GAP + how, style="dim")
            how = ""
        out.line(text)
        if how:
            out.para(" " * lead, how, style="dim")
    if sizes.legend:
        out.para("  ", sizes.legend, style="dim")


def _code(out: _Out, code: CodeView) -> None:
    """The instructions around the faulting IP, `=>` at the IP; addresses shorten, then the
    bytes give way, to fit the width."""
    out.para("Faulting code".ljust(LABEL_WIDTH), clean(code.where), prefix_style="bold")
    addresses = [r.address for r in code.rows]
    texts = [clean(r.text) for r in code.rows]
    bytes_w = max((len(r.bytes) for r in code.rows), default=0)
    text_w = max((len(t) for t in texts), default=0)
    shown, with_bytes = addresses, True
    for candidate, keep_bytes in ((addresses, True), (trimmed(addresses), True), (trimmed(addresses), False)):
        shown, with_bytes = candidate, keep_bytes
        address_w = max((len(a) for a in candidate), default=0)
        used = 4 + address_w + len(GAP) + (bytes_w + len(GAP) if keep_bytes else 0) + text_w
        if used <= out.width:
            break
    for r, address, instruction in zip(code.rows, shown, texts):
        line = Styled("  => " if r.faulting else "     ", style="bold red" if r.faulting else "")
        line.append(address + GAP + (r.bytes.ljust(bytes_w) + GAP if with_bytes else ""))
        line.append(instruction, style="bold" if r.faulting else "")
        out.line(line)
    if code.note:
        out.para("     ", clean(code.note, 1000), style="dim")


def _registers(out: _Out, cells: Sequence[str]) -> None:
    """The exception context, as many `name=value` cells a line as fit."""
    room = out.width - LABEL_WIDTH
    lines: List[str] = []
    for cell in cells:
        if lines and len(lines[-1]) + 1 + len(cell) <= room:
            lines[-1] += " " + cell
        else:
            lines.append(cell)
    for i, line in enumerate(lines):
        out.line(Styled.assemble(("Registers".ljust(LABEL_WIDTH) if i == 0 else " " * LABEL_WIDTH, "bold"), line))


def emit_lines(lines: Sequence[Styled], color: bool, width: int, plain: bool = True) -> str:
    """`lines` as rich writes them on a console of `width` columns, in colour or not.
    Without colour that is each line's plain text and a newline, unless a line holds a
    tab or a newline (rich expands and splits those): then, and for colour, rich writes
    them (`plain=False`: always)."""
    if plain and not color and not any("\t" in t.plain or "\n" in t.plain for t in lines):
        return "".join(t.plain + "\n" for t in lines)
    from rich.console import Console

    buf = io.StringIO()
    console = Console(
        file=buf,
        force_terminal=color,
        color_system="standard" if color else None,
        width=width,
        highlight=False,
        soft_wrap=True,
    )
    for t in lines:
        console.print(t.rich(), soft_wrap=True)
    return buf.getvalue()


def render_text(report: Report, color: bool = False, width: int = 120, max_frames: int = 40) -> str:
    """The analyze report for a terminal of `width` columns."""
    return emit_lines(text_lines(report, width, max_frames), color, width)


def text_lines(report: Report, width: int = 120, max_frames: int = 40) -> List[Styled]:
    """The analyze report's lines for a terminal of `width` columns."""
    view = report_view(report, REPORT, max_rows=max_frames, other_stacks=False)
    shown: List[Styled] = []
    out = _Out(shown.append, width)
    v = view.verdict
    out.para(f"dumpkit {view.dumpkit_version}: ", clean(view.dump_path), indent=2, prefix_style="dim")
    out.line()
    headline = wrap("", clean(v.headline, 2000), width - 9)
    out.line(Styled.assemble(("VERDICT ", "bold reverse"), " ", (headline[0].plain, "bold")))
    out.lines(Styled(" " * 9 + line.plain, style="bold") for line in headline[1:])
    out.line(Styled(f"confidence: {v.confidence}", style="dim"))
    if view.signature:
        out.para("signature: ", clean(view.signature, 1000), indent=4, prefix_style="dim")
    if view.blame:
        out.para("blame:     ", _plain(view.blame), indent=4, prefix_style="dim")
    _items(out, "Evidence", v.evidence)
    _items(out, "Next steps", v.next_steps, numbered=True)
    if view.images is not None:
        _items(out, view.images.title, view.images.lines)
    out.line()

    for f in view.facts.rows:
        _fact(out, f)
    for r in view.facts.remarks:
        out.para(" " * LABEL_WIDTH, ("note: " if r.note else "") + clean(r.text, 1000), style="dim")
    out.line()
    for c in view.facts.collisions:
        _collision(out, c)
    if view.waits is not None:
        _waits(out, view.waits)

    if view.code is not None:
        _code(out, view.code)
    if view.registers:
        _registers(out, view.registers)
    if view.code is not None or view.registers:
        out.line()
    if view.python is not None:
        python_section(out, view.python)
    for rec in view.recursions:
        out.line(Styled(f"Recursion on thread {rec.tid}", style="bold"))
        out.para("  ", rec.summary)
        for fn in rec.functions:
            out.line(Styled("    " + clean(fn)))
        if rec.entry_path:
            path = " <- ".join(clean(fn) for fn in rec.entry_path)
            out.para(
                "  entered from: ", path + (f" <- ... ({rec.entry_more} more)" if rec.entry_more else ""), indent=4
            )
    if view.frame_sizes is not None:
        _frame_sizes(out, view.frame_sizes)
    if view.budget is not None:
        out.para("Stack".ljust(LABEL_WIDTH), clean(view.budget, 1000), prefix_style="bold")
    out.line()

    crash = view.crashing
    if crash is not None and crash.stack is not None:
        out.para(
            f"Crashing thread {crash.tid}  ",
            f"{crash.frames} ({crash.trust}); walk ended: {clean(crash.stop_reason, 1000)}",
            indent=2,
            style="dim",
            prefix_style="bold",
        )
        lines, note = stack_lines(crash.stack, width, "... (more frames: use `dumpkit stack`)")
        out.lines(lines)
        if note:
            out.para("", note, style="dim")
        out.line()
    others = view.threads
    if others.groups:
        out.line(Styled(others.title, style="bold"))
        for g in others.groups:
            out.para("  ", _plain(g.summary), indent=4)
        out.para("  ", f"(every stack in full: dumpkit stack --all {clean(shell_quote(view.dump_path))})", style="dim")
    if view.problems:
        out.line()
        _items(out, "Problems met while reading (the rest of the report stands)", view.problems)
    return shown
