"""The memory a dying thread's stack points to, which `dumpkit capture` adds to its dumps.

A runtime that aborts writes its reason first, and the text is seldom on the stack itself:
TensorFlow's `Check failed: ...` is in the heap buffer of a LogMessage's stream (the object
lives on the stack, its characters do not), an uncaught C++ exception's what() string is
in the heap object its ThrowInfo describes. A MiniDumpNormal dump holds the stacks but not
the heap, so the text would be lost; a full-memory dump keeps everything and costs tens of
megabytes. The middle way is dbghelp's own idea (MiniDumpWithIndirectlyReferencedMemory,
which Wine's writer ignores): for every word near the top of the stack that points into
readable memory outside the modules and the stack, keep a small window around where it
points; and, once more, around what those windows point to (an object holding a pointer to
its text). Bounded by construction: the words looked at, the window sizes, the total.
A snapshot of a running process (`capture --attach PID --now`) keeps what every thread's
stack points to in the same way, the writable sections of the images included: that is
where a hung thread's lock is, on the heap or in a DLL's globals.

Pure: the caller hands in the stack's bytes and a reader of the stopped process."""

from __future__ import annotations

import struct
from bisect import bisect_right
from typing import Callable, Iterable, List, Sequence, Set, Tuple

from dumpkit.spans import Span, gaps, merge

STACK_BYTES = 128 << 10  # from the stack pointer up: where the dying frames and their objects are
BEFORE, AFTER = 64, 448  # a window around each pointer: an object's head and its text
SECOND_BEFORE, SECOND_AFTER = 0, 256  # around what the first windows point to
TYPE_NAME = 64  # bytes kept of an object's type's name
TYPE_HEAD = 32  # bytes kept of the type object itself: through tp_name (+24)
MAX_POINTERS = 4096  # distinct targets per level
MAX_TOTAL = 4 << 20  # bytes added in all
IMAGE_SCN_MEM_WRITE = 0x80000000  # a section the process may change (.data, .bss)
LOWEST = 0x10000  # below: never a pointer (Windows keeps the first 64 KiB unmapped)
HIGHEST = 0x7FFFFFFFFFFF  # the end of x64 user space
PAGE = 0x1000

ReadAvailable = Callable[[int, int], bytes]


def _words(data: bytes) -> Iterable[int]:
    usable = len(data) & ~7
    return struct.unpack_from(f"<{usable // 8}Q", data) if usable else ()


def _inside(value: int, spans: Sequence[Span]) -> bool:
    """Is `value` in one of the sorted, merged `spans`?"""
    i = bisect_right(spans, (value, 1 << 64)) - 1
    return i >= 0 and spans[i][0] <= value < spans[i][1]


def _targets(data: bytes, skip: Sequence[Span], seen: Set[int]) -> List[int]:
    """The distinct words of `data` that can be user-space pointers outside `skip` (sorted,
    merged), in the order they appear, at most MAX_POINTERS, none already in `seen`."""
    out: List[int] = []
    for value in _words(data):
        if value < LOWEST or value > HIGHEST or value in seen:
            continue
        seen.add(value)
        if _inside(value, skip):
            continue
        out.append(value)
        if len(out) >= MAX_POINTERS:
            break
    return out


def _windows(targets: Sequence[int], before: int, after: int) -> List[Span]:
    return merge(((t - before) & ~15, (t + after + 15) & ~15) for t in targets)


def _read(read_available: ReadAvailable, spans: Sequence[Span], budget: int) -> List[Tuple[int, bytes]]:
    """The readable bytes of `spans` (each read from its start as far as the process has
    it), within `budget` bytes in all."""
    out: List[Tuple[int, bytes]] = []
    for lo, hi in spans:
        if budget <= 0:
            break
        data = read_available(lo, min(hi - lo, budget))
        if not data and (lo | PAGE - 1) + 1 < hi:
            # the window's head lies on a page the process does not have (an object at the
            # start of its allocation): the rest of it, from the next page on
            lo = (lo | PAGE - 1) + 1
            data = read_available(lo, min(hi - lo, budget))
        if data:
            out.append((lo, data))
            budget -= len(data)
    return out


def pointed_memory(
    stack: bytes,
    skip: Sequence[Span],
    read_available: ReadAvailable,
    max_total: int = MAX_TOTAL,
    held: Sequence[Span] = (),
    registers: Sequence[int] = (),
) -> List[Tuple[int, bytes]]:
    """The pieces (address, bytes) of memory that the words of `stack` (the top of the
    dying thread's stack, from its stack pointer up) point to, and what those point to in
    turn, outside `skip` (the modules' images and the stack itself, which the dump has or
    whose files the analysis reads). `registers`: the thread's general-purpose registers,
    looked at first: the object a function was working on when it stopped (the one an access
    violation read through, the lock a wait was given) is often in a register and nowhere on
    the stack yet. `held`: what is kept already (an earlier stack's pieces): not read again,
    but an object there still gets its type's name."""
    skip, held = merge(skip), merge(held)
    seen: Set[int] = set()
    in_registers = struct.pack(f"<{len(registers)}Q", *(r & (1 << 64) - 1 for r in registers))
    targets = _targets(in_registers + stack[:STACK_BYTES], skip, seen)
    fresh_targets = [t for t in targets if not _inside(t, held)]
    first = _read(read_available, _windows(fresh_targets, BEFORE, AFTER), max_total)
    used = sum(len(d) for _, d in first)
    inner: List[int] = []
    for _, data in first:
        inner += _targets(data, skip, seen)
        if len(inner) >= MAX_POINTERS:
            break
    have = merge([*held, *((a, a + len(d)) for a, d in first)])
    fresh = [t for t in inner[:MAX_POINTERS] if not _inside(t, have)]
    second = _read(read_available, _windows(fresh, SECOND_BEFORE, SECOND_AFTER), max_total - used)
    used += sum(len(d) for _, d in second)
    names = _type_names(targets, [*first, *second], read_available, max_total - used)
    return first + second + names


