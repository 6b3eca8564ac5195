"""Lazy reading of PE images (PE32+ fully, PE32 headers), from a file or from memory.

One class, `PEImage`, reads every byte through a small reader:
- over a file on disk (`PEImage.from_file`): the file is mmapped read-only and an RVA is
  mapped to a file offset through the section table (bytes past a section's raw data read
  as zeros, as the loader maps them);
- over the image as mapped in a crashed process (`PEImage.from_memory`): RVA = VA - base,
  read through `read_va(address, size)`, which raises `MemoryNotInDump` for missing bytes.

Only the headers are parsed up front. The exception directory (.pdata) is binary-searched
in place, one 12-byte entry per probe; exports, the version resource and the CodeView record
are parsed on first use and cached. Every count and length that comes from the image is
bounded, and nothing recurses on data-controlled depth.
"""

from __future__ import annotations

import bisect
import mmap
import os
import struct
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

from dumpkit.target import CodeViewRecord, MemoryNotInDump

__all__ = [
    "PEError",
    "Section",
    "DataDirectory",
    "RuntimeFunction",
    "UnwindOp",
    "UnwindInfo",
    "VersionInfo",
    "PEImage",
    "ReadVA",
    # constants
    "IMAGE_FILE_MACHINE_I386",
    "IMAGE_FILE_MACHINE_AMD64",
    "IMAGE_FILE_MACHINE_ARM64",
    "UNW_FLAG_EHANDLER",
    "UNW_FLAG_UHANDLER",
    "UNW_FLAG_CHAININFO",
    "UWOP_PUSH_NONVOL",
    "UWOP_ALLOC_LARGE",
    "UWOP_ALLOC_SMALL",
    "UWOP_SET_FPREG",
    "UWOP_SAVE_NONVOL",
    "UWOP_SAVE_NONVOL_FAR",
    "UWOP_EPILOG",
    "UWOP_SPARE_CODE",
    "UWOP_SAVE_XMM128",
    "UWOP_SAVE_XMM128_FAR",
    "UWOP_PUSH_MACHFRAME",
    "UWOP_SET_FPREG_LARGE",
    "UWOP_NAMES",
    "parse_vs_versioninfo",
]

ReadVA = Callable[[int, int], bytes]


class PEError(Exception):
    """The image (or the part of it asked for) cannot be read or is malformed. One line."""


# ----------------------------------------------------------------------------- constants
IMAGE_FILE_MACHINE_I386 = 0x014C
IMAGE_FILE_MACHINE_AMD64 = 0x8664
IMAGE_FILE_MACHINE_ARM64 = 0xAA64

IMAGE_SCN_CNT_CODE = 0x00000020
IMAGE_SCN_MEM_EXECUTE = 0x20000000

DIR_EXPORT = 0
DIR_RESOURCE = 2
DIR_EXCEPTION = 3
DIR_DEBUG = 6

IMAGE_DEBUG_TYPE_CODEVIEW = 2
RT_VERSION = 16

UNW_FLAG_EHANDLER = 0x1
UNW_FLAG_UHANDLER = 0x2
UNW_FLAG_CHAININFO = 0x4

UWOP_PUSH_NONVOL = 0
UWOP_ALLOC_LARGE = 1
UWOP_ALLOC_SMALL = 2
UWOP_SET_FPREG = 3
UWOP_SAVE_NONVOL = 4
UWOP_SAVE_NONVOL_FAR = 5
UWOP_EPILOG = 6  # version 2; in version 1 this number was UWOP_SAVE_XMM (2 slots)
UWOP_SPARE_CODE = 7  # reserved; historically UWOP_SAVE_XMM_FAR (3 slots)
UWOP_SAVE_XMM128 = 8
UWOP_SAVE_XMM128_FAR = 9
UWOP_PUSH_MACHFRAME = 10
UWOP_SET_FPREG_LARGE = 11  # newer Windows unwinders only

UWOP_NAMES: Dict[int, str] = {
    UWOP_PUSH_NONVOL: "PUSH_NONVOL",
    UWOP_ALLOC_LARGE: "ALLOC_LARGE",
    UWOP_ALLOC_SMALL: "ALLOC_SMALL",
    UWOP_SET_FPREG: "SET_FPREG",
    UWOP_SAVE_NONVOL: "SAVE_NONVOL",
    UWOP_SAVE_NONVOL_FAR: "SAVE_NONVOL_FAR",
    UWOP_EPILOG: "EPILOG",
    UWOP_SPARE_CODE: "SPARE_CODE",
    UWOP_SAVE_XMM128: "SAVE_XMM128",
    UWOP_SAVE_XMM128_FAR: "SAVE_XMM128_FAR",
    UWOP_PUSH_MACHFRAME: "PUSH_MACHFRAME",
    UWOP_SET_FPREG_LARGE: "SET_FPREG_LARGE",
}

