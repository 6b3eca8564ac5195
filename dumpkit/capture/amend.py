"""Adding memory ranges to a minidump that a dump writer has just written.

The minidump format lets a MemoryListStream hold any ranges of the process's memory. On
Windows, dbghelp's MiniDumpWriteDump takes extra ranges from a MemoryCallback; a writer
that does not honour the callback (Wine's dbghelp answers 'Unsupported callback yet') can
have them added afterwards, in the same form a callback gives: the bytes appended to the
file, one MemoryListStream describing the old ranges and the new ones, and a stream
directory that points to it. Ranges the dump already holds are not added twice.

Only for dumps dumpkit writes itself (`dumpkit capture`): dumpkit never writes to a dump it
was given to read. The header is rewritten last, so an amend that fails half-way leaves
the dump as the writer wrote it, with unused bytes at its end."""

from __future__ import annotations

import os
import struct
from typing import BinaryIO, List, Optional, Sequence, Tuple

from dumpkit.spans import gaps, merge
from dumpkit.records import record

MEMORY_LIST_STREAM = 5
HEADER = struct.Struct(
    "<4sIIIIIQ"
)  # Signature, Version, NumberOfStreams, StreamDirectoryRva, CheckSum, TimeDateStamp, Flags
DIRECTORY_ENTRY = struct.Struct("<III")  # StreamType, DataSize, Rva
DESCRIPTOR = struct.Struct("<QII")  # StartOfMemoryRange, DataSize, Rva
MAX_RVA = 0xFFFFFFFF  # RVAs are 32-bit: a MemoryListStream dump stays under 4 GiB
MAX_STREAMS = 4096  # a directory this long is not one a dump writer wrote


class AmendError(Exception):
    """The dump cannot be amended; the message says why in one line."""


@record
class Amended:
    ranges_added: int
    bytes_added: int
    already_present: int  # bytes the dump already held (e.g. given by the writer's callback)
    # bytes of range data moved to the end so that the writer's memory list could grow where
    # it is (None: the list was written anew at the end, the old one left unused)
    moved: Optional[int] = None


THREAD_LIST_STREAM = 3
THREAD = struct.Struct(
    "<IIIIQQIIII"
)  # MINIDUMP_THREAD: ..., Stack {Start, DataSize, Rva}, ThreadContext {DataSize, Rva}
STACK_RVA, CONTEXT_RVA = 36, 44  # offsets in MINIDUMP_THREAD
# streams whose records may point at range data by RVA besides the memory and thread lists
# (ThreadExList's backing stores, Memory64List's base): with any of them the list is not
# grown in place
_POINTS_INTO_MEMORY = frozenset({8, 9})


def _grow_in_place(
    f: BinaryIO,
    size: int,
    dir_rva: int,
    entries: List[List[int]],
    memory: List[int],
    old: List[Tuple[int, int, int]],
    new: List[Tuple[int, bytes]],
) -> Optional[int]:
    """Grow the writer's memory list where it stands: the range data right after it (Wine
    writes the list just before the bytes it describes; the first is a thread's stack) is
    copied to the end of the file and every RVA into it (memory descriptors, thread stacks)
    follows, then the longer list is written over the old one. Dumps a writer made with a
    few hundred ranges lose little either way; Wine's have a million and more, and a list
    written anew at the end would leave 16 bytes a range (23 MB for a TensorFlow process)
    unused in the file. Returns the bytes moved, or None (nothing written) when anything
    else might point into the bytes to be overwritten: then the caller appends a new list."""
    if any(e[0] in _POINTS_INTO_MEMORY for e in entries):
        return None
    list_rva, list_size = memory[2], memory[1]
    grow_from, grow_to = list_rva + list_size, list_rva + list_size + len(new) * DESCRIPTOR.size
    blobs = sorted({(r, s) for _, s, r in old if s > 0})
    movers = [(r, s) for r, s in blobs if r < grow_to and r + s > grow_from]
    cursor = grow_from
    for r, s in movers:  # the bytes to overwrite must be range data, wholly
        if r > cursor or r < grow_from:
            return None
        cursor = max(cursor, r + s)
    if cursor < grow_to or grow_to > size:
        return None
    span = (grow_from, cursor)
    for e in entries:  # no stream's own bytes in there
        if e is not memory and e[1] and e[2] < span[1] and e[2] + e[1] > span[0]:
            return None
    threads = next((e for e in entries if e[0] == THREAD_LIST_STREAM), None)
    thread_rows: List[Tuple[int, int]] = []  # (file offset of the Stack.Rva field, its value)
    if threads is not None:
        f.seek(threads[2])
        raw = f.read(threads[1])
        (n,) = struct.unpack_from("<I", raw, 0) if len(raw) >= 4 else (0,)
        if 4 + n * THREAD.size > len(raw):
            return None
        for i in range(n):
            at = 4 + i * THREAD.size
            (stack_rva,) = struct.unpack_from("<I", raw, at + STACK_RVA)
            (context_rva,) = struct.unpack_from("<I", raw, at + CONTEXT_RVA)
            if span[0] <= context_rva < span[1]:
                return None
            thread_rows.append((threads[2] + at + STACK_RVA, stack_rva))
    # 1. copies of the bytes to move, and the new ranges, at the end of the file
    end = (size + 15) & ~15
    if end + (span[1] - span[0]) + sum(len(d) for _, d in new) > MAX_RVA:
        return None
    f.seek(size)
    f.write(b"\0" * (end - size))
    f.seek(span[0])
    moving = f.read(span[1] - span[0])
    f.seek(end)
    f.write(moving)
    shift = end - span[0]

    def moved(rva: int) -> int:
        return rva + shift if span[0] <= rva < span[1] else rva

    at = end + len(moving)
    descriptors = [(a, s, moved(r)) for a, s, r in old]
    for address, data in new:
        f.write(data)
        descriptors.append((address, len(data), at))
        at += len(data)
    # 2. thread stacks point at the copies
    for offset, rva in thread_rows:
        if moved(rva) != rva:
            f.seek(offset)
            f.write(struct.pack("<I", moved(rva)))
    # 3. the longer list where the old one was, and its directory entry
    descriptors.sort()
    f.seek(list_rva)
    f.write(struct.pack("<I", len(descriptors)) + b"".join(DESCRIPTOR.pack(a, s, r) for a, s, r in descriptors))
    memory[1] = 4 + len(descriptors) * DESCRIPTOR.size
    f.seek(dir_rva + entries.index(memory) * DIRECTORY_ENTRY.size)
    f.write(DIRECTORY_ENTRY.pack(*memory))
    return len(moving)


