"""CodeView symbol records, the few kinds that name code: public symbols (S_PUB32) and
procedures (S_GPROC32 / S_LPROC32, global and static functions, and their _ID forms that
MSVC writes in module streams)."""

from __future__ import annotations

import struct
from typing import Iterator, Optional

from dumpkit.symbols.pdb.msf import PdbError
from dumpkit.records import record

__all__ = ["Procedure", "Public", "parse_public", "procedures"]

S_PUB32 = 0x110E
PROC_KINDS = frozenset((0x110F, 0x1110, 0x1146, 0x1147, 0x1155, 0x1156))  # L/G PROC32, _ID, _DPC
_PROC = struct.Struct("<IIIIIIIIHB")  # parent, end, next, length, dbg start/end, type, offset, segment, flags
_PUB = struct.Struct("<IIH")  # flags, offset, segment
CVPSF_FUNCTION = 0x2
MAX_NAME = 4096


@record
class Procedure:
    name: str
    segment: int
    offset: int
    length: int
    static: bool  # S_LPROC32: a function with internal linkage


@record
class Public:
    name: str
    segment: int
    offset: int
    function: bool


def _name(raw: bytes, pos: int) -> str:
    end = raw.find(b"\0", pos, pos + MAX_NAME)
    return raw[pos : end if end >= 0 else min(len(raw), pos + MAX_NAME)].decode("utf-8", "replace")


def parse_public(record: bytes) -> Optional[Public]:
    """An S_PUB32 record (its length and kind included), or None for another kind."""
    if len(record) < 4 + _PUB.size:
        raise PdbError("a public symbol record is shorter than its fixed part")
    (kind,) = struct.unpack_from("<H", record, 2)
    if kind != S_PUB32:
        return None
    flags, offset, segment = _PUB.unpack_from(record, 4)
    return Public(_name(record, 4 + _PUB.size), segment, offset, bool(flags & CVPSF_FUNCTION))


def procedures(raw: bytes, start: int, end: int) -> Iterator[Procedure]:
    """The procedures among the records of raw[start:end] (a module's symbol stream).
    Each step moves forward, past a procedure's own nested records when its end pointer
    allows it, so a damaged stream ends the walk rather than looping."""
    end = min(end, len(raw))
    pos = start
    while pos + 4 <= end:
        length, kind = struct.unpack_from("<HH", raw, pos)
        if length < 2:
            return
        nxt = pos + 2 + length
        if kind in PROC_KINDS and pos + 4 + _PROC.size <= nxt <= end:
            _, proc_end, _, size, _, _, _, offset, segment, _ = _PROC.unpack_from(raw, pos + 4)
            name = _name(raw[:nxt], pos + 4 + _PROC.size)
            yield Procedure(name, segment, offset, size, kind in (0x110F, 0x1146, 0x1155))
            if nxt < proc_end < end:
                nxt = proc_end  # S_END of this procedure: skip its locals and blocks
        pos = nxt
