"""Dump strings are attacker-controlled: module names, paths and thread names come from
whoever wrote the dump. Every renderer passes them through one of these."""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
# What can start markup in GFM inline text or a table cell: emphasis, code, links (and
# so images), raw HTML, autolinks and entities, strikethrough, cell separators,
# headings. Left alone, so a pasted report's source stays readable: periods, hyphens,
# parentheses, `!` and `>` (without `[` no link or image can form, without `<` no HTML,
# and dump text never starts a line, so no list or quote), and `_` between two letters
# or digits (GFM never opens or closes emphasis inside a word: STATUS_STACK_OVERFLOW).
# A string, as _REFERENCE, that re compiles (and caches) at its first use: only Markdown
# needs the two, and compiling them cost ~2 ms of every text or JSON report's start-up.
_MD_SPECIAL = r"[\\`*\[\]#|<~&]|(?<![^\W_])_|_(?![^\W_])"


# What GitHub turns into a mention, an issue link or a web link in text (not in code):
# `@name`, `#123` (also `owner/repo#123`), `GH-123`, `http://...`, `www.x`. A WORD JOINER
# (U+2060, invisible) after the trigger breaks each pattern; a backslash would not, since
# GitHub finds references in the rendered text, after escapes are gone.
WORD_JOINER = "\u2060"
_REFERENCE = r"(?i)([@#])(?=\w)|\b(GH)(?=-\d)|(:)(?=//)|\b(www)(?=\.)"


def _no_references(s: str) -> str:
    return re.sub(_REFERENCE, lambda m: m.group(0) + WORD_JOINER, s)


def _md_escape(s: str) -> str:
    s = re.sub(_MD_SPECIAL, lambda m: "\\" + m.group(0), _no_references(s))
    return "\\" + s if s.startswith(">") else s  # a quote marker, should a line ever start here


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
    return _md_escape(clean(text, limit))


def markdown_code(text: object, limit: int = MAX_SHOWN) -> str:
    """Safe inside an inline code span: backticks cannot close it early."""
    s = clean(text, limit).replace("`", "'")
    return f"`{s}`"


def html_text(text: object, limit: int = MAX_SHOWN) -> str:
    from html import escape  # here: the text and JSON reports' start-up need not import html (~1 ms)

    return escape(clean(text, limit), quote=True)


def _code_spans(s: str) -> Optional[List[Tuple[bool, str]]]:
    """A dumpkit sentence split at its backticks into (is_code, part) pairs, or None when
    the backticks do not pair up (then no part can be trusted to be a span)."""
    parts = s.split("`")
    if len(parts) % 2 == 0:
        return None
    out: List[Tuple[bool, str]] = []
    for i, part in enumerate(parts):
        if i % 2 == 0:
            out.append((False, part))
        elif part.strip():
            out.append((True, part))
        else:  # an empty span: "``" would open a double-backtick span, keep it literal
            out.append((False, f"`{part}`"))
    return out


def markdown_prose(text: object, limit: int = MAX_SHOWN, table_cell: bool = False) -> str:
    """A sentence dumpkit wrote (verdict, evidence, next steps) for Markdown prose: its
    `...` spans become inline code, everything else is escaped. Dump names interpolated
    into the sentence stay inert either way: outside a span they are escaped, inside one
    they are literal code text (a span never holds a backtick, so it cannot end early);
    a name whose backticks leave the count odd makes the whole sentence escaped prose.
    In a table cell, GFM splits at `|` even inside code, so those are escaped too."""
    s = clean(text, limit)
    spans = _code_spans(s)
    if spans is None:
        return _md_escape(s)
    bar = "\\|" if table_cell else "|"
    return "".join(f"`{p.replace('|', bar)}`" if is_code else _md_escape(p) for is_code, p in spans)


def html_prose(text: object, limit: int = MAX_SHOWN) -> str:
    """The same for HTML: `...` spans become <code>, every part HTML-escaped."""
    from html import escape

    s = clean(text, limit)
    spans = _code_spans(s)
    if spans is None:
        return escape(s, quote=True)
    return "".join(
        f"<code>{escape(p, quote=True)}</code>" if is_code else escape(p, quote=True) for is_code, p in spans
    )
