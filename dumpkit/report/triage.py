"""`dumpkit triage` in text, Markdown, HTML and JSON, laid out from report/view/triage.py."""

from __future__ import annotations

import json
from typing import List, Sequence

from dumpkit.analysis.model import Report
from dumpkit.report.escape import clean, html_text, markdown_prose
from dumpkit.report.markdown import cell_code
from dumpkit.report.view.triage import HEADERS, TriageView, link, rows_as_cells

# Dump-controlled strings in cells (paths, module names) are cut: a table stays a table.
CELL = 300
# what a group's dumps lacked; their frames there were scanned, so the signature stops short
IMAGES_MISSING = "images missing (--image-path or --fetch-images would name more frames)"
# its dumps written while the process was at a memory limit: an allocation most likely failed
AT_MEMORY_LIMIT = "out of memory when written"


def render_triage_text(view: TriageView) -> str:
    out = [f"dumpkit triage: {view.summary}", ""]
    for r in view.groups:
        out.append(f"#{r.number}  {r.count} x  {clean(r.signature, CELL)}")
        out.append(f"    verdict: {r.verdict}    modules: {clean(r.modules, CELL)}")
        out.append(f"    seen: {r.first_seen} .. {r.last_seen}    example: {clean(r.example, CELL)}")
        if r.python:
            out.append(f"    python recursion: {clean(r.python, CELL)}")
        if r.missing_images:
            out.append(f"    {IMAGES_MISSING}: {clean(r.missing_images, CELL)}")
        if r.memory_limits:
            out.append(f"    {AT_MEMORY_LIMIT}: {r.memory_limits}")
        out.append("")
    if view.failures:
        out.append(f"Not analysed ({len(view.failures)}):")
        for f in view.failures:
            out.append(f"  {clean(f.path, CELL)}: {f.status}: {clean(f.error, CELL)}")
        out.append("")
    return "\n".join(out)


def render_triage_markdown(view: TriageView) -> str:
    out = ["# dumpkit triage", "", markdown_prose(view.summary), ""]
    if view.groups:
        out.append("| " + " | ".join(HEADERS) + " |")
        out.append("|" + "---|" * len(HEADERS))
        for r, cells in zip(view.groups, rows_as_cells(view)):
            n, sig, verdict, count, modules, first, last, example = cells
            signature = cell_code(sig[:CELL])
            if r.python:
                signature += "<br>python recursion: " + markdown_prose(r.python, CELL, table_cell=True)
            if r.missing_images:
                signature += f"<br>{IMAGES_MISSING}: " + markdown_prose(r.missing_images, CELL, table_cell=True)
            if r.memory_limits:
                signature += f"<br>{AT_MEMORY_LIMIT}: " + markdown_prose(r.memory_limits, CELL, table_cell=True)
            row = (n, signature, verdict, count, cell_code(modules[:CELL]), first, last)
            out.append("| " + " | ".join(row + (cell_code(example[:CELL]),)) + " |")
        out.append("")
    if view.failures:
        out += ["## Not analysed", "", "| dump | status | error |", "|---|---|---|"]
        for f in view.failures:
            out.append(
                f"| {cell_code(f.path[:CELL])} | {f.status} | {markdown_prose(f.error, CELL, table_cell=True)} |"
            )
        out.append("")
    return "\n".join(out)


_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse}"
    "td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top;text-align:left}"
    "code{font-size:90%}"
)


def render_triage_html(view: TriageView) -> str:
    out: List[str] = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>dumpkit triage</title>',
        f"<style>{_STYLE}</style></head><body>",
        "<h1>dumpkit triage</h1>",
        f"<p>{html_text(view.summary)}</p>",
    ]
    if view.groups:
        out.append("<table><thead><tr>" + "".join(f"<th>{h}</th>" for h in HEADERS) + "</tr></thead><tbody>")
        for r in view.groups:
            example = html_text(r.example, CELL)
            href = link(r.example_report)
            if href:
                example = f'<a href="{html_text(href)}">{example}</a>'
            cells = (
                str(r.number),
                f"<code>{html_text(r.signature, CELL)}</code>"
                + (f"<br><small>python recursion: {html_text(r.python, CELL)}</small>" if r.python else "")
                + (
                    f"<br><small>{IMAGES_MISSING}: {html_text(r.missing_images, CELL)}</small>"
                    if r.missing_images
                    else ""
                )
                + (
                    f"<br><small>{AT_MEMORY_LIMIT}: {html_text(r.memory_limits, CELL)}</small>"
                    if r.memory_limits
                    else ""
                ),
                html_text(r.verdict),
                str(r.count),
                html_text(r.modules, CELL),
                r.first_seen,
                r.last_seen,
                example,
            )
            out.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        out.append("</tbody></table>")
    if view.failures:
        out.append(
            "<h2>Not analysed</h2><table><thead><tr><th>dump</th><th>status</th><th>error</th></tr></thead><tbody>"
        )
        for f in view.failures:
            failure = (html_text(f.path, CELL), f.status, html_text(f.error, CELL))
            out.append("<tr>" + "".join(f"<td>{c}</td>" for c in failure) + "</tr>")
        out.append("</tbody></table>")
    out.append("</body></html>\n")
    return "\n".join(out)


def render_triage_json(document: dict) -> str:
    return json.dumps(document, indent=1, sort_keys=False) + "\n"


def per_dump_html(report: Report) -> str:
    """The per-dump report a triage page links to: HTML, redacted as every shared format is.
    (Module-level so worker processes and Dask tasks receive it by reference.)"""
    from dumpkit.report.html import render_html
    from dumpkit.report.redact import redact_report

    return render_html(redact_report(report))


__all__: Sequence[str] = (
    "render_triage_text",
    "render_triage_markdown",
    "render_triage_html",
    "render_triage_json",
    "per_dump_html",
)
