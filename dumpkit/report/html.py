"""A single self-contained HTML page (no scripts, no external resources). Every dump
string is HTML-escaped."""

from __future__ import annotations

from typing import List

from dumpkit.analysis.model import Report, ThreadReport
from dumpkit.analysis.recursion import call_order
from dumpkit.words import plural
from dumpkit.report.escape import html_prose as prose, html_text as h
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

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:75em;color:#222}
h1{font-size:1.3em} .verdict{font-size:1.15em;font-weight:bold;padding:.6em;background:#fdecea;border-left:4px solid #c62828}
table{border-collapse:collapse} td,th{padding:.15em .6em;text-align:left;vertical-align:top}
.stack td{font-family:ui-monospace,monospace;font-size:.9em} .num{text-align:right}
.scan{color:#777} .flag{color:#c62828;font-weight:bold} .fold{color:#a06000;font-style:italic} .dim{color:#666}
"""


def _stack(t: ThreadReport, digits: int = 16) -> List[str]:
    rows = [
        '<table class="stack"><tr><th>#</th><th>Memory</th><th>Child-SP</th><th>RetAddr/IP</th><th>Call site</th><th>Found by</th></tr>'
    ]
    for r in collapse(t.frames, t.cycles):
        if isinstance(r, str):
            rows.append(f'<tr><td colspan="6" class="fold">{h(r)}</td></tr>')
            continue
        cls = ' class="scan"' if r.trust.startswith("scan") else ""
        size = f"{r.size:x}" if r.size is not None else ""
        rows.append(
            f"<tr{cls}><td class=num>{r.index}</td><td class=num>{size}</td><td>{r.sp:0{digits}x}</td>"
            f"<td>{r.ip:0{digits}x}</td><td>{h(frame_name(r))}</td><td>{h(r.trust)}</td></tr>"
        )
    rows.append("</table>")
    return rows


def render_html(report: Report) -> str:
    v = report.verdict
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>dumpkit: {h(v.headline, 200)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>Crash analysis of {h(report.dump.path)}</h1>",
        f'<p class="verdict">{prose(v.headline, 2000)}</p>',
        f'<p class="dim">confidence: {h(v.confidence)}</p>',
    ]
    if v.evidence:
        out.append("<h2>Evidence</h2><ul>" + "".join(f"<li>{prose(e, 2000)}</li>" for e in v.evidence) + "</ul>")
    if v.next_steps:
        out.append("<h2>Next steps</h2><ol>" + "".join(f"<li>{prose(s, 2000)}</li>" for s in v.next_steps) + "</ol>")
    out.append("<h2>Facts</h2><table>")
    c = report.crash
    if c is not None:
        ex = f"{c.code:#010x} {h(c.code_name)}"
        if c.fastfail_code is not None:
            ex += f" / {h(c.fastfail_name)} ({c.fastfail_code})"
        out.append(f"<tr><th>Exception</th><td>{ex} on thread {c.thread_id} at {c.address:#x}</td></tr>")
        if c.summary:
            out.append(f"<tr><th>Meaning</th><td>{prose(c.summary, 1000)}</td></tr>")
    s = report.system
    if s is not None:
        out.append(
            f"<tr><th>OS</th><td>{h(s.arch)}, Windows {h(s.os_version)}"
            + (f" ({h(s.os_build)})" if s.os_build else "")
            + (f", under {h(s.wine)}" if s.wine else "")
            + "</td></tr>"
        )
        out.append(f"<tr><th>CPU</th><td>{h(s.cpu)}, {plural(s.processors, 'processor')}</td></tr>")
    env = report.environment
    if env.cpu_features:
        feats = ", ".join(
            f"{k} {'yes' if val else 'no' if val is not None else 'unknown'}" for k, val in env.cpu_features.items()
        )
        out.append(f"<tr><th>CPU features</th><td>{h(feats)}</td></tr>")
    if env.python:
        out.append(f"<tr><th>Python</th><td>{h(env.python)}</td></tr>")
    if env.tensorflow or env.tensorflow_version:
        out.append(
            f"<tr><th>TensorFlow</th><td>{h(env.tensorflow_version or 'version unknown')}"
            + (f" ({h(env.tensorflow[0])})" if env.tensorflow else "")
            + "</td></tr>"
        )
    for comp in env.cuda:
        out.append(f"<tr><th>{h(comp.name)}</th><td>{h(comp.version or '?')} ({h(comp.module)})</td></tr>")
    out.append("</table>")
    for sentence in env.compatibility:
        out.append(f'<p class="dim">{prose(sentence, 1000)}</p>')
    for note in env.notes:
        out.append(f'<p class="dim">Note: {prose(note, 1000)}</p>')
    for t, cyc in shown_cycles(report):
        out.append(
            f"<h2>Recursion on thread {t.tid}</h2><p>{h(cycle_summary(cyc))}</p><ul>"
            + "".join(f"<li><code>{h(fn)}</code></li>" for fn in call_order(cyc))
            + "</ul>"
        )
        path, more = entry_path(cyc)
        if path:
            out.append(
                "<p>entered from: "
                + " &lt;- ".join(f"<code>{h(fn)}</code>" for fn in path)
                + (f" &lt;- ... ({more} more)" if more else "")
                + "</p>"
            )
    crash_thread = next((t for t in report.threads if t.is_crashing), None)
    if crash_thread is not None:
        if crash_thread.budget is not None:
            out.append(f"<p><b>Stack</b>: {h(budget_line(crash_thread.budget), 1000)}</p>")
        if shows_frame_sizes(report):
            legend = oversized_legend(report)
            out.append(
                "<h2>Largest frames</h2><table><tr><th>#</th><th>function</th><th>frame</th>"
                "<th>prologue asks</th>" + ("<th></th>" if legend else "") + "</tr>"
            )
            for fs in report.frame_sizes[:8]:
                asks = f"{fs.requested:,}" if fs.requested is not None else ""
                if fs.not_yet_allocated:
                    asks += " (died in the stack probe)"
                mark = f'<td class="flag">{"oversized" if fs.oversized else ""}</td>' if legend else ""
                out.append(
                    f"<tr><td class=num>{fs.frame_index}</td><td><code>{h(fs.function)}</code></td>"
                    f"<td class=num>{fs.size:,}</td><td class=num>{asks}</td>{mark}</tr>"
                )
            out.append("</table>")
            if legend:
                out.append(f'<p class="dim">{h(legend)}</p>')
        out.append(f"<h2>Crashing thread {crash_thread.tid} ({plural(crash_thread.frame_count, 'frame')})</h2>")
        out += _stack(crash_thread, pointer_digits(report))
    for t, same in stack_groups(report.threads):
        if not t.frames:
            continue
        label = ", ".join(f"{x.tid}" + (f" {h(x.name, 80)}" if x.name else "") for x in (t, *same))
        if same:
            title = f"Threads {label} (identical stacks, {plural(t.frame_count, 'frame')}; Child-SP shown for {t.tid})"
        else:
            title = f"Thread {label} ({plural(t.frame_count, 'frame')})"
        out.append(f"<details><summary>{title}</summary>")
        out += _stack(t, pointer_digits(report))
        out.append("</details>")
    if report.soft_errors:
        out.append(
            "<h2>Problems met while reading</h2><ul>"
            + "".join(f"<li>{h(e, 1000)}</li>" for e in report.soft_errors)
            + "</ul>"
        )
    out.append(
        f'<p class="dim">dumpkit {h(report.dumpkit_version)}, report schema {report.schema_version}</p></body></html>'
    )
    return "\n".join(out) + "\n"
