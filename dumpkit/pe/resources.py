"""The resource directory, as far as dumpkit needs it: the RT_VERSION resource (first name,
first language) and the VS_VERSIONINFO blob inside it, whose fixed file info and
StringFileInfo strings say which build of CUDA, cuDNN, Python or TensorFlow a DLL is.
Walked iteratively with bounded counts (the blob nests four levels: root, StringFileInfo,
string table, string)."""

from __future__ import annotations

import struct
from typing import Callable, Dict, List, Optional, Tuple

from dumpkit.pe.errors import PEError
from dumpkit.pe.headers import DataDirectory
from dumpkit.pe.winnt import (
    IMAGE_RESOURCE_DATA_ENTRY,
    IMAGE_RESOURCE_DIRECTORY,
    IMAGE_RESOURCE_DIRECTORY_ENTRY,
    RT_VERSION,
    VS_BLOCK_HEADER,
    VS_FFI_SIGNATURE,
    VS_FIXEDFILEINFO,
)
from dumpkit.records import field, record

__all__ = [
    "VersionInfo",
    "parse_vs_versioninfo",
    "version_resource",
    "MAX_RESOURCE_ENTRIES",
    "MAX_VERSION_RESOURCE",
    "MAX_VERSION_BLOCKS",
    "MAX_VERSION_STRING",
]

MAX_RESOURCE_ENTRIES = 4096  # per resource directory
MAX_VERSION_RESOURCE = 1 << 20
MAX_VERSION_BLOCKS = 4096
MAX_VERSION_STRING = 4096  # UTF-16 code units
MAX_VERSION_KEY = 256  # UTF-16 code units


@record
class VersionInfo:
    file_version: Optional[str]  # from VS_FIXEDFILEINFO, "a.b.c.d"
    product_version: Optional[str]
    strings: Dict[str, str] = field(default_factory=dict)
    file_flags: int = 0
    file_os: int = 0
    file_type: int = 0


# ----------------------------------------------------------------------------- resource directory
def _directory_entries(read_rva: Callable[[int, int], bytes], dir_rva: int) -> List[Tuple[int, int, bool]]:
    """(name-or-id, offset from the resource root, is_directory) of one directory.
    Named entries carry name = -1."""
    hdr = read_rva(dir_rva, IMAGE_RESOURCE_DIRECTORY.size)
    nnamed, nids = IMAGE_RESOURCE_DIRECTORY.unpack_from(hdr, 0)[4:]
    n = min(nnamed + nids, MAX_RESOURCE_ENTRIES)
    entry = IMAGE_RESOURCE_DIRECTORY_ENTRY.size
    raw = read_rva(dir_rva + IMAGE_RESOURCE_DIRECTORY.size, entry * n) if n else b""
    out = []
    for i in range(n):
        name, off = IMAGE_RESOURCE_DIRECTORY_ENTRY.unpack_from(raw, entry * i)
        ident = -1 if name & 0x80000000 else name
        out.append((ident, off & 0x7FFFFFFF, bool(off & 0x80000000)))
    return out


def version_resource(
    directory: Optional[DataDirectory], read_rva: Callable[[int, int], bytes]
) -> Optional[VersionInfo]:
    """The RT_VERSION resource (first name, first language) decoded, or None when there is
    none. PEError / MemoryNotInDump / struct.error when it cannot be read."""
    if directory is None:
        return None
    root = directory.rva
    # level 1: type == RT_VERSION
    node = None
    for ident, off, is_dir in _directory_entries(read_rva, root):
        if ident == RT_VERSION and is_dir:
            node = off
            break
    if node is None:
        return None
    # level 2 (name) must be a subdirectory, level 3 (language) a data entry: take the first
    for want_dir in (True, False):
        ents = _directory_entries(read_rva, root + node)
        if not ents:
            return None
        _, off, is_dir = ents[0]
        if is_dir != want_dir:
            return None
        node = off
    data_rva, size = IMAGE_RESOURCE_DATA_ENTRY.unpack_from(read_rva(root + node, IMAGE_RESOURCE_DATA_ENTRY.size), 0)
    if size < 6:
        return None
    size = min(size, MAX_VERSION_RESOURCE)
    return parse_vs_versioninfo(read_rva(data_rva, size))


