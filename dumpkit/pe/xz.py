"""Random access into an .xz file written in blocks (`xz --block-size=N`): the index at
the end of the stream says where each block sits and how many bytes it holds, so a read
decompresses only the blocks it touches (an image's COFF symbols at the end of the file
cost their own blocks, not the whole file before them). Format: the .xz file format
1.1.0, sections 2.1.2 (stream footer), 3.1 (block) and 4 (index)."""

from __future__ import annotations

import bisect
import struct
from typing import BinaryIO, Dict, List, Optional, Tuple
from dumpkit.records import record

__all__ = ["XzBlock", "XzBlocks", "read_index"]

HEADER_MAGIC = b"\xfd7zXZ\x00"
FOOTER_MAGIC = b"YZ"
MAX_BLOCKS = 1 << 16
MAX_INDEX = 1 << 20


@record
class XzBlock:
    at: int  # file offset of its block header
    length: int  # bytes it takes in the file (padded to a multiple of 4)
    start: int  # offset of its first byte in the decompressed data
    size: int  # bytes it decompresses to


def _varint(data: bytes, i: int) -> Tuple[int, int]:
    """An xz multibyte integer at data[i]: (value, index after it). At most 9 bytes."""
    value = 0
    for k in range(9):
        if i >= len(data):
            raise ValueError("index ends inside a number")
        c = data[i]
        i += 1
        value |= (c & 0x7F) << (7 * k)
        if not c & 0x80:
            return value, i
    raise ValueError("number longer than 9 bytes")


def read_index(fh: BinaryIO, file_size: int) -> Optional[Tuple[bytes, List[XzBlock]]]:
    """(stream header, blocks) of a file holding exactly one xz stream, or None when it
    is anything else (several streams, padding, a damaged or oversized index): such a
    file is read from the start instead, which says what is wrong with it."""
    if file_size < 32:
        return None
    import zlib  # imported here, as lzma below: a run without .xz images needs neither (~1 ms)

    fh.seek(0)
    header = fh.read(12)
    fh.seek(file_size - 12)
    footer = fh.read(12)
    if len(header) != 12 or len(footer) != 12 or not header.startswith(HEADER_MAGIC) or footer[10:] != FOOTER_MAGIC:
        return None
    if footer[8:10] != header[6:8] or struct.unpack("<I", footer[:4])[0] != zlib.crc32(footer[4:10]):
        return None
    index_size = (struct.unpack("<I", footer[4:8])[0] + 1) * 4
    index_at = file_size - 12 - index_size
    if index_size > MAX_INDEX or index_at < 12:
        return None
    fh.seek(index_at)
    index = fh.read(index_size)
    if len(index) != index_size or index[0] != 0:
        return None
    if struct.unpack("<I", index[-4:])[0] != zlib.crc32(index[:-4]):
        return None
    try:
        count, i = _varint(index, 1)
        if count > MAX_BLOCKS:
            return None
        blocks: List[XzBlock] = []
        at, start = 12, 0
        for _ in range(count):
            unpadded, i = _varint(index, i)
            size, i = _varint(index, i)
            length = (unpadded + 3) & ~3
            blocks.append(XzBlock(at, length, start, size))
            at += length
            start += size
    except ValueError:
        return None
    if at != index_at:  # the blocks must fill the stream exactly up to its index
        return None
    return header, blocks


class XzBlocks:
    """The decompressed bytes of a block-indexed .xz file, each block decompressed once,
    when a read first touches it."""

    def __init__(self, fh: BinaryIO, header: bytes, blocks: List[XzBlock]):
        self._fh = fh
        self._header = header
        self._blocks = blocks
        self._starts = [b.start for b in blocks]
        self._data: Dict[int, bytes] = {}
        self.size = blocks[-1].start + blocks[-1].size if blocks else 0

    @property
    def decompressed(self) -> int:
        return sum(len(d) for d in self._data.values())

    def _block(self, n: int) -> bytes:
        data = self._data.get(n)
        if data is None:
            b = self._blocks[n]
            self._fh.seek(b.at)
            raw = self._fh.read(b.length)
            # A block alone is not a stream; behind the stream header it decodes as the
            # stream's first block (the decoder then waits for more, which never comes).
            import lzma

            data = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(self._header + raw)
            if len(raw) != b.length or len(data) != b.size:
                raise ValueError(f"block {n} decompresses to {len(data)} bytes, its index says {b.size}")
            self._data[n] = data
        return data

    def read(self, offset: int, size: int) -> bytes:
        """bytes [offset, offset + size) of the decompressed data; the caller checks bounds.
        Raises ValueError or lzma.LZMAError on a damaged block."""
        out = []
        n = bisect.bisect_right(self._starts, offset) - 1
        end = offset + size
        while offset < end and 0 <= n < len(self._blocks):  # bounded: n grows every turn
            b = self._blocks[n]
            data = self._block(n)
            out.append(data[offset - b.start : min(end, b.start + b.size) - b.start])
            offset = b.start + b.size
            n += 1
        return b"".join(out)
