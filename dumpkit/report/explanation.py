"""`dumpkit explain` as plain text for a terminal (no colour, no markup): the view of
report.view.explanation, wrapped at 88 columns; commands are never wrapped."""

from __future__ import annotations

import textwrap
from typing import List, Sequence

from dumpkit.report.view.explanation import (
    COMMANDS,
    Explanation,
    ExplanationView,
    capture_advice_view,
    explanation_view,
)

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
    parts = [view.heading] + ([f"  {view.spellings}"] if view.spellings else [])
    parts += ["", _para(view.summary)] if view.summary else []
    for s in view.sections:
        parts += [""] + ([s.title] if s.title else [])
        parts += [_bullets(s.items)] if s.bullets else [_para(m) for m in s.items]
    return "\n".join(parts) + "\n"


def render_explanation_text(e: Explanation, how_to_capture: bool = False) -> str:
    """`dumpkit explain`'s answer (analysis.explain) as terminal text; the dump-capture
    advice in full with `how_to_capture`, else its one-line pointer."""
    return render_explanation(explanation_view(e, how_to_capture))


def render_capture_advice() -> str:
    """`dumpkit explain --how-to-capture` on its own."""
    return render_explanation(capture_advice_view())
