"""`dumpkit explain` as plain text for a terminal (no colour, no markup): the view of
report.view.explanation, wrapped at 88 columns; commands are never wrapped."""

from __future__ import annotations

import textwrap
from typing import List, Sequence

from dumpkit.report.view.explanation import COMMANDS, Explanation, ExplanationView, explanation_view

WIDTH = 88


def _para(text: str, indent: str = "  ") -> str:
    out = []
    for line in text.split("\n"):
        if line.startswith(COMMANDS):
            out.append(indent + "    " + line)
        else:
            out.append(textwrap.fill(line, WIDTH, initial_indent=indent, subsequent_indent=indent))
    return "\n".join(out)


def _bullets(items: Sequence[str]) -> str:
    lines: List[str] = []
    for item in items:
        first, *rest = item.split("\n")
        lines.append(textwrap.fill(first, WIDTH, initial_indent="  - ", subsequent_indent="    "))
        for extra in rest:
            if extra.startswith(COMMANDS):
                lines.append("      " + extra)
            else:
                lines.append(textwrap.fill(extra, WIDTH, initial_indent="    ", subsequent_indent="    "))
    return "\n".join(lines)


def render_explanation(view: ExplanationView) -> str:
    parts = [view.heading, f"  {view.spellings}", "", _para(view.summary)]
    for s in view.sections:
        parts += ["", s.title] + ([_bullets(s.items)] if s.bullets else [_para(m) for m in s.items])
    return "\n".join(parts) + "\n"


def render_explanation_text(e: Explanation) -> str:
    """`dumpkit explain`'s answer (analysis.explain) as terminal text."""
    return render_explanation(explanation_view(e))
