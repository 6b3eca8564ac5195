"""Microsoft cabinets (MSCF), the container of a symbol store's compressed files: `symstore
/compress` and Microsoft's symbol server keep `ntdll.dll` as `ntdll.dl_`, a cabinet holding
the one file. Read here: the header, folders and files of a single cabinet; data stored,
MSZIP (raw deflate per 32 KiB block, each block's dictionary the output before it) or LZX
(dumpkit.symbols.lzx). Quantum and cabinet sets spanning several files are refused by name.

Everything is read from a file object with explicit bounds: counts come from 16-bit
fields, and the output is capped by the caller's limit before it is produced.
"""

from __future__ import annotations

import struct
import zlib
from typing import BinaryIO, Iterator, List, Optional, Tuple

from dumpkit.symbols.lzx import FRAME, LzxError, lzx_frames
from dumpkit.records import record

__all__ = ["Cabinet", "CabinetError", "CabinetFolder", "CabinetMember", "is_cabinet"]

SIGNATURE = b"MSCF"
_HEADER = struct.Struct("<4sIIIIIBBHHHHH")
_FOLDER = struct.Struct("<IHH")
_FILE = struct.Struct("<IIHHHH")
_DATA = struct.Struct("<IHH")
_PREV_CABINET, _NEXT_CABINET, _RESERVE_PRESENT = 1, 2, 4
_NAME_IS_UTF8 = 0x80
_MAX_NAME = 256
STORED, MSZIP, QUANTUM, LZX = 0, 1, 2, 3
_METHODS = {STORED: "stored", MSZIP: "MSZIP", QUANTUM: "Quantum", LZX: "LZX"}


class CabinetError(ValueError):
    """A cabinet that cannot be read: the message is one line saying what is wrong."""


@record
class CabinetFolder:
    """A run of data blocks compressed as one stream."""

    data_offset: int  # file offset of its first CFDATA
    blocks: int
    method: int  # STORED, MSZIP, QUANTUM or LZX
    window_bits: int  # LZX's window, 15..21; 0 otherwise

    @property
    def method_name(self) -> str:
        return _METHODS.get(self.method, f"method {self.method}")


@record
class CabinetMember:
    """A file in the cabinet: `size` bytes from `offset` in its folder's output."""

    name: str
    size: int
    folder: int
    offset: int


def is_cabinet(head: bytes) -> bool:
    return head[:4] == SIGNATURE


def _checksum(data: bytes, seed: int) -> int:
    """The cabinet checksum: 32-bit little-endian words XORed, the 1-3 trailing bytes
    taken most significant first."""
    whole = len(data) & ~3
    csum = seed
    for (word,) in struct.iter_unpack("<I", data[:whole]):
        csum ^= word
    tail = 0
    for b in data[whole:]:
        tail = tail << 8 | b
    return csum ^ tail


