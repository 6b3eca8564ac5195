"""The export directory: (rva, name) of every exported function, forwarders skipped,
unnamed exports as "#ordinal". Counts are bounded by the image's size; names are read in one
block when the linker put them together (it always does), else one by one."""

from __future__ import annotations

import struct
from typing import Dict, List, Optional, Protocol, Sequence, Tuple

from dumpkit.pe.errors import PEError
from dumpkit.pe.headers import DataDirectory
from dumpkit.pe.winnt import DIR_EXPORT, IMAGE_EXPORT_DIRECTORY
from dumpkit.target import MemoryNotInDump


class PEImage(Protocol):
    """What the export parser reads of an image (pe.image.PEImage is one): it is declared
    here so that the image, which calls this parser, is not imported by it."""

    size_of_image: int
    problems: List[str]

    def read_rva(self, rva: int, size: int) -> bytes: ...

    def directory(self, index: int) -> Optional[DataDirectory]: ...


__all__ = ["PEImage", "parse_exports", "read_cstring", "MAX_EXPORTS", "MAX_EXPORT_NAME", "MAX_EXPORT_NAME_BLOCK"]

MAX_EXPORTS = 1 << 20  # functions and names each
MAX_EXPORT_NAME = 1024
MAX_EXPORT_NAME_BLOCK = 8 << 20  # one read of all export names when they fit in this


def read_cstring(image: "PEImage", rva: int, limit: int) -> bytes:
    """A NUL-terminated byte string at `rva`, at most `limit` bytes (PEError if longer).
    Reads in small chunks, falling back to single bytes near the end of readable data."""
    out = bytearray()
    pos = rva
    while len(out) < limit:
        want = min(64, limit - len(out), image.size_of_image - pos)
        if want <= 0:
            break
        try:
            chunk = image.read_rva(pos, want)
        except (MemoryNotInDump, PEError):
            if want == 1:
                raise
            chunk = image.read_rva(pos, 1)
        nul = chunk.find(b"\0")
        if nul >= 0:
            out += chunk[:nul]
            return bytes(out)
        out += chunk
        pos += len(chunk)
    raise PEError(f"unterminated string at RVA {rva:#x}")


def parse_exports(image: "PEImage") -> List[Tuple[int, str]]:
    """(rva, name) in table order (unsorted); problems met are added to `image.problems`.
    Raises PEError / MemoryNotInDump when the directory or its arrays cannot be read."""
    d = image.directory(DIR_EXPORT)
    if d is None:
        return []
    hdr = image.read_rva(d.rva, IMAGE_EXPORT_DIRECTORY.size)
    (_, _, _, _, _, ordinal_base, nfuncs, nnames, funcs_rva, names_rva, ords_rva) = IMAGE_EXPORT_DIRECTORY.unpack_from(
        hdr, 0
    )
    limit = min(MAX_EXPORTS, image.size_of_image // 4)
    if nfuncs > limit:
        image.problems.append(f"export table claims {nfuncs} functions; reading {limit}")
        nfuncs = limit
    if nnames > limit:
        image.problems.append(f"export table claims {nnames} names; reading {limit}")
        nnames = limit
    if nfuncs == 0:
        return []
    funcs = struct.unpack(f"<{nfuncs}I", image.read_rva(funcs_rva, 4 * nfuncs))
    names: Dict[int, List[str]] = {}
    if nnames:
        name_rvas = struct.unpack(f"<{nnames}I", image.read_rva(names_rva, 4 * nnames))
        ordinals = struct.unpack(f"<{nnames}H", image.read_rva(ords_rva, 2 * nnames))
        bad = 0
        block_at, block = _name_block(image, name_rvas)
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
                    raw = read_cstring(image, nrva, MAX_EXPORT_NAME)
                except (PEError, MemoryNotInDump):
                    bad += 1
                    continue
            names.setdefault(idx, []).append(raw.decode("utf-8", "replace"))
        if bad:
            image.problems.append(f"export table: {bad} unreadable or invalid names")
    fwd_lo, fwd_hi = d.rva, d.rva + d.size
    out: List[Tuple[int, str]] = []
    for idx, frva in enumerate(funcs):
        if frva == 0 or fwd_lo <= frva < fwd_hi:  # unused slot / forwarder string
            continue
        for n in names.get(idx, (f"#{ordinal_base + idx}",)):
            out.append((frva, n))
    return out


def _name_block(image: "PEImage", name_rvas: Sequence[int]) -> Tuple[int, bytes]:
    """(rva, bytes) of one read covering every export name when they lie close
    together (linkers put them in one run); (0, b"") when not, or when that read
    fails, and each name is then read on its own."""
    if not name_rvas:
        return 0, b""
    lo = min(name_rvas)
    hi = min(max(name_rvas) + MAX_EXPORT_NAME, image.size_of_image)
    if hi <= lo or hi - lo > MAX_EXPORT_NAME_BLOCK:
        return 0, b""
    try:
        return lo, image.read_rva(lo, hi - lo)
    except (PEError, MemoryNotInDump):
        return 0, b""
