"""A single self-contained HTML page (no scripts, no external resources). What is shown
comes from report.view; every dump string is HTML-escaped. The pictures are inline SVG
(report/svg.py) of the view's numbers (report/view/pictures.py)."""

from __future__ import annotations

from typing import List

from dumpkit.analysis.model import Report
from dumpkit.report.escape import html_prose as prose, html_text as h
from dumpkit.report.svg import budget_svg, by_function_svg, cycle_svg, trust_svg
from dumpkit.report.view import CODE, DOCUMENT, PROSE, WORDS, Fold, Line, PythonView, StackTable, report_view
from dumpkit.report.view.pictures import Pictures, pictures_view

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:75em;color:#222}
h1{font-size:1.3em} .verdict{font-size:1.15em;font-weight:bold;padding:.6em;background:#fdecea;border-left:4px solid #c62828}
table{border-collapse:collapse} td,th{padding:.15em .6em;text-align:left;vertical-align:top}
.stack td{font-family:ui-monospace,monospace;font-size:.9em} .num{text-align:right}
.scan{color:#777} .flag{color:#c62828;font-weight:bold} .fold{color:#a06000;font-style:italic} .dim{color:#666}
.wide{overflow-x:auto;max-width:100%} body{overflow-wrap:anywhere} .stack td{overflow-wrap:normal}
figure{margin:1em 0 1.4em} figcaption{color:#444;font-size:.92em;margin-top:.3em;max-width:60em}
svg.pic{display:block;max-width:100%;height:auto}
"""


def inline(line: Line) -> str:
    """A view line as HTML: names as <code>, dumpkit's sentences with their code spans."""
    out = []
    for s in line:
        if s.kind == WORDS:
            out.append(s.text)
        elif s.kind == CODE:
            out.append(f"<code>{h(s.text, s.limit)}</code>")
        elif s.kind == PROSE:
            out.append(prose(s.text, s.limit))
        else:
            out.append(h(s.text, s.limit))
    return "".join(out)


def _stack(table: StackTable) -> List[str]:
    t = table.headers
    heads = (t.number, t.size, t.child_sp, t.ip, t.call_site, t.found_by)
    rows = ['<div class="wide"><table class="stack"><tr>' + "".join(f"<th>{x}</th>" for x in heads) + "</tr>"]
    for r in table.rows:
        if isinstance(r, Fold):
            rows.append(f'<tr><td colspan="6" class="fold">{h(r.text)}</td></tr>')
            continue
        cls = ' class="scan"' if r.scanned else ""
        rows.append(
            f"<tr{cls}><td class=num>{r.number}</td><td class=num>{r.memory}</td><td>{r.child_sp}</td>"
            f"<td>{r.ip}</td><td>{h(r.call_site)}</td><td>{h(r.found_by)}</td></tr>"
        )
    rows.append("</table></div>")
    return rows


def _python(py: PythonView, max_rows: int = 200) -> List[str]:
    out = [f"<h2>Python stacks</h2><p>{h(py.summary, 1000)}</p>"]
    for s in py.stacks:
        out.append(
            f'<h3>{h(s.title)}</h3><div class="wide"><table class="stack">'
            "<tr><th>#</th><th>function</th><th>file:line</th></tr>"
        )
        for r in s.rows[:max_rows]:
            if isinstance(r, Fold):
                out.append(f'<tr><td colspan="3" class="fold">{h(r.text)}</td></tr>')
            else:
                problem = f' <span class="dim">({h(r.problem)})</span>' if r.problem else ""
                out.append(
                    f"<tr><td class=num>{r.index}</td><td>{h(r.function, 200)}</td>"
                    f"<td>{h(r.location, 300)}{problem}</td></tr>"
                )
        out.append("</table></div>")
    return out


def _figure(svg: str, caption: str, kind: str) -> str:
    return f'<figure class="{kind}">{svg}<figcaption>{h(caption, 1000)}</figcaption></figure>'


def _at_a_glance(pictures: Pictures) -> List[str]:
    """The stack's pictures, right under the verdict they support."""
    figures = []
    if pictures.budget is not None:
        figures.append(_figure(budget_svg(pictures.budget), pictures.budget.caption, "budget"))
    for i, c in enumerate(pictures.cycles):
        figures.append(_figure(cycle_svg(c, f"cycle{i}"), c.caption, "cycle"))
    if pictures.by_function is not None:
        figures.append(_figure(by_function_svg(pictures.by_function), pictures.by_function.caption, "by-function"))
    return ["<h2>The stack at a glance</h2>", *figures] if figures else []


def render_html(report: Report) -> str:
    view = report_view(report, DOCUMENT)
    pictures = pictures_view(report)
    v = view.verdict
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>dumpkit: {h(v.headline, 200)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>Crash analysis of {h(view.dump_path)}</h1>",
        f'<p class="verdict">{prose(v.headline, 2000)}</p>',
        f'<p class="dim">confidence: {h(v.confidence)}</p>',
    ]
    if view.signature:
        out.append(f'<p class="dim">signature: <code>{h(view.signature, 1000)}</code></p>')
    if view.blame:
        out.append(f'<p class="dim">blame: {inline(view.blame)}</p>')
    out += _at_a_glance(pictures)
    if v.evidence:
        out.append("<h2>Evidence</h2><ul>" + "".join(f"<li>{prose(e, 2000)}</li>" for e in v.evidence) + "</ul>")
    if v.next_steps:
        out.append("<h2>Next steps</h2><ol>" + "".join(f"<li>{prose(s, 2000)}</li>" for s in v.next_steps) + "</ol>")
    if view.images is not None:
        out.append(
            f"<h2>{h(view.images.title)}</h2><ul>"
            + "".join(f"<li>{h(x, 2000)}</li>" for x in view.images.lines)
            + "</ul>"
        )
    out.append("<h2>Facts</h2><table>")
    for f in view.facts.rows:
        out.append(f"<tr><th>{h(f.label)}</th><td>{inline(f.value)}</td></tr>")
    out.append("</table>")
    for r in view.facts.remarks:
        out.append(f'<p class="dim">{"Note: " if r.note else ""}{prose(r.text, 1000)}</p>')
    for col in view.facts.collisions:
        out.append(f"<h2>{h(col.heading)}</h2><p><b>{prose(col.title, 2000)}</b></p>")
        out.append("<ul>" + "".join(f"<li>{inline(m)}</li>" for m in col.modules) + "</ul>")
        out.append(f"<p>Leads to: {prose(col.leads_to, 2000)}</p>")
        out.append("<p>Ways out:</p><ol>" + "".join(f"<li>{prose(w, 2000)}</li>" for w in col.ways_out) + "</ol>")
        out += [f'<p class="dim">Not known: {prose(u, 2000)}</p>' for u in col.unknown]
    if view.waits is not None:
        out.append("<h2>Who waits for whom</h2>")
        out += [f"<p><b>Deadlock:</b> {prose(d, 2000)}</p>" for d in view.waits.deadlocks]
        out.append("<table><tr><th>Thread</th><th>Where</th><th>Waits on</th><th>Held by</th></tr>")
        out += [
            f"<tr><td>{h(r.thread)}</td><td>{prose(r.where, 1000)}</td><td>{prose(r.what, 1000)}</td>"
            f"<td>{prose(r.held_by, 1000)}</td></tr>"
            for r in view.waits.rows
        ]
        out.append("</table>")
    if view.code is not None:
        c = view.code
        out.append(f'<h2>Faulting code in <code>{h(c.where)}</code></h2><div class="wide"><pre>')
        for row in c.rows:
            line = f"{'=&gt;' if row.faulting else '  '} {row.address}  {row.bytes:<30}  {h(row.text)}"
            out.append(f'<b class="flag">{line}</b>' if row.faulting else line)
        out.append("</pre></div>" + (f'<p class="dim">{h(c.note, 1000)}</p>' if c.note else ""))
    if view.registers:
        cells = view.registers
        rows = "\n".join(" ".join(cells[i : i + 4]) for i in range(0, len(cells), 4))
        out.append(f'<details><summary>Registers</summary><div class="wide"><pre>{h(rows, 4000)}</pre></div></details>')
    if view.python is not None:
        out += _python(view.python)
    for rec in view.recursions:
        out.append(
            f"<h2>Recursion on thread {rec.tid}</h2><p>{h(rec.summary)}</p><ul>"
            + "".join(f"<li><code>{h(fn)}</code></li>" for fn in rec.functions)
            + "</ul>"
        )
        if rec.entry_path:
            out.append(
                "<p>entered from: "
                + " &lt;- ".join(f"<code>{h(fn)}</code>" for fn in rec.entry_path)
                + (f" &lt;- ... ({rec.entry_more} more)" if rec.entry_more else "")
                + "</p>"
            )
    crash = view.crashing
    if crash is not None and crash.stack is not None:
        if view.budget is not None:
            out.append(f"<p><b>Stack</b>: {h(view.budget, 1000)}</p>")
        sizes = view.frame_sizes
        if sizes is not None:
            legend = sizes.legend
            heads = sizes.headers
            out.append(
                f"<h2>Largest frames</h2><table><tr><th>{heads.index}</th><th>{heads.function}</th>"
                f"<th>{heads.size}</th><th>{heads.asks}</th>" + ("<th></th>" if legend else "") + "</tr>"
            )
            for fs in sizes.rows:
                mark = f'<td class="flag">{"oversized" if fs.oversized else ""}</td>' if legend else ""
                out.append(
                    f"<tr><td class=num>{fs.index}</td><td><code>{h(fs.function)}</code></td>"
                    f"<td class=num>{fs.size}</td><td class=num>{fs.asks_noted}</td>{mark}</tr>"
                )
            out.append("</table>")
            if legend:
                out.append(f'<p class="dim">{h(legend)}</p>')
        out.append(f"<h2>Crashing thread {crash.tid} ({crash.frames})</h2>")
        if pictures.trust is not None:
            out.append(_figure(trust_svg(pictures.trust), pictures.trust.caption, "trust"))
        out += _stack(crash.stack)
    for g in view.threads.groups:
        t = g.lead
        if not t.has_frames or t.stack is None:
            continue
        label = ", ".join(f"{x.tid}" + (f" {h(x.name, 80)}" if x.name else "") for x in (t, *g.same))
        if g.same:
            title = f"Threads {label} (identical stacks, {t.frames}; Child-SP shown for {t.tid})"
        else:
            title = f"Thread {label} ({t.frames})"
        out.append(f"<details><summary>{title}</summary>")
        out += _stack(t.stack)
        out.append("</details>")
    if view.problems:
        out.append(
            "<h2>Problems met while reading</h2><ul>"
            + "".join(f"<li>{h(e, 1000)}</li>" for e in view.problems)
            + "</ul>"
        )
    out.append(
        f'<p class="dim">dumpkit {h(view.dumpkit_version)}, report schema {view.schema_version}</p></body></html>'
    )
    return "\n".join(out) + "\n"
