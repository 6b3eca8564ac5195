"""The COFF symbol table and its string table, found through the file header (files only:
the loader does not map them). MSVC images carry none (names live in the PDB), but mingw-w64
keeps the table unless stripped, and it names static functions the export table cannot
(libgcc's ___chkstk_ms, a host exe's internals). Its string table also holds the long
section names mingw writes as "/N"."""

from __future__ import annotations

import struct
from typing import List, Optional, Sequence, Tuple

from dumpkit.pe.backing import Backing
from dumpkit.pe.errors import PEError
from dumpkit.pe.headers import Section
from dumpkit.pe.winnt import IMAGE_SYM_CLASS_EXTERNAL, IMAGE_SYM_CLASS_STATIC, IMAGE_SYM_DTYPE_FUNCTION, IMAGE_SYMBOL

__all__ = ["function_symbols", "long_section_name", "MAX_COFF_SYMBOLS", "MAX_COFF_STRINGS", "MAX_SYMBOL_NAME"]

MAX_COFF_SYMBOLS = 1 << 21
MAX_COFF_STRINGS = 64 << 20
MAX_SYMBOL_NAME = 1024
MAX_SECTION_NAME = 256


def long_section_name(file: Backing, symtab_ptr: int, nsymbols: int, s: Section) -> Section:
    """`s` with its real name when it is "/N": offset N in the COFF string table."""
    if not (s.name.startswith("/") and s.name[1:].isdigit()) or not symtab_ptr:
        return s
    try:
        start = symtab_ptr + IMAGE_SYMBOL.size * nsymbols + int(s.name[1:])
        limit = min(MAX_SECTION_NAME, file.size - start)
        if limit <= 0:
            return s
        holds = getattr(file, "holds", None)  # a bundle: only what the image it was made from read
        if holds is not None and not holds(start, limit):
            return s
        name = file.read(start, limit).split(b"\0", 1)[0].decode("utf-8", "replace")
        if name:
            return Section(name, s.rva, s.virtual_size, s.raw_offset, s.raw_size, s.characteristics)
    except PEError:
        pass
    return s


def function_symbols(
    file: Backing, symtab_ptr: int, nsymbols: int, file_order_sections: Sequence[Section], problems: List[str]
) -> List[Tuple[int, str]]:
    """(rva, name) of the function symbols, sorted. Functions: DT_FUNCTION (high nibble of
    Type) with external or static storage; assembly labels have no type, so external
    symbols in a code section count too. Raises PEError when the table cannot be read."""
    if not symtab_ptr or not nsymbols:
        return []
    entry = IMAGE_SYMBOL.size
    count = min(nsymbols, MAX_COFF_SYMBOLS)
    if count < nsymbols:
        problems.append(f"COFF symbol table claims {nsymbols} symbols; reading {count}")
    table = file.read(symtab_ptr, entry * count)
    count = len(table) // entry
    strtab_at = symtab_ptr + entry * nsymbols
    strsize_raw = file.read(strtab_at, 4)
    strsize = struct.unpack("<I", strsize_raw)[0] if len(strsize_raw) == 4 else 0
    strtab = file.read(strtab_at, min(strsize, MAX_COFF_STRINGS)) if strsize > 4 else b""
    # COFF section number (1-based, file order) -> RVA, for code sections only
    code_rva = {i + 1: sec.rva for i, sec in enumerate(file_order_sections) if sec.is_executable}
    out: List[Tuple[int, str]] = []
    i = 0
    while i < count:
        name_raw, value, secnum, typ, storage, naux = IMAGE_SYMBOL.unpack_from(table, entry * i)
        i += 1 + naux
        if storage not in (IMAGE_SYM_CLASS_EXTERNAL, IMAGE_SYM_CLASS_STATIC):
            continue
        sec_rva = code_rva.get(secnum)
        if sec_rva is None:
            continue
        if (typ >> 4) != IMAGE_SYM_DTYPE_FUNCTION and storage != IMAGE_SYM_CLASS_EXTERNAL:
            continue
        name = _symbol_name(name_raw, strtab)
        if name is not None:
            out.append((sec_rva + value, name))
    out.sort()
    return out


def _symbol_name(name_raw: bytes, strtab: bytes) -> Optional[str]:
    if name_raw[:4] == b"\0\0\0\0":  # long name: an offset into the string table
        off = struct.unpack_from("<I", name_raw, 4)[0]
        end = strtab.find(b"\0", off, off + MAX_SYMBOL_NAME) if off < len(strtab) else -1
        if end < 0:
            return None
        return strtab[off:end].decode("utf-8", "replace")
    return name_raw.split(b"\0", 1)[0].decode("utf-8", "replace")
