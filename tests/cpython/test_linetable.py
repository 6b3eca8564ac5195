"""Line numbers from each line-table format: tables written by the tests' transcription of
each CPython compiler's emit rules, and tables CPython itself compiled (the running Python)."""

from __future__ import annotations

import dis
import sys
import textwrap
import types

import pytest

from dumpkit.cpython.linetable import line_from_linetable, line_from_lnotab, line_from_locations
from tests.cpython.compilers import line_at, linetable_310, lnotab_38, locations_311

# First line 100; jumps past the one-byte limits both ways, and a long run (> 255 bytes).
JUMPY = [(3, 100), (4, 101), (2, 400), (200, 402), (1, 150), (5, 10), (3, 11), (1, 11), (2, 700)]


def test_lnotab_gives_each_instructions_line():
    table = lnotab_38(JUMPY, 100)
    total = sum(u for u, _ in JUMPY)
    for unit in range(total):
        assert line_from_lnotab(table, 100, unit * 2) == line_at(JUMPY, unit), unit


def test_lnotab_empty_table_is_the_first_line():
    assert line_from_lnotab(b"", 42, 30) == 42


def test_linetable_310_gives_each_instructions_line_and_none_where_there_is_none():
    program = [(2, 100), (3, None), (4, 300), (150, 301), (2, None), (1, 30), (2, 31)]
    table = linetable_310(program, 100)
    assert b"\x80" in table  # a range with no line was written as -128
    total = sum(u for u, _ in program)
    for unit in range(total):
        assert line_from_linetable(table, 100, unit * 2) == line_at(program, unit), unit


def test_linetable_310_offset_past_the_end_has_no_line():
    table = linetable_310([(4, 10)], 10)
    assert line_from_linetable(table, 10, 8) is None
    assert line_from_linetable(table, 10, -2) == 10  # f_lasti -1: not started


LOCATIONS = [
    (1, (50, 50, -1, -1)),  # no columns (the RESUME of a function)
    (3, (51, 51, 4, 20)),  # one-line form, line + 1
    (2, (51, 51, 8, 12)),  # short form: same line
    (20, (53, 53, 0, 90)),  # one-line, split into 8 + 8 + 4
    (2, None),  # no location
    (4, (40, 44, 8, 2)),  # long form: negative delta, several lines
    (1, (300, 300, 200, 210)),  # long form: big delta, columns >= 128
    (2, (300, 300, 3, 9)),  # short form after the long one
    (5, (299, 299, -1, -1)),  # no columns, negative delta
]


def test_locations_give_each_instructions_line():
    table = locations_311(LOCATIONS, 50)
    total = sum(u for u, _ in LOCATIONS)
    for unit in range(total):
        assert line_from_locations(table, 50, unit * 2) == line_at(LOCATIONS, unit), unit
    assert line_from_locations(table, 50, total * 2) is None


def test_damaged_tables_do_not_raise():
    for table in (b"\x01", b"\xff" * 7, b"\x80\x7f\x7f", bytes(range(256))):
        line_from_lnotab(table, 1, 1000)
        line_from_linetable(table, 1, 1000)
        line_from_locations(table, 1, 1000)


SOURCE = textwrap.dedent(
    """
    import os

    def outer(a, b):
        total = 0
        for i in range(a):
            if i % 3 == 0:
                total += (i *
                          b)
            else:
                total -= i
        def inner(x):
            return [y
                    for y in range(x)
                    if y > a]
        try:
            total += len(inner(b))
        except ValueError:
            pass
        """
    + "\n" * 300
    + """
        return total + os.getpid(
        )
    """
)


def _codes(code: types.CodeType):
    todo = [code]
    while todo:
        c = todo.pop()
        yield c
        todo.extend(k for k in c.co_consts if isinstance(k, types.CodeType))


def _lines(code: types.CodeType):
    """(start, end, line) byte ranges from the running interpreter itself."""
    if hasattr(code, "co_lines"):
        return list(code.co_lines())
    starts = list(dis.findlinestarts(code))
    bounds = [s for s, _ in starts] + [len(code.co_code)]
    return [(s, bounds[i + 1], line) for i, (s, line) in enumerate(starts)]


def test_tables_compiled_by_the_running_cpython():
    """The decoder for the running version's format agrees with CPython's own line lookup
    on every instruction of real compiled code."""
    if sys.version_info >= (3, 11):
        decode, table_of = line_from_locations, (lambda c: c.co_linetable)
    elif sys.version_info >= (3, 10):
        decode, table_of = line_from_linetable, (lambda c: c.co_linetable)
    else:
        decode, table_of = line_from_lnotab, (lambda c: c.co_lnotab)
    checked = 0
    for code in _codes(compile(SOURCE, "<synthetic>", "exec")):
        for start, end, line in _lines(code):
            for offset in range(start, end, 2):
                assert decode(table_of(code), code.co_firstlineno, offset) == line, (code.co_name, offset)
                checked += 1
    assert checked > 80  # 92 instructions on 3.8, more on later versions


@pytest.mark.parametrize("encode,decode", [(lnotab_38, line_from_lnotab), (linetable_310, line_from_linetable)])
def test_older_formats_on_the_running_cpythons_line_ranges(encode, decode):
    """The line ranges CPython compiled SOURCE into, written in the 3.8 and 3.10 formats."""
    for code in _codes(compile(SOURCE, "<synthetic>", "exec")):
        segments = []
        for start, end, line in _lines(code):
            if end > start:
                segments.append(((end - start) // 2, line if line is not None or encode is linetable_310 else None))
        if encode is lnotab_38:
            # 3.8 gives every instruction a line: carry the previous one over gaps
            last = code.co_firstlineno
            filled = []
            for units, line in segments:
                last = line if line is not None else last
                filled.append((units, last))
            segments = filled
        table = encode(segments, code.co_firstlineno)
        for unit in range(sum(u for u, _ in segments)):
            assert decode(table, code.co_firstlineno, unit * 2) == line_at(segments, unit)
