"""Markdown for GitHub issues and post-mortems: the verdict up top, full stacks folded in
<details>. What is shown comes from report.view; dump strings are escaped
(escape.markdown / markdown_code)."""

from __future__ import annotations

from typing import List

from dumpkit.analysis.model import Report
from dumpkit.report.escape import clean, markdown as md, markdown_code as code, markdown_prose as prose
from dumpkit.report.view import (
    CODE,
    DOCUMENT,
    LITERAL,
    PROSE,
    WORDS,
    Fold,
    Line,
    PythonView,
    StackTable,
    ThreadView,
    report_view,
)


def cell_code(text: object) -> str:
    """An inline code span inside a table row: GFM splits cells at `|` even in code."""
    return code(text).replace("|", "\\|")


def inline(line: Line, cell: bool = False) -> str:
    """A view line as Markdown; `cell`: inside a table row."""
    out = []
    for s in line:
        if s.kind == WORDS:
            out.append(s.text)
        elif s.kind in (CODE, LITERAL):
            out.append(cell_code(s.text) if cell else code(s.text, s.limit))
        elif s.kind == PROSE:
            out.append(prose(s.text, s.limit, table_cell=cell))
        else:
            out.append(md(s.text, s.limit))
    return "".join(out)


def _stack_block(table: StackTable, digits: int = 16) -> List[str]:
    """A fenced `kf`-style table: frame number (decimal), frame size (hex, like `kf`),
    Child-SP, return address / IP, call site, how the frame was found."""
    width = max(4, table.number_width)
    header = f"{'#':>{width}} {'Memory':>8} {'Child-SP':>{digits}} {'RetAddr/IP':>{digits}} Call site  [found by]"
    lines = ["```", header]
    for r in table.rows:
        if isinstance(r, Fold):
            lines.append(f"{'':>{width + 2}}{r.text}")
            continue
        # Inside a fence only a line starting with ``` could end it; strip backticks.
        name = clean(r.call_site).replace("`", "'")
        lines.append(f"{r.number:>{width}} {r.memory:>8} {r.child_sp} {r.ip} {name}  [{r.found_by}]")
    lines.append("```")
    return lines


def _python(py: PythonView, max_rows: int = 60) -> List[str]:
    """The Python stacks in fenced blocks (innermost first), with the interpreter line."""
    out = [f"**Python stacks**: {md(py.summary, 1000)}", ""]
    for s in py.stacks:
        out += [f"{md(s.title)}:", "", "```"]
        for r in s.rows[:max_rows]:
            if isinstance(r, Fold):
                out.append(f"      {r.text}")
            else:
                # Inside a fence only a line starting with ``` could end it; strip backticks.
                line = f"{r.index:>5} {clean(r.function, 200)}  {clean(r.location, 300)}"
                out.append(line.replace("`", "'") + (f"  ({clean(r.problem)})" if r.problem else ""))
        if len(s.rows) > max_rows:
            out.append("      ... (every frame: dumpkit stack --python)")
        out += ["```", ""]
    return out


def _thread_label(t: ThreadView) -> str:
    return f"{t.tid}" + (f" {code(t.name, 80)}" if t.name else "")


def _group_heading(t: ThreadView, same) -> List[str]:
    """`Thread 388:`, or for identical stacks `Threads 392, 396, 400 (identical stacks...):`."""
    if not same:
        return [f"Thread {_thread_label(t)}:"]
    tids = ", ".join(_thread_label(x) for x in (t, *same))
    return [f"Threads {tids} (identical stacks; Child-SP shown for {t.tid}):"]


def render_markdown(report: Report) -> str:
    view = report_view(report, DOCUMENT)
    v = view.verdict
    out: List[str] = [
        "## Crash analysis (dumpkit)",
        "",
        f"**{prose(v.headline, 2000)}**",
        "",
        f"Confidence: {v.confidence}",
        "",
    ]
    if v.evidence:
        out.append("**Evidence**")
        out += [f"- {prose(e, 2000)}" for e in v.evidence]
        out.append("")
    if v.next_steps:
        out.append("**Next steps**")
        out += [f"{i}. {prose(s, 2000)}" for i, s in enumerate(v.next_steps, 1)]
    if view.images is not None:
        out += ["", f"**{view.images.title}**"] + [f"- {md(line, 2000)}" for line in view.images.lines]
        out.append("")

    out += ["| | |", "|---|---|"]
    for f in view.facts.rows:
        out.append(f"| {md(f.label)} | {inline(f.value, cell=True)} |")
    out.append("")
    # One bullet each: consecutive quoted lines would run together into one paragraph.
    for r in view.facts.remarks:
        out.append(f"> - {'Note: ' if r.note else ''}{prose(r.text, 1000)}")
    if view.facts.remarks:
        out.append("")

    if view.python is not None:
        out += _python(view.python)
    for rec in view.recursions:
        out.append(f"**Recursion on thread {rec.tid}**: {rec.summary}")
        out.append("")
        out += [f"- {code(fn)}" for fn in rec.functions]
        if rec.entry_path:
            out += [
                "",
                "Entered from: "
                + " \\<- ".join(code(fn) for fn in rec.entry_path)
                + (f" \\<- ... ({rec.entry_more} more)" if rec.entry_more else ""),
            ]
        out.append("")
    crash = view.crashing
    if crash is not None and crash.stack is not None:
        sizes = view.frame_sizes
        if sizes is not None:
            legend = sizes.legend
            out += [
                "**Largest frames**",
                "",
                "| # | function | frame bytes | prologue asks |" + (" |" if legend else ""),
                "|---:|---|---:|---:|" + ("---|" if legend else ""),
            ]
            for fs in sizes.rows:
                mark = (" **oversized** |" if fs.oversized else " |") if legend else ""
                out.append(f"| {fs.index} | {cell_code(fs.function)} | {fs.size} | {fs.asks_noted} |{mark}")
            if legend:
                out += ["", f"<sub>{md(legend)}</sub>"]
            out.append("")
        if view.budget is not None:
            out += [f"**Stack**: {md(view.budget, 1000)}", ""]
        summary = f"Crashing thread {crash.tid}: {crash.frames}"
        out += ["<details>", f"<summary>{summary}</summary>", ""] + _stack_block(crash.stack, view.pointer_digits)
        out += ["", "</details>", ""]
    others = view.threads
    if others.groups:
        out += ["<details>", f"<summary>{others.title} ({others.count})</summary>", ""]
        for g in others.groups:
            out += _group_heading(g.lead, g.same)
            if g.lead.has_frames and g.lead.stack is not None:
                out += _stack_block(g.lead.stack, view.pointer_digits)
            else:
                out += [f"No frames: {md(g.lead.stop_reason)}"]
            out.append("")
        out += ["</details>", ""]
    if view.problems:
        out += ["<details>", f"<summary>Problems met while reading ({len(view.problems)})</summary>", ""]
        out += [f"- {md(e, 1000)}" for e in view.problems]
        out += ["", "</details>", ""]
    out.append(f"<sub>dumpkit {md(view.dumpkit_version)}, report schema {view.schema_version}</sub>")
    return "\n".join(out) + "\n"
