"""The PDB's fixed streams: the info stream (which build it belongs to: GUID and age) and
the DBI stream (the module list, the section contributions saying which module made each
piece of code, and which streams hold the publics, the symbol records and the section
headers)."""

from __future__ import annotations

import struct
from typing import List, Optional, Tuple

from dumpkit.symbols.pdb.msf import MsfFile, PdbError, Stream
from dumpkit.target import format_guid
from dumpkit.records import record

__all__ = ["DbiStream", "PdbInfo", "ModuleInfo", "SectionContributions", "read_info", "read_dbi"]

INFO_STREAM = 1
DBI_STREAM = 3
_INFO = struct.Struct("<III16s")  # version, signature (time), age, GUID
# DBI header: signature, version, age, globals/build/publics/dll-version/records/rebuild
# (u16 each), then the substream sizes, MFC index, flags, machine, padding.
_DBI = struct.Struct("<iIIHHHHHHiiiiiIiiHHI")
_MODULE = struct.Struct("<I" + "H2xiiIH2xII" + "HHIII" + "H2xIII")  # 64 bytes
_CONTRIB = struct.Struct("<H2xiiIH2xII")  # 28 bytes (V60)
_CONTRIB_V60 = 0xEFFE0000 + 19970605
_CONTRIB_V2 = 0xEFFE0000 + 20140516
_SECTION = struct.Struct("<8sIIIIIIHHI")  # IMAGE_SECTION_HEADER, 40 bytes
_SECTION_HEADERS_SLOT = 5  # in the optional debug header's stream list
IMAGE_SCN_MEM_EXECUTE = 0x20000000
MAX_MODULES = 1 << 20
MAX_SECTIONS = 4096
MAX_SMALL_STREAM = 64 << 20


@record
class PdbInfo:
    guid: str  # formatted as in the image's CodeView record
    age: int
    signature: int


def read_info(msf: MsfFile) -> PdbInfo:
    stream = msf.stream(INFO_STREAM)
    if stream.size < _INFO.size:
        raise PdbError(f"PDB info stream of {stream.size} bytes is too short")
    _, signature, age, guid = _INFO.unpack(stream.read(0, _INFO.size))
    return PdbInfo(format_guid(guid), age, signature)


@record
class ModuleInfo:
    index: int
    name: str
    stream: Optional[int]  # its symbol stream, None when it has none
    symbols_size: int  # bytes of symbol records (after the 4-byte signature's start)
    lines_offset: int  # where its C13 line subsections start in that stream
    lines_size: int


@record
class Section:
    rva: int
    size: int
    executable: bool


@record(frozen=False)
class DbiStream:
    age: int
    publics_stream: Optional[int]
    records_stream: Optional[int]
    modules: List[ModuleInfo]
    sections: List[Section]
    contributions: "SectionContributions"

    def rva(self, segment: int, offset: int) -> Optional[int]:
        """The RVA of section `segment` (1-based) + `offset`, None when no such section."""
        if 1 <= segment <= len(self.sections) and offset >= 0:
            return self.sections[segment - 1].rva + offset
        return None

    def executable(self, segment: int) -> bool:
        return 1 <= segment <= len(self.sections) and self.sections[segment - 1].executable


class SectionContributions:
    """The fixed-size contribution entries, sorted by section and offset as linkers write
    them; searched in place (a big PDB holds millions) rather than read whole."""

    def __init__(self, stream: Stream, start: int, size: int):
        self._stream = stream
        self._start = start
        self._entry = 28
        self.count = 0
        if size < 4:
            return
        (version,) = struct.unpack("<I", stream.read(start, 4))
        if version == _CONTRIB_V2:
            self._entry = 32
        elif version != _CONTRIB_V60:
            raise PdbError(f"section contributions have an unknown version {version:#x}")
        self._start = start + 4
        self.count = (size - 4) // self._entry

    def entry(self, i: int) -> Tuple[int, int, int, int]:
        """(section, offset, size, module index) of entry `i`."""
        raw = self._stream.read(self._start + i * self._entry, _CONTRIB.size)
        section, offset, size, _, module, _, _ = _CONTRIB.unpack(raw)
        return section, offset, size, module

    def module_at(self, section: int, offset: int) -> Optional[int]:
        """The module whose contribution covers section:offset (binary search, bounded by
        the entry count's logarithm)."""
        lo, hi = 0, self.count
        while lo < hi:
            mid = (lo + hi) // 2
            s, o, _, _ = self.entry(mid)
            if (s, o) <= (section, offset):
                lo = mid + 1
            else:
                hi = mid
        if lo == 0:
            return None
        s, o, size, module = self.entry(lo - 1)
        if s == section and o <= offset < o + size:
            return module
        return None


