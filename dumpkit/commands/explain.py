"""`dumpkit explain`: what an exit or exception code means; no dump needed. It imports the
code tables and their renderer, nothing of the dump machinery (tests/test_frontdoor.py)."""

from __future__ import annotations

import sys
from typing import Sequence

from dumpkit.commands.exits import EXIT_OK, fail


def run_explain(words: Sequence[str], how_to_capture: bool) -> int:
    """`dumpkit explain`: what a code means, or the dump-capture advice alone."""
    text = " ".join(words)  # `dumpkit explain stack overflow` needs no quotes
    if not text.strip():
        if not how_to_capture:
            raise fail("name a code to explain (or give --how-to-capture alone for the dump-capture advice)")
        from dumpkit.report.explanation import render_capture_advice

        sys.stdout.write(render_capture_advice().rstrip("\n") + "\n")
        return EXIT_OK
    from dumpkit.analysis.codes import parse_code
    from dumpkit.analysis.explain import explain
    from dumpkit.report.explanation import render_explanation_text

    try:
        parsed = parse_code(text)
    except ValueError as e:
        raise fail(str(e)) from None
    sys.stdout.write(render_explanation_text(explain(parsed), how_to_capture).rstrip("\n") + "\n")
    return EXIT_OK