# Bounds on data-controlled sizes.
MAX_SECTIONS = 1024  # the loader's limit is 96; be generous but finite
MAX_HEADER_OFFSET = 0x10000000  # e_lfanew
MAX_EXPORTS = 1 << 20  # functions and names each
MAX_EXPORT_NAME = 1024
MAX_EXPORT_NAME_BLOCK = 8 << 20  # one read of all export names when they fit in this
MAX_RESOURCE_ENTRIES = 4096  # per resource directory
MAX_VERSION_RESOURCE = 1 << 20
MAX_VERSION_BLOCKS = 4096
MAX_VERSION_STRING = 4096  # UTF-16 code units
MAX_DEBUG_ENTRIES = 64
MAX_PDB_NAME = 1024
MAX_COFF_SYMBOLS = 1 << 21
MAX_COFF_STRINGS = 64 << 20
MAX_CHAIN = 32  # chained unwind infos followed by unwind_chain()
MAX_INDIRECT = 4  # RUNTIME_FUNCTION -> RUNTIME_FUNCTION hops
PDATA_ENTRY = 12
_UNWIND_CACHE = 4096


# ----------------------------------------------------------------------------- model
@dataclass(frozen=True)
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


@dataclass(frozen=True)
class DataDirectory:
    rva: int
    size: int


@dataclass(frozen=True)
class RuntimeFunction:
    """One RUNTIME_FUNCTION, image-relative. `unwind_rva` never has bit 0 set.

    When the .pdata entry that covered the looked-up address was indirect (its unwind
    field had bit 0 set and pointed at another RUNTIME_FUNCTION), `lookup_function`
    returns the entry it points to, as Windows does (its begin is the primary function's
    start, which is what prologue offsets are measured from), and keeps the covering
    entry in `indirect_from`."""

    begin_rva: int
    end_rva: int
    unwind_rva: int
    indirect_from: Optional["RuntimeFunction"] = None

    def contains(self, rva: int) -> bool:
        return self.begin_rva <= rva < self.end_rva


@dataclass(frozen=True)
class UnwindOp:
    """One decoded unwind operation.

    `operand` per op: PUSH_NONVOL: register number; ALLOC_LARGE / ALLOC_SMALL: bytes
    allocated; SET_FPREG: the frame offset in bytes (UNWIND_INFO.frame_offset, already
    scaled by 16); SAVE_NONVOL(_FAR): stack offset in bytes (register in op_info);
    SAVE_XMM128(_FAR): stack offset in bytes (xmm number in op_info); EPILOG (v2) and
    SPARE_CODE: the raw value of the extra slot(s); PUSH_MACHFRAME: op_info (1 = with
    error code); SET_FPREG_LARGE: the raw (unscaled) 32-bit value of its two extra slots.

    Slot counts follow Windows' own table (RtlpUnwindOpSlots): EPILOG takes 2 slots and
    SPARE_CODE 3 (binutils' objdump decodes v2 epilog codes as 1 slot; Windows does not)."""

    code_offset: int
    op: int
    op_info: int
    operand: int
    slots: int = 1  # how many 16-bit slots this operation used

    @property
    def name(self) -> str:
        return UWOP_NAMES.get(self.op, f"UWOP_{self.op}")


@dataclass(frozen=True)
class UnwindInfo:
    rva: int
    version: int
    flags: int
    size_of_prolog: int
    count_of_codes: int
    frame_register: int
    frame_offset: int  # bytes (the scaled field * 16)
    ops: Tuple[UnwindOp, ...]
    handler_rva: Optional[int] = None  # EHANDLER / UHANDLER
    handler_data_rva: Optional[int] = None  # language-specific data follows the handler
    chained: Optional[RuntimeFunction] = None  # CHAININFO

    @property
    def has_handler(self) -> bool:
        return self.handler_rva is not None

    @property
    def is_chained(self) -> bool:
        return self.chained is not None


@dataclass(frozen=True)
class VersionInfo:
    file_version: Optional[str]  # from VS_FIXEDFILEINFO, "a.b.c.d"
    product_version: Optional[str]
    strings: Dict[str, str] = field(default_factory=dict)
    file_flags: int = 0
    file_os: int = 0
    file_type: int = 0


# ----------------------------------------------------------------------------- helpers
def _u16(b: bytes, off: int) -> int:
    return struct.unpack_from("<H", b, off)[0]


def _u32(b: bytes, off: int) -> int:
    return struct.unpack_from("<I", b, off)[0]


def _u64(b: bytes, off: int) -> int:
    return struct.unpack_from("<Q", b, off)[0]


def _align(value: int, alignment: int) -> int:
    return (value + alignment - 1) & ~(alignment - 1)


def _version_str(ms: int, ls: int) -> str:
    return f"{ms >> 16}.{ms & 0xFFFF}.{ls >> 16}.{ls & 0xFFFF}"


def _format_guid(raw: bytes) -> str:
    d1, d2, d3 = struct.unpack_from("<IHH", raw, 0)
    d4 = raw[8:16]
    return f"{d1:08X}-{d2:04X}-{d3:04X}-{d4[:2].hex().upper()}-{d4[2:].hex().upper()}"


