"""The terminal view (rich) of a report, and of `dumpkit stack`. What is shown comes from
report.view; this module only lays it out. Every dump-derived string goes through
escape.clean and into rich Text objects, never into markup, so a hostile module name
cannot style or inject."""

from __future__ import annotations

import io
import shlex
from typing import Iterable, Optional

from rich.console import Console
from rich.table import Table
from rich.text import Text

from dumpkit.analysis.model import Report, Stacks
from dumpkit.report.escape import clean
from dumpkit.report.view import (
    REPORT,
    WORDS,
    Fact,
    Fold,
    Line,
    PythonView,
    StackTable,
    python_view,
    report_view,
    stacks_view,
)

LABEL_WIDTH = 15  # "CUDA runtime", "NVIDIA driver", "CPU features" fit whole


def _label(name: str) -> Text:
    return Text(name.ljust(LABEL_WIDTH), style="bold")


def inline(line: Line, style: str = "") -> Text:
    """A view line as terminal text: values cleaned, no markup."""
    return Text("".join(s.text if s.kind == WORDS else clean(s.text, s.limit) for s in line), style=style)


def stack_table(table: StackTable, more: str = "... (more frames: use `dumpkit stack`)") -> Table:
    out = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
    out.add_column("#", justify="right")
    out.add_column("Memory", justify="right")
    out.add_column("Child-SP", justify="right")
    out.add_column("RetAddr/IP", justify="right")
    out.add_column("Call site")
    out.add_column("Found by")
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


def python_section(console: Console, py: PythonView, max_rows: Optional[int] = 40) -> None:
    """The interpreter, and each thread's Python stack, innermost first (`max_rows` rows
    each; None: all)."""
    console.print(_label("Python stacks") + Text(clean(py.summary, 1000)))
    for s in py.stacks:
        console.print(Text(s.title, style="bold"))
        table = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
        for col, justify in (("#", "right"), ("function", "left"), ("file:line", "left")):
            table.add_column(col, justify=justify)  # type: ignore[arg-type]
        for r in s.rows if max_rows is None else s.rows[:max_rows]:
            if isinstance(r, Fold):
                table.add_row("", Text(r.text, style="yellow"), "")
            else:
                where = clean(r.location, 300) + (f"  ({clean(r.problem)})" if r.problem else "")
                table.add_row(str(r.index), Text(clean(r.function, 200)), Text(where))
        if max_rows is not None and len(s.rows) > max_rows:
            table.add_row("", Text("... (every frame: dumpkit stack --python)", style="dim"), "")
        console.print(table)
        for p in s.problems:
            console.print(Text(f"  problem: {clean(p, 1000)}", style="dim"))
    console.print()


def _lines(console: Console, title: str, items: Iterable[str], numbered: bool = False) -> None:
    items = list(items)
    if not items:
        return
    console.print(Text(title, style="bold"))
    for i, it in enumerate(items, 1):
        console.print(Text(f"  {i}. " if numbered else "  - ") + Text(clean(it, 2000)))


def _fact(console: Console, f: Fact) -> None:
    value = f.terminal_value or f.value
    if f.terminal_label is None:
        console.print(Text(" " * LABEL_WIDTH) + inline(value, style="dim"))
    else:
        console.print(_label(clean(f.terminal_label, LABEL_WIDTH - 1)) + inline(value))