def _word_at(pieces: Sequence[Tuple[int, bytes]], starts: Sequence[int], address: int) -> int:
    """The 8-byte word at `address` in the pieces read so far (sorted by start), else 0."""
    i = bisect_right(starts, address) - 1
    if i < 0:
        return 0
    lo, data = pieces[i]
    k = address - lo
    return struct.unpack_from("<Q", data, k)[0] if 0 <= k <= len(data) - 8 else 0


def _type_names(
    targets: Sequence[int], pieces: Sequence[Tuple[int, bytes]], read_available: ReadAvailable, budget: int
) -> List[Tuple[int, bytes]]:
    """How a Python object says what it is: its type (ob_type, +8) and the type's name
    (tp_name, +24). A heap type's name is a third pointer away from the stack (3.12 made
    _thread.lock and most of the standard library's types heap types), past the two levels
    above; a hung thread's lock is only known for one by that name. A static type's name is
    in its module's read-only data, which an image file also has; it is kept all the same
    (TYPE_NAME bytes), so that the dump names its objects on a machine without the file. The
    type object's head (TYPE_HEAD bytes, through tp_name) is kept too: a static type lives in
    its DLL's writable data, which no file answers for (3.8's _thread.RLock in python38.dll)."""
    ordered = sorted(pieces)
    starts = [a for a, _ in ordered]

    def word(address: int) -> int:
        # what was read here, else the process (a type object an earlier stack's windows
        # already brought, which this stack's pieces do not repeat)
        found = _word_at(ordered, starts, address)
        if found or not LOWEST <= address <= HIGHEST:
            return found
        data = read_available(address, 8)
        return struct.unpack("<Q", data)[0] if len(data) == 8 else 0

    names: List[int] = []
    kinds: List[int] = []
    seen: Set[int] = set()
    for t in targets:
        kind = word(t + 8)
        name = word(kind + 24)
        if LOWEST <= name <= HIGHEST and name not in seen:
            seen.add(name)
            names.append(name)
            if len(names) >= MAX_POINTERS:
                break
        if LOWEST <= name <= HIGHEST and kind not in seen:
            # the type's head up to tp_name: a static type lives in its DLL's writable data,
            # which a second-level window reaches only while the budget of pointers lasts
            seen.add(kind)
            kinds.append(kind)
    have = merge((a, a + len(d)) for a, d in ordered)
    wanted = _windows([n for n in names if not _inside(n, have)], 0, TYPE_NAME)
    wanted += _windows([k for k in kinds[:MAX_POINTERS] if not _inside(k + 24, have)], 0, TYPE_HEAD)
    return _read(read_available, merge(wanted), budget)


def pointed_by_stacks(
    stacks: Sequence[bytes],
    skip: Sequence[Span],
    read_available: ReadAvailable,
    max_total: int = MAX_TOTAL,
    registers: Sequence[Sequence[int]] = (),
) -> List[Tuple[int, bytes]]:
    """`pointed_memory` for every thread of a process that did not crash (a hang: what each
    waits on is an object its stack or its registers point to, a lock or an event; `registers`
    go with `stacks` in order, as far as they are given). Each stack gets an equal share of the
    budget left, so one thread full of pointers cannot starve the others, and what one leaves
    goes to the next; what an earlier stack brought is not read again."""
    out: List[Tuple[int, bytes]] = []
    taken: List[Span] = []
    used = 0
    for i, stack in enumerate(stacks):
        share = (max_total - used) // (len(stacks) - i)
        values = registers[i] if i < len(registers) else ()
        got = pointed_memory(stack, skip, read_available, share, held=taken, registers=values)
        out += got
        used += sum(len(d) for _, d in got)
        taken = merge([*taken, *((a, a + len(d)) for a, d in got)])
    return out


def unchanging_image_spans(base: int, size: int, sections: Iterable[Tuple[int, int, int]]) -> List[Span]:
    """The parts of an image mapped at `base` whose bytes are its file's: all but its
    writable sections, given as (rva, virtual size, characteristics). A lock a DLL keeps in
    a global (a CRITICAL_SECTION in .bss, CPython's GIL in python3X.dll's .data) changes as
    the process runs, so a pointer to it is followed like one into the heap."""
    writable = merge(
        (base + rva, base + ((rva + vsize + PAGE - 1) & ~(PAGE - 1)))
        for rva, vsize, characteristics in sections
        if characteristics & IMAGE_SCN_MEM_WRITE
    )
    return gaps(base, base + size, writable)