def read_dbi(msf: MsfFile) -> DbiStream:
    stream = msf.stream(DBI_STREAM)
    if stream.size < _DBI.size:
        raise PdbError(f"DBI stream of {stream.size} bytes is too short")
    h = _DBI.unpack(stream.read(0, _DBI.size))
    signature, _, age, _, _, publics, _, records, _ = h[:9]
    mod_size, contrib_size, map_size, files_size, tsm_size, _, dbg_size, ec_size = h[9:17]
    if signature != -1:
        raise PdbError(f"DBI stream has an old-format signature {signature}")
    sizes = (mod_size, contrib_size, map_size, files_size, tsm_size, ec_size, dbg_size)
    if any(s < 0 for s in sizes) or _DBI.size + sum(sizes) > stream.size:
        raise PdbError("DBI substream sizes pass the end of the DBI stream")
    pos = _DBI.size
    modules = _modules(stream.read(pos, mod_size)) if mod_size <= MAX_SMALL_STREAM else []
    if mod_size > MAX_SMALL_STREAM:
        raise PdbError(f"module list of {mod_size} bytes is implausible")
    contributions = SectionContributions(stream, pos + mod_size, contrib_size)
    dbg_at = pos + mod_size + contrib_size + map_size + files_size + tsm_size + ec_size
    dbg = stream.read(dbg_at, min(dbg_size, 2 * 16))
    sections: List[Section] = []
    if len(dbg) >= 2 * (_SECTION_HEADERS_SLOT + 1):
        (sh,) = struct.unpack_from("<H", dbg, 2 * _SECTION_HEADERS_SLOT)
        if sh != 0xFFFF:
            sections = _sections(msf.stream(sh))
    return DbiStream(
        age=age,
        publics_stream=None if publics == 0xFFFF else publics,
        records_stream=None if records == 0xFFFF else records,
        modules=modules,
        sections=sections,
        contributions=contributions,
    )


def _cstring(raw: bytes, pos: int) -> Tuple[str, int]:
    end = raw.find(b"\0", pos)
    if end < 0:
        raise PdbError("a name runs past the end of its substream")
    return raw[pos:end].decode("utf-8", "replace"), end + 1


def _modules(raw: bytes) -> List[ModuleInfo]:
    out: List[ModuleInfo] = []
    pos = 0
    while pos + _MODULE.size <= len(raw) and len(out) < MAX_MODULES:
        f = _MODULE.unpack_from(raw, pos)
        stream, sym_bytes, c11_bytes, c13_bytes = f[9], f[10], f[11], f[12]
        name, after = _cstring(raw, pos + _MODULE.size)
        _, after = _cstring(raw, after)  # the object file's name
        out.append(
            ModuleInfo(
                index=len(out),
                name=name,
                stream=None if stream == 0xFFFF else stream,
                symbols_size=sym_bytes,
                lines_offset=sym_bytes + c11_bytes,
                lines_size=c13_bytes,
            )
        )
        pos = (after + 3) & ~3
    return out


def _sections(stream: Stream) -> List[Section]:
    n = min(stream.size // _SECTION.size, MAX_SECTIONS)
    raw = stream.read(0, n * _SECTION.size)
    out = []
    for i in range(n):
        _, vsize, rva, _, _, _, _, _, _, flags = _SECTION.unpack_from(raw, i * _SECTION.size)
        out.append(Section(rva, vsize, bool(flags & IMAGE_SCN_MEM_EXECUTE)))
    return out