class Cabinet:
    """One cabinet file, opened for reading its members."""

    def __init__(self, fh: BinaryIO, size: int, name: str):
        self._fh = fh
        self.size = size
        self.name = name
        head = self._read(0, _HEADER.size, "header")
        sig, _, total, _, files_at, _, minor, major, nfolders, nfiles, flags, _, _ = _HEADER.unpack(head)
        if sig != SIGNATURE:
            raise CabinetError(f"{name}: not a cabinet (no MSCF signature)")
        if (major, minor) != (1, 3):
            raise CabinetError(f"{name}: cabinet format {major}.{minor}, dumpkit reads 1.3")
        if flags & (_PREV_CABINET | _NEXT_CABINET):
            raise CabinetError(f"{name}: part of a cabinet set spanning several files, which dumpkit does not read")
        if total > size:
            raise CabinetError(f"{name}: cabinet says it is {total} bytes, the file has {size} (truncated)")
        at = _HEADER.size
        folder_reserve = self._data_reserve = 0
        if flags & _RESERVE_PRESENT:
            header_reserve, folder_reserve, self._data_reserve = struct.unpack("<HBB", self._read(at, 4, "header"))
            at += 4 + header_reserve
        folders: List[CabinetFolder] = []
        for i in range(nfolders):
            offset, blocks, kind = _FOLDER.unpack(self._read(at, _FOLDER.size, f"folder {i}"))
            at += _FOLDER.size + folder_reserve
            method = kind & 0xF
            window = (kind >> 8) & 0x1F if method == LZX else 0
            folders.append(CabinetFolder(offset, blocks, method, window))
        self.folders = tuple(folders)
        members: List[CabinetMember] = []
        at = files_at
        for i in range(nfiles):
            fsize, foffset, folder, _, _, attribs = _FILE.unpack(self._read(at, _FILE.size, f"file {i}"))
            raw = self._read(at + _FILE.size, min(_MAX_NAME + 1, size - at - _FILE.size), f"file {i}'s name")
            end = raw.find(b"\0")
            if end < 0:
                raise CabinetError(f"{name}: file {i}'s name is not terminated within {_MAX_NAME} bytes")
            at += _FILE.size + end + 1
            if folder >= len(folders):
                raise CabinetError(f"{name}: file {i} is in folder {folder}, the cabinet has {len(folders)}")
            text = raw[:end].decode("utf-8" if attribs & _NAME_IS_UTF8 else "latin-1", "replace")
            members.append(CabinetMember(text, fsize, folder, foffset))
        self.members = tuple(members)

    def _read(self, offset: int, size: int, what: str) -> bytes:
        if size < 0 or offset + size > self.size:
            raise CabinetError(f"{self.name}: the file ends inside the cabinet's {what}")
        self._fh.seek(offset)
        data = self._fh.read(size)
        if len(data) != size:
            raise CabinetError(f"{self.name}: the file ends inside the cabinet's {what}")
        return data

    def member(self, wanted: str) -> CabinetMember:
        """The member named `wanted` (ignoring case), else the only member there is."""
        for m in self.members:
            if m.name.lower() == wanted.lower():
                return m
        if len(self.members) == 1:
            return self.members[0]
        names = ", ".join(m.name for m in self.members[:5]) or "no files"
        raise CabinetError(f"{self.name}: holds {names}, not {wanted}")

    def _blocks(self, folder: CabinetFolder) -> Iterator[Tuple[bytes, int]]:
        """A folder's data blocks as (compressed bytes, uncompressed size), checksums checked."""
        at = folder.data_offset
        for i in range(folder.blocks):
            csum, packed, unpacked = _DATA.unpack(self._read(at, _DATA.size, f"data block {i}"))
            at += _DATA.size + self._data_reserve
            data = self._read(at, packed, f"data block {i}")
            at += packed
            if csum and _checksum(_DATA.pack(0, packed, unpacked)[4:], _checksum(data, 0)) != csum:
                raise CabinetError(f"{self.name}: data block {i} fails its checksum (damaged or truncated)")
            yield data, unpacked

    def _output(self, folder: CabinetFolder) -> Iterator[bytes]:
        blocks = self._blocks(folder)
        if folder.method == STORED:
            for i, (data, unpacked) in enumerate(blocks):
                if len(data) != unpacked:
                    raise CabinetError(f"{self.name}: stored block {i} holds {len(data)} bytes, says {unpacked}")
                yield data
        elif folder.method == MSZIP:
            yield from self._mszip(blocks)
        elif folder.method == LZX:
            try:
                yield from lzx_frames(blocks, folder.window_bits)
            except LzxError as e:
                raise CabinetError(f"{self.name}: LZX data does not decode ({e})") from None
        else:
            raise CabinetError(f"{self.name}: compressed with {folder.method_name}, which dumpkit does not read")

    def _mszip(self, blocks: Iterator[Tuple[bytes, int]]) -> Iterator[bytes]:
        history = b""
        for i, (data, unpacked) in enumerate(blocks):
            if data[:2] != b"CK":
                raise CabinetError(f"{self.name}: MSZIP block {i} lacks its 'CK' signature")
            if unpacked > FRAME:
                raise CabinetError(f"{self.name}: MSZIP block {i} says it holds {unpacked} bytes (at most {FRAME})")
            inflate = zlib.decompressobj(-15, zdict=history) if history else zlib.decompressobj(-15)
            try:
                out = inflate.decompress(data[2:], unpacked + 1)
            except zlib.error as e:
                raise CabinetError(f"{self.name}: MSZIP block {i} does not inflate ({e})") from None
            if len(out) != unpacked:
                raise CabinetError(f"{self.name}: MSZIP block {i} inflates to {len(out)} bytes, says {unpacked}")
            history = (history + out)[-FRAME:]
            yield out

    def extract(self, member: CabinetMember, out: BinaryIO, limit: int) -> int:
        """Write `member` to `out`; CabinetError when it is larger than `limit` bytes or
        does not decode. Returns the bytes written."""
        end = member.offset + member.size
        if end > limit:
            raise CabinetError(f"{self.name}: {member.name} is {member.size} bytes, more than the limit of {limit}")
        pos = 0
        written = 0
        for chunk in self._output(self.folders[member.folder]):
            lo, hi = max(member.offset - pos, 0), min(end - pos, len(chunk))
            if lo < hi:
                out.write(chunk[lo:hi])
                written += hi - lo
            pos += len(chunk)
            if pos >= end:
                break
        if written != member.size:
            raise CabinetError(f"{self.name}: its data ends {member.size - written} bytes short of {member.name}")
        return written


def open_cabinet(fh: BinaryIO, size: int, name: str) -> Optional[Cabinet]:
    """The cabinet in `fh`, or None when it does not start with the MSCF signature."""
    fh.seek(0)
    if not is_cabinet(fh.read(4)):
        return None
    return Cabinet(fh, size, name)
