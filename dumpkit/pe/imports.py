"""The import directory and the delay-load import directory: each DLL an image imports, and
the names (or ordinals) it imports from it.

Names come from the import *name* table (OriginalFirstThunk, or the delay-load descriptor's
ImportNameTableRVA): in a process the loader has overwritten the address table with
addresses, so an image read from a dump's memory names its imports only through the name
table. An image whose descriptor has none (old linkers) names them in a file but not in
memory; that DLL is then listed with `complete` False.

Every count the image claims is bounded (the constants below, and the image's size): a
descriptor list or a thunk list without its terminating zero entry ends at the limit, and
names are read with a length limit and a total byte budget, so a hostile image never loops
or allocates without bound. What is cut short is said in `image.problems`."""

from __future__ import annotations

import struct
from typing import List, Optional, Protocol, Sequence, Tuple

from dumpkit.pe.errors import PEError
from dumpkit.pe.exports import cut_cstrings, read_cstring
from dumpkit.pe.headers import DataDirectory
from dumpkit.pe.winnt import (
    DELAYLOAD_RVA_BASED,
    DIR_DELAY_IMPORT,
    DIR_IMPORT,
    IMAGE_DELAYLOAD_DESCRIPTOR,
    IMAGE_IMPORT_DESCRIPTOR,
    IMAGE_ORDINAL_FLAG32,
    IMAGE_ORDINAL_FLAG64,
)
from dumpkit.records import record
from dumpkit.target import MemoryNotInDump

__all__ = [
    "ImportedDll",
    "ImportTable",
    "parse_imports",
    "MAX_IMPORT_DLLS",
    "MAX_IMPORTS_PER_DLL",
    "MAX_IMPORTED_FUNCTIONS",
    "MAX_IMPORT_NAME",
    "MAX_IMPORT_NAME_BYTES",
    "MAX_IMPORT_NAME_BLOCK",
]

MAX_IMPORT_DLLS = 4096  # descriptors per directory; real images import tens of DLLs
MAX_IMPORTS_PER_DLL = 1 << 16  # thunks per DLL: an export table's ordinals are 16-bit
MAX_IMPORTED_FUNCTIONS = 1 << 18  # thunks over the whole image (TensorFlow's biggest: ~10^4)
MAX_IMPORT_NAME = 4096  # MSVC hashes decorated names longer than this
MAX_IMPORT_NAME_BYTES = 16 << 20  # all names together: many thunks may point at one long name
MAX_IMPORT_NAME_BLOCK = 8 << 20  # one read of a DLL's names when they fit in this

_NAME_MARGIN = 256  # read past the last name's start: most names are shorter, longer ones are read alone

_THUNK_BLOCK = 512  # thunks read per call
_DESCRIPTOR_BLOCK = 64  # descriptors read per call


class PEImage(Protocol):
    """What the import parser reads of an image (pe.image.PEImage is one)."""

    size_of_image: int
    image_base: int
    is_pe32plus: bool
    source: str  # "memory": the address tables hold addresses, not names
    problems: List[str]

    def read_rva(self, rva: int, size: int) -> bytes: ...

    def directory(self, index: int) -> Optional[DataDirectory]: ...


@record
class ImportedDll:
    """One import descriptor: the DLL as the image names it ("MSVCP140.dll") and what the
    image takes from it. A DLL may have two (a plain and a delay-load one)."""

    dll: str
    names: Tuple[str, ...]  # in table order
    ordinals: Tuple[int, ...]  # imports by ordinal only
    delayed: bool  # from the delay-load directory: loaded on first call, not at start
    complete: bool  # the name table was read to its end (False: see the image's problems)
    # the rva of each name's address-table entry, the pointer a `call [rip+x]` to that
    # import reads (parallel to `names`; empty where the table's place is not known)
    slots: Tuple[int, ...] = ()

    def slot(self, name: str) -> Optional[int]:
        """The address-table entry of the imported `name`, or None."""
        if len(self.slots) != len(self.names) or name not in self.names:
            return None
        return self.slots[self.names.index(name)]


