"""`dumpkit explain` in plain words, and what it says when it cannot read what was typed:
the nearest spelling it knows, in the one-line error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dumpkit.analysis.codes import ParsedCode, parse_code
from dumpkit.analysis.codes.notes import PLAIN_WORDS
from dumpkit.analysis.codes.parse import looks_like_number

ROOT = Path(__file__).resolve().parents[3]


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


@pytest.mark.parametrize(
    "typed,meant",
    [
        ("STATUS_STACK_OVERFLOWW", "STATUS_STACK_OVERFLOW"),
        ("stack overflw", "STACK_OVERFLOW"),
        ("acess violation", "ACCESS_VIOLATION"),
        ("abrt", "abort"),
        ("E_OUTOFMEMOR", "E_OUTOFMEMORY"),
        ("ERROR_ACCES_DENIED", "ERROR_ACCESS_DENIED"),
    ],
)
def test_a_typo_is_answered_with_the_nearest_spelling(typed, meant):
    with pytest.raises(ValueError) as exc:
        parse_code(typed)
    assert str(exc.value).endswith(f"; did you mean {meant}?") and "\n" not in str(exc.value)


def test_nonsense_gets_no_suggestion():
    with pytest.raises(ValueError) as exc:
        parse_code("banana-split")
    assert "did you mean" not in str(exc.value)


def test_numbers_and_fail_fast_spellings_leave_the_tables_unread():
    probe = (
        "from dumpkit.analysis.codes import parse_code\n"
        "from dumpkit.analysis.codes.table import code_table, error_table\n"
        "parse_code('-1073741571'); parse_code('0xC0000409/7'); parse_code('FAST_FAIL_FATAL_APP_EXIT')\n"
        "parse_code('abort'); parse_code('0xC0000005')\n"
        "assert code_table.cache_info().currsize == 0 and error_table.cache_info().currsize == 0\n"
        "parse_code('stack overflow')\n"
        "assert error_table.cache_info().currsize == 0, 'a status name needs no winerror table'\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