# ----------------------------------------------------------------------------- readers
class _BytesBacking:
    """An image file already in memory (e.g. decompressed from NAME.dll.xz)."""

    def __init__(self, data: bytes):
        if not data:
            raise PEError("image is empty")
        self._data = data
        self.size = len(data)

    def read(self, offset: int, size: int) -> bytes:
        if offset < 0 or size < 0 or offset + size > self.size:
            raise PEError(f"file offset {offset:#x} (+{size:#x}) is past the end of the file")
        return self._data[offset : offset + size]

    def close(self) -> None:
        self._data = b""


class _FileBacking:
    """A read-only mmap of a file; offsets are file offsets."""

    def __init__(self, path: str):
        try:
            self._fh = open(path, "rb")
        except OSError as e:
            raise PEError(f"cannot open {path}: {e.strerror or e}") from None
        try:
            size = os.fstat(self._fh.fileno()).st_size
            if size == 0:
                raise PEError(f"{path} is empty")
            self._mm: Optional[mmap.mmap] = mmap.mmap(self._fh.fileno(), 0, access=mmap.ACCESS_READ)
        except PEError:
            self._fh.close()
            raise
        except (OSError, ValueError) as e:
            self._fh.close()
            raise PEError(f"cannot map {path}: {e}") from None
        self.size = size

    def read(self, offset: int, size: int) -> bytes:
        mm = self._mm
        if mm is None:
            raise PEError("image is closed")
        if offset < 0 or size < 0 or offset + size > self.size:
            raise PEError(f"file offset {offset:#x} (+{size:#x}) is past the end of the file")
        return mm[offset : offset + size]

    def close(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        self._fh.close()


# ----------------------------------------------------------------------------- the image
class PEImage:
    """A PE image read lazily through one reader. Use `from_file` or `from_memory`."""

    # header fields (set by _parse_headers)
    machine: int
    is_pe32plus: bool
    timestamp: int
    characteristics: int
    size_of_image: int
    size_of_headers: int
    checksum: int
    entry_point_rva: int
    image_base: int
    section_alignment: int
    file_alignment: int
    subsystem: int
    dll_characteristics: int
    size_of_stack_reserve: int
    size_of_stack_commit: int
    sections: Tuple[Section, ...]
    data_directories: Tuple[DataDirectory, ...]

    def __init__(
        self,
        header_reader: Callable[[int, int], bytes],
        *,
        source: str,
        file: Optional[_FileBacking] = None,
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
        self._unwind_cache: Dict[int, UnwindInfo] = {}
        self._coff: Optional[List[Tuple[int, str]]] = None
        self._coff_rvas: List[int] = []
        self._parse_headers(header_reader)
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
        backing = _FileBacking(path)
        try:
            img = cls(backing.read, source="file", file=backing)
        except PEError as e:
            backing.close()
            raise PEError(f"{os.path.basename(path)}: {e}") from None
        except Exception:
            backing.close()
            raise
        img.path = path
        return img

    @classmethod
    def from_bytes(cls, data: bytes, name: str = "<bytes>") -> "PEImage":
        """An image file held in memory; laid out and read like `from_file`."""
        return cls.from_backing(_BytesBacking(data), name)

    @classmethod
    def from_backing(cls, backing, name: str) -> "PEImage":
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
    def _parse_headers(self, rd: Callable[[int, int], bytes]) -> None:
        dos = rd(0, 0x40)
        if dos[:2] != b"MZ":
            raise PEError("not a PE image (no MZ signature)")
        e_lfanew = _u32(dos, 0x3C)
        if e_lfanew < 4 or e_lfanew > MAX_HEADER_OFFSET:
            raise PEError(f"bad e_lfanew {e_lfanew:#x}")
        nt = rd(e_lfanew, 24)
        if nt[:4] != b"PE\0\0":
            raise PEError("not a PE image (no PE signature)")
        (self.machine, nsections, self.timestamp, self._symtab_ptr, self._nsymbols, opt_size, self.characteristics) = (
            struct.unpack_from("<HHIIIHH", nt, 4)
        )
        if nsections > MAX_SECTIONS:
            raise PEError(f"implausible section count {nsections}")
        if opt_size < 2:
            raise PEError("no optional header")
        opt = rd(e_lfanew + 24, opt_size)
        magic = _u16(opt, 0)
        if magic == 0x20B:
            self.is_pe32plus = True
            need = 112
        elif magic == 0x10B:
            self.is_pe32plus = False
            need = 96
        else:
            raise PEError(f"bad optional header magic {magic:#x}")
        if opt_size < need:
            raise PEError(f"optional header too small ({opt_size} bytes)")
        self.entry_point_rva = _u32(opt, 16)
        self.section_alignment = _u32(opt, 32)
        self.file_alignment = _u32(opt, 36)
        self.size_of_image = _u32(opt, 56)
        self.size_of_headers = _u32(opt, 60)
        self.checksum = _u32(opt, 64)
        self.subsystem = _u16(opt, 68)
        self.dll_characteristics = _u16(opt, 70)
        if self.is_pe32plus:
            self.image_base = _u64(opt, 24)
            self.size_of_stack_reserve = _u64(opt, 72)
            self.size_of_stack_commit = _u64(opt, 80)
            ndirs = _u32(opt, 108)
            dir_off = 112
        else:
            self.image_base = _u32(opt, 28)
            self.size_of_stack_reserve = _u32(opt, 72)
            self.size_of_stack_commit = _u32(opt, 76)
            ndirs = _u32(opt, 92)
            dir_off = 96
        ndirs = min(ndirs, 16, (opt_size - dir_off) // 8)
        self.data_directories = tuple(
            DataDirectory(*struct.unpack_from("<II", opt, dir_off + 8 * i)) for i in range(ndirs)
        )
        if self.size_of_image == 0:
            raise PEError("SizeOfImage is 0")

        sec_off = e_lfanew + 24 + opt_size
        raw = rd(sec_off, 40 * nsections) if nsections else b""
        sections = []
        for i in range(nsections):
            name_b, vsize, vaddr, rsize, roff, _, _, _, _, chars = struct.unpack_from("<8sIIIIIIHHI", raw, 40 * i)
            name = name_b.split(b"\0", 1)[0].decode("latin-1")
            sections.append(Section(name, vaddr, vsize, roff, rsize, chars))
        self._file_order_sections = tuple(sections)  # COFF section numbers index this
        sections.sort(key=lambda s: s.rva)
        if self._file is not None and not getattr(self._file, "lazy", False):
            sections = [self._long_section_name(s) for s in sections]
        self.sections = tuple(sections)

    def _long_section_name(self, s: Section) -> Section:
        """mingw images name long sections "/N": offset N in the COFF string table."""
        if not (s.name.startswith("/") and s.name[1:].isdigit()) or not self._symtab_ptr:
            return s
        try:
            start = self._symtab_ptr + 18 * self._nsymbols + int(s.name[1:])
            limit = min(256, self._file.size - start)
            if limit <= 0:
                return s
            name = self._file.read(start, limit).split(b"\0", 1)[0].decode("utf-8", "replace")
            if name:
                return Section(name, s.rva, s.virtual_size, s.raw_offset, s.raw_size, s.characteristics)
        except PEError:
            pass
        return s

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
        assert self._file is not None
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
                    out += self._file.read(pos, n)
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
                out += self._file.read(sec.raw_offset + off_in, n)
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

    def _read_cstring(self, rva: int, limit: int) -> bytes:
        """A NUL-terminated byte string at `rva`, at most `limit` bytes (PEError if longer).
        Reads in small chunks, falling back to single bytes near the end of readable data."""
        out = bytearray()
        pos = rva
        while len(out) < limit:
            want = min(64, limit - len(out), self.size_of_image - pos)
            if want <= 0:
                break
            try:
                chunk = self.read_rva(pos, want)
            except (MemoryNotInDump, PEError):
                if want == 1:
                    raise
                chunk = self.read_rva(pos, 1)
            nul = chunk.find(b"\0")
            if nul >= 0:
                out += chunk[:nul]
                return bytes(out)
            out += chunk
            pos += len(chunk)
        raise PEError(f"unterminated string at RVA {rva:#x}")

    # ---------------------------------------------------------------- .pdata
    def pdata_entry(self, index: int) -> RuntimeFunction:
        """Raw table entry `index` (unwind bit 0 NOT resolved)."""
        if not 0 <= index < self.pdata_count:
            raise IndexError(index)
        b, e, u = struct.unpack("<III", self.read_rva(self._pdata_rva + PDATA_ENTRY * index, PDATA_ENTRY))
        return RuntimeFunction(b, e, u)

    def _read_runtime_function(self, rva: int) -> RuntimeFunction:
        b, e, u = struct.unpack("<III", self.read_rva(rva, PDATA_ENTRY))
        return RuntimeFunction(b, e, u)

    def resolve_indirect(self, entry: RuntimeFunction) -> RuntimeFunction:
        """Follow bit 0 of the unwind field (an entry that points at another entry)."""
        cur = entry
        for _ in range(MAX_INDIRECT):
            if not cur.unwind_rva & 1:
                if cur is entry:
                    return entry
                return RuntimeFunction(cur.begin_rva, cur.end_rva, cur.unwind_rva, indirect_from=entry)
            cur = self._read_runtime_function(cur.unwind_rva & ~1)
        raise PEError(f"indirect RUNTIME_FUNCTION chain too long at {entry.begin_rva:#x}")

    def lookup_function(self, rva: int) -> Optional[RuntimeFunction]:
        """The RUNTIME_FUNCTION covering `rva` (binary search over the raw table, one entry
        read per probe), indirect entries resolved; None when no entry covers it.
        Raises MemoryNotInDump (memory images) when a probed entry is missing, and PEError
        for an indirect entry that cannot be resolved."""
        lo, hi = 0, self.pdata_count
        found: Optional[RuntimeFunction] = None
        while lo < hi:
            mid = (lo + hi) // 2
            ent = self.pdata_entry(mid)
            if ent.begin_rva <= rva:
                found = ent
                lo = mid + 1
            else:
                hi = mid
        if found is None or not (found.begin_rva <= rva < found.end_rva):
            return None
        return self.resolve_indirect(found)

    # ---------------------------------------------------------------- UNWIND_INFO
    def unwind_info(self, unwind_rva: int) -> UnwindInfo:
        """Parse the UNWIND_INFO at `unwind_rva` (PEError when malformed or truncated)."""
        cached = self._unwind_cache.get(unwind_rva)
        if cached is not None:
            return cached
        try:
            head = self.read_rva(unwind_rva, 4)
        except PEError:
            raise PEError(f"UNWIND_INFO at {unwind_rva:#x} is outside the image") from None
        version = head[0] & 7
        flags = head[0] >> 3
        prolog = head[1]
        count = head[2]
        frame_register = head[3] & 0xF
        frame_offset = (head[3] >> 4) * 16
        if version not in (1, 2):
            raise PEError(f"UNWIND_INFO at {unwind_rva:#x}: unsupported version {version}")
        try:
            codes = self.read_rva(unwind_rva + 4, 2 * count) if count else b""
        except PEError:
            raise PEError(f"UNWIND_INFO at {unwind_rva:#x}: unwind codes truncated") from None
        ops = _decode_unwind_codes(codes, count, version, frame_offset, unwind_rva)

        tail = unwind_rva + 4 + 2 * ((count + 1) & ~1)
        handler = handler_data = None
        chained = None
        try:
            if flags & UNW_FLAG_CHAININFO:
                chained = self._read_runtime_function(tail)
            elif flags & (UNW_FLAG_EHANDLER | UNW_FLAG_UHANDLER):
                handler = _u32(self.read_rva(tail, 4), 0)
                handler_data = tail + 4
        except PEError:
            raise PEError(f"UNWIND_INFO at {unwind_rva:#x}: handler/chain data truncated") from None
        info = UnwindInfo(
            rva=unwind_rva,
            version=version,
            flags=flags,
            size_of_prolog=prolog,
            count_of_codes=count,
            frame_register=frame_register,
            frame_offset=frame_offset,
            ops=tuple(ops),
            handler_rva=handler,
            handler_data_rva=handler_data,
            chained=chained,
        )
        if len(self._unwind_cache) >= _UNWIND_CACHE:
            self._unwind_cache.clear()
        self._unwind_cache[unwind_rva] = info
        return info

    def unwind_chain(self, unwind_rva: int) -> List[UnwindInfo]:
        """The UNWIND_INFO at `unwind_rva` followed by its chained infos, in order.
        Iterative and bounded; a loop or an over-long chain is a PEError."""
        out: List[UnwindInfo] = []
        seen = set()
        rva = unwind_rva
        while True:
            if rva in seen:
                raise PEError(f"unwind chain loops at UNWIND_INFO {rva:#x}")
            if len(out) >= MAX_CHAIN:
                raise PEError(f"unwind chain longer than {MAX_CHAIN} at {unwind_rva:#x}")
            seen.add(rva)
            info = self.unwind_info(rva)
            out.append(info)
            if info.chained is None:
                return out
            rva = self.resolve_indirect(info.chained).unwind_rva

    # ---------------------------------------------------------------- exports
    def exports(self) -> List[Tuple[int, str]]:
        """(rva, name) sorted by rva; forwarders skipped; unnamed exports as "#ordinal".
        Parsed once; an unreadable or malformed table gives what could be read (see
        `problems`)."""
        if self._exports is None:
            try:
                result = self._parse_exports()
            except (PEError, MemoryNotInDump) as e:
                self.problems.append(f"export table: {e}")
                result = []
            result.sort()
            self._exports = result
            self._export_rvas = [r for r, _ in result]
        return self._exports

    def _parse_exports(self) -> List[Tuple[int, str]]:
        d = self.directory(DIR_EXPORT)
        if d is None:
            return []
        hdr = self.read_rva(d.rva, 40)
        (_, _, _, _, _, ordinal_base, nfuncs, nnames, funcs_rva, names_rva, ords_rva) = struct.unpack_from(
            "<IIHHIIIIIII", hdr, 0
        )
        limit = min(MAX_EXPORTS, self.size_of_image // 4)
        if nfuncs > limit:
            self.problems.append(f"export table claims {nfuncs} functions; reading {limit}")
            nfuncs = limit
        if nnames > limit:
            self.problems.append(f"export table claims {nnames} names; reading {limit}")
            nnames = limit
        if nfuncs == 0:
            return []
        funcs = struct.unpack(f"<{nfuncs}I", self.read_rva(funcs_rva, 4 * nfuncs))
        names: Dict[int, List[str]] = {}
        if nnames:
            name_rvas = struct.unpack(f"<{nnames}I", self.read_rva(names_rva, 4 * nnames))
            ordinals = struct.unpack(f"<{nnames}H", self.read_rva(ords_rva, 2 * nnames))
            bad = 0
            block_at, block = self._export_name_block(name_rvas)
            for nrva, idx in zip(name_rvas, ordinals):
                if idx >= nfuncs:
                    bad += 1
                    continue
                raw = None
                at = nrva - block_at
                if 0 <= at < len(block):
                    end = block.find(b"\0", at, at + MAX_EXPORT_NAME)
                    if end >= 0:
                        raw = block[at:end]
                if raw is None:
                    try:
                        raw = self._read_cstring(nrva, MAX_EXPORT_NAME)
                    except (PEError, MemoryNotInDump):
                        bad += 1
                        continue
                names.setdefault(idx, []).append(raw.decode("utf-8", "replace"))
            if bad:
                self.problems.append(f"export table: {bad} unreadable or invalid names")
        fwd_lo, fwd_hi = d.rva, d.rva + d.size
        out: List[Tuple[int, str]] = []
        for idx, frva in enumerate(funcs):
            if frva == 0 or fwd_lo <= frva < fwd_hi:  # unused slot / forwarder string
                continue
            for n in names.get(idx, (f"#{ordinal_base + idx}",)):
                out.append((frva, n))
        return out

    def _export_name_block(self, name_rvas) -> Tuple[int, bytes]:
        """(rva, bytes) of one read covering every export name when they lie close
        together (linkers put them in one run); (0, b"") when not, or when that read
        fails, and each name is then read on its own."""
        if not name_rvas:
            return 0, b""
        lo = min(name_rvas)
        hi = min(max(name_rvas) + MAX_EXPORT_NAME, self.size_of_image)
        if hi <= lo or hi - lo > MAX_EXPORT_NAME_BLOCK:
            return 0, b""
        try:
            return lo, self.read_rva(lo, hi - lo)
        except (PEError, MemoryNotInDump):
            return 0, b""

    # ---------------------------------------------------------------- COFF symbols
    def coff_functions(self) -> List[Tuple[int, str]]:
        """(rva, name) of function symbols in the COFF symbol table, sorted.

        MSVC images carry none (names live in the PDB), but mingw-w64 keeps the table
        unless stripped, and it names static functions the export table cannot (libgcc's
        ___chkstk_ms, a host exe's internals). Files only: the table is not mapped."""
        if self._coff is None:
            try:
                self._coff = self._parse_coff()
            except (PEError, MemoryNotInDump, struct.error) as e:
                self.problems.append(f"COFF symbol table: {e}")
                self._coff = []
            self._coff_rvas = [r for r, _ in self._coff]
        return self._coff

    def _parse_coff(self) -> List[Tuple[int, str]]:
        if self._file is None or not self._symtab_ptr or not self._nsymbols:
            return []
        count = min(self._nsymbols, MAX_COFF_SYMBOLS)
        if count < self._nsymbols:
            self.problems.append(f"COFF symbol table claims {self._nsymbols} symbols; reading {count}")
        table = self.read_file_offset(self._symtab_ptr, 18 * count)
        count = len(table) // 18
        strtab_at = self._symtab_ptr + 18 * self._nsymbols
        strsize_raw = self.read_file_offset(strtab_at, 4)
        strsize = _u32(strsize_raw, 0) if len(strsize_raw) == 4 else 0
        strtab = self.read_file_offset(strtab_at, min(strsize, MAX_COFF_STRINGS)) if strsize > 4 else b""
        # COFF section number -> RVA, for code sections only
        code_rva = {i + 1: sec.rva for i, sec in enumerate(self._file_order_sections) if sec.is_executable}
        unpack = struct.Struct("<8sIhHBB").unpack_from
        out: List[Tuple[int, str]] = []
        i = 0
        while i < count:
            name_raw, value, secnum, typ, storage, naux = unpack(table, 18 * i)
            i += 1 + naux
            # Functions: DT_FUNCTION (high nibble of Type) with external (2) or static (3)
            # storage; assembly labels have no type, so take external ones in code.
            if storage not in (2, 3):
                continue
            sec_rva = code_rva.get(secnum)
            if sec_rva is None:
                continue
            if (typ >> 4) != 2 and storage != 2:
                continue
            if name_raw[:4] == b"\0\0\0\0":
                off = struct.unpack_from("<I", name_raw, 4)[0]
                end = strtab.find(b"\0", off, off + MAX_EXPORT_NAME) if off < len(strtab) else -1
                if end < 0:
                    continue
                name = strtab[off:end].decode("utf-8", "replace")
            else:
                name = name_raw.split(b"\0", 1)[0].decode("utf-8", "replace")
            out.append((sec_rva + value, name))
        out.sort()
        return out

    def nearest_function_symbol(self, rva: int) -> Optional[Tuple[str, int]]:
        """(name, rva) of the nearest COFF function symbol at or below `rva`."""
        syms = self.coff_functions()
        i = bisect.bisect_right(self._coff_rvas, rva) - 1
        if i < 0:
            return None
        return syms[i][1], syms[i][0]

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

    # ---------------------------------------------------------------- version resource
    def version_info(self) -> Optional[VersionInfo]:
        """The RT_VERSION resource (first name, first language), or None."""
        if not self._version_done:
            try:
                self._version = self._parse_version()
            except (PEError, MemoryNotInDump) as e:
                self.problems.append(f"version resource: {e}")
                self._version = None
            except struct.error:
                self.problems.append("version resource: truncated")
                self._version = None
            self._version_done = True
        return self._version

    def _resource_entries(self, root: int, dir_rva: int) -> List[Tuple[int, int, bool]]:
        """(name-or-id, offset from the resource root, is_directory) of one directory.
        Named entries carry name = -1."""
        hdr = self.read_rva(dir_rva, 16)
        nnamed, nids = struct.unpack_from("<HH", hdr, 12)
        n = min(nnamed + nids, MAX_RESOURCE_ENTRIES)
        raw = self.read_rva(dir_rva + 16, 8 * n) if n else b""
        out = []
        for i in range(n):
            name, off = struct.unpack_from("<II", raw, 8 * i)
            ident = -1 if name & 0x80000000 else name
            out.append((ident, off & 0x7FFFFFFF, bool(off & 0x80000000)))
        return out

    def _parse_version(self) -> Optional[VersionInfo]:
        d = self.directory(DIR_RESOURCE)
        if d is None:
            return None
        root = d.rva
        # level 1: type == RT_VERSION
        node = None
        for ident, off, is_dir in self._resource_entries(root, root):
            if ident == RT_VERSION and is_dir:
                node = off
                break
        if node is None:
            return None
        # level 2 (name) and level 3 (language): take the first subdirectory / data entry
        for level in (2, 3):
            ents = self._resource_entries(root, root + node)
            if not ents:
                return None
            _, off, is_dir = ents[0]
            if level == 2:
                if not is_dir:
                    return None
                node = off
            else:
                if is_dir:
                    return None
                node = off
        data_rva, size = struct.unpack_from("<II", self.read_rva(root + node, 8), 0)
        if size < 6:
            return None
        size = min(size, MAX_VERSION_RESOURCE)
        return parse_vs_versioninfo(self.read_rva(data_rva, size))

    # ---------------------------------------------------------------- CodeView
    def codeview(self) -> Optional[CodeViewRecord]:
        """The RSDS CodeView record from the debug directory, or None."""
        if not self._codeview_done:
            try:
                self._codeview = self._parse_codeview()
            except (PEError, MemoryNotInDump) as e:
                self.problems.append(f"debug directory: {e}")
                self._codeview = None
            self._codeview_done = True
        return self._codeview

    def _parse_codeview(self) -> Optional[CodeViewRecord]:
        d = self.directory(DIR_DEBUG)
        if d is None:
            return None
        n = min(d.size // 28, MAX_DEBUG_ENTRIES)
        raw = self.read_rva(d.rva, 28 * n)
        for i in range(n):
            (_, _, _, _, dtype, size, addr, ptr) = struct.unpack_from("<IIHHIIII", raw, 28 * i)
            if dtype != IMAGE_DEBUG_TYPE_CODEVIEW or size < 24:
                continue
            size = min(size, 24 + MAX_PDB_NAME)
            if addr:
                data = self.read_rva(addr, size)
            elif ptr and self._file is not None:
                data = self._file.read(ptr, size)
            else:
                continue
            if data[:4] != b"RSDS":
                continue
            guid = _format_guid(data[4:20])
            age = _u32(data, 20)
            name = data[24:].split(b"\0", 1)[0].decode("utf-8", "replace")
            return CodeViewRecord(pdb_name=name, guid=guid, age=age)
        return None


# ----------------------------------------------------------------------------- unwind codes
def _decode_unwind_codes(codes: bytes, count: int, version: int, frame_offset: int, where: int) -> List[UnwindOp]:
    ops: List[UnwindOp] = []
    i = 0
    while i < count:
        code_offset = codes[2 * i]
        op = codes[2 * i + 1] & 0xF
        info = codes[2 * i + 1] >> 4

        def slot(k: int, i: int = i, op: int = op) -> int:
            if i + k >= count:
                raise PEError(
                    f"UNWIND_INFO at {where:#x}: {UWOP_NAMES.get(op, op)} at slot {i} runs past "
                    f"the {count} unwind codes"
                )
            return _u16(codes, 2 * (i + k))

        if op == UWOP_PUSH_NONVOL:
            n, operand = 1, info
        elif op == UWOP_ALLOC_LARGE:
            if info == 0:
                n, operand = 2, slot(1) * 8
            elif info == 1:
                n, operand = 3, slot(1) | (slot(2) << 16)
            else:
                raise PEError(f"UNWIND_INFO at {where:#x}: ALLOC_LARGE with op info {info}")
        elif op == UWOP_ALLOC_SMALL:
            n, operand = 1, info * 8 + 8
        elif op == UWOP_SET_FPREG:
            n, operand = 1, frame_offset
        elif op == UWOP_SAVE_NONVOL:
            n, operand = 2, slot(1) * 8
        elif op == UWOP_SAVE_NONVOL_FAR:
            n, operand = 3, slot(1) | (slot(2) << 16)
        elif op == UWOP_EPILOG:
            # v2: epilog descriptor; v1: the old UWOP_SAVE_XMM. Two slots either way, as
            # Windows' own unwinder counts it. Keep the raw value.
            n, operand = 2, slot(1)
        elif op == UWOP_SPARE_CODE:
            n, operand = 3, slot(1) | (slot(2) << 16)
        elif op == UWOP_SAVE_XMM128:
            n, operand = 2, slot(1) * 16
        elif op == UWOP_SAVE_XMM128_FAR:
            n, operand = 3, slot(1) | (slot(2) << 16)
        elif op == UWOP_PUSH_MACHFRAME:
            if info > 1:
                raise PEError(f"UNWIND_INFO at {where:#x}: PUSH_MACHFRAME with op info {info}")
            n, operand = 1, info
        elif op == UWOP_SET_FPREG_LARGE:
            n, operand = 3, slot(1) | (slot(2) << 16)
        else:
            raise PEError(f"UNWIND_INFO at {where:#x}: unknown unwind op {op}")
        ops.append(UnwindOp(code_offset, op, info, operand, n))
        i += n
    return ops


# ----------------------------------------------------------------------------- dynamic tables
class MemoryUnwindData:
    """UNWIND_INFO read straight from process memory at `base + rva`, with no PE header:
    what a dynamic function table (the FunctionTable stream: JIT code registered with
    RtlAddFunctionTable) points at. Shares PEImage's parser."""

    def __init__(self, read_va: ReadVA, base: int):
        self._read_va = read_va
        self.base = base
        self._unwind_cache: Dict[int, UnwindInfo] = {}

    def read_rva(self, rva: int, size: int) -> bytes:
        data = self._read_va(self.base + rva, size)
        if len(data) != size:
            raise MemoryNotInDump(self.base + rva, size)
        return data

    _read_runtime_function = PEImage._read_runtime_function
    resolve_indirect = PEImage.resolve_indirect
    unwind_info = PEImage.unwind_info
    unwind_chain = PEImage.unwind_chain


# ----------------------------------------------------------------------------- VS_VERSIONINFO
class _EndOfBlocks(Exception):
    """A zero-length (padding) block: no more siblings."""


def _vs_block(buf: bytes, off: int, end: int) -> Tuple[str, int, int, int, int, int]:
    """One VERSIONINFO block header at `off` (inside [off, end)):
    (key, wValueLength, wType, value_offset, block_end). Key decoding is bounded."""
    if off + 6 > end:
        raise PEError("version block truncated")
    wlen, wvlen, wtype = struct.unpack_from("<HHH", buf, off)
    if wlen < 6:
        raise _EndOfBlocks()
    block_end = min(off + wlen, end)
    p = off + 6
    chars = []
    while p + 2 <= block_end and len(chars) < 256:
        c = _u16(buf, p)
        p += 2
        if c == 0:
            break
        chars.append(c)
    key = struct.pack(f"<{len(chars)}H", *chars).decode("utf-16-le", "replace")
    value_off = _align(p, 4)
    return key, wvlen, wtype, value_off, block_end, wlen


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
    if wvlen >= 52 and value_off + 52 <= root_end:
        fixed = struct.unpack_from("<13I", buf, value_off)
        if fixed[0] == 0xFEEF04BD:
            file_version = _version_str(fixed[2], fixed[3])
            product_version = _version_str(fixed[4], fixed[5])
            flags, fos, ftype = fixed[7] & fixed[6], fixed[8], fixed[9]
    strings: Dict[str, str] = {}
    try:
        _walk_string_file_info(buf, _align(value_off + wvlen, 4), root_end, strings)
    except _EndOfBlocks:
        pass
    return VersionInfo(file_version, product_version, strings, flags, fos, ftype)


def _walk_string_file_info(buf: bytes, child: int, root_end: int, strings: Dict[str, str]) -> None:
    budget = MAX_VERSION_BLOCKS
    while child + 6 <= root_end and budget > 0:
        budget -= 1
        ckey, cvlen, _, cval, cend, clen = _vs_block(buf, child, root_end)
        if ckey == "StringFileInfo":
            table = _align(cval + cvlen, 4)
            while table + 6 <= cend and budget > 0:
                budget -= 1
                _, tvlen, _, tval, tend, tlen = _vs_block(buf, table, cend)
                s = _align(tval + tvlen, 4)
                while s + 6 <= tend and budget > 0:
                    budget -= 1
                    skey, _, _, sval, send, slen = _vs_block(buf, s, tend)
                    # wValueLength counts WCHARs by the spec but bytes for some tools:
                    # read to the block's end and stop at the NUL instead.
                    if skey and skey not in strings:
                        strings[skey] = _utf16z(buf, sval, send)
                    s = _align(s + slen, 4)
                table = _align(table + tlen, 4)
        child = _align(child + clen, 4)
