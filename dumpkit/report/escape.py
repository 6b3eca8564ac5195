"""Dump strings are attacker-controlled: module names, paths and thread names come from
whoever wrote the dump. Every renderer passes them through one of these."""
from __future__ import annotations

import html
import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
# What can start markup in GFM inline text or a table cell: emphasis, code, links and
# images, raw HTML and entities, strikethrough, cell separators, headings. Periods,
# hyphens and parentheses are left alone: without `[` they cannot form a link, and dump
# text never starts a line, so they cannot start a list.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]#!|<>~&])")
MAX_SHOWN = 512


def clean(text: object, limit: int = MAX_SHOWN) -> str:
    """Printable, single-line, bounded: terminal escapes and bidi overrides removed."""
    s = "" if text is None else str(text)
    s = _CONTROL.sub("\ufffd", s.replace("\n", " ").replace("\r", " ").replace("\t", " "))
    if len(s) > limit:
        s = s[:limit] + f"... ({len(s) - limit} more characters)"
    return s


def markdown(text: object, limit: int = MAX_SHOWN) -> str:
    """Safe inside Markdown prose and table cells (also neutralises raw HTML)."""
    return _MD_SPECIAL.sub(r"\\\1", clean(text, limit))


def markdown_code(text: object, limit: int = MAX_SHOWN) -> str:
    """Safe inside an inline code span: backticks cannot close it early."""
    s = clean(text, limit).replace("`", "'")
    return f"`{s}`"


def html_text(text: object, limit: int = MAX_SHOWN) -> str:
    return html.escape(clean(text, limit), quote=True)
