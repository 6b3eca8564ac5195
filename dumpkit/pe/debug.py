"""The debug directory: the CodeView record ("RSDS": PDB GUID, age and path) that ties an
image to its PDB and that symbol servers index."""

from __future__ import annotations

import struct
from typing import Callable, Optional

from dumpkit.pe.headers import DataDirectory
from dumpkit.pe.winnt import CV_INFO_PDB70_HEADER_SIZE, IMAGE_DEBUG_DIRECTORY, IMAGE_DEBUG_TYPE_CODEVIEW
from dumpkit.target import CodeViewRecord, format_guid

__all__ = ["codeview_record", "format_guid", "MAX_DEBUG_ENTRIES", "MAX_PDB_NAME"]

MAX_DEBUG_ENTRIES = 64
MAX_PDB_NAME = 1024


def codeview_record(
    directory: Optional[DataDirectory],
    read_rva: Callable[[int, int], bytes],
    read_file: Optional[Callable[[int, int], bytes]],
) -> Optional[CodeViewRecord]:
    """The first RSDS record the debug directory points at, or None. The record is read at
    its RVA when it is mapped, else at its file offset when the image is a file."""
    if directory is None:
        return None
    entry = IMAGE_DEBUG_DIRECTORY.size
    n = min(directory.size // entry, MAX_DEBUG_ENTRIES)
    raw = read_rva(directory.rva, entry * n)
    for i in range(n):
        (_, _, _, _, dtype, size, addr, ptr) = IMAGE_DEBUG_DIRECTORY.unpack_from(raw, entry * i)
        if dtype != IMAGE_DEBUG_TYPE_CODEVIEW or size < CV_INFO_PDB70_HEADER_SIZE:
            continue
        size = min(size, CV_INFO_PDB70_HEADER_SIZE + MAX_PDB_NAME)
        if addr:
            data = read_rva(addr, size)
        elif ptr and read_file is not None:
            data = read_file(ptr, size)
        else:
            continue
        if data[:4] != b"RSDS":
            continue
        guid = format_guid(data[4:20])
        age = struct.unpack_from("<I", data, 20)[0]
        name = data[24:].split(b"\0", 1)[0].decode("utf-8", "replace")
        return CodeViewRecord(pdb_name=name, guid=guid, age=age)
    return None
