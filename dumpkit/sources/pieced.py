"""A file of which only some byte ranges are held: a bundle written with --only-used-memory
stores the kept ranges of its dump back to back, and this serves them at their places in the
original file, with zeros between. The minidump reader slices it as it slices a mapped file;
what it holds as memory is limited to the kept ranges (MinidumpTarget's `kept`), so the
zeros are never served as the dump's memory."""

from __future__ import annotations

import bisect
from typing import Optional, Sequence, Tuple, Union

import mmap


class PiecedFile:
    """`size` bytes, of which `pieces` ((file offset, length), sorted, disjoint) are held in
    `data` back to back, in order; the rest reads as zeros. Read-only; supports len() and
    slicing with a step of 1, as bytes does."""

    def __init__(self, size: int, pieces: Sequence[Tuple[int, int]], data: Union[bytes, mmap.mmap]):
        held = sum(n for _, n in pieces)
        if held != len(data):
            raise ValueError(f"the pieces hold {held} bytes, the data {len(data)}")
        self._size = size
        self._starts = [off for off, _ in pieces]
        self._ends = [off + n for off, n in pieces]
        self._at = []  # where each piece's bytes start in `data`
        pos = 0
        for off, n in pieces:
            if off < 0 or n <= 0 or off + n > size:
                raise ValueError(f"piece ({off:#x}, +{n:#x}) is outside the {size}-byte file")
            self._at.append(pos)
            pos += n
        self._data = data

    def __len__(self) -> int:
        return self._size

    def held(self, offset: int, size: int) -> Optional[bytes]:
        """The bytes at [offset, offset + size) when one piece holds them all, else None."""
        i = bisect.bisect_right(self._starts, offset) - 1
        if i < 0 or offset + size > self._ends[i]:
            return None
        at = self._at[i] + offset - self._starts[i]
        return bytes(self._data[at : at + size])

    def __getitem__(self, key: slice) -> bytes:
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError("a PiecedFile is read by slices")
        lo, hi, _ = key.indices(self._size)
        if hi <= lo:
            return b""
        inside = self.held(lo, hi - lo)  # inside one piece: the common case
        if inside is not None:
            return inside
        out = bytearray(hi - lo)
        i = max(bisect.bisect_right(self._starts, lo) - 1, 0)
        while i < len(self._starts) and self._starts[i] < hi:
            a, b = max(lo, self._starts[i]), min(hi, self._ends[i])
            if b > a:
                at = self._at[i] + a - self._starts[i]
                out[a - lo : b - lo] = self._data[at : at + b - a]
            i += 1
        return bytes(out)

    def close(self) -> None:
        if isinstance(self._data, mmap.mmap):
            try:
                self._data.close()
            except (BufferError, ValueError):
                pass
