"""Markdown for GitHub issues and post-mortems: the verdict up top, full stacks folded in
<details>. Dump strings are escaped (escape.markdown / markdown_code)."""

from __future__ import annotations

from typing import List

from dumpkit.analysis.model import Report, ThreadReport
from dumpkit.analysis.recursion import call_order
from dumpkit.words import plural
from dumpkit.report.escape import clean, markdown as md, markdown_code as code, markdown_prose as prose
from dumpkit.report.text import (
    budget_line,
    collapse,
    cycle_summary,
    entry_path,
    frame_name,
    oversized_legend,
    pointer_digits,
    shown_cycles,
    shows_frame_sizes,
    stack_groups,
)


def cell_code(text: object) -> str:
    """An inline code span inside a table row: GFM splits cells at `|` even in code."""
    return code(text).replace("|", "\\|")


def _stack_block(t: ThreadReport, digits: int = 16) -> List[str]:
    """A fenced `kf`-style table: frame number (decimal), frame size (hex, like `kf`),
    Child-SP, return address / IP, call site, how the frame was found."""
    width = max(4, len(str(t.frames[-1].index)) if t.frames else 0)
    header = f"{'#':>{width}} {'Memory':>8} {'Child-SP':>{digits}} {'RetAddr/IP':>{digits}} Call site  [found by]"
    lines = ["```", header]
    for r in collapse(t.frames, t.cycles):
        if isinstance(r, str):
            lines.append(f"{'':>{width + 2}}{r}")
            continue
        size = f"{r.size:x}" if r.size is not None else ""
        # Inside a fence only a line starting with ``` could end it; strip backticks.
        name = clean(frame_name(r)).replace("`", "'")
        lines.append(f"{r.index:{width}d} {size:>8} {r.sp:0{digits}x} {r.ip:0{digits}x} {name}  [{r.trust}]")
    lines.append("```")
    return lines


def _thread_label(t: ThreadReport) -> str:
    return f"{t.tid}" + (f" {code(t.name, 80)}" if t.name else "")


def _group_heading(t: ThreadReport, same) -> List[str]:
    """`Thread 388:`, or for identical stacks `Threads 392, 396, 400 (identical stacks...):`."""
    if not same:
        return [f"Thread {_thread_label(t)}:"]
    tids = ", ".join(_thread_label(x) for x in (t, *same))
    return [f"Threads {tids} (identical stacks; Child-SP shown for {t.tid}):"]


def render_markdown(report: Report) -> str:
    v = report.verdict
    digits = pointer_digits(report)
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
        out.append("")

    out += ["| | |", "|---|---|"]
    c = report.crash
    if c is not None:
        ex = f"`{c.code:#010x}` {md(c.code_name)}"
        if c.fastfail_code is not None:
            ex += f" / {md(c.fastfail_name)} ({c.fastfail_code})"
        out.append(f"| Exception | {ex} on thread {c.thread_id} at `{c.address:#x}` |")
        if c.summary:
            out.append(f"| Meaning | {prose(c.summary, 1000, table_cell=True)} |")
    s = report.system
    if s is not None:
        os_line = f"{md(s.arch)}, Windows {md(s.os_version)}" + (f" ({md(s.os_build)})" if s.os_build else "")
        if s.wine:
            os_line += f", under {md(s.wine)}"
        out.append(f"| OS | {os_line} |")
        out.append(f"| CPU | {md(s.cpu)}, {plural(s.processors, 'processor')} |")
    env = report.environment
    if env.cpu_features:
        feats = ", ".join(
            f"{k} {'yes' if val else 'no' if val is not None else 'unknown'}" for k, val in env.cpu_features.items()
        )
        out.append(f"| CPU features | {md(feats)} |")
    if env.python:
        out.append(f"| Python | {md(env.python)} |")
    if env.tensorflow or env.tensorflow_version:
        out.append(
            f"| TensorFlow | {md(env.tensorflow_version or 'version unknown')}"
            + (f" ({cell_code(env.tensorflow[0])})" if env.tensorflow else "")
            + " |"
        )
    for comp in env.cuda:
        out.append(f"| {md(comp.name)} | {md(comp.version or '?')} ({cell_code(comp.module)}) |")
    out.append("")
    # One bullet each: consecutive quoted lines would run together into one paragraph.
    for sentence in env.compatibility:
        out.append(f"> - {prose(sentence, 1000)}")
    for note in env.notes:
        out.append(f"> - Note: {prose(note, 1000)}")
    if env.compatibility or env.notes:
        out.append("")

    for t, cyc in shown_cycles(report):
        out.append(f"**Recursion on thread {t.tid}**: {cycle_summary(cyc)}")
        out.append("")
        out += [f"- {code(fn)}" for fn in call_order(cyc)]
        path, more = entry_path(cyc)
        if path:
            out += [
                "",
                "Entered from: "
                + " \\<- ".join(code(fn) for fn in path)
                + (f" \\<- ... ({more} more)" if more else ""),
            ]
        out.append("")
    crash_thread = next((t for t in report.threads if t.is_crashing), None)
    if crash_thread is not None:
        if shows_frame_sizes(report):
            legend = oversized_legend(report)
            out += [
                "**Largest frames**",
                "",
                "| # | function | frame bytes | prologue asks |" + (" |" if legend else ""),
                "|---:|---|---:|---:|" + ("---|" if legend else ""),
            ]
            for fs in report.frame_sizes[:8]:
                asks = f"{fs.requested:,}" if fs.requested is not None else ""
                if fs.not_yet_allocated:
                    asks += " (died in the stack probe)"
                mark = (" **oversized** |" if fs.oversized else " |") if legend else ""
                out.append(f"| {fs.frame_index} | {cell_code(fs.function)} | {fs.size:,} | {asks} |{mark}")
            if legend:
                out += ["", f"<sub>{md(legend)}</sub>"]
            out.append("")
        if crash_thread.budget is not None:
            out += [f"**Stack**: {md(budget_line(crash_thread.budget), 1000)}", ""]
        summary = f"Crashing thread {crash_thread.tid}: {plural(crash_thread.frame_count, 'frame')}"
        out += ["<details>", f"<summary>{summary}</summary>", ""] + _stack_block(crash_thread, digits)
        out += ["", "</details>", ""]
    groups = stack_groups(report.threads)
    if groups:
        count = sum(1 + len(same) for _t, same in groups)
        distinct = f"; {len(groups)} distinct stacks" if len(groups) < count else ""
        title = "Other threads" if crash_thread is not None else "Threads"
        out += ["<details>", f"<summary>{title} ({count}{distinct})</summary>", ""]
        for t, same in groups:
            out += _group_heading(t, same)
            out += _stack_block(t, digits) if t.frames else [f"No frames: {md(t.stop_reason)}"]
            out.append("")
        out += ["</details>", ""]
    if report.soft_errors:
        out += ["<details>", f"<summary>Problems met while reading ({len(report.soft_errors)})</summary>", ""]
        out += [f"- {md(e, 1000)}" for e in report.soft_errors]
        out += ["", "</details>", ""]
    out.append(f"<sub>dumpkit {md(report.dumpkit_version)}, report schema {report.schema_version}</sub>")
    return "\n".join(out) + "\n"
