"""Where the bytes of an image file come from: a file mapped read-only, or bytes already in
memory. (A process's mapped image is read through a `ReadVA` instead: addresses, not file
offsets.) dumpkit.images adds a third backing, an .xz file decompressed as far as reads reach."""

from __future__ import annotations

import mmap
import os
from typing import Callable, Optional, Protocol

from dumpkit.pe.errors import PEError

__all__ = ["Backing", "BytesBacking", "FileBacking", "ReadVA"]

ReadVA = Callable[[int, int], bytes]
"""read_va(address, size) over a process's memory; raises MemoryNotInDump for missing bytes."""


class Backing(Protocol):
    """Bytes of an image file by file offset. `read` raises PEError past the end. A backing
    may set `lazy = True` when it produces bytes on demand (its `size` may then be costly)."""

    @property
    def size(self) -> int: ...  # read-only for users: a lazy backing computes it

    def read(self, offset: int, size: int) -> bytes: ...

    def close(self) -> None: ...


def _check_range(offset: int, size: int, total: int) -> None:
    if offset < 0 or size < 0 or offset + size > total:
        raise PEError(f"file offset {offset:#x} (+{size:#x}) is past the end of the file")


class BytesBacking:
    """An image file already in memory (e.g. decompressed from NAME.dll.xz)."""

    def __init__(self, data: bytes):
        if not data:
            raise PEError("image is empty")
        self._data = data
        self.size = len(data)

    def read(self, offset: int, size: int) -> bytes:
        _check_range(offset, size, self.size)
        return self._data[offset : offset + size]

    def close(self) -> None:
        self._data = b""


class FileBacking:
    """A read-only mmap of a file; offsets are file offsets."""

    def __init__(self, path: str):
        try:
            self._fh = open(path, "rb")
        except OSError as e:
            raise PEError(f"cannot open {path}: {e.strerror or e}") from None
        try:
            size = os.fstat(self._fh.fileno()).st_size
            if size == 0:
                raise PEError(f"{path} is empty")
            self._mm: Optional[mmap.mmap] = mmap.mmap(self._fh.fileno(), 0, access=mmap.ACCESS_READ)
        except PEError:
            self._fh.close()
            raise
        except (OSError, ValueError) as e:
            self._fh.close()
            raise PEError(f"cannot map {path}: {e}") from None
        self.size = size

    def read(self, offset: int, size: int) -> bytes:
        mm = self._mm
        if mm is None:
            raise PEError("image is closed")
        _check_range(offset, size, self.size)
        return mm[offset : offset + size]

    def close(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        self._fh.close()
