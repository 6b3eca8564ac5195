"""The MSF 7.00 container a PDB is: a file of fixed-size blocks, a directory saying which
blocks make up each numbered stream. Streams are read lazily, block by block, so a PDB of
several GB costs only the blocks of the streams a lookup needs."""

from __future__ import annotations

import os
import struct
from typing import List, Optional, Protocol, Tuple

__all__ = ["MSF_MAGIC", "MsfFile", "PdbError", "PdbFile", "PdbSource", "Stream"]

MSF_MAGIC = b"Microsoft C/C++ MSF 7.00\r\n\x1aDS\x00\x00\x00"
_SUPERBLOCK = struct.Struct("<IIIIII")  # block size, free map, blocks, directory bytes, unused, map block
_BLOCK_SIZES = (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)
MAX_STREAMS = 1 << 20
MAX_DIRECTORY_BYTES = 1 << 28
_NIL_STREAM = 0xFFFFFFFF


class PdbError(Exception):
    """A PDB that cannot be read as one: the message is one line naming what is wrong."""


class PdbSource(Protocol):
    """Where a PDB's bytes come from: a file here, or the pages of one a bundle carries
    (whose unread parts raise PdbError). `read` returns exactly `size` bytes or raises."""

    @property
    def size(self) -> int: ...

    def read(self, offset: int, size: int) -> bytes: ...

    def close(self) -> None: ...


class PdbFile:
    """A PDB file on this machine, read with seek + read."""

    lazy = False

    def __init__(self, path: str):
        try:
            self._fh = open(path, "rb")
            self._size = os.fstat(self._fh.fileno()).st_size
        except OSError as e:
            raise PdbError(f"cannot open: {e.strerror or e}") from None
        self._closed = False

    @property
    def size(self) -> int:
        return self._size

    def read(self, offset: int, size: int) -> bytes:
        if self._closed:
            raise PdbError("the PDB is closed")
        try:
            self._fh.seek(offset)
            data = self._fh.read(size)
        except OSError as e:
            raise PdbError(f"cannot read: {e.strerror or e}") from None
        if len(data) != size:
            raise PdbError(f"file ends at {self._size} bytes, inside a block it names")
        return data

    def close(self) -> None:
        self._closed = True
        self._fh.close()


class MsfFile:
    """An open MSF file: its block size and each stream's size and block list."""

    def __init__(self, source: PdbSource, name: str = "PDB"):
        self._source: Optional[PdbSource] = source
        self.name = name
        self.file_size = file_size = source.size
        head = self._read_at(0, len(MSF_MAGIC) + _SUPERBLOCK.size)
        if head[: len(MSF_MAGIC)] != MSF_MAGIC:
            raise PdbError("not an MSF 7.00 PDB (bad signature)")
        block_size, _, blocks, dir_bytes, _, map_block = _SUPERBLOCK.unpack_from(head, len(MSF_MAGIC))
        if block_size not in _BLOCK_SIZES:
            raise PdbError(f"block size {block_size} is not one MSF uses")
        self.block_size = block_size
        if blocks * block_size > file_size + block_size:
            raise PdbError(f"claims {blocks} blocks of {block_size} bytes, file has {file_size} bytes")
        self.block_count = min(blocks, -(-file_size // block_size))
        if dir_bytes > MAX_DIRECTORY_BYTES:
            raise PdbError(f"stream directory of {dir_bytes} bytes is implausible")
        dir_blocks = -(-dir_bytes // block_size)
        if dir_blocks * 4 > block_size:
            raise PdbError(f"stream directory of {dir_bytes} bytes does not fit one block map")
        self._check_block(map_block)
        block_map = struct.unpack_from(f"<{dir_blocks}I", self._read_block(map_block))
        directory = Stream(self, dir_bytes, list(block_map)).read(0, dir_bytes)
        self.stream_sizes, self.stream_blocks = self._parse_directory(directory)

    def _parse_directory(self, raw: bytes) -> Tuple[List[int], List[List[int]]]:
        if len(raw) < 4:
            raise PdbError("stream directory is empty")
        (count,) = struct.unpack_from("<I", raw, 0)
        if count > MAX_STREAMS or 4 + 4 * count > len(raw):
            raise PdbError(f"stream directory claims {count} streams in {len(raw)} bytes")
        sizes = [0 if s == _NIL_STREAM else s for s in struct.unpack_from(f"<{count}I", raw, 4)]
        pos = 4 + 4 * count
        blocks: List[List[int]] = []
        for size in sizes:
            n = -(-size // self.block_size)
            if pos + 4 * n > len(raw):
                raise PdbError(f"stream directory ends inside the block list of stream {len(blocks)}")
            blocks.append(list(struct.unpack_from(f"<{n}I", raw, pos)))
            pos += 4 * n
        return sizes, blocks

    def _check_block(self, block: int) -> None:
        if not 0 < block < self.block_count:
            raise PdbError(f"block {block} is outside the file ({self.block_count} blocks)")

    def _read_at(self, offset: int, size: int) -> bytes:
        if self._source is None:
            raise PdbError(f"{self.name} is closed")
        if offset + size > self.file_size:
            raise PdbError(f"file ends at {self.file_size} bytes, inside a block it names")
        return self._source.read(offset, size)

    def _read_block(self, block: int) -> bytes:
        return self._read_at(block * self.block_size, self.block_size)

    def read_blocks(self, first: int, count: int) -> bytes:
        """`count` consecutive blocks from `first` (checked to lie in the file)."""
        self._check_block(first)
        self._check_block(first + count - 1)
        return self._read_at(first * self.block_size, count * self.block_size)

    @property
    def stream_count(self) -> int:
        return len(self.stream_sizes)

    def stream(self, index: int) -> "Stream":
        if not 0 <= index < len(self.stream_sizes):
            raise PdbError(f"stream {index} does not exist ({len(self.stream_sizes)} streams)")
        return Stream(self, self.stream_sizes[index], self.stream_blocks[index])

    def close(self) -> None:
        if self._source is not None:
            self._source.close()
            self._source = None


class Stream:
    """One stream: bytes at stream offsets, gathered from its blocks on demand."""

    def __init__(self, msf: MsfFile, size: int, blocks: List[int]):
        self._msf = msf
        self.size = size
        self._blocks = blocks

    def read(self, offset: int, size: int) -> bytes:
        """Exactly `size` bytes at `offset`, or PdbError when they pass the stream's end."""
        if offset < 0 or size < 0 or offset + size > self.size:
            raise PdbError(f"read of {size} bytes at {offset} passes the end of a {self.size}-byte stream")
        bs = self._msf.block_size
        out = []
        pos = offset
        end = offset + size
        while pos < end:
            i = pos // bs
            # a run of blocks that follow each other in the file is one read
            run = 1
            while (i + run) * bs < end and self._blocks[i + run] == self._blocks[i] + run:
                run += 1
            data = self._msf.read_blocks(self._blocks[i], run)
            lo = pos - i * bs
            hi = min(end - i * bs, run * bs)
            out.append(data[lo:hi])
            pos = i * bs + hi
        return b"".join(out)

    def read_all(self, limit: int) -> bytes:
        """The whole stream, refused when larger than `limit` bytes."""
        if self.size > limit:
            raise PdbError(f"a stream of {self.size} bytes is larger than the {limit} read at once")
        return self.read(0, self.size)
