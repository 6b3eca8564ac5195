"""Markdown for GitHub issues and post-mortems: the verdict up top, a short crashing stack
open and long stacks folded in <details>, under 60,000 characters whatever the dump
(stacks and lists trimmed, with a note). What is shown comes from report.view; dump
strings are escaped (escape.markdown / markdown_code), which also keeps `@name` and `#123`
from mentioning or linking anyone."""

from __future__ import annotations

from typing import List, Optional

from dumpkit.analysis.model import Report
from dumpkit.report.escape import clean, markdown as md, markdown_code as code, markdown_prose as prose
from dumpkit.report.view import (
    CODE,
    LITERAL,
    PROSE,
    REPORT,
    WORDS,
    CodeView,
    Fold,
    Line,
    PythonView,
    ReportView,
    StackTable,
    ThreadView,
    cut_table,
    report_view,
)
from dumpkit.records import record


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
    """A fenced table, columns as the view heads them: frame number, frame size, Child-SP,
    return address / IP, call site, [how the frame was found]."""
    h = table.headers
    width = max(len(h.number), table.number_width)
    size = max([len(h.size)] + [len(r.memory) for r in table.rows if not isinstance(r, Fold)])
    header = (
        f"{h.number:>{width}} {h.size:>{size}} {h.child_sp:>{digits}} {h.ip:>{digits}} "
        f"{h.call_site}  [{h.found_by.lower()}]"
    )
    lines = ["```", header]
    for r in table.rows:
        if isinstance(r, Fold):
            lines.append(f"{'':>{width + 2}}{r.text}")
            continue
        # Inside a fence only a line starting with ``` could end it; strip backticks.
        name = clean(r.call_site).replace("`", "'")
        lines.append(f"{r.number:>{width}} {r.memory:>{size}} {r.child_sp} {r.ip} {name}  [{r.found_by}]")
    if table.cut:
        lines.append(f"{'':>{width + 2}}... (more frames: dumpkit stack)")
    lines.append("```")
    return lines


def _python(py: PythonView, limits: "Limits") -> List[str]:
    """The Python stacks in fenced blocks (innermost first), with the interpreter line."""
    out = [f"**Python stacks**: {md(py.summary, 1000)}", ""]
    for s in py.stacks[: limits.python_stacks]:
        out += [f"{md(s.title)}:", "", "```"]
        for r in s.rows[: limits.python_rows]:
            if isinstance(r, Fold):
                out.append(f"      {r.text}")
            else:
                # Inside a fence only a line starting with ``` could end it; strip backticks.
                line = f"{r.index:>5} {clean(r.function, 200)}  {clean(r.location, 300)}"
                out.append(line.replace("`", "'") + (f"  ({clean(r.problem)})" if r.problem else ""))
        if len(s.rows) > limits.python_rows:
            out.append("      ... (every frame: dumpkit stack --python)")
        out += ["```", ""]
    if len(py.stacks) > limits.python_stacks:
        out += [f"({len(py.stacks) - limits.python_stacks} more Python stacks: dumpkit stack --all --python)", ""]
    return out


def _code(c: CodeView) -> List[str]:
    """The instructions around the faulting IP in a fenced block, `=>` at the IP."""
    out = [f"**Faulting code** in {code(c.where)}:", "", "```"]
    width = max((len(r.bytes) for r in c.rows), default=0)
    for r in c.rows:
        # Inside a fence only a line starting with ``` could end it; strip backticks.
        text = clean(r.text).replace("`", "'")
        out.append(f"{'=>' if r.faulting else '  '} {r.address}  {r.bytes:<{width}}  {text}")
    out += ["```", ""]
    if c.note:
        out += [f"<sub>{md(c.note, 1000)}</sub>", ""]
    return out


def _thread_label(t: ThreadView) -> str:
    return f"{t.tid}" + (f" {code(t.name, 80)}" if t.name else "")


def _group_heading(t: ThreadView, same) -> List[str]:
    """`Thread 388:`, or for identical stacks `Threads 392, 396, 400 (identical stacks...):`."""
    if not same:
        return [f"Thread {_thread_label(t)}:"]
    tids = ", ".join(_thread_label(x) for x in (t, *same))
    return [f"Threads {tids} (identical stacks; Child-SP shown for {t.tid}):"]


