"""One member out of a zip (a wheel, an embeddable Python) read over ranges: the end
record, the central directory, the member's local header and as much of its data as asked.

What a hostile archive could do is bounded here: the directory's size and entry count are
capped, a member must be stored or deflated, unencrypted, no larger than the caller's
limit, and its data must lie before the directory; inflating never produces more than the
size the directory declares (a zip bomb stops at it), and a member is whole only when its
length and CRC-32 are the declared ones. Member names are only compared, never used as
paths."""

from __future__ import annotations

import struct
import zlib
from typing import BinaryIO, Dict, List, Optional, Protocol

from dumpkit.records import record

MAX_DIRECTORY = 64 << 20  # a wheel's central directory: TensorFlow's is about 2 MB
MAX_ENTRIES = 500_000
_TAIL = 64 * 1024 + 22  # the end record and the longest comment
_CHUNK = 1 << 20
_OUT = 1 << 22  # inflated bytes per step


class ZipError(Exception):
    """The archive or member cannot be used; the message says why (one line)."""


class Ranged(Protocol):
    @property
    def size(self) -> int: ...

    def read(self, offset: int, n: int) -> bytes: ...

    def read_tail(self, n: int) -> bytes: ...

    def stream_to(self, offset: int, n: int, out: BinaryIO, progress=None) -> None: ...


@record
class Member:
    name: str
    method: int  # 0 stored, 8 deflated
    flags: int
    crc: int
    compressed: int
    size: int
    header_offset: int


@record
class Directory:
    members: Dict[str, Member]  # by lower-case name
    offset: int  # where the central directory starts: every member's data ends before it


def read_directory(f: Ranged) -> Directory:
    tail = f.read_tail(_TAIL)
    total = f.size
    end = tail.rfind(b"PK\x05\x06")
    if end < 0 or len(tail) - end < 22:
        raise ZipError("not a zip archive (no end of central directory record)")
    _, disk, cd_disk, _, count, cd_size, cd_offset, _ = struct.unpack_from("<IHHHHIIH", tail, end)
    if disk != 0 or cd_disk != 0:
        raise ZipError("a zip split over several files")
    if 0xFFFFFFFF in (cd_size, cd_offset) or count == 0xFFFF:
        loc = end - 20
        if loc < 0 or tail[loc : loc + 4] != b"PK\x06\x07":
            raise ZipError("a zip64 archive without its locator")
        (z64,) = struct.unpack_from("<Q", tail, loc + 8)
        rec = f.read(z64, 56) if z64 + 56 <= total else b""
        if rec[:4] != b"PK\x06\x06":
            raise ZipError("a zip64 end record that is not one")
        count, _, cd_size, cd_offset = struct.unpack_from("<QQQQ", rec, 24)
    if cd_size > MAX_DIRECTORY or count > MAX_ENTRIES:
        raise ZipError(f"a central directory of {count:,} entries / {cd_size:,} bytes is past dumpkit's limits")
    if cd_offset + cd_size > total:
        raise ZipError("the central directory lies past the end of the file")
    tail_start = total - len(tail)
    if cd_offset >= tail_start:
        raw = tail[cd_offset - tail_start : cd_offset - tail_start + cd_size]
    else:
        raw = f.read(cd_offset, cd_size)
    return Directory(_entries(raw, count), cd_offset)


def _entries(raw: bytes, count: int) -> Dict[str, Member]:
    out: Dict[str, Member] = {}
    pos = 0
    for _ in range(count):  # bounded by MAX_ENTRIES
        if raw[pos : pos + 4] != b"PK\x01\x02" or pos + 46 > len(raw):
            raise ZipError("a damaged central directory")
        (flags, method, _, _, crc, csize, usize, nlen, xlen, clen) = struct.unpack_from("<HHHHIIIHHH", raw, pos + 8)
        (offset,) = struct.unpack_from("<I", raw, pos + 42)
        name = raw[pos + 46 : pos + 46 + nlen].decode("utf-8" if flags & 0x800 else "cp437", "replace")
        extra = raw[pos + 46 + nlen : pos + 46 + nlen + xlen]
        usize, csize, offset = _zip64(extra, usize, csize, offset)
        out.setdefault(name.lower(), Member(name, method, flags, crc, csize, usize, offset))
        pos += 46 + nlen + xlen + clen
    return out


