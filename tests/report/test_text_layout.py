"""The text report wraps prose as the standard library's textwrap does (break_long_words and
break_on_hyphens off): dumpkit's own `words_wrapped` spares every start-up textwrap's import,
and must not move a single line break."""

from __future__ import annotations

import random
import textwrap

import pytest

from dumpkit.report.text_layout import words_wrapped

# what report prose is made of: words, paths, hyphenated and long names, and the whitespace
# textwrap treats specially (tabs, newlines, runs of spaces) or not at all (a no-break space)
PIECES = [
    "the",
    "stack",
    "overflowed",
    "after",
    "1,710",
    "repetitions",
    "of",
    "PyObject_Repr",
    "->",
    "tensorflow::grappler::MetaOptimizer::OptimizeConsumeItem",
    "C:\\Users\\me\\AppData\\Local\\Programs\\Python\\Python311\\Lib\\site-packages\\numpy\\core\\_multiarray_umath.cp311-win_amd64.pyd",
    "self-referencing",
    "re-entrant",
    "(0xc00000fd)",
    "x" * 130,
    " ",
    "  ",
    "   ",
    "\t",
    "\n",
    "\r\n",
    "\x0b",
    "\xa0",
    "\u3000",
    "é",
    "",
]


def _texts(seed: int, count: int):
    rng = random.Random(seed)
    for _ in range(count):
        n = rng.randint(0, 40)
        parts = [rng.choice(PIECES) for _ in range(n)]
        yield "".join(p if rng.random() < 0.3 else p + " " for p in parts)


@pytest.mark.parametrize("width", [1, 7, 20, 33, 60, 71, 100, 150])
def test_lines_are_textwraps(width: int) -> None:
    for text in _texts(width, 400):
        expected = textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)
        assert words_wrapped(text, width) == expected, (text, width)


def test_edge_texts() -> None:
    for text in ["", " ", "   leading", "trailing   ", "\t\ttabs\tinside", "a\n\nb", "word", "x" * 50, " " * 50]:
        for width in (1, 5, 20, 49, 50, 51):
            assert words_wrapped(text, width) == textwrap.wrap(
                text, width, break_long_words=False, break_on_hyphens=False
            ), (text, width)
