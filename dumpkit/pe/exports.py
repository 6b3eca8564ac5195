"""The export directory: (rva, name) of every exported function, forwarders skipped,
unnamed exports as "#ordinal". Counts are bounded by the image's size; names are read in
one block when they lie within 8 MB (a linker puts them in one run), else in chunks of up to a
MiB taken in address order, and one by one where no chunk can be read."""

from __future__ import annotations

import bisect
import struct
from typing import Dict, Iterator, List, Optional, Protocol, Sequence, Tuple

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


__all__ = [
    "PEImage",
    "cut_cstrings",
    "parse_exports",
    "read_cstring",
    "read_cstrings",
    "MAX_EXPORTS",
    "MAX_EXPORT_NAME",
    "MAX_EXPORT_NAME_BLOCK",
]

MAX_EXPORTS = 1 << 20  # functions and names each
MAX_EXPORT_NAME = 1024
MAX_EXPORT_NAME_BLOCK = 8 << 20  # one read of all export names when they fit in this
# Names that do not fit it are read in chunks. TensorFlow's _pywrap_tensorflow_internal.pyd has
# 45,575 names over 9.4 MB: read one by one they took 0.75 s of every analysis that named a
# frame in it; in chunks, ten reads. (The one read is kept where it serves: a bundle holds the
# pages its analysis read, and the chunks read only the names' own bytes.)
EXPORT_NAME_CHUNK = 1 << 20
_SMALLEST_BLOCK = 4096  # a block that cannot be read is retried halved, down to a page
_FAILED_BLOCKS = 16  # blocks that could not be read before the rest are read one by one


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
        # a name whose ordinal is out of range is not read: a bundle holds the pages its
        # analysis read, and its neighbours' blocks stop where it starts
        valid = [(rva, idx) for rva, idx in zip(name_rvas, ordinals) if idx < nfuncs]
        fences = [rva for rva, idx in zip(name_rvas, ordinals) if idx >= nfuncs]
        bad = len(fences)
        block_at, block = _name_block(image, name_rvas)
        if block:
            raws = list(cut_cstrings(image, block_at, block, [rva for rva, _ in valid], MAX_EXPORT_NAME))
        else:
            raws = read_cstrings(image, [rva for rva, _ in valid], MAX_EXPORT_NAME, fences)
        for raw, (_, idx) in zip(raws, valid):
            if raw is None:
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
        named = names.get(idx)
        if named is None:
            out.append((frva, f"#{ordinal_base + idx}"))
        else:
            for n in named:
                out.append((frva, n))
    return out


def _name_block(image: "PEImage", name_rvas: Sequence[int]) -> Tuple[int, bytes]:
    """(rva, bytes) of one read covering every export name when they lie within
    MAX_EXPORT_NAME_BLOCK (linkers put them in one run); (0, b"") when not, or when that read
    fails."""
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


def cut_cstrings(
    image: "PEImage", block_at: int, block: bytes, rvas: Sequence[int], limit: int
) -> Iterator[Optional[bytes]]:
    """The NUL-terminated strings at `rvas`, in their order: cut from `block` (read at
    `block_at`) where it holds one whole, else read on its own (None: unreadable). One at a
    time, so a caller that stops early (a budget spent) reads no page past it."""
    for rva in rvas:
        at = rva - block_at
        end = block.find(b"\0", at, at + limit) if 0 <= at < len(block) else -1
        if end >= 0:
            yield block[at:end]
            continue
        try:
            yield read_cstring(image, rva, limit)
        except (PEError, MemoryNotInDump):
            yield None


def read_cstrings(
    image: "PEImage", rvas: Sequence[int], limit: int, fences: Sequence[int] = ()
) -> List[Optional[bytes]]:
    """The NUL-terminated strings at `rvas`, in their order; None for one that cannot be read
    or has no NUL in its first `limit` bytes (as read_cstring). They are cut from blocks of
    up to EXPORT_NAME_CHUNK bytes read in address order, each from the first string the
    last one did not hold and ending before the next of `fences` (strings not asked for);
    a string no block decides (its bytes unreadable as a block) is read on its own."""
    out: List[Optional[bytes]] = [None] * len(rvas)
    if not rvas:
        return out
    # blocks end where the last string starts, which is read on its own: no read goes past
    # the strings asked for (a bundle holds the pages its analysis read, and no other)
    names_end = min(max(rvas), image.size_of_image)
    fenced = sorted(fences)
    block_at, block = 0, b""
    failed = 0
    for i in sorted(range(len(rvas)), key=rvas.__getitem__):
        rva = rvas[i]
        at = rva - block_at
        end = block.find(b"\0", at, at + limit) if 0 <= at < len(block) else -1
        if end < 0 and (at < 0 or at + limit > len(block)):
            # not in the block, or running past its end: the next block starts here
            if failed >= _FAILED_BLOCKS or rva >= names_end:
                block_at, block = rva, b""
            else:
                end = min(rva + EXPORT_NAME_CHUNK, names_end)
                fence = bisect.bisect_right(fenced, rva)
                if fence < len(fenced):
                    end = min(end, fenced[fence])
                block_at, block = rva, _block(image, rva, end - rva)
                failed += not block
            at = 0
            end = block.find(b"\0", 0, limit)
        if end >= 0:
            out[i] = block[at:end]
        elif at + limit > len(block):  # the block does not decide: read it on its own
            try:
                out[i] = read_cstring(image, rva, limit)
            except (PEError, MemoryNotInDump):
                pass
    return out


def _block(image: "PEImage", rva: int, size: int) -> bytes:
    """The bytes at `rva`: `size` of them, or the most a halved read could take (a dump or a
    bundle may hold the names' pages but not the ones after); b"" when not even a page."""
    while True:
        try:
            return image.read_rva(rva, size)
        except (PEError, MemoryNotInDump):
            if size <= _SMALLEST_BLOCK:
                return b""
            size = max(size // 2, _SMALLEST_BLOCK)