# GitHub refuses an issue or comment body over 65,536 characters; a report stays under
# this whatever the dump, with room left for the reporter's own words.
MAX_CHARACTERS = 60_000
UNFOLDED_STACK_ROWS = 30  # a crashing stack this short is shown open, not in <details>


@record
class Limits:
    """How much of each part a Markdown report shows; tried from the first level down
    until the report fits MAX_CHARACTERS."""

    crash_rows: Optional[int]  # frame rows of the crashing stack (None: every kept row)
    other_rows: int  # frame rows of each other stack shown
    other_stacks: int  # other threads' stacks shown in full (the rest: one line each)
    other_lines: int  # other threads listed at most
    python_rows: int
    python_stacks: int
    problems: int


LEVELS = (
    Limits(None, 60, 1000, 1000, 60, 1000, 200),
    Limits(100, 20, 20, 1000, 30, 10, 50),
    Limits(60, 10, 8, 200, 20, 4, 20),
    Limits(40, 0, 0, 60, 10, 2, 10),
    Limits(20, 0, 0, 10, 5, 1, 5),
)


def _other_threads(view: ReportView, limits: Limits) -> List[str]:
    others = view.threads
    if not others.groups:
        return []
    out = ["<details>", f"<summary>{others.title} ({others.count})</summary>", ""]
    listed = others.groups[: limits.other_lines]
    for i, g in enumerate(listed):
        if i < limits.other_stacks and g.lead.has_frames and g.lead.stack is not None:
            out += _group_heading(g.lead, g.same)
            out += _stack_block(cut_table(g.lead.stack, limits.other_rows), view.pointer_digits)
            out.append("")
        elif i < limits.other_stacks:
            out += _group_heading(g.lead, g.same) + [f"No frames: {md(g.lead.stop_reason)}", ""]
        else:
            out.append(f"- {inline(g.summary)}")
    if len(listed) > limits.other_stacks:
        out.append("")
    if len(others.groups) > len(listed):
        out += [f"... {len(others.groups) - len(listed)} more distinct stacks (dumpkit stack --all)", ""]
    out += ["</details>", ""]
    return out


