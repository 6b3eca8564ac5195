"""Names for code from one PDB: the procedure whose range covers an RVA (found through the
module that contributed that code, so only that module's symbol stream is read), else the
nearest public symbol (binary search over the publics' address map, record by record).
Everything read is bounded and cached; a damaged PDB raises PdbError, one line."""

from __future__ import annotations

import bisect
import os
import struct
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from dumpkit.symbols.demangle import display_name
from dumpkit.symbols.pdb.msf import MsfFile, PdbError, Stream
from dumpkit.symbols.pdb.records import parse_public, procedures
from dumpkit.symbols.pdb.streams import DbiStream, PdbInfo, read_dbi, read_info
from dumpkit.target import CodeViewRecord

__all__ = ["PdbFunction", "PdbSymbols", "open_pdb"]

_PUBLICS_HEADER = struct.Struct("<IIIIHxxII")  # hash bytes, address-map bytes, thunks...
MAX_MODULE_SYMBOLS = 256 << 20  # bytes of one module's symbol records read at once
MAX_CACHED_MODULES = 64
MAX_LOOKUPS_CACHED = 1 << 16


@dataclass(frozen=True)
class PdbFunction:
    """A name for code: `rva` is where the named function starts; `size` is its length
    for a procedure record, None for a public symbol (which has no length)."""

    name: str
    rva: int
    size: Optional[int]


class PdbSymbols:
    def __init__(self, msf: MsfFile, path: str):
        self.path = path
        self._msf = msf
        self.info: PdbInfo = read_info(msf)
        self.dbi: DbiStream = read_dbi(msf)
        self._modules: Dict[int, Tuple[List[int], List[PdbFunction]]] = {}
        self._lookups: Dict[int, Optional[PdbFunction]] = {}
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

    def _procedure_at(self, rva: int) -> Optional[PdbFunction]:
        where = self._section_of(rva)
        if where is None:
            return None
        module = self.dbi.contributions.module_at(*where)
        if module is None or not 0 <= module < len(self.dbi.modules):
            return None
        starts, funcs = self._module_functions(module)
        i = bisect.bisect_right(starts, rva) - 1
        # Procedures can nest (a thunk inside a function's range): the innermost one that
        # covers rva is the last starting at or below it that still covers it.
        while i >= 0 and rva - funcs[i].rva < 1 << 24:
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


def open_pdb(path: str) -> PdbSymbols:
    """Open and check the PDB at `path`: PdbError (one line) when it is not a readable PDB."""
    try:
        fh = open(path, "rb")
        size = os.fstat(fh.fileno()).st_size
    except OSError as e:
        raise PdbError(f"cannot open: {e.strerror or e}") from None
    msf = MsfFile(fh, size, path)
    try:
        return PdbSymbols(msf, path)
    except BaseException:
        msf.close()
        raise
