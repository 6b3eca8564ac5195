"""A minimal Windows Installer-shaped file for tests: a Compound File Binary ([MS-CFB],
version 3, 512-byte sectors) whose one stream is a cabinet, stored uncompressed, holding the
files given; the shape of python.org's PDB packages (core_pdb.msi: an embedded cabinet),
made here because no Linux tool at hand writes one."""

from __future__ import annotations

import struct
from typing import Dict, List

_SECTOR = 512
_END, _FREE, _FATSECT = 0xFFFFFFFE, 0xFFFFFFFF, 0xFFFFFFFD
_BLOCK = 0x8000  # a cabinet's data blocks hold at most 32 KiB


def stored_cabinet(files: Dict[str, bytes]) -> bytes:
    """A one-folder cabinet (format 1.3, no compression) holding `files`."""
    names = list(files)
    payload = b"".join(files[n] for n in names)
    blocks = [payload[i : i + _BLOCK] for i in range(0, len(payload), _BLOCK)] or [b""]
    entries = b""
    offset = 0
    for n in names:
        entries += struct.pack("<IIHHHH", len(files[n]), offset, 0, 0, 0, 0x20) + n.encode() + b"\0"
        offset += len(files[n])
    files_at = 36 + 8
    data_at = files_at + len(entries)
    data = b"".join(struct.pack("<IHH", 0, len(b), len(b)) + b for b in blocks)
    total = data_at + len(data)
    header = struct.pack("<4sIIIIIBBHHHHH", b"MSCF", 0, total, 0, files_at, 0, 3, 1, 1, len(names), 0, 0, 0)
    folder = struct.pack("<IHH", data_at, len(blocks), 0)
    return header + folder + entries + data


def compound_file(stream: bytes, name: str = "cab1.cab") -> bytes:
    """A CFB file whose root holds one stream, `stream`, in regular sectors."""
    n_data = -(-len(stream) // _SECTOR)
    n_fat = 1
    while n_fat * (_SECTOR // 4) < n_fat + 1 + n_data:
        n_fat += 1
    assert n_fat <= 109, "the test stream is too large for a header-only DIFAT"
    fat: List[int] = [_FATSECT] * n_fat + [_END]  # FAT sectors, then the directory sector
    first_data = n_fat + 1
    fat += [first_data + i + 1 for i in range(n_data - 1)] + [_END]
    fat += [_FREE] * (n_fat * (_SECTOR // 4) - len(fat))
    difat = list(range(n_fat)) + [_FREE] * (109 - n_fat)
    header = (
        b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
        + bytes(16)
        + struct.pack("<HHHHH", 0x3E, 3, 0xFFFE, 9, 6)
        + bytes(6)
        + struct.pack("<IIIIIIIII", 0, n_fat, n_fat, 0, 4096, _END, 0, _END, 0)
        + struct.pack("<109I", *difat)
    )

    def entry(label: str, kind: int, child: int, start: int, size: int) -> bytes:
        raw = label.encode("utf-16-le") + b"\0\0"
        return (
            raw.ljust(64, b"\0")
            + struct.pack("<HBBIII", len(raw), kind, 1, _FREE, _FREE, child)
            + bytes(16 + 4 + 16)
            + struct.pack("<IQ", start, size)
        )

    directory = entry("Root Entry", 5, 1, _END, 0) + entry(name, 2, _FREE, first_data, len(stream))
    directory = directory.ljust(_SECTOR, b"\0")
    fat_bytes = struct.pack(f"<{len(fat)}I", *fat)
    body = stream.ljust(n_data * _SECTOR, b"\0")
    return header + fat_bytes + directory + body