def _zip64(extra: bytes, usize: int, csize: int, offset: int):
    """The sizes and offset a zip64 extra field gives for the ones set to 0xFFFFFFFF."""
    pos = 0
    while pos + 4 <= len(extra):  # bounded by the field's length
        tag, size = struct.unpack_from("<HH", extra, pos)
        if tag == 1:
            body = extra[pos + 4 : pos + 4 + size]
            values: List[int] = [struct.unpack_from("<Q", body, i)[0] for i in range(0, len(body) - 7, 8)]
            if usize == 0xFFFFFFFF and values:
                usize = values.pop(0)
            if csize == 0xFFFFFFFF and values:
                csize = values.pop(0)
            if offset == 0xFFFFFFFF and values:
                offset = values.pop(0)
            break
        pos += 4 + size
    return usize, csize, offset


def find(directory: Directory, name: str) -> Optional[Member]:
    return directory.members.get(name.lower())


def _data_offset(f: Ranged, directory: Directory, m: Member, limit: int) -> int:
    if m.flags & 1:
        raise ZipError(f"{m.name} is encrypted")
    if m.method not in (0, 8):
        raise ZipError(f"{m.name} is compressed with method {m.method}, not stored or deflated")
    if m.size > limit:
        raise ZipError(f"{m.name} is {m.size:,} bytes, more than the limit of {limit:,}")
    if m.method == 0 and m.compressed != m.size:
        raise ZipError(f"{m.name} is stored, but its sizes differ")
    head = f.read(m.header_offset, 30)
    if head[:4] != b"PK\x03\x04":
        raise ZipError(f"{m.name}: no local header where the directory says")
    nlen, xlen = struct.unpack_from("<HH", head, 26)
    start = m.header_offset + 30 + nlen + xlen
    if start + m.compressed > directory.offset:
        raise ZipError(f"{m.name}: its data runs into the central directory")
    return start


def head(f: Ranged, directory: Directory, m: Member, n: int, limit: int) -> bytes:
    """The first `n` bytes of the member, inflated (fewer when it is shorter)."""
    start = _data_offset(f, directory, m, limit)
    n = min(n, m.size)
    if m.method == 0:
        return f.read(start, n)
    inflate = zlib.decompressobj(-15)
    out = bytearray()
    pos = 0
    step = 64 * 1024
    while len(out) < n and pos < m.compressed:  # bounded by the member's compressed size
        chunk = f.read(start + pos, min(step, m.compressed - pos))
        pos += len(chunk)
        step = min(step * 2, _CHUNK * 8)
        try:
            out += inflate.decompress(chunk, n - len(out))
        except zlib.error as e:
            raise ZipError(f"{m.name}: not a deflate stream ({e})") from None
    return bytes(out[:n])


class _Inflater:
    """A writer that inflates what it is given into `out`, never past `size` bytes."""

    def __init__(self, out: BinaryIO, m: Member):
        self.out = out
        self.m = m
        self.written = 0
        self.taken = 0
        self.crc = 0
        self._z = zlib.decompressobj(-15) if m.method == 8 else None

    def tell(self) -> int:
        return self.taken

    def write(self, chunk: bytes) -> None:
        self.taken += len(chunk)
        if self._z is None:
            self._emit(chunk)
            return
        try:
            data = self._z.decompress(chunk, _OUT)
            while True:  # bounded: each step emits output, and output stops at m.size
                self._emit(data)
                if not self._z.unconsumed_tail:
                    break
                data = self._z.decompress(self._z.unconsumed_tail, _OUT)
        except zlib.error as e:
            raise ZipError(f"{self.m.name}: not a deflate stream ({e})") from None

    def _emit(self, data: bytes) -> None:
        self.written += len(data)
        if self.written > self.m.size:
            raise ZipError(f"{self.m.name} inflates past its declared {self.m.size:,} bytes (a zip bomb?); refused")
        self.crc = zlib.crc32(data, self.crc)
        self.out.write(data)

    def finish(self) -> None:
        if self._z is not None:
            tail = self._z.flush()
            self._emit(tail)
            if not self._z.eof:
                raise ZipError(f"{self.m.name}: its deflate stream ends early")
        if self.written != self.m.size or (self.crc & 0xFFFFFFFF) != self.m.crc:
            raise ZipError(
                f"{self.m.name}: inflated {self.written:,} bytes, CRC {self.crc:08x}; the directory says "
                f"{self.m.size:,} bytes, CRC {self.m.crc:08x}"
            )


def extract(f: Ranged, directory: Directory, m: Member, out: BinaryIO, limit: int, progress=None) -> None:
    """The whole member inflated into `out`, checked against its declared size and CRC."""
    start = _data_offset(f, directory, m, limit)
    writer = _Inflater(out, m)
    f.stream_to(start, m.compressed, writer, progress)  # type: ignore[arg-type]
    writer.finish()