def add_memory(path: str, pieces: Sequence[Tuple[int, bytes]]) -> Amended:
    """Append `pieces` ((address, bytes) of the process's memory) to the minidump at `path`
    as memory ranges, leaving out what it already holds."""
    with open(path, "r+b") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(0)
        head = f.read(HEADER.size)
        if len(head) < HEADER.size or head[:4] != b"MDMP":
            raise AmendError(f"{path}: not a minidump")
        signature, version, count, dir_rva, checksum, stamp, flags = HEADER.unpack(head)
        if count > MAX_STREAMS or dir_rva + count * DIRECTORY_ENTRY.size > size:
            raise AmendError(f"{path}: the stream directory lies outside the file")
        f.seek(dir_rva)
        raw_dir = f.read(count * DIRECTORY_ENTRY.size)
        entries = [list(DIRECTORY_ENTRY.unpack_from(raw_dir, i * DIRECTORY_ENTRY.size)) for i in range(count)]
        memory = next((e for e in entries if e[0] == MEMORY_LIST_STREAM), None)
        old: List[Tuple[int, int, int]] = []  # (address, size, rva)
        if memory is not None:
            f.seek(memory[2])
            raw = f.read(memory[1])
            (n,) = struct.unpack_from("<I", raw, 0) if len(raw) >= 4 else (0,)
            if 4 + n * DESCRIPTOR.size > len(raw):
                raise AmendError(f"{path}: its memory list is cut short")
            old = [DESCRIPTOR.unpack_from(raw, 4 + i * DESCRIPTOR.size) for i in range(n)]
        held = merge((a, a + s) for a, s, _ in old)
        outside: List[Tuple[int, bytes]] = []
        for address, data in pieces:
            for lo, hi in gaps(address, address + len(data), held):
                outside.append((lo, data[lo - address : hi - address]))
        # pieces may overlap one another (capture adds the Python stacks' memory and the
        # command line's in one amend): each byte once. In address order, whatever an earlier
        # piece covers is one span from this piece's start to `reach`.
        new: List[Tuple[int, bytes]] = []
        reach = 0
        for lo, data in sorted(outside, key=lambda p: (p[0], -len(p[1]))):
            if lo + len(data) > reach:
                start = max(lo, reach)
                new.append((start, data[start - lo :]))
                reach = lo + len(data)
        present = sum(len(d) for _, d in pieces) - sum(len(d) for _, d in outside)
        if not new:
            return Amended(0, 0, present)
        if memory is not None:
            moved = _grow_in_place(f, size, dir_rva, entries, memory, old, new)
            if moved is not None:
                return Amended(len(new), sum(len(d) for _, d in new), present, moved)
        at = (size + 15) & ~15
        f.seek(size)
        f.write(b"\0" * (at - size))
        descriptors = [(a, s, r) for a, s, r in old]
        for address, data in new:
            f.write(data)
            descriptors.append((address, len(data), at))
            at += len(data)
        descriptors.sort()
        stream_rva = at
        f.write(struct.pack("<I", len(descriptors)))
        f.write(b"".join(DESCRIPTOR.pack(a, s, r) for a, s, r in descriptors))
        stream_size = 4 + len(descriptors) * DESCRIPTOR.size
        if memory is None:
            entries.append([MEMORY_LIST_STREAM, stream_size, stream_rva])
        else:
            memory[1], memory[2] = stream_size, stream_rva
        new_dir = stream_rva + stream_size
        if new_dir + len(entries) * DIRECTORY_ENTRY.size > MAX_RVA:
            raise AmendError(f"{path}: the amended dump would pass 4 GiB, beyond a memory list's reach")
        f.write(b"".join(DIRECTORY_ENTRY.pack(*e) for e in entries))
        f.flush()
        f.seek(0)
        f.write(HEADER.pack(signature, version, len(entries), new_dir, checksum, stamp, flags))
    return Amended(len(new), sum(len(d) for _, d in new), present)
