"""Whether a file found where the module is published is the module's own build, judged
from its PE headers before the file is taken: what the dump records of the module
(TimeDateStamp and SizeOfImage; where TimeDateStamp is 0, as reproducible builds leave it,
SizeOfImage, the PE CheckSum and the CodeView GUID and age where the dump has them), and the
PE header bytes the dump's memory holds, which a different build cannot share."""

from __future__ import annotations

from typing import Callable, Optional

from dumpkit.pe import PEError, PEImage
from dumpkit.target import MemoryNotInDump, Module

HEADER_BYTES = 4096  # the first page: PE headers and section table, as mapped and as on disk
MAX_PREFIX = 64 << 20  # inflated bytes held to reach a CodeView record (TimeDateStamp 0)


class MemberPrefix:
    """A Backing over the first bytes of an archive member, inflated as far as reads reach
    (and no further than MAX_PREFIX): enough to read headers and the debug directory."""

    lazy = True

    def __init__(self, inflate: Callable[[int], bytes], size: int, name: str):
        self._inflate = inflate  # inflate(n): the member's first n bytes
        self._size = size
        self._name = name
        self._data = b""

    @property
    def size(self) -> int:
        return self._size

    def read(self, offset: int, size: int) -> bytes:
        end = offset + size
        if offset < 0 or size < 0 or end > self._size:
            raise PEError(f"file offset {offset:#x} (+{size:#x}) is past the end of the file")
        if end > len(self._data):
            if end > MAX_PREFIX:
                raise PEError(f"{self._name}: reading past {MAX_PREFIX:,} bytes to check it; refused")
            self._data = self._inflate(max(end, min(self._size, 2 * len(self._data), MAX_PREFIX), HEADER_BYTES))
            if end > len(self._data):
                raise PEError(f"{self._name}: member ends early")
        return self._data[offset:end]

    def close(self) -> None:
        self._data = b""


def mismatch(image: PEImage, module: Module, dump_header: Optional[bytes]) -> Optional[str]:
    """None when `image` (headers read) is the module's build, else why not (one line)."""
    if image.size_of_image != module.size:
        return f"another build (SizeOfImage {image.size_of_image:#x}, the dump has {module.size:#x})"
    if module.timestamp:
        if image.timestamp != module.timestamp:
            return f"another build (TimeDateStamp {image.timestamp:#010x}, the dump has {module.timestamp:#010x})"
    else:
        if module.checksum and image.checksum != module.checksum:
            return f"another build (CheckSum {image.checksum:#x}, the dump has {module.checksum:#x})"
        if module.cv_record is not None:
            try:
                cv = image.codeview()
            except (PEError, MemoryNotInDump):
                cv = None
            if cv is None or cv.symbol_id != module.cv_record.symbol_id:
                got = cv.symbol_id if cv is not None else "none"
                return f"another build (CodeView {got}, the dump has {module.cv_record.symbol_id})"
        elif dump_header is None:
            if module.checksum:
                return None  # SizeOfImage and a CheckSum over the whole file: another build has not both
            # SizeOfImage (and a CheckSum of 0) alone cannot tell two reproducible builds apart
            return (
                "not identifiable: TimeDateStamp and CheckSum 0, and the dump holds neither its CodeView "
                "record nor its headers"
            )
        else:
            n = min(len(dump_header), image.size_of_headers, HEADER_BYTES)
            try:
                mine = image.read_file_offset(0, n)
            except PEError as e:
                return f"unreadable headers ({e})"
            if _unrelocated(mine) != _unrelocated(dump_header[:n]):
                return "another build (its PE headers differ from the ones in the dump's memory)"
    return None


def _unrelocated(header: bytes) -> bytes:
    """The header bytes with ImageBase zeroed: the loader may write the base it chose there."""
    if len(header) < 0x40:
        return header
    opt = int.from_bytes(header[0x3C:0x40], "little") + 24
    if opt + 32 > len(header):
        return header
    at, width = (opt + 24, 8) if header[opt : opt + 2] == b"\x0b\x02" else (opt + 28, 4)
    return header[:at] + bytes(width) + header[at + width :]


def dump_header(read_va: Optional[Callable[[int, int], bytes]], module: Module) -> Optional[bytes]:
    """The module's first page as the dump's memory holds it (None when it does not)."""
    if read_va is None:
        return None
    try:
        data = read_va(module.base, HEADER_BYTES)
    except (MemoryNotInDump, PEError, ValueError):
        return None
    return data if len(data) == HEADER_BYTES and data[:2] == b"MZ" else None
