"""Inline text as the view hands it to renderers: runs of text, each saying what it is, so
every format marks it up and escapes it its own way while the words stay the view's."""

from __future__ import annotations

from typing import Tuple

from dumpkit.report.escape import MAX_SHOWN
from dumpkit.records import record

# What a span is: the kind decides the markup and the escaping.
WORDS = "words"  # dumpkit's own fixed wording and punctuation: no markup characters, written as is
TEXT = "text"  # a value (from the dump or the analyses): escaped by every format
CODE = "code"  # a function or module name: code in Markdown and HTML
LITERAL = "literal"  # an address or a path: code in Markdown (no backslash clutter), plain elsewhere
THREAD = "thread"  # a thread id: DML links it to `~~[TID]s`
PROSE = "prose"  # a sentence dumpkit wrote, whose `...` parts are code in Markdown and HTML


@record
class Span:
    text: str
    kind: str = WORDS
    limit: int = MAX_SHOWN  # characters shown before the rest is counted


Line = Tuple[Span, ...]


def words(text: str) -> Span:
    return Span(text, WORDS)


def text(value: str, limit: int = MAX_SHOWN) -> Span:
    return Span(value, TEXT, limit)


def plain(line: Line) -> str:
    """The line's characters, unescaped and unbounded (tests, and formats without markup)."""
    return "".join(s.text for s in line)
