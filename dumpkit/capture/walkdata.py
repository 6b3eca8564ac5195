"""The parts of the modules' images that a stack walk and its names read, which `dumpkit
capture` adds to its dumps so that they read the same on a machine without the images.

A minidump holds the stacks but not the code: read on another machine, a frame in
ntdll.dll or kernelbase.dll has no unwind data and no name unless the image is found there
(Microsoft's symbol server for Windows' own DLLs, which an offline machine cannot reach;
nowhere for Wine's or a program's own DLLs). The walk then goes on by scanning, a hung
thread's wait has no name, and an exit stop is a bare breakpoint. What the walk needs of an
image is small: its headers, its exception directory (.pdata), the unwind information the
entries point to (.xdata), and the export directory for the names: about 100-400 KB for a
system DLL. The analysis reads an image from the dump's memory when its header and
exception directory are there and no file of the build is found (images/locator.py: a file
has all the code, which the dump holds only near the threads).

Which modules: those a thread's instruction pointer is in, or a word near the top of its
stack points into, most pointed-at first. And of their code, what the walk reads of it:
the function each thread stopped in (a system call's stub has no unwind entry, and its
caller is found by reading its code), and a few bytes around each word of the stacks that
points into code (a return address's call site, which confirms it). Bounded: the stack
bytes looked at per thread, each table's size, the code windows, and the total."""

from __future__ import annotations

import struct
from bisect import bisect_right
from typing import Callable, Dict, Iterable, List, Sequence, Set, Tuple

from dumpkit.pe.headers import PEError
from dumpkit.pe.image import PEImage
from dumpkit.spans import Span, merge
from dumpkit.target import MemoryNotInDump, Module

STACK_BYTES = 64 << 10  # of each thread's stack, from its stack pointer up: the frames a walk starts from
MAX_TABLE = 1 << 20  # an export or exception directory larger than this is left out (a huge DLL's)
MAX_UNWIND_SPAN = 2 << 20  # the unwind information of one module, first to last entry
MAX_TOTAL = 16 << 20  # bytes added in all
UNWIND_TAIL = 0x220  # past the last entry's start: its header, 255 codes, a chained entry
PAGE = 0x1000
MAX_FUNCTION = 64 << 10  # of the function a thread stopped in
NEAR_IP = 0x200  # either side of an instruction pointer no unwind entry covers
CALL_SITE = (16, 16)  # bytes before and after a word that points into code: the call it returns from
MAX_CALL_SITES = 16384
IMAGE_SCN_MEM_EXECUTE = 0x20000000
EXPORTS, EXCEPTIONS = 0, 3  # data directory indexes

ReadVA = Callable[[int, int], bytes]


def image_tables(img: PEImage, module: Module) -> List[Span]:
    """The spans of `module`'s image a walk and its names read: the headers' page, the export
    and exception directories, and the unwind information. `img`: the image as the process
    maps it (PEImage.from_memory over the process's memory)."""
    end = module.base + max(module.size, img.size_of_image)
    spans: List[Span] = [(module.base, module.base + min(max(img.size_of_headers, 1), PAGE))]
    for index in (EXPORTS, EXCEPTIONS):
        d = img.directory(index)
        if d is not None and 0 < d.size <= MAX_TABLE:
            spans.append((module.base + d.rva, min(end, module.base + d.rva + d.size)))
    exc = img.directory(EXCEPTIONS)
    if exc is not None and 0 < exc.size <= MAX_TABLE:
        try:
            table = img.read_rva(exc.rva, exc.size - exc.size % 12)
        except (PEError, MemoryNotInDump):
            return merge(spans)
        unwind = [u for _, _, u in struct.iter_unpack("<III", table) if u and not u & 1]
        if unwind:
            first, last = min(unwind), max(unwind) + UNWIND_TAIL
            if last - first <= MAX_UNWIND_SPAN:
                spans.append((module.base + first, min(end, module.base + last)))
    return merge(spans)


