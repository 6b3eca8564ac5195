"""Names for code from one PDB: the procedure whose range covers an RVA (found through the
module that contributed that code, so only that module's symbol stream is read), else the
nearest public symbol (binary search over the publics' address map, record by record).
Everything read is bounded and cached; a damaged PDB raises PdbError, one line."""

from __future__ import annotations

import bisect
import struct
from typing import Dict, List, Optional, Tuple

from dumpkit.symbols.demangle import display_name
from dumpkit.symbols.pdb.lines import LineEntry, NameTable, line_entries, names_stream_index
from dumpkit.symbols.pdb.msf import MsfFile, PdbError, PdbFile, PdbSource, Stream
from dumpkit.symbols.pdb.records import parse_public, procedures
from dumpkit.symbols.pdb.streams import DbiStream, PdbInfo, read_dbi, read_info
from dumpkit.target import CodeViewRecord
from dumpkit.records import record

__all__ = ["PdbFunction", "PdbSymbols", "SourceLine", "open_pdb"]

_PUBLICS_HEADER = struct.Struct("<IIIIHxxII")  # hash bytes, address-map bytes, thunks...
MAX_MODULE_SYMBOLS = 256 << 20  # bytes of one module's symbol records read at once
MAX_CACHED_MODULES = 64
MAX_LOOKUPS_CACHED = 1 << 16
MAX_NESTING = 64  # procedures tried below an RVA for one that covers it


@record
class PdbFunction:
    """A name for code: `rva` is where the named function starts; `size` is its length
    for a procedure record, None for a public symbol (which has no length)."""

    name: str
    rva: int
    size: Optional[int]


@record
class SourceLine:
    file: str
    line: int


