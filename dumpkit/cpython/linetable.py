"""Line numbers from a code object's line table and the offset of the instruction a frame
is executing, one decoder per format CPython has used. Each mirrors the interpreter's own
lookup (PyCode_Addr2Line of that version) so the line is the one a traceback would show.

Offsets are in bytes from the start of the bytecode. Every loop is bounded by the table's
length; a damaged table gives a wrong or missing line, never an exception."""

from __future__ import annotations

from typing import Optional


def line_from_lnotab(table: bytes, first_line: int, offset: int) -> int:
    """3.8-3.9 `co_lnotab`: (bytecode increment, line increment) byte pairs, the line
    increment signed since 3.6 (Objects/lnotab_notes.txt); `offset` is f_lasti."""
    line = first_line
    addr = 0
    for i in range(0, len(table) - 1, 2):
        addr += table[i]
        if addr > offset:
            break
        step = table[i + 1]
        line += step - 256 if step >= 128 else step
    return line


def line_from_linetable(table: bytes, first_line: int, offset: int) -> Optional[int]:
    """3.10 `co_linetable`: (length of a range of bytecode in bytes, line delta) byte pairs;
    a delta of -128 means the range has no line (Objects/lnotab_notes.txt of 3.10).
    `offset` is f_lasti * 2. None when the offset has no line."""
    if offset < 0:
        return first_line
    line = first_line
    start = 0
    for i in range(0, len(table) - 1, 2):
        end = start + table[i]
        step = table[i + 1]
        step = step - 256 if step >= 128 else step
        has_line = step != -128
        if has_line:
            line += step
        if start <= offset < end:
            return line if has_line else None
        start = end
    return None


def _varint(table: bytes, at: int):
    # 6-bit groups, least significant first; bit 6 says another group follows
    value = shift = 0
    while at < len(table):
        b = table[at]
        at += 1
        value |= (b & 63) << shift
        shift += 6
        if not b & 64:
            break
    return value, at


def _svarint(table: bytes, at: int):
    value, at = _varint(table, at)
    return (-(value >> 1) if value & 1 else value >> 1), at


def line_from_locations(table: bytes, first_line: int, offset: int) -> Optional[int]:
    """3.11+ location table (Objects/locations.md): entries that each start with a byte
    1CCCCLLL (C = kind of entry, L = number of code units - 1) followed by the entry's
    data. Kinds 0-9: same line as before; 10-12: line + 0..2; 13 (no columns) and 14 (long
    form): signed varint line delta; 15: no line. `offset` is (instruction - start of the
    code) in bytes. None when the instruction has no line."""
    if offset < 0:
        return first_line
    line = first_line
    start = 0
    at = 0
    n = len(table)
    while at < n:
        first = table[at]
        if not first & 0x80:
            at += 1  # not an entry start (damaged table): resynchronise on the next one
            continue
        kind = (first >> 3) & 15
        end = start + ((first & 7) + 1) * 2
        has_line = kind != 15
        if kind in (13, 14):
            delta, _ = _svarint(table, at + 1)
            line += delta
        elif 10 <= kind <= 12:
            line += kind - 10
        if start <= offset < end:
            return line if has_line else None
        start = end
        at += 1
        while at < n and not table[at] & 0x80:
            at += 1
    return None