def _report(view: ReportView, limits: Limits, trimmed: bool) -> str:
    v = view.verdict
    out: List[str] = [
        "## Crash analysis (dumpkit)",
        "",
        f"**{prose(v.headline, 2000)}**",
        "",
        f"Confidence: {v.confidence}",
        "",
    ]
    if view.signature:
        out += [f"Signature: {code(view.signature, 1000)}", ""]
    if view.blame:
        out += [f"Blame: {inline(view.blame)}", ""]
    if v.evidence:
        out.append("**Evidence**")
        out += [f"- {prose(e, 2000)}" for e in v.evidence]
        out.append("")
    if v.next_steps:
        out.append("**Next steps**")
        out += [f"{i}. {prose(s, 2000)}" for i, s in enumerate(v.next_steps, 1)]
        out.append("")
    if view.images is not None:
        out += [f"**{view.images.title}**"] + [f"- {md(line, 2000)}" for line in view.images.lines] + [""]

    if view.facts.rows:
        out += ["| Fact | Value |", "|---|---|"]
        for f in view.facts.rows:
            out.append(f"| {md(f.label)} | {inline(f.value, cell=True)} |")
        out.append("")
    # One bullet each: consecutive quoted lines would run together into one paragraph.
    for r in view.facts.remarks:
        out.append(f"> - {'Note: ' if r.note else ''}{prose(r.text, 1000)}")
    if view.facts.remarks:
        out.append("")
    for c in view.facts.collisions:
        out += [f"**{md(c.heading)}:** {prose(c.title, 2000)}", ""]
        out += [f"- {inline(m)}" for m in c.modules] + [""]
        out += [f"Leads to: {prose(c.leads_to, 2000)}", "", "Ways out:", ""]
        out += [f"{i}. {prose(w, 2000)}" for i, w in enumerate(c.ways_out, 1)] + [""]
        out += [f"Not known: {prose(u, 2000)}" for u in c.unknown] + ([""] if c.unknown else [])
    if view.waits is not None:
        out += ["**Who waits for whom**", ""]
        out += [f"- **Deadlock:** {prose(d, 2000)}" for d in view.waits.deadlocks]
        out += ["", "| Thread | Where | Waits on | Held by |", "|---|---|---|---|"]
        out += [
            f"| {md(r.thread)} | {prose(r.where, 1000)} | {prose(r.what, 1000)} | {prose(r.held_by, 1000)} |"
            for r in view.waits.rows
        ]
        out.append("")

    if view.code is not None:
        out += _code(view.code)
    if view.registers:
        out += ["<details>", "<summary>Registers</summary>", "", "```"]
        out += [" ".join(view.registers[i : i + 4]) for i in range(0, len(view.registers), 4)]
        out += ["```", "", "</details>", ""]
    if view.python is not None:
        out += _python(view.python, limits)
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
            h = sizes.headers
            out += [
                "**Largest frames**",
                "",
                f"| {h.index} | {h.function} | {h.size} | {h.asks} |",
                "|---:|---|---:|---:|",
            ]
            for fs in sizes.rows:
                mark = " **oversized**" if fs.oversized else ""
                out.append(f"| {fs.index} | {cell_code(fs.function)} | {fs.size}{mark} | {fs.asks_noted} |")
            if legend:
                out += ["", f"<sub>{md(legend)}</sub>"]
            out.append("")
        if view.budget is not None:
            out += [f"**Stack**: {md(view.budget, 1000)}", ""]
        stack = crash.stack if limits.crash_rows is None else cut_table(crash.stack, limits.crash_rows)
        block = _stack_block(stack, view.pointer_digits)
        title = f"Crashing thread {crash.tid}: {crash.frames}"
        if sum(1 for r in stack.rows if not isinstance(r, Fold)) <= UNFOLDED_STACK_ROWS:
            out += [f"**{title}**", ""] + block + [""]
        else:
            out += ["<details>", f"<summary>{title}</summary>", ""] + block + ["", "</details>", ""]
    out += _other_threads(view, limits)
    if view.problems:
        shown = view.problems[: limits.problems]
        out += ["<details>", f"<summary>Problems met while reading ({len(view.problems)})</summary>", ""]
        out += [f"- {md(e, 1000)}" for e in shown]
        if len(view.problems) > len(shown):
            out.append(f"- ... {len(view.problems) - len(shown)} more (dumpkit analyze --format json lists them all)")
        out += ["", "</details>", ""]
    if trimmed:
        out += [
            f"<sub>Stacks and lists trimmed to keep this report under {MAX_CHARACTERS:,} characters "
            "(GitHub's limit for an issue is 65,536); `dumpkit analyze --format json` has everything.</sub>",
            "",
        ]
    out.append(f"<sub>dumpkit {md(view.dumpkit_version)}, report schema {view.schema_version}</sub>")
    return "\n".join(out) + "\n"


def _cut_to_fit(text: str, limit: int) -> str:
    """The last resort, should the smallest level still be too long: whole lines up to
    the limit, any open fence and <details> closed, and a note saying so."""
    note = "\n<sub>Report cut here to fit a GitHub issue; `dumpkit analyze --format json` has everything.</sub>\n"
    lines: List[str] = []
    size = 0
    fence = False
    details = 0
    for line in text.splitlines():
        if size + len(line) + 1 > limit - len(note) - 40:
            break
        lines.append(line)
        size += len(line) + 1
        if line.strip() == "```":
            fence = not fence
        details += line.count("<details>") - line.count("</details>")
    tail = (["```"] if fence else []) + ["", "</details>"] * max(0, details)
    return "\n".join(lines + tail) + "\n" + note


def render_markdown(report: Report, limit: int = MAX_CHARACTERS) -> str:
    """The report in GitHub Markdown, under `limit` characters whatever the dump: each
    level of Limits is tried until one fits."""
    view = report_view(report, REPORT)
    text = ""
    for i, limits in enumerate(LEVELS):
        text = _report(view, limits, trimmed=i > 0)
        if len(text) < limit:
            return text
    return _cut_to_fit(text, limit)