@record
class ImportTable:
    """Both import directories. `complete`: every descriptor and name table was read to its
    end; when False, an import not listed may still be there."""

    dlls: Tuple[ImportedDll, ...]
    complete: bool

    def from_dll(self, dll: str) -> Tuple[ImportedDll, ...]:
        """The descriptors naming `dll` (case-insensitive, as the loader matches)."""
        want = dll.lower()
        return tuple(d for d in self.dlls if d.dll.lower() == want)

    def imports(self, dll: str, name: str) -> bool:
        return any(name in d.names for d in self.from_dll(dll))

    def slots_of(self, name: str, dll_prefix: str) -> Tuple[int, ...]:
        """The address-table entries through which the image calls `name` imported from
        the DLLs whose names start with `dll_prefix` (lower case: "python")."""
        found = []
        for d in self.dlls:
            if d.dll.lower().startswith(dll_prefix):
                at = d.slot(name)
                if at is not None:
                    found.append(at)
        return tuple(found)


class _Budget:
    """What is left of the image-wide limits while its tables are read."""

    def __init__(self) -> None:
        self.functions = MAX_IMPORTED_FUNCTIONS
        self.name_bytes = MAX_IMPORT_NAME_BYTES


def parse_imports(image: "PEImage") -> ImportTable:
    """Both directories, plain first. Raises PEError / MemoryNotInDump only when neither
    directory's descriptors can be read at all; anything less is a problem line and an
    incomplete table."""
    budget = _Budget()
    dlls: List[ImportedDll] = []
    complete = True
    failure: Optional[Exception] = None
    for index, delayed in ((DIR_IMPORT, False), (DIR_DELAY_IMPORT, True)):
        d = image.directory(index)
        if d is None:
            continue
        what = "delay-load import table" if delayed else "import table"
        try:
            found, whole = _directory(image, d.rva, delayed, budget, what)
        except (PEError, MemoryNotInDump) as e:
            image.problems.append(f"{what}: {e}")
            failure, complete = e, False
            continue
        dlls += found
        complete = complete and whole
    if failure is not None and not dlls:
        raise failure
    return ImportTable(tuple(dlls), complete)


