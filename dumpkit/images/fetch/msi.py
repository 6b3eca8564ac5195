"""The cabinets inside a Windows Installer package: python.org ships each release's PDBs as
MSI packages (`amd64/core_pdb.msi`, ...) whose files sit in a cabinet embedded as a stream
(CPython's Tools/msi: `MediaTemplate EmbedCab="yes"`). An MSI is a Compound File Binary
file ([MS-CFB]): sectors chained through a FAT, a directory of named streams. Only what
finding those cabinets needs is read: the FAT, the directory, and the streams in regular
sectors that start with a cabinet's signature (a cabinet is never under the 4096-byte
mini-stream cutoff). Every chain is bounded by the file's sector count, so a loop in a
hostile FAT ends."""

from __future__ import annotations

import struct
from typing import BinaryIO, List, Tuple

MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_END = 0xFFFFFFFE  # ENDOFCHAIN
_FREE = 0xFFFFFFFF
_MAX_SECTOR = 0xFFFFFFFA  # above: special values
_STREAM = 2
_MAX_DIFAT = 1 << 16


class MsiError(ValueError):
    """Not a compound file dumpkit can read; the message says why."""


def _sector(fh: BinaryIO, shift: int, number: int, file_size: int) -> bytes:
    at = (number + 1) << shift
    if at + (1 << shift) > file_size:
        raise MsiError(f"sector {number} lies past the end of the file")
    fh.seek(at)
    return fh.read(1 << shift)


def cabinet_streams(fh: BinaryIO, file_size: int, limit: int) -> List[Tuple[int, bytes]]:
    """(stream size, bytes) of each stream that holds a cabinet, at most `limit` bytes each."""
    fh.seek(0)
    head = fh.read(512)
    if len(head) < 512 or head[:8] != MAGIC:
        raise MsiError("not a compound file (no CFB signature)")
    (shift,) = struct.unpack_from("<H", head, 30)
    if shift not in (9, 12):
        raise MsiError(f"a sector size of 2^{shift}")
    n_fat, first_dir = struct.unpack_from("<II", head, 44)
    (cutoff,) = struct.unpack_from("<I", head, 56)
    first_difat, n_difat = struct.unpack_from("<II", head, 68)
    sectors = max(0, (file_size >> shift) - 1)
    fat_ids = [s for s in struct.unpack_from("<109I", head, 76) if s <= _MAX_SECTOR]
    nxt = first_difat
    for _ in range(min(n_difat, _MAX_DIFAT)):  # more FAT sector numbers, chained
        if nxt > _MAX_SECTOR or nxt >= sectors:
            break
        words = struct.unpack(f"<{(1 << shift) // 4}I", _sector(fh, shift, nxt, file_size))
        fat_ids += [s for s in words[:-1] if s <= _MAX_SECTOR]
        nxt = words[-1]
    fat: List[int] = []
    for s in fat_ids[: max(n_fat, 0)]:
        fat += struct.unpack(f"<{(1 << shift) // 4}I", _sector(fh, shift, s, file_size))
    fat = fat[:sectors]

    def chain(start: int) -> List[int]:
        out: List[int] = []
        s = start
        while s <= _MAX_SECTOR and s < len(fat) and len(out) <= len(fat):  # a loop cannot outrun the FAT
            out.append(s)
            s = fat[s]
        if s not in (_END, _FREE) and s <= _MAX_SECTOR:
            raise MsiError("a sector chain that leaves the file or loops")
        return out

    directory = b"".join(_sector(fh, shift, s, file_size) for s in chain(first_dir))
    found: List[Tuple[int, bytes]] = []
    for at in range(0, len(directory) - 127, 128):
        entry_type = directory[at + 66]
        start, size = struct.unpack_from("<IQ", directory, at + 116)
        if shift == 9:
            size &= 0xFFFFFFFF  # version 3 files: the high half is undefined
        if entry_type != _STREAM or size < max(cutoff, 36) or start > _MAX_SECTOR:
            continue
        if size > limit:
            raise MsiError(f"a stream of {size:,} bytes, more than the limit of {limit:,}")
        first = _sector(fh, shift, start, file_size)
        if first[:4] != b"MSCF":
            continue
        data = b"".join(_sector(fh, shift, s, file_size) for s in chain(start))
        if len(data) < size:
            raise MsiError("a stream shorter than its directory entry says")
        found.append((size, data[:size]))
    return found
