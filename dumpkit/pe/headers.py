"""The headers of a PE image: DOS stub pointer, file header, optional header (PE32+ and
PE32), data directories and the section table. Read once, up front, through a reader of
header bytes (file offsets and RVAs coincide inside the headers)."""

from __future__ import annotations

import struct
from typing import Callable, Tuple

from dumpkit.pe.errors import PEError
from dumpkit.pe.winnt import (
    E_LFANEW_OFFSET,
    IMAGE_DATA_DIRECTORY,
    IMAGE_DOS_HEADER_SIZE,
    IMAGE_FILE_HEADER,
    IMAGE_NT_OPTIONAL_HDR32_MAGIC,
    IMAGE_NT_OPTIONAL_HDR64_MAGIC,
    IMAGE_NUMBEROF_DIRECTORY_ENTRIES,
    IMAGE_SCN_CNT_CODE,
    IMAGE_SCN_MEM_EXECUTE,
    IMAGE_SECTION_HEADER,
    NT_SIGNATURE_AND_FILE_HEADER_SIZE,
)
from dumpkit.records import record

__all__ = ["DataDirectory", "Headers", "Section", "parse_headers", "MAX_SECTIONS", "MAX_HEADER_OFFSET"]

MAX_SECTIONS = 1024  # the loader's limit is 96; be generous but finite
MAX_HEADER_OFFSET = 0x10000000  # e_lfanew


@record
class Section:
    name: str
    rva: int
    virtual_size: int
    raw_offset: int
    raw_size: int
    characteristics: int

    @property
    def mapped_size(self) -> int:
        """Bytes the loader maps for this section (before section alignment)."""
        return self.virtual_size if self.virtual_size else self.raw_size

    @property
    def end_rva(self) -> int:
        return self.rva + self.mapped_size

    @property
    def is_executable(self) -> bool:
        return bool(self.characteristics & (IMAGE_SCN_MEM_EXECUTE | IMAGE_SCN_CNT_CODE))

    def contains_rva(self, rva: int) -> bool:
        return self.rva <= rva < self.end_rva


@record
class DataDirectory:
    rva: int
    size: int


@record
class Headers:
    """Every header field dumpkit uses. `sections` is in file order (COFF section numbers
    index it) with names as written (a long name stays "/N")."""

    machine: int
    timestamp: int
    symbol_table_offset: int  # PointerToSymbolTable (0: none)
    symbol_count: int
    characteristics: int
    is_pe32plus: bool
    entry_point_rva: int
    image_base: int
    section_alignment: int
    file_alignment: int
    size_of_image: int
    size_of_headers: int
    checksum: int
    subsystem: int
    dll_characteristics: int
    size_of_stack_reserve: int
    size_of_stack_commit: int
    data_directories: Tuple[DataDirectory, ...]
    sections: Tuple[Section, ...]
    # (MajorLinkerVersion, MinorLinkerVersion): MSVC writes its toolset's, 14.40 for Visual
    # Studio 2022 17.10; GNU ld writes binutils' (2.x)
    linker_version: Tuple[int, int] = (0, 0)


def _u16(b: bytes, off: int) -> int:
    return struct.unpack_from("<H", b, off)[0]


def _u32(b: bytes, off: int) -> int:
    return struct.unpack_from("<I", b, off)[0]


def _u64(b: bytes, off: int) -> int:
    return struct.unpack_from("<Q", b, off)[0]


def parse_headers(rd: Callable[[int, int], bytes]) -> Headers:
    """The headers read through `rd(offset, size)`; PEError when they are not a PE image's."""
    dos = rd(0, IMAGE_DOS_HEADER_SIZE)
    if dos[:2] != b"MZ":
        raise PEError("not a PE image (no MZ signature)")
    e_lfanew = _u32(dos, E_LFANEW_OFFSET)
    if e_lfanew < 4 or e_lfanew > MAX_HEADER_OFFSET:
        raise PEError(f"bad e_lfanew {e_lfanew:#x}")
    nt = rd(e_lfanew, NT_SIGNATURE_AND_FILE_HEADER_SIZE)
    if nt[:4] != b"PE\0\0":
        raise PEError("not a PE image (no PE signature)")
    machine, nsections, timestamp, symtab_ptr, nsymbols, opt_size, characteristics = IMAGE_FILE_HEADER.unpack_from(
        nt, 4
    )
    if nsections > MAX_SECTIONS:
        raise PEError(f"implausible section count {nsections}")
    if opt_size < 2:
        raise PEError("no optional header")
    opt = rd(e_lfanew + NT_SIGNATURE_AND_FILE_HEADER_SIZE, opt_size)
    magic = _u16(opt, 0)
    if magic == IMAGE_NT_OPTIONAL_HDR64_MAGIC:
        is_pe32plus, need = True, 112
    elif magic == IMAGE_NT_OPTIONAL_HDR32_MAGIC:
        is_pe32plus, need = False, 96
    else:
        raise PEError(f"bad optional header magic {magic:#x}")
    if opt_size < need:
        raise PEError(f"optional header too small ({opt_size} bytes)")
    if is_pe32plus:
        image_base, stack_reserve, stack_commit = _u64(opt, 24), _u64(opt, 72), _u64(opt, 80)
        ndirs, dir_off = _u32(opt, 108), 112
    else:
        image_base, stack_reserve, stack_commit = _u32(opt, 28), _u32(opt, 72), _u32(opt, 76)
        ndirs, dir_off = _u32(opt, 92), 96
    ndirs = min(ndirs, IMAGE_NUMBEROF_DIRECTORY_ENTRIES, (opt_size - dir_off) // IMAGE_DATA_DIRECTORY.size)
    directories = tuple(
        DataDirectory(*IMAGE_DATA_DIRECTORY.unpack_from(opt, dir_off + IMAGE_DATA_DIRECTORY.size * i))
        for i in range(ndirs)
    )
    size_of_image = _u32(opt, 56)
    if size_of_image == 0:
        raise PEError("SizeOfImage is 0")

    sec_off = e_lfanew + NT_SIGNATURE_AND_FILE_HEADER_SIZE + opt_size
    entry = IMAGE_SECTION_HEADER.size
    raw = rd(sec_off, entry * nsections) if nsections else b""
    sections = []
    for i in range(nsections):
        name_b, vsize, vaddr, rsize, roff, _, _, _, _, chars = IMAGE_SECTION_HEADER.unpack_from(raw, entry * i)
        name = name_b.split(b"\0", 1)[0].decode("latin-1")
        sections.append(Section(name, vaddr, vsize, roff, rsize, chars))
    return Headers(
        machine=machine,
        timestamp=timestamp,
        symbol_table_offset=symtab_ptr,
        symbol_count=nsymbols,
        characteristics=characteristics,
        is_pe32plus=is_pe32plus,
        entry_point_rva=_u32(opt, 16),
        image_base=image_base,
        section_alignment=_u32(opt, 32),
        file_alignment=_u32(opt, 36),
        size_of_image=size_of_image,
        size_of_headers=_u32(opt, 60),
        checksum=_u32(opt, 64),
        subsystem=_u16(opt, 68),
        dll_characteristics=_u16(opt, 70),
        size_of_stack_reserve=stack_reserve,
        size_of_stack_commit=stack_commit,
        data_directories=directories,
        sections=tuple(sections),
        linker_version=(opt[2], opt[3]),
    )