def _directory(image: "PEImage", rva: int, delayed: bool, budget: _Budget, what: str) -> Tuple[List[ImportedDll], bool]:
    """The descriptors of one directory, to the zero entry (its Size is not trusted: the
    terminator is what the loader reads)."""
    layout = IMAGE_DELAYLOAD_DESCRIPTOR if delayed else IMAGE_IMPORT_DESCRIPTOR
    room = max(0, image.size_of_image - rva) // layout.size
    limit = min(MAX_IMPORT_DLLS, room)
    out: List[ImportedDll] = []
    complete = True
    at = 0
    while at < limit:
        n = min(_DESCRIPTOR_BLOCK, limit - at)
        raw = _read_entries(image, rva + at * layout.size, layout.size, n)
        if at == 0 and not raw:
            raise PEError(f"descriptor at RVA {rva:#x} cannot be read")
        for i in range(len(raw) // layout.size):
            fields = layout.unpack_from(raw, i * layout.size)
            if not any(fields):
                return out, complete
            dll = _delayed(image, fields, budget) if delayed else _plain(image, fields, budget)
            if dll is None:
                complete = False
                continue
            out.append(dll)
            complete = complete and dll.complete
        if len(raw) < n * layout.size:
            image.problems.append(f"{what}: descriptors end unreadable after {len(out)} DLLs")
            return out, False
        at += n
    image.problems.append(f"{what}: no end after {limit} descriptors; reading {limit}")
    return out, False


def _plain(image: "PEImage", fields: Sequence[int], budget: _Budget) -> Optional[ImportedDll]:
    name_table, stamp, _chain, name_rva, address_table = fields
    dll = _dll_name(image, name_rva, "import table")
    if dll is None:
        return None
    if name_table:
        return _thunks(image, dll, name_table, False, False, budget, address_table)
    # No name table: the address table holds the names in a file, unless the image was bound
    # (nonzero TimeDateStamp) or the loader has filled it in (memory).
    if image.source == "memory" or stamp:
        image.problems.append(f"import table: {dll} has no name table; its imported names are not known")
        return ImportedDll(dll, (), (), False, False)
    return _thunks(image, dll, address_table, False, False, budget, address_table)


def _delayed(image: "PEImage", fields: Sequence[int], budget: _Budget) -> Optional[ImportedDll]:
    attributes, name_rva, _handle, iat, name_table = fields[:5]
    vas = not attributes & DELAYLOAD_RVA_BASED  # Visual C++ 6 wrote addresses, not RVAs
    dll = _dll_name(image, _rva(image, name_rva, vas), "delay-load import table")
    if dll is None:
        return None
    return _thunks(image, dll, _rva(image, name_table, vas), True, vas, budget, _rva(image, iat, vas))


def _rva(image: "PEImage", value: int, va: bool) -> int:
    """An RVA from a field that holds an address when `va` (out of the image: an RVA the
    reads refuse)."""
    return value - image.image_base if va and value >= image.image_base else value


def _dll_name(image: "PEImage", rva: int, what: str) -> Optional[str]:
    try:
        return read_cstring(image, rva, MAX_IMPORT_NAME).decode("ascii", "replace")
    except (PEError, MemoryNotInDump) as e:
        image.problems.append(f"{what}: a DLL name cannot be read ({e})")
        return None


def _thunks(
    image: "PEImage", dll: str, table: int, delayed: bool, vas: bool, budget: _Budget, address_table: int
) -> Optional[ImportedDll]:
    """The name table at `table` read to its zero thunk, its names then read in one block
    when they lie together (linkers put them in one run). `address_table`: the rva of the
    address table whose entries match the name table's one for one."""
    size = 8 if image.is_pe32plus else 4
    flag = IMAGE_ORDINAL_FLAG64 if image.is_pe32plus else IMAGE_ORDINAL_FLAG32
    fmt = "<Q" if image.is_pe32plus else "<I"
    limit = min(MAX_IMPORTS_PER_DLL, budget.functions, max(0, image.size_of_image - table) // size)
    values: List[int] = []
    ended = False
    while len(values) < limit and not ended:
        n = min(_THUNK_BLOCK, limit - len(values))
        raw = _read_entries(image, table + len(values) * size, size, n)
        for (v,) in struct.iter_unpack(fmt, raw):
            if v == 0:
                ended = True
                break
            values.append(v)
        if not ended and len(raw) < n * size:
            break
    budget.functions -= len(values)
    if not ended:
        why = "is unreadable" if len(values) < limit else "has no end"
        image.problems.append(f"import table: {dll}'s name table {why} after {len(values)} entries")
    ordinals = tuple(v & 0xFFFF for v in values if v & flag)
    by_name = [i for i, v in enumerate(values) if not v & flag]
    name_rvas = [_rva(image, values[i], vas) + 2 for i in by_name]  # past the Hint
    names, read, all_read = _names(image, name_rvas, budget)
    if not all_read:
        image.problems.append(f"import table: {len(name_rvas) - len(names)} names imported from {dll} unreadable")
    slots = tuple(address_table + by_name[k] * size for k in read) if address_table else ()
    return ImportedDll(dll, tuple(names), ordinals, delayed, ended and all_read, slots)


def _names(image: "PEImage", rvas: Sequence[int], budget: _Budget) -> Tuple[List[str], List[int], bool]:
    """The names at `rvas`, within the budget; (names read, the index in `rvas` of each,
    whether all were)."""
    block_at, block = _name_block(image, rvas)
    out: List[str] = []
    read: List[int] = []
    for k, raw in enumerate(cut_cstrings(image, block_at, block, rvas, MAX_IMPORT_NAME)):
        if raw is None:
            continue
        budget.name_bytes -= len(raw)
        if budget.name_bytes < 0:
            return out, read, False
        out.append(raw.decode("ascii", "replace"))
        read.append(k)
    return out, read, len(out) == len(rvas)


def _name_block(image: "PEImage", rvas: Sequence[int]) -> Tuple[int, bytes]:
    """(rva, bytes) of one read covering every name when they lie close together; (0, b"")
    when not or when that read fails, and each name is then read on its own."""
    inside = [r for r in rvas if 0 <= r < image.size_of_image]
    if not inside:
        return 0, b""
    lo = min(inside)
    hi = min(max(inside) + _NAME_MARGIN, image.size_of_image)
    if hi - lo > MAX_IMPORT_NAME_BLOCK:
        return 0, b""
    try:
        return lo, image.read_rva(lo, hi - lo)
    except (PEError, MemoryNotInDump):
        # the block may run past the readable bytes (a dump's pages, the image's end)
        return 0, b""


def _read_entries(image: "PEImage", rva: int, size: int, count: int) -> bytes:
    """Up to `count` entries of `size` bytes at `rva`: all in one read, else as many as can
    be read one by one (a dump may hold the first page of a table but not the next)."""
    try:
        return image.read_rva(rva, size * count)
    except (PEError, MemoryNotInDump):
        pass
    out = bytearray()
    for i in range(count):
        try:
            out += image.read_rva(rva + i * size, size)
        except (PEError, MemoryNotInDump):
            break
    return bytes(out)
