"""How a found image file is read: in place, from an .xz copy as far as reads reach, and
with the pages read recorded (a bundle keeps exactly those)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, BinaryIO, List, Optional, Set, Tuple

from dumpkit.pe import PEError
from dumpkit.pe.backing import Backing
from dumpkit.pe.xz import XzBlocks, read_index

if TYPE_CHECKING:  # the PDB reader is imported when a PDB is found (most dumps have none)
    pass


PAGE = 4096  # reads are recorded page-granular: a later read of a nearby byte is served too


class RecordingBacking:
    """An image file's backing that remembers which pages were read (successful reads
    only: a read past the end fails the same way when the bundle replays it)."""

    def __init__(self, inner: Backing):
        self.inner = inner
        self.lazy = getattr(inner, "lazy", False)
        self.pages: Set[int] = set()

    @property
    def size(self) -> int:
        return self.inner.size

    def read(self, offset: int, size: int) -> bytes:
        data = self.inner.read(offset, size)
        if data:
            self.pages.update(range(offset // PAGE, (offset + len(data) - 1) // PAGE + 1))
        return data

    def ranges(self) -> List[Tuple[int, int]]:
        """The recorded pages as sorted, merged (file offset, length) ranges, clipped to the file."""
        out: List[Tuple[int, int]] = []
        total = self.inner.size
        for page in sorted(self.pages):
            start = page * PAGE
            end = min(start + PAGE, total)
            if end <= start:
                continue
            if out and out[-1][0] + out[-1][1] == start:
                out[-1] = (out[-1][0], end - out[-1][0])
            else:
                out.append((start, end - start))
        return out

    def close(self) -> None:
        self.inner.close()


MAX_XZ_IMAGE = 1 << 30
_XZ_IN_CHUNK = 1 << 16
_XZ_OUT_CHUNK = 1 << 18


class XzBacking:
    """An xz-compressed image file, decompressed into memory only as far as reads
    reach (headers, .text, .pdata/.xdata and exports usually sit well before the
    debug sections and COFF symbols at the end). Bounded; nothing is written."""

    lazy = True

    def __init__(self, path: str):
        import lzma

        self._lzma = lzma
        self.path = path
        try:
            self._fh: Optional[BinaryIO] = open(path, "rb")
        except OSError as e:
            raise PEError(f"cannot open {path}: {e.strerror or e}") from None
        self._dec = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
        self._data = bytearray()
        self._ended = False
        self.decompressions = 0  # decompress calls made (for tests)
        # Written in blocks (`xz --block-size`): a read decompresses only its blocks.
        self._blocks: Optional[XzBlocks] = None
        try:
            found = read_index(self._fh, os.fstat(self._fh.fileno()).st_size)
        except OSError:
            found = None
        if found is not None and len(found[1]) > 1:
            blocks = XzBlocks(self._fh, *found)
            if blocks.size <= MAX_XZ_IMAGE:
                self._blocks = blocks
        self._fh.seek(0)

    def _fill(self, end: int) -> None:
        """Decompress until `end` bytes are out or the stream ends."""
        while len(self._data) < end and not self._ended:
            if self._fh is None:
                raise PEError(f"{self.path}: image is closed")
            chunk = b""
            if self._dec.needs_input:
                chunk = self._fh.read(_XZ_IN_CHUNK)
                if not chunk:
                    self._ended = True
                    raise PEError(f"{self.path}: cannot decompress (truncated xz stream)")
            try:
                self._data += self._dec.decompress(chunk, max_length=_XZ_OUT_CHUNK)
            except (self._lzma.LZMAError, EOFError) as e:
                self._ended = True
                raise PEError(f"{self.path}: cannot decompress ({e})") from None
            self.decompressions += 1
            if self._dec.eof:
                self._ended = True
            if len(self._data) > MAX_XZ_IMAGE:
                self._ended = True
                raise PEError(f"{self.path}: decompressed image larger than {MAX_XZ_IMAGE} bytes")

    @property
    def decompressed(self) -> int:
        return self._blocks.decompressed if self._blocks is not None else len(self._data)

    @property
    def size(self) -> int:
        if self._blocks is not None:
            return self._blocks.size
        self._fill(MAX_XZ_IMAGE + 1)
        return len(self._data)

    def read(self, offset: int, size: int) -> bytes:
        if offset < 0 or size < 0:
            raise PEError(f"file offset {offset:#x} (+{size:#x}) is past the end of the file")
        if self._blocks is not None:
            if offset + size > self._blocks.size:
                raise PEError(f"file offset {offset:#x} (+{size:#x}) is past the end of the file")
            if self._fh is None:
                raise PEError(f"{self.path}: image is closed")
            try:
                return self._blocks.read(offset, size)
            except (self._lzma.LZMAError, EOFError, ValueError) as e:
                raise PEError(f"{self.path}: cannot decompress ({e})") from None
        self._fill(offset + size)
        if offset + size > len(self._data):
            raise PEError(f"file offset {offset:#x} (+{size:#x}) is past the end of the file")
        return bytes(self._data[offset : offset + size])

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        self._data = bytearray()
        self._blocks = None
        self._ended = True