# ----------------------------------------------------------------------------- VS_VERSIONINFO
class _EndOfBlocks(Exception):
    """A zero-length (padding) block: no more siblings."""


def _align4(value: int) -> int:
    return (value + 3) & ~3


def _version_str(ms: int, ls: int) -> str:
    return f"{ms >> 16}.{ms & 0xFFFF}.{ls >> 16}.{ls & 0xFFFF}"


def _vs_block(buf: bytes, off: int, end: int) -> Tuple[str, int, int, int, int, int]:
    """One VERSIONINFO block header at `off` (inside [off, end)):
    (key, wValueLength, wType, value_offset, block_end, wLength). Key decoding is bounded."""
    if off + VS_BLOCK_HEADER.size > end:
        raise PEError("version block truncated")
    wlen, wvlen, wtype = VS_BLOCK_HEADER.unpack_from(buf, off)
    if wlen < VS_BLOCK_HEADER.size:
        raise _EndOfBlocks()
    block_end = min(off + wlen, end)
    p = off + VS_BLOCK_HEADER.size
    chars: List[int] = []
    while p + 2 <= block_end and len(chars) < MAX_VERSION_KEY:
        c = struct.unpack_from("<H", buf, p)[0]
        p += 2
        if c == 0:
            break
        chars.append(c)
    key = struct.pack(f"<{len(chars)}H", *chars).decode("utf-16-le", "replace")
    return key, wvlen, wtype, _align4(p), block_end, wlen


def _utf16z(buf: bytes, start: int, end: int, limit: int = MAX_VERSION_STRING) -> str:
    end = min(end, start + 2 * limit)
    raw = buf[start:end]
    for k in range(0, len(raw) - 1, 2):
        if raw[k] == 0 and raw[k + 1] == 0:
            raw = raw[:k]
            break
    else:
        raw = raw[: len(raw) & ~1]
    return raw.decode("utf-16-le", "replace")


def parse_vs_versioninfo(buf: bytes) -> Optional[VersionInfo]:
    """Parse a VS_VERSIONINFO blob: the fixed info and every StringFileInfo string.
    Iterative (the format nests four levels deep: root, StringFileInfo, table, string)."""
    try:
        key, wvlen, _, value_off, root_end, _ = _vs_block(buf, 0, len(buf))
    except _EndOfBlocks:
        raise PEError("empty version resource") from None
    if key != "VS_VERSION_INFO":
        raise PEError(f"version resource key is {key!r}")
    file_version = product_version = None
    flags = fos = ftype = 0
    if wvlen >= VS_FIXEDFILEINFO.size and value_off + VS_FIXEDFILEINFO.size <= root_end:
        fixed = VS_FIXEDFILEINFO.unpack_from(buf, value_off)
        if fixed[0] == VS_FFI_SIGNATURE:
            file_version = _version_str(fixed[2], fixed[3])
            product_version = _version_str(fixed[4], fixed[5])
            flags, fos, ftype = fixed[7] & fixed[6], fixed[8], fixed[9]
    strings: Dict[str, str] = {}
    try:
        _walk_string_file_info(buf, _align4(value_off + wvlen), root_end, strings)
    except _EndOfBlocks:
        pass
    return VersionInfo(file_version, product_version, strings, flags, fos, ftype)


def _walk_string_file_info(buf: bytes, child: int, root_end: int, strings: Dict[str, str]) -> None:
    budget = MAX_VERSION_BLOCKS
    while child + 6 <= root_end and budget > 0:
        budget -= 1
        ckey, cvlen, _, cval, cend, clen = _vs_block(buf, child, root_end)
        if ckey == "StringFileInfo":
            table = _align4(cval + cvlen)
            while table + 6 <= cend and budget > 0:
                budget -= 1
                _, tvlen, _, tval, tend, tlen = _vs_block(buf, table, cend)
                s = _align4(tval + tvlen)
                while s + 6 <= tend and budget > 0:
                    budget -= 1
                    skey, _, _, sval, send, slen = _vs_block(buf, s, tend)
                    # wValueLength counts WCHARs by the spec but bytes for some tools:
                    # read to the block's end and stop at the NUL instead.
                    if skey and skey not in strings:
                        strings[skey] = _utf16z(buf, sval, send)
                    s = _align4(s + slen)
                table = _align4(table + tlen)
        child = _align4(child + clen)
