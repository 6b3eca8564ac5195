"""`dumpkit explain` in plain words, and what it says when it cannot read what was typed:
the nearest spelling it knows, in the one-line error."""

from __future__ import annotations

import pytest

from dumpkit.analysis.codes import ParsedCode, parse_code
from dumpkit.analysis.codes.notes import PLAIN_WORDS
from dumpkit.analysis.codes.parse import looks_like_number


@pytest.mark.parametrize(
    "words,parsed",
    [
        ("stack overflow", ParsedCode(0xC00000FD)),
        ("Stack Overflow", ParsedCode(0xC00000FD)),
        ("access violation", ParsedCode(0xC0000005)),
        ("abort", ParsedCode(0xC0000409, 7)),
        ("std::terminate", ParsedCode(0xC0000409, 7)),
        ("segfault", ParsedCode(0xC0000005)),
        ("heap corruption", ParsedCode(0xC0000374)),
        ("illegal instruction", ParsedCode(0xC000001D)),
        ("c++ exception", ParsedCode(0xE06D7363)),
        ("buffer overrun", ParsedCode(0xC0000409)),
        ("dll not found", ParsedCode(0xC0000135)),
    ],
)
def test_plain_words_name_the_code(words, parsed):
    assert parse_code(words) == parsed


def test_no_phrase_reads_as_a_number():
    assert not [w for w in PLAIN_WORDS if looks_like_number(w)]


def test_nonsense_gets_no_suggestion():
    with pytest.raises(ValueError) as exc:
        parse_code("banana-split")
    assert "did you mean" not in str(exc.value)
