"""Source lines from a module's C13 debug subsections: DEBUG_S_LINES blocks (code offset ->
line, per file) and DEBUG_S_FILECHKSMS (file id -> name offset in the /names string table)."""

from __future__ import annotations

import struct
from typing import Dict, List, Optional, Tuple

from dumpkit.symbols.pdb.msf import MsfFile, PdbError, Stream

__all__ = ["LineEntry", "line_entries", "names_stream_index", "NameTable"]

DEBUG_S_LINES = 0xF2
DEBUG_S_FILECHKSMS = 0xF4
_IGNORE = 0x80000000
_LINES_HEADER = struct.Struct("<IHHI")  # code offset, segment, flags, code size
_FILE_BLOCK = struct.Struct("<III")  # file id, line count, block bytes
CV_LINES_HAVE_COLUMNS = 0x1
MAX_LINES = 1 << 22
MAX_NAMED_STREAMS = 4096

# (segment, offset, line, file id): one line record, positions still section-relative
LineEntry = Tuple[int, int, int, int]


def line_entries(raw: bytes) -> Tuple[List[LineEntry], Dict[int, int]]:
    """The line records of a module's C13 subsections (`raw`), and file id -> name offset.
    Malformed subsections end the walk; counts are bounded by the bytes that hold them."""
    entries: List[LineEntry] = []
    files: Dict[int, int] = {}
    pos = 0
    while pos + 8 <= len(raw):
        kind, size = struct.unpack_from("<II", raw, pos)
        body = raw[pos + 8 : pos + 8 + size]
        if len(body) < size:
            break
        kind &= ~_IGNORE
        if kind == DEBUG_S_LINES and size >= _LINES_HEADER.size:
            _lines(body, entries)
        elif kind == DEBUG_S_FILECHKSMS:
            _checksums(body, files)
        pos += 8 + ((size + 3) & ~3)
    return entries, files


def _lines(body: bytes, out: List[LineEntry]) -> None:
    offset, segment, flags, _ = _LINES_HEADER.unpack_from(body, 0)
    columns = bool(flags & CV_LINES_HAVE_COLUMNS)
    pos = _LINES_HEADER.size
    while pos + _FILE_BLOCK.size <= len(body) and len(out) < MAX_LINES:
        file_id, count, block = _FILE_BLOCK.unpack_from(body, pos)
        need = _FILE_BLOCK.size + count * (12 if columns else 8)
        if block < need or pos + block > len(body):
            return
        for i in range(count):
            at, bits = struct.unpack_from("<II", body, pos + _FILE_BLOCK.size + 8 * i)
            line = bits & 0xFFFFFF
            if line not in (0, 0xFEEFEE, 0xF00F00):  # hidden-code markers name no line
                out.append((segment, offset + at, line, file_id))
        pos += block


def _checksums(body: bytes, files: Dict[int, int]) -> None:
    pos = 0
    while pos + 6 <= len(body):
        name, size = struct.unpack_from("<IB", body, pos)
        files[pos] = name
        pos = (pos + 6 + size + 3) & ~3


def names_stream_index(info: Stream) -> Optional[int]:
    """The stream index of "/names" from the info stream's named-stream map."""
    at = 28  # version, signature, age, GUID
    (strings_size,) = struct.unpack("<I", info.read(at, 4))
    strings = info.read(at + 4, strings_size)
    at += 4 + strings_size
    size, _capacity = struct.unpack("<II", info.read(at, 8))
    at += 8
    (words,) = struct.unpack("<I", info.read(at, 4))
    if words > MAX_NAMED_STREAMS:
        raise PdbError(f"named-stream map claims {words} bitmap words")
    present = struct.unpack(f"<{words}I", info.read(at + 4, 4 * words))
    at += 4 + 4 * words
    (deleted,) = struct.unpack("<I", info.read(at, 4))
    if deleted > MAX_NAMED_STREAMS:
        raise PdbError(f"named-stream map claims {deleted} bitmap words")
    at += 4 + 4 * deleted
    buckets = sum(bin(w).count("1") for w in present)
    for i in range(min(buckets, size, MAX_NAMED_STREAMS)):
        key, value = struct.unpack("<II", info.read(at + 8 * i, 8))
        end = strings.find(b"\0", key)
        if key < len(strings) and strings[key : end if end >= 0 else len(strings)] == b"/names":
            return value
    return None


class NameTable:
    """The /names stream: file names by offset, read one at a time."""

    _HEADER = 12  # signature, hash version, strings size

    def __init__(self, msf: MsfFile, index: int):
        self._stream = msf.stream(index)
        if self._stream.size < self._HEADER:
            raise PdbError("the /names stream is shorter than its header")
        sig, _, size = struct.unpack("<III", self._stream.read(0, self._HEADER))
        if sig != 0xEFFEEFFE:
            raise PdbError(f"the /names stream has an unknown signature {sig:#x}")
        self._size = min(size, self._stream.size - self._HEADER)
        self._cache: Dict[int, str] = {}

    def name(self, offset: int) -> Optional[str]:
        if offset in self._cache:
            return self._cache[offset]
        if not 0 <= offset < self._size:
            return None
        raw = self._stream.read(self._HEADER + offset, min(1024, self._size - offset))
        text = raw.split(b"\0", 1)[0].decode("utf-8", "replace")
        self._cache[offset] = text
        return text
