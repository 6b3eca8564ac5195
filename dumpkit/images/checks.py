"""Whether a file is the module's build: the store key an image or PDB is filed under, the
checks a file must pass (PE headers, TimeDateStamp, SizeOfImage; a PDB's GUID and age)
before it is used or cached, and whether an image in the dump's memory carries its unwind
data."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, List, Optional, Tuple

from dumpkit.images.paths import existing_files, module_file_name, windows_path_candidates
from dumpkit.pe import PEError, PEImage
from dumpkit.symbols.store import Check, StoreKey, read_pointer
from dumpkit.target import CodeViewRecord, MemoryNotInDump, Module

if TYPE_CHECKING:  # the PDB reader is imported when a PDB is found (most dumps have none)
    pass


_PDATA_PROBE_CHUNK = 1 << 20
_PDATA_FULL_CHECK = 1 << 20  # bytes of .pdata read in full to accept a memory image
_UNWIND_SAMPLES = 64  # .pdata entries whose UNWIND_INFO must be in memory too

MAX_FILE_PTR = 4096


def pointed_files(ptr: str) -> Tuple[List[str], Optional[str]]:
    """The existing files a store's file.ptr points to here, and why there are none (None
    when there are)."""
    value, why = read_pointer(ptr)
    if value is None:
        return [], why
    found = list(existing_files(windows_path_candidates(value) if os.sep == "/" else [value]))
    return found, None if found else f"{ptr} points to {value}, which is not here"


def image_key(module: Module) -> Optional[StoreKey]:
    name = module_file_name(module)
    if not name or not module.timestamp or not module.size:
        return None
    return StoreKey(name, f"{module.timestamp:08X}{module.size:x}")


def image_check(module: Module) -> Check:
    """A store candidate is the module's image when its PE headers parse, its TimeDateStamp
    and SizeOfImage are the module's, and the file holds all of its sections' data (a
    transfer cut short can leave the headers whole)."""

    def check(path: str) -> Optional[str]:
        try:
            img = PEImage.from_file(path)
        except PEError as e:
            return f"not a PE image ({e})"
        try:
            if img.timestamp != module.timestamp or img.size_of_image != module.size:
                return (
                    f"another build (TimeDateStamp {img.timestamp:#010x} SizeOfImage {img.size_of_image:#x}, "
                    f"the dump has {module.timestamp:#010x} {module.size:#x})"
                )
            size = os.path.getsize(path)
            end = max((s.raw_offset + s.raw_size for s in img.sections if s.raw_size), default=0)
            if end > size:
                return f"cut short ({size:,} bytes; its sections' data ends at {end:,})"
        finally:
            img.close()
        return None

    return check


def pdb_check(cv: CodeViewRecord) -> Check:
    """A store candidate is the PDB `cv` names when it reads as one and its GUID and age are `cv`'s."""

    def check(path: str) -> Optional[str]:
        from dumpkit.symbols.pdb import PdbError, open_pdb

        try:
            pdb = open_pdb(path)
        except PdbError as e:
            return f"not a readable PDB ({e})"
        try:
            why = pdb.mismatch(cv)
        finally:
            pdb.close()
        return None if why is None else f"another build ({why})"

    return check


def pdata_unreadable(img: PEImage) -> Optional[str]:
    """None when the image's unwind data reads from memory, else why not: the exception
    directory in full when it is at most _PDATA_FULL_CHECK bytes (a few probes of a huge
    one, which a lookup's binary search touches only a few entries of), and the
    UNWIND_INFO headers of up to _UNWIND_SAMPLES entries spread over it (a dump can
    hold .pdata but not .xdata, and then a file image unwinds where memory cannot)."""
    if not img.pdata_count:
        exc = img.directory(3)
        if exc is None:
            return "no exception directory"
        return "exception directory not usable for this machine"
    total = img.pdata_count * 12
    rva = img.directory(3).rva  # type: ignore[union-attr]
    if total <= _PDATA_FULL_CHECK:
        pos = 0
        while pos < total:
            n = min(_PDATA_PROBE_CHUNK, total - pos)
            try:
                img.read_rva(rva + pos, n)
            except (MemoryNotInDump, PEError):
                return f"exception directory not in the dump (from RVA {rva + pos:#x})"
            pos += n
    for index in _spread(img.pdata_count, _UNWIND_SAMPLES):
        try:
            entry = img.pdata_entry(index)
        except (MemoryNotInDump, PEError):
            return f"exception directory not in the dump (entry {index} at RVA {rva + 12 * index:#x})"
        if entry.unwind_rva & 1:
            continue  # points at another entry, not at unwind info
        try:
            img.read_rva(entry.unwind_rva, 4)
        except (MemoryNotInDump, PEError):
            return f"unwind info not in the dump (RVA {entry.unwind_rva:#x}, for the function at {entry.begin_rva:#x})"
    return None


_CODE_SAMPLES = 8  # functions whose first byte is looked for in a memory image


def code_in_dump(img: PEImage) -> bool:
    """Whether the dump holds the image's code, not only its tables: the first byte of each
    of _CODE_SAMPLES functions spread over its exception directory. A full-memory dump
    holds all of it; a dump `dumpkit capture` wrote holds the tables a walk reads and only
    the code near the threads (capture/walkdata.py), and a file of the same build, where
    one is found, is better (the code the call-site and prologue checks read, a COFF
    symbol table)."""
    for index in _spread(img.pdata_count, _CODE_SAMPLES):
        try:
            img.read_rva(img.pdata_entry(index).begin_rva, 1)
        except (MemoryNotInDump, PEError):
            return False
    return True


def _spread(count: int, samples: int) -> List[int]:
    """Up to `samples` indexes spread evenly over range(count), first and last included."""
    if count <= samples:
        return list(range(count))
    return sorted({(count - 1) * k // (samples - 1) for k in range(samples)})
