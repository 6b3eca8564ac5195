"""`PEImage`: one PE image (PE32+ fully, PE32 headers), read lazily from a file or from the
memory of a crashed process. The facade the rest of dumpkit uses.

Every byte is read through one reader:
- over a file (`from_file`, `from_bytes`, `from_backing`): an RVA is mapped to a file
  offset through the section table (bytes past a section's raw data read as zeros, as the
  loader maps them);
- over the image as mapped in a process (`from_memory`): RVA = VA - base, read through
  `read_va(address, size)`, which raises `MemoryNotInDump` for missing bytes.

Only the headers are parsed up front. The exception directory is binary-searched in place
(pe/exception.py); exports, imports, COFF symbols, the version resource and the CodeView
record are parsed on first use by their own modules and cached here, and what goes wrong
while reading them is kept in `problems` (one line each) instead of raised.
"""

from __future__ import annotations

import bisect
import os
import re
import struct
from typing import Callable, Dict, List, Optional, Tuple

from dumpkit.pe import coff, debug, exports, imports, resources
from dumpkit.pe.backing import Backing, BytesBacking, FileBacking, ReadVA
from dumpkit.pe.errors import PEError
from dumpkit.pe.pynames import PythonNames, python_names
from dumpkit.pe.exception import PDATA_ENTRY, RuntimeFunction, UnwindReader, search_runtime_functions
from dumpkit.pe.headers import DataDirectory, Section, parse_headers
from dumpkit.pe.imports import ImportTable
from dumpkit.pe.resources import VersionInfo
from dumpkit.pe.winnt import (
    DIR_DEBUG,
    DIR_EXCEPTION,
    DIR_RESOURCE,
    IMAGE_FILE_MACHINE_AMD64,
    IMAGE_SCN_MEM_WRITE,
    RUNTIME_FUNCTION,
)
from dumpkit.target import CodeViewRecord, MemoryNotInDump

__all__ = ["PEImage"]


def _align(value: int, alignment: int) -> int:
    return (value + alignment - 1) & ~(alignment - 1)


