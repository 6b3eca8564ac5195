"""The text report without colour is written without rich (issue #34 item 1: rich costs a
quarter of a small dump's run); what it writes must be what rich writes for the same
lines, byte for byte. Each dump's report lines go through both paths (report/text.py's
emit_lines, plain=True and plain=False) at several widths; Styled stands in for
rich.text.Text on strings rich treats specially."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console
from rich.text import Text

from dumpkit.engine import Options
from dumpkit.report.text import emit_lines, text_lines
from dumpkit.report.text_layout import Styled
from tests.support.samples import analyse_file, REAL_DUMPS, SAMPLE_BIN, SAMPLES

FAST = ("null_deref.dmp", "recursion_cycle3.dmp", "tree_free.dmp")


def _dumps():
    for p in sorted(SAMPLES.glob("*.dmp")):
        marks = () if p.name in FAST else (pytest.mark.slow,)
        yield pytest.param(p, [str(SAMPLE_BIN)], id=f"sample--{p.name}", marks=marks)
    for p in sorted(REAL_DUMPS.glob("*/*.dmp")) if REAL_DUMPS.is_dir() else ():
        yield pytest.param(p, [], id=f"real--{p.parent.name}--{p.name}", marks=(pytest.mark.slow,))


@pytest.mark.parametrize("dump,images", list(_dumps()))
def test_plain_report_is_what_rich_writes(dump: Path, images):
    try:
        report = analyse_file(str(dump), Options(image_paths=images))
    except Exception as e:  # a dump the CLI refuses as unusable has no report to compare
        pytest.skip(f"{dump.name}: {e}")
    for width in (120, 80, 40):
        lines = text_lines(report, width)
        plain = emit_lines(lines, False, width)
        assert plain == emit_lines(lines, False, width, plain=False), f"{dump.name} at {width} columns"
        assert plain.count("\n") >= len(lines)


TRICKY = [
    "",
    "plain ascii",
    "  trailing   ",
    "bell\x07 back\x08 vt\x0b ff\x0c cr\x0d end",
    "a\ttab\tand\t\tmore",
    "two\nlines\n",
    "wide \u4e2d\u6587 and \U0001f600 emoji",
    "zero\u200bwidth joiner\u200d and vs16\ufe0f",
    "\x1b[31mescape\x1b[0m",
    "combining e\u0301",
]


@pytest.mark.parametrize("s", TRICKY)
def test_styled_is_the_text_rich_builds(s):
    built = [
        (Styled(s, "bold"), Text(s, style="bold")),
        (Styled.assemble((s, "dim"), " ", (s, "")), Text.assemble((s, "dim"), " ", (s, ""))),
    ]
    styled, text = Styled("x "), Text("x ")
    styled.append(s, "yellow")
    text.append(s, style="yellow")
    styled.append("  ")
    text.append("  ")
    built.append((styled, text))
    stripped, rich_stripped = Styled(s + "   "), Text(s + "   ")
    stripped.rstrip()
    rich_stripped.rstrip()
    built.append((stripped, rich_stripped))
    for mine, theirs in built:
        assert mine.plain == theirs.plain
        assert mine.cell_len == theirs.cell_len
        assert mine.rich() == theirs
        assert mine.rich().spans == theirs.spans
        lines = [mine, Styled(""), mine]
        assert emit_lines(lines, False, 40) == emit_lines(lines, False, 40, plain=False)


def test_colour_goes_through_rich():
    line = Styled.assemble(("VERDICT ", "bold reverse"), " ", ("headline", "bold"))
    buf = __import__("io").StringIO()
    Console(file=buf, force_terminal=True, color_system="standard", width=80, highlight=False, soft_wrap=True).print(
        Text.assemble(("VERDICT ", "bold reverse"), " ", ("headline", "bold")), soft_wrap=True
    )
    assert emit_lines([line], True, 80) == buf.getvalue()
    assert "\x1b[" in buf.getvalue()