class PdbSymbols:
    def __init__(self, msf: MsfFile, path: str):
        self.path = path
        self._msf = msf
        self.info: PdbInfo = read_info(msf)
        self.dbi: DbiStream = read_dbi(msf)
        self._modules: Dict[int, Tuple[List[int], List[PdbFunction]]] = {}
        self._lookups: Dict[int, Optional[PdbFunction]] = {}
        self._lines: Dict[int, Tuple[List[int], List[Tuple[int, int]], Dict[int, int]]] = {}
        self._names: Optional[NameTable] = None
        self._names_read = False
        self._records: Optional[Stream] = None
        self._map: Optional[Tuple[Stream, int, int]] = None  # publics stream, map offset, entries
        if self.dbi.records_stream is not None and self.dbi.publics_stream is not None:
            self._records = msf.stream(self.dbi.records_stream)
            publics = msf.stream(self.dbi.publics_stream)
            if publics.size >= _PUBLICS_HEADER.size:
                hash_bytes, map_bytes = _PUBLICS_HEADER.unpack(publics.read(0, _PUBLICS_HEADER.size))[:2]
                at = _PUBLICS_HEADER.size + hash_bytes
                if at + map_bytes > publics.size:
                    raise PdbError("the publics' address map passes the end of its stream")
                self._map = (publics, at, map_bytes // 4)

    def mismatch(self, cv: CodeViewRecord) -> Optional[str]:
        """Why this PDB is not the one `cv` names (GUID and age), or None when it is."""
        if self.info.guid.upper() != cv.guid.upper():
            return f"GUID {self.info.guid}, the image wants {cv.guid}"
        if cv.age != self.info.age:
            return f"age {self.info.age}, the image wants {cv.age}"
        return None

    def function_at(self, rva: int) -> Optional[PdbFunction]:
        """The procedure covering `rva`, else the nearest public symbol at or below it in
        executable code, else None."""
        if rva in self._lookups:
            return self._lookups[rva]
        found = self._procedure_at(rva) or self._public_at(rva)
        if len(self._lookups) >= MAX_LOOKUPS_CACHED:
            self._lookups.clear()
        self._lookups[rva] = found
        return found

    # -- procedures, through the contributing module -------------------------------------
    def _section_of(self, rva: int) -> Optional[Tuple[int, int]]:
        for i, s in enumerate(self.dbi.sections):
            if s.rva <= rva < s.rva + max(s.size, 1):
                return i + 1, rva - s.rva
        return None

    def _module_of(self, rva: int) -> Optional[int]:
        """The index of the module whose section contribution holds `rva`."""
        where = self._section_of(rva)
        if where is None:
            return None
        module = self.dbi.contributions.module_at(*where)
        return module if module is not None and 0 <= module < len(self.dbi.modules) else None

    def _procedure_at(self, rva: int) -> Optional[PdbFunction]:
        module = self._module_of(rva)
        if module is None:
            return None
        starts, funcs = self._module_functions(module)
        i = bisect.bisect_right(starts, rva) - 1
        # Procedures can nest (a thunk inside a function's range): the innermost one that
        # covers rva is the last starting at or below it that still covers it. A few
        # steps back suffice; a hostile stream of overlapping ranges gets no more.
        for _ in range(MAX_NESTING):
            if i < 0:
                break
            f = funcs[i]
            if f.size is not None and rva < f.rva + f.size:
                return f
            i -= 1
        return None

    def _module_functions(self, index: int) -> Tuple[List[int], List[PdbFunction]]:
        cached = self._modules.get(index)
        if cached is not None:
            return cached
        info = self.dbi.modules[index]
        funcs: List[PdbFunction] = []
        if info.stream is not None and info.symbols_size > 4:
            stream = self._msf.stream(info.stream)
            size = min(info.symbols_size, stream.size)
            if size > MAX_MODULE_SYMBOLS:
                raise PdbError(f"module {info.name} has {size} bytes of symbols, more than read at once")
            raw = stream.read(0, size)
            for p in procedures(raw, 4, size):
                at = self.dbi.rva(p.segment, p.offset)
                if at is not None and p.name:
                    funcs.append(PdbFunction(p.name, at, p.length))
        funcs.sort(key=lambda f: f.rva)
        if len(self._modules) >= MAX_CACHED_MODULES:
            self._modules.clear()
        result = ([f.rva for f in funcs], funcs)
        self._modules[index] = result
        return result

    # -- source lines ----------------------------------------------------------------------
    def line_at(self, rva: int) -> Optional[SourceLine]:
        """The source file and line of the code at `rva`, when its module's C13 line
        records cover it (the line record at or below `rva` within the same procedure)."""
        module = self._module_of(rva)
        if module is None:
            return None
        starts, lines, files = self._module_lines(module)
        i = bisect.bisect_right(starts, rva) - 1
        func = self._procedure_at(rva)
        if i < 0 or (func is not None and starts[i] < func.rva):
            return None
        line, file_id = lines[i]
        names = self._name_table()
        name = names.name(files[file_id]) if names is not None and file_id in files else None
        return SourceLine(name or "?", line)

    def _module_lines(self, index: int) -> Tuple[List[int], List[Tuple[int, int]], Dict[int, int]]:
        cached = self._lines.get(index)
        if cached is not None:
            return cached
        info = self.dbi.modules[index]
        entries: List[LineEntry] = []
        files: Dict[int, int] = {}
        if info.stream is not None and info.lines_size:
            stream = self._msf.stream(info.stream)
            size = min(info.lines_size, max(0, stream.size - info.lines_offset))
            if size > MAX_MODULE_SYMBOLS:
                raise PdbError(f"module {info.name} has {size} bytes of line records, more than read at once")
            entries, files = line_entries(stream.read(info.lines_offset, size))
        located = sorted(
            (rva, line, f) for seg, off, line, f in entries for rva in [self.dbi.rva(seg, off)] if rva is not None
        )
        if len(self._lines) >= MAX_CACHED_MODULES:
            self._lines.clear()
        result = ([r for r, _, _ in located], [(line, f) for _, line, f in located], files)
        self._lines[index] = result
        return result

    def _name_table(self) -> Optional[NameTable]:
        if not self._names_read:
            self._names_read = True
            index = names_stream_index(self._msf.stream(1))
            self._names = NameTable(self._msf, index) if index is not None else None
        return self._names

    # -- publics, by binary search over the address map ----------------------------------
    def _public(self, i: int) -> Tuple[int, Optional[PdbFunction]]:
        """(rva or -1, the public as a function name or None) of address-map entry i."""
        assert self._map is not None and self._records is not None
        stream, at, _ = self._map
        (offset,) = struct.unpack("<I", stream.read(at + 4 * i, 4))
        (length,) = struct.unpack("<H", self._records.read(offset, 2))
        pub = parse_public(self._records.read(offset, min(2 + length, self._records.size - offset)))
        if pub is None:
            return -1, None
        rva = self.dbi.rva(pub.segment, pub.offset)
        if rva is None:
            return -1, None
        named = PdbFunction(display_name(pub.name), rva, None) if self.dbi.executable(pub.segment) else None
        return rva, named

    def _public_at(self, rva: int) -> Optional[PdbFunction]:
        if self._map is None:
            return None
        lo, hi = 0, self._map[2]
        while lo < hi:
            mid = (lo + hi) // 2
            if self._public(mid)[0] <= rva:
                lo = mid + 1
            else:
                hi = mid
        return self._public(lo - 1)[1] if lo > 0 else None

    def close(self) -> None:
        self._msf.close()


def open_pdb(path: str, source: Optional[PdbSource] = None) -> PdbSymbols:
    """Open and check the PDB at `path` (read from `source` when given: a recording of the
    file, or the pages a bundle carries): PdbError (one line) when it is not a readable PDB."""
    if source is None:
        source = PdbFile(path)
    try:
        msf = MsfFile(source, path)
        return PdbSymbols(msf, path)
    except BaseException:
        source.close()
        raise