class PEImage(UnwindReader):
    """A PE image read lazily through one reader. Use `from_file`, `from_bytes`,
    `from_backing` or `from_memory`."""

    def __init__(
        self,
        header_reader: Callable[[int, int], bytes],
        *,
        source: str,
        file: Optional[Backing] = None,
        read_va: Optional[ReadVA] = None,
        base: int = 0,
    ):
        self.source = source  # "file" or "memory"
        self.path: Optional[str] = None
        self.base = base  # the address the image was read at (memory), else 0
        self._file = file
        self._read_va = read_va
        self.problems: List[str] = []  # non-fatal problems met while reading (one line each)
        self._exports: Optional[List[Tuple[int, str]]] = None
        self._export_rvas: List[int] = []
        self._version: Optional[VersionInfo] = None
        self._version_done = False
        self._codeview: Optional[CodeViewRecord] = None
        self._codeview_done = False
        self._unwind_cache = {}
        self._coff: Optional[List[Tuple[int, str]]] = None
        self._coff_rvas: List[int] = []
        self._imports: Optional[ImportTable] = None
        self._python_names: Optional[PythonNames] = None
        self._python_names_done = False
        self._cython_pattern: Optional["re.Pattern[str]"] = None  # see cython_name
        self._cython_checked = False
        self._cython_scanned = 0  # bytes of code read for cython_name, within cython.CODE_BUDGET
        self._cython_names: Dict[int, Optional[str]] = {}
        self._pybind11_names: Optional[Dict[int, str]] = None  # see pybind11_name
        self._take_headers(header_reader)
        self._section_starts = [s.rva for s in self.sections]
        exc = self.directory(DIR_EXCEPTION)
        if exc is not None and self.machine == IMAGE_FILE_MACHINE_AMD64:
            self._pdata_rva = exc.rva
            # a hostile size cannot make the search probe outside the image
            fits = max(0, self.size_of_image - exc.rva) // PDATA_ENTRY
            self.pdata_count = min(exc.size // PDATA_ENTRY, fits)
            if self.pdata_count < exc.size // PDATA_ENTRY:
                self.problems.append(
                    f"exception directory claims {exc.size // PDATA_ENTRY} entries; {fits} fit in the image"
                )
        else:
            # ARM64's .pdata has 8-byte entries and x86 has none: not handled here.
            self._pdata_rva = 0
            self.pdata_count = 0

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_file(cls, path: str) -> "PEImage":
        img = cls.from_backing(FileBacking(path), os.path.basename(path))
        img.path = path
        return img

    @classmethod
    def from_bytes(cls, data: bytes, name: str = "<bytes>") -> "PEImage":
        """An image file held in memory; laid out and read like `from_file`."""
        return cls.from_backing(BytesBacking(data), name)

    @classmethod
    def from_backing(cls, backing: Backing, name: str) -> "PEImage":
        """An image file served by `backing`: `read(offset, size)` (PEError past its end),
        `close()`, `size`. A backing with `lazy = True` produces bytes on demand
        (a compressed file decompressed as far as reads reach); its `size` may be costly,
        so long section names, which live at the end of the file, stay as `/N`."""
        try:
            img = cls(backing.read, source="file", file=backing)
        except PEError as e:
            backing.close()
            raise PEError(f"{name}: {e}") from None
        except Exception:
            backing.close()
            raise
        img.path = name
        return img

    @classmethod
    def from_memory(cls, read_va: ReadVA, base: int) -> "PEImage":
        def header_reader(offset: int, size: int) -> bytes:
            try:
                data = read_va(base + offset, size)
            except MemoryNotInDump:
                raise PEError(f"PE header at {base:#x} is not in the dump") from None
            if len(data) != size:
                raise PEError(f"short read of the PE header at {base + offset:#x}")
            return data

        return cls(header_reader, source="memory", read_va=read_va, base=base)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        self._unwind_cache.clear()

    def __enter__(self) -> "PEImage":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        where = self.path if self.path else f"memory@{self.base:#x}"
        return f"<PEImage {where} machine={self.machine:#x} ts={self.timestamp:#010x} size={self.size_of_image:#x}>"

    # ---------------------------------------------------------------- headers
    def _take_headers(self, rd: Callable[[int, int], bytes]) -> None:
        """Every field of pe.headers.Headers becomes an attribute of the image."""
        h = parse_headers(rd)
        self.machine = h.machine
        self.timestamp = h.timestamp
        self._symtab_ptr = h.symbol_table_offset
        self._nsymbols = h.symbol_count
        self.characteristics = h.characteristics
        self.is_pe32plus = h.is_pe32plus
        self.entry_point_rva = h.entry_point_rva
        self.image_base = h.image_base
        self.section_alignment = h.section_alignment
        self.file_alignment = h.file_alignment
        self.size_of_image = h.size_of_image
        self.size_of_headers = h.size_of_headers
        self.checksum = h.checksum
        self.subsystem = h.subsystem
        self.dll_characteristics = h.dll_characteristics
        self.size_of_stack_reserve = h.size_of_stack_reserve
        self.size_of_stack_commit = h.size_of_stack_commit
        self.linker_version = h.linker_version
        self.data_directories = h.data_directories
        self._file_order_sections = h.sections  # COFF section numbers index this
        sections = sorted(h.sections, key=lambda s: s.rva)
        file = self._file
        if file is not None and not getattr(file, "lazy", False):
            sections = [coff.long_section_name(file, self._symtab_ptr, self._nsymbols, s) for s in sections]
        self.sections = tuple(sections)

    def directory(self, index: int) -> Optional[DataDirectory]:
        """Data directory `index` if present and non-empty."""
        if 0 <= index < len(self.data_directories):
            d = self.data_directories[index]
            if d.rva and d.size:
                return d
        return None

    # ---------------------------------------------------------------- reading
    def section_for_rva(self, rva: int) -> Optional[Section]:
        i = bisect.bisect_right(self._section_starts, rva) - 1
        if i >= 0 and self.sections[i].contains_rva(rva):
            return self.sections[i]
        return None

    def is_code_rva(self, rva: int) -> bool:
        s = self.section_for_rva(rva)
        return s is not None and s.is_executable

    def read_rva(self, rva: int, size: int) -> bytes:
        """`size` bytes at `rva`. Raises PEError when the range is outside the image (or not
        backed by the file) and MemoryNotInDump when a memory image lacks the bytes."""
        if size < 0 or rva < 0 or rva + size > self.size_of_image:
            raise PEError(f"RVA {rva:#x} (+{size:#x}) is outside the image")
        if size == 0:
            return b""
        if self._read_va is not None:
            data = self._read_va(self.base + rva, size)
            if len(data) != size:
                raise MemoryNotInDump(self.base + rva, size)
            return data
        return self._read_file_rva(rva, size)

    def _read_file_rva(self, rva: int, size: int) -> bytes:
        file = self._file
        assert file is not None
        out = bytearray()
        pos, end = rva, rva + size
        while pos < end:
            i = bisect.bisect_right(self._section_starts, pos) - 1
            sec = self.sections[i] if i >= 0 else None
            if sec is not None:
                ext = _align(sec.mapped_size, max(self.section_alignment, 1))
                if not (sec.rva <= pos < sec.rva + ext):
                    sec = None
            if sec is None:
                first = self._section_starts[0] if self.sections else self.size_of_image
                if pos < min(self.size_of_headers, first):
                    n = min(end, self.size_of_headers, first) - pos
                    out += file.read(pos, n)
                    pos += n
                    continue
                raise PEError(f"RVA {pos:#x} is not in any section")
            ext_end = sec.rva + _align(sec.mapped_size, max(self.section_alignment, 1))
            if i + 1 < len(self.sections):
                ext_end = min(ext_end, self.sections[i + 1].rva)
            chunk_end = min(end, ext_end)
            off_in = pos - sec.rva
            raw_avail = min(sec.raw_size, sec.mapped_size)
            if off_in < raw_avail:
                n = min(chunk_end - pos, raw_avail - off_in)
                out += file.read(sec.raw_offset + off_in, n)
                pos += n
            else:
                n = chunk_end - pos
                out += bytes(n)  # beyond the raw data: zero-filled by the loader
                pos += n
        return bytes(out)

    def read_file_offset(self, offset: int, size: int) -> bytes:
        """Raw file bytes (file-backed images only)."""
        if self._file is None:
            raise PEError("not a file-backed image")
        return self._file.read(offset, size)

    # ---------------------------------------------------------------- .pdata (pe/exception.py)
    def pdata_entry(self, index: int) -> RuntimeFunction:
        """Raw table entry `index` (unwind bit 0 NOT resolved)."""
        if not 0 <= index < self.pdata_count:
            raise IndexError(index)
        return RuntimeFunction(
            *RUNTIME_FUNCTION.unpack(self.read_rva(self._pdata_rva + PDATA_ENTRY * index, PDATA_ENTRY))
        )

    def lookup_function(self, rva: int) -> Optional[RuntimeFunction]:
        """The RUNTIME_FUNCTION covering `rva` (binary search over the raw table, one entry
        read per probe), indirect entries resolved; None when no entry covers it.
        Raises MemoryNotInDump (memory images) when a probed entry is missing, and PEError
        for an indirect entry that cannot be resolved."""
        found = search_runtime_functions(self.pdata_entry, self.pdata_count, rva)
        return None if found is None else self.resolve_indirect(found)

    # unwind_info, unwind_chain and resolve_indirect come from UnwindReader

    # ---------------------------------------------------------------- exports (pe/exports.py)
    def exports(self) -> List[Tuple[int, str]]:
        """(rva, name) sorted by rva; forwarders skipped; unnamed exports as "#ordinal".
        Parsed once; an unreadable or malformed table gives what could be read (see
        `problems`)."""
        if self._exports is None:
            try:
                result = exports.parse_exports(self)
            except (PEError, MemoryNotInDump) as e:
                self.problems.append(f"export table: {e}")
                result = []
            result.sort()
            self._exports = result
            self._export_rvas = [r for r, _ in result]
        return self._exports

    def nearest_export(self, rva: int) -> Optional[Tuple[str, int]]:
        """(name, export rva) of the nearest export at or below `rva`."""
        exps = self.exports()
        i = bisect.bisect_right(self._export_rvas, rva) - 1
        if i < 0:
            return None
        # several names may share one rva: prefer the first (sorted) of them
        r = self._export_rvas[i]
        j = bisect.bisect_left(self._export_rvas, r)
        return exps[j][1], r

    # ---------------------------------------------------------------- imports (pe/imports.py)
    def imports(self) -> ImportTable:
        """The DLLs this image imports and the names it imports from each (the import and
        delay-load import directories). Parsed once; what could not be read makes the
        table incomplete and is said in `problems`."""
        if self._imports is None:
            try:
                self._imports = imports.parse_imports(self)
            except (PEError, MemoryNotInDump):  # said in `problems` by the parser
                self._imports = ImportTable((), False)
        return self._imports

    # ---------------------------------------------------------------- CPython's tables (pe/pynames.py)
    def python_name(self, rva: int) -> Optional[str]:
        """The name CPython's method and type tables in this image give the function that
        starts at `rva` (`list.__repr__`, `nt.abort`), or None. The data is read at the
        first question, once."""
        if not self._python_names_done:
            self._python_names_done = True
            self._python_names = python_names(self)
        names = self._python_names
        return names.name(rva) if names is not None else None

    def cython_name(self, rva: int) -> Optional[str]:
        """The traceback name the function at `rva` of a Cython extension module loads
        (pe/cython.py), or None; worked out once per function."""
        if rva in self._cython_names:
            return self._cython_names[rva]
        from dumpkit.pe import cython  # only where a .pyd's function is named: not at start-up

        name: Optional[str] = None
        if not self._cython_checked:
            self._cython_checked = True
            # the imports first: an image that is not Cython's (TensorFlow's, with ~10^5
            # exports) is told by them, without a pass over its exports
            if cython.builds_tracebacks(self.imports()):
                modules = cython.extension_modules(n for _, n in self.exports())
                self._cython_pattern = cython.traceback_pattern(modules) if modules else None
        if self._cython_pattern is not None and self._cython_scanned < cython.CODE_BUDGET:
            try:
                extent = self._function_extent(rva)
                if extent is not None:
                    size = min(extent[1] - rva, cython.MAX_CODE)
                    self._cython_scanned += max(size, 0)
                    code = self.read_rva(rva, size)
                    name = cython.traceback_name(
                        code, rva, lambda at: self._constant_string(at, cython.MAX_NAME), self._cython_pattern
                    )
            except (PEError, MemoryNotInDump):
                name = None
        self._cython_names[rva] = name
        return name

    def pybind11_name(self, rva: int) -> Optional[str]:
        """The name a pybind11 module-level definition gives the function at `rva`
        (`_pywrap_utils.Flatten`), or `pybind11::cpp_function::dispatcher` for the function
        every such call enters (pe/pybind11.py), or None; the image's definitions are read
        at the first question, once."""
        if self._pybind11_names is None:
            from dumpkit.pe import pybind11  # only where a .pyd's function is named

            self._pybind11_names = {}
            try:
                init = pybind11.extension_init(self.exports()) if pybind11.may_bind(self.imports()) else None
                if init is not None:
                    self._pybind11_names = pybind11.bindings(
                        init[0],
                        init[1],
                        self.imports(),
                        self._function_extent,
                        self._code_or_nothing,
                        lambda at: self._constant_string(at, pybind11.MAX_NAME),
                    )
            except (PEError, MemoryNotInDump):
                pass  # the headers or tables the rules start from cannot be read: no names
        return self._pybind11_names.get(rva)

    def _code_or_nothing(self, rva: int, size: int) -> bytes:
        """The code at `rva`, or nothing where it cannot be read (a dump's missing page): a
        function not read is one whose calls and loads name nothing."""
        try:
            return self.read_rva(rva, size)
        except (PEError, MemoryNotInDump):
            return b""

    def _function_extent(self, rva: int) -> Optional[Tuple[int, int]]:
        """(begin, end) of the function whose .pdata entry begins at `rva`, else None."""
        try:
            function = self.lookup_function(rva)
        except (PEError, MemoryNotInDump):
            return None
        if function is None or function.begin_rva != rva or function.indirect_from is not None:
            return None
        return function.begin_rva, function.end_rva

    def _constant_string(self, rva: int, limit: int) -> Optional[str]:
        """The ASCII string at `rva` in a read-only data section, up to its NUL (within
        `limit` bytes)."""
        section = self.section_for_rva(rva)
        if section is None or section.is_executable or section.characteristics & IMAGE_SCN_MEM_WRITE:
            return None
        try:
            raw = self.read_rva(rva, min(limit, section.end_rva - rva, self.size_of_image - rva))
        except (PEError, MemoryNotInDump):
            return None
        end = raw.find(b"\0")
        if end < 0 or not raw[:end].isascii():
            return None
        return raw[:end].decode("ascii")

    # ---------------------------------------------------------------- COFF symbols (pe/coff.py)
    def coff_functions(self) -> List[Tuple[int, str]]:
        """(rva, name) of function symbols in the COFF symbol table, sorted.

        MSVC images carry none (names live in the PDB), but mingw-w64 keeps the table
        unless stripped, and it names static functions the export table cannot (libgcc's
        ___chkstk_ms, a host exe's internals). Files only: the table is not mapped."""
        if self._coff is None:
            try:
                if self._file is None:
                    self._coff = []
                else:
                    self._coff = coff.function_symbols(
                        self._file, self._symtab_ptr, self._nsymbols, self._file_order_sections, self.problems
                    )
            except (PEError, MemoryNotInDump, struct.error) as e:
                self.problems.append(f"COFF symbol table: {e}")
                self._coff = []
            self._coff_rvas = [r for r, _ in self._coff]
        return self._coff

    def nearest_function_symbol(self, rva: int) -> Optional[Tuple[str, int]]:
        """(name, rva) of the nearest COFF function symbol at or below `rva`."""
        syms = self.coff_functions()
        i = bisect.bisect_right(self._coff_rvas, rva) - 1
        if i < 0:
            return None
        return syms[i][1], syms[i][0]

    # ---------------------------------------------------------------- version resource (pe/resources.py)
    def version_info(self) -> Optional[VersionInfo]:
        """The RT_VERSION resource (first name, first language), or None."""
        if not self._version_done:
            try:
                self._version = resources.version_resource(self.directory(DIR_RESOURCE), self.read_rva)
            except (PEError, MemoryNotInDump) as e:
                self.problems.append(f"version resource: {e}")
                self._version = None
            except struct.error:
                self.problems.append("version resource: truncated")
                self._version = None
            self._version_done = True
        return self._version

    # ---------------------------------------------------------------- CodeView (pe/debug.py)
    def codeview(self) -> Optional[CodeViewRecord]:
        """The RSDS CodeView record from the debug directory, or None."""
        if not self._codeview_done:
            file = self._file
            try:
                self._codeview = debug.codeview_record(
                    self.directory(DIR_DEBUG), self.read_rva, file.read if file is not None else None
                )
            except (PEError, MemoryNotInDump) as e:
                self.problems.append(f"debug directory: {e}")
                self._codeview = None
            self._codeview_done = True
        return self._codeview
