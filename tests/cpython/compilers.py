"""Line tables as each CPython version's compiler writes them (Python/compile.c of 3.8,
3.10 and 3.11), for the synthetic code objects of the tests. Written from the compilers'
emit rules, not from the reader's decoders.

A program is a list of segments, in order: (code units, location), where location is a line
number, None (no line: 3.10+ only), or for 3.11+ a (line, end_line, col, end_col) tuple
(a plain line there has no columns, col = end_col = -1)."""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

Segment = Tuple[int, object]


def line_at(segments: Sequence[Segment], unit: int) -> Optional[int]:
    """The line the program says instruction `unit` (index in code units) is on."""
    start = 0
    for units, loc in segments:
        if start <= unit < start + units:
            return loc[0] if isinstance(loc, tuple) else loc  # type: ignore[return-value]
        start += units
    raise IndexError(unit)


def lnotab_38(segments: Sequence[Segment], first_line: int) -> bytes:
    """3.8 assemble_lnotab: called for each instruction whose line differs from the last."""
    out = bytearray()
    a_lineno, a_lineno_off, offset = first_line, 0, 0
    for units, line in segments:
        assert isinstance(line, int)
        d_bytecode = (offset - a_lineno_off) * 2
        d_lineno = line - a_lineno
        if d_bytecode or d_lineno:
            if d_bytecode > 255:
                ncodes = d_bytecode // 255
                out += bytes([255, 0]) * ncodes
                d_bytecode -= ncodes * 255
            if d_lineno < -128 or d_lineno > 127:
                if d_lineno < 0:
                    k, ncodes = -128, (-d_lineno) // 128
                else:
                    k, ncodes = 127, d_lineno // 127
                d_lineno -= ncodes * k
                out += bytes([d_bytecode, k & 0xFF])
                out += bytes([0, k & 0xFF]) * (ncodes - 1)
                d_bytecode = 0
            out += bytes([d_bytecode, d_lineno & 0xFF])
            a_lineno, a_lineno_off = line, offset
        offset += units
    return bytes(out)


def linetable_310(segments: Sequence[Segment], first_line: int) -> bytes:
    """3.10 assemble_line_range, run each time the line changes and once at the end."""
    out = bytearray()
    state = {"lineno": first_line, "prev": first_line, "start": 0}

    def line_range(offset: int) -> None:
        bdelta = (offset - state["start"]) * 2
        if bdelta == 0:
            return
        if state["lineno"] is None:
            ldelta = -128
        else:
            ldelta = state["lineno"] - state["prev"]
            state["prev"] = state["lineno"]
            while ldelta > 127:
                out.extend((0, 127))
                ldelta -= 127
            while ldelta < -127:
                out.extend((0, (-127) & 0xFF))
                ldelta += 127
        while bdelta > 254:
            out.extend((254, ldelta & 0xFF))
            ldelta = -128 if state["lineno"] is None else 0
            bdelta -= 254
        out.extend((bdelta, ldelta & 0xFF))
        state["start"] = offset

    offset = 0
    for units, line in segments:
        if line != state["lineno"]:
            line_range(offset)
            state["lineno"] = line
        offset += units
    line_range(offset)
    return bytes(out)


def _varint(value: int) -> List[int]:
    out = []
    while value >= 64:
        out.append(64 | (value & 63))
        value >>= 6
    out.append(value)
    return out


def _svarint(value: int) -> List[int]:
    return _varint(((-value) << 1) | 1 if value < 0 else value << 1)


def locations_311(segments: Sequence[Segment], first_line: int) -> bytes:
    """3.11 write_location_info_entry: one entry per run of instructions with one location,
    runs longer than 8 code units split; the form is the shortest that holds the location."""
    out = bytearray()
    prev_line = first_line

    def first_byte(code: int, length: int) -> None:
        out.append(0x80 | (code << 3) | (length - 1))

    def entry(loc, size: int) -> None:
        nonlocal prev_line
        if loc is None:
            first_byte(15, size)
            return
        if isinstance(loc, int):  # a line without columns
            loc = (loc, loc, -1, -1)
        line, end_line, col, end_col = loc
        delta = line - prev_line
        if col < 0 or end_col < 0:
            if end_line == line or end_line == -1:
                first_byte(13, size)
                out.extend(_svarint(delta))
                prev_line = line
                return
        elif end_line == line:
            if delta == 0 and col < 80 and 0 <= end_col - col < 16:
                first_byte(col >> 3, size)
                out.append(((col & 7) << 4) | (end_col - col))
                return
            if 0 <= delta < 3 and col < 128 and end_col < 128:
                first_byte(10 + delta, size)
                out.extend((col, end_col))
                prev_line = line
                return
        first_byte(14, size)
        out.extend(_svarint(delta))
        out.extend(_varint(end_line - line))
        out.extend(_varint(col + 1))
        out.extend(_varint(end_col + 1))
        prev_line = line

    for units, loc in segments:
        while units > 8:
            entry(loc, 8)
            units -= 8
        entry(loc, units)
    return bytes(out)