def render_text(report: Report, color: bool = False, width: int = 120, max_frames: int = 40) -> str:
    view = report_view(report, REPORT, max_rows=max_frames, other_stacks=False)
    buf = io.StringIO()
    console = Console(
        file=buf,
        force_terminal=color,
        color_system="standard" if color else None,
        width=width,
        highlight=False,
        soft_wrap=False,
    )
    v = view.verdict
    console.print(Text(f"dumpkit {view.dumpkit_version}: ", style="dim") + Text(clean(view.dump_path)))
    console.print()
    console.print(Text("VERDICT ", style="bold reverse") + Text(" ") + Text(clean(v.headline, 2000), style="bold"))
    console.print(Text(f"confidence: {v.confidence}", style="dim"))
    _lines(console, "Evidence", v.evidence)
    _lines(console, "Next steps", v.next_steps, numbered=True)
    if view.images is not None:
        _lines(console, view.images.title, view.images.lines)
    console.print()

    for f in view.facts.rows:
        _fact(console, f)
    for r in view.facts.remarks:
        console.print(Text(" " * LABEL_WIDTH) + Text(("note: " if r.note else "") + clean(r.text, 1000), style="dim"))
    console.print()

    if view.python is not None:
        python_section(console, view.python)
    for rec in view.recursions:
        console.print(Text(f"Recursion on thread {rec.tid}", style="bold"))
        console.print(Text(f"  {rec.summary}"))
        for fn in rec.functions:
            console.print(Text("    ") + Text(clean(fn)))
        if rec.entry_path:
            console.print(
                Text("  entered from: ")
                + Text(clean(" <- ".join(rec.entry_path), 1000))
                + Text(f" <- ... ({rec.entry_more} more)" if rec.entry_more else "")
            )
    sizes = view.frame_sizes
    if sizes is not None:
        console.print(Text("Largest frames (crashing thread)", style="bold"))
        table = Table(box=None, pad_edge=False, header_style="bold")
        for col in ("#", "function", "frame", "prologue asks") + (("",) if sizes.legend else ()) + ("how",):
            table.add_column(col, justify="right" if col in ("#", "frame", "prologue asks") else "left")
        for fs in sizes.rows:
            mark = (Text("oversized" if fs.oversized else "", style="bold red"),) if sizes.legend else ()
            table.add_row(str(fs.index), Text(clean(fs.function)), fs.size, fs.asks, *mark, Text(clean(fs.how)))
        console.print(table)
        if sizes.legend:
            console.print(Text(f"  {sizes.legend}", style="dim"))
    if view.budget is not None:
        console.print(_label("Stack") + Text(clean(view.budget, 1000)))
    console.print()

    crash = view.crashing
    if crash is not None and crash.stack is not None:
        console.print(
            Text(f"Crashing thread {crash.tid}", style="bold")
            + Text(f"  {crash.frames} ({crash.trust}); walk ended: {clean(crash.stop_reason, 1000)}", style="dim")
        )
        console.print(stack_table(crash.stack))
        console.print()
    others = view.threads
    if others.groups:
        console.print(Text(others.title, style="bold"))
        for g in others.groups:
            console.print(Text("  ") + inline(g.summary))
        console.print(
            Text(f"  (every stack in full: dumpkit stack --all {clean(shlex.quote(view.dump_path))})", style="dim")
        )
    if view.problems:
        console.print()
        _lines(console, "Problems met while reading (the rest of the report stands)", view.problems)
    return buf.getvalue()


def render_stacks(doc: Stacks, console: Console, max_rows: Optional[int] = None) -> None:
    """`dumpkit stack`: each thread asked for, every frame, in WinDbg's `kf` layout, then
    where each module image came from."""
    view = stacks_view(doc)
    crash = next((t.tid for t in doc.threads if t.is_crashing), None)
    py = python_view(doc.python, crash, tids=[t.tid for t in doc.threads])
    if py is not None:
        python_section(console, py, max_rows=None)
    for t in view.threads:
        console.print(
            Text(f"Thread {t.tid}" + (f' "{clean(t.name, 80)}"' if t.name else ""), style="bold")
            + Text(f"  {t.frames}; walk ended: {t.stop_reason}", style="dim")
        )
        if t.stack is not None:
            console.print(stack_table(t.stack))
        console.print()
    if view.images:
        console.print(Text("Module images", style="bold"))
        for m in view.images:
            console.print(Text(f"  {clean(m.name)}: {clean(m.source)}"))