def _pointing(modules: Sequence[Module], ips: Sequence[int], stacks: Sequence[bytes]) -> Dict[int, Set[int]]:
    """Module index (in `modules`, sorted by base) -> the distinct instruction pointers and
    words of `stacks` (each the top STACK_BYTES of a thread's stack, 8-byte aligned) that
    point into it. One pass over the words, a binary search each."""
    bases = [m.base for m in modules]
    if not modules:
        return {}
    low, high = modules[0].base, max(m.base + m.size for m in modules)
    hits: Dict[int, Set[int]] = {}

    def count(word: int) -> None:
        if low <= word < high:
            i = bisect_right(bases, word) - 1
            if i >= 0 and word < modules[i].base + modules[i].size:
                hits.setdefault(i, set()).add(word)

    for ip in ips:
        count(ip)
    for stack in stacks:
        data = stack[: STACK_BYTES - STACK_BYTES % 8]
        for (word,) in struct.iter_unpack("<Q", data[: len(data) - len(data) % 8]):
            count(word)
    return hits


def _ranked(modules: Sequence[Module], ips: Sequence[int], stacks: Sequence[bytes]) -> List[Tuple[Module, Set[int]]]:
    """The modules `_pointing` finds, each with its words, pointed at in the most places first."""
    ordered = sorted((m for m in modules if m.size), key=lambda m: m.base)
    hits = _pointing(ordered, ips, stacks)
    return [(ordered[i], hits[i]) for i in sorted(hits, key=lambda i: (-len(hits[i]), ordered[i].base))]


def modules_on_stacks(modules: Sequence[Module], ips: Sequence[int], stacks: Sequence[bytes]) -> List[Module]:
    """The modules a thread's instruction pointer is in or a word of `stacks` points into,
    those pointed at in the most places first."""
    return [m for m, _ in _ranked(modules, ips, stacks)]


def walk_tables(read: ReadVA, modules: Sequence[Module], ips: Sequence[int], stacks: Sequence[bytes]) -> List[Span]:
    """The image tables (image_tables) of the modules on the threads' stacks, those pointed
    at in the most places first, and the code the walk reads (code_windows), until
    MAX_TOTAL bytes; a module whose headers cannot be read is passed over."""
    out: List[Span] = []
    total = 0
    for module, words in _ranked(modules, ips, stacks):
        try:
            img = PEImage.from_memory(read, module.base)
        except (PEError, MemoryNotInDump):
            continue
        spans = image_tables(img, module) + code_windows(img, module, [p for p in ips if p in words], words)
        size = sum(b - a for a, b in merge(spans))
        if total + size > MAX_TOTAL:
            continue
        out += spans
        total += size
    return merge(out)


def code_windows(img: PEImage, module: Module, ips: Sequence[int], words: Iterable[int]) -> List[Span]:
    """What a walk reads of `module`'s code (`img`, as for image_tables): the function each
    instruction pointer in it is in (or NEAR_IP either side, where no unwind entry covers
    it), and CALL_SITE around each of `words` (stack words) that points into its executable
    sections, at most MAX_CALL_SITES."""
    base, end = module.base, module.base + module.size
    code = merge(
        (base + s.rva, base + s.rva + s.mapped_size) for s in img.sections if s.characteristics & IMAGE_SCN_MEM_EXECUTE
    )
    out: List[Span] = []
    for ip in ips:
        if not base <= ip < end:
            continue
        try:
            f = img.lookup_function(ip - base)
        except (PEError, MemoryNotInDump):
            f = None
        if f is not None:
            out.append((base + f.begin_rva, base + min(f.end_rva, f.begin_rva + MAX_FUNCTION)))
        else:
            out.append((max(base, ip - NEAR_IP), min(end, ip + NEAR_IP)))
    sites = sorted(w for w in words if any(a <= w < b for a, b in code))[:MAX_CALL_SITES]
    out += [(max(base, w - CALL_SITE[0]), min(end, w + CALL_SITE[1])) for w in sites]
    return merge(out)


def as_ranges(spans: Sequence[Span]) -> List[Tuple[int, int]]:
    """(address, size) pairs, as capture's page reader takes them."""
    return [(a, b - a) for a, b in spans if b > a]
