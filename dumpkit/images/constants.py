"""Memory a dump leaves out but an image file holds: the read-only sections of a loaded
module (.rdata, .text). A MiniDumpNormal keeps the heap objects a thread points to but not
always the strings their types name (tp_name lives in python3X.dll's .rdata); those bytes
are the same in every process that loaded the image, so the file stands in for them.
Writable sections are never read from the file: their contents belong to the process."""

from __future__ import annotations

from typing import Callable

from dumpkit.images.provider import ImageProvider
from dumpkit.pe.errors import PEError
from dumpkit.target import MemoryNotInDump, Target

IMAGE_SCN_MEM_WRITE = 0x80000000

Read = Callable[[int, int], bytes]


def with_constants(target: Target, images: ImageProvider) -> Read:
    """A reader that returns what the dump holds, else the bytes of a read-only section of
    the image mapped there, else what it has (possibly b"")."""

    def read(address: int, size: int) -> bytes:
        data = target.read_available(address, size)
        if len(data) == size:
            return data
        module = target.module_at(address)
        if module is None or address + size > module.base + module.size:
            return data
        image = images.image(module)
        if image is None:
            return data
        rva = address - module.base
        section = image.section_for_rva(rva)
        if section is None or section.characteristics & IMAGE_SCN_MEM_WRITE or rva + size > section.end_rva:
            return data
        try:
            return image.read_rva(rva, size)
        except (PEError, MemoryNotInDump):
            return data

    return read
