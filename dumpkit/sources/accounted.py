"""How far into its file a minidump's own records reach, read from its first bytes.

A minidump is its header, its stream directory and what they point at: each stream (RVA
and size), and from the memory lists, the thread lists, the module list and the exception
the bytes those point at (memory ranges, stacks, contexts, CodeView records). Nothing a reader uses lies
past the furthest of these, so a packed dump that unpacks far beyond it holds something
else: the zeros of a decompression bomb behind a header, or junk (sources/packed.py stops
unpacking it). Module names are the one thing not counted (their length is in the name),
which the slack a caller allows covers many times over."""

from __future__ import annotations

import struct
from typing import Optional

__all__ = ["accounted_size"]

_HEADER = 32
_THREAD_LIST, _MODULE_LIST, _MEMORY_LIST, _EXCEPTION, _THREAD_EX_LIST, _MEMORY64_LIST = 3, 4, 5, 6, 8, 9
_EXCEPTION_CONTEXT_AT = 160  # MINIDUMP_EXCEPTION_STREAM: ThreadId, alignment, MINIDUMP_EXCEPTION, then the context
# Directory entries and list records looked at, at most: a real dump has a few dozen
# streams, and lists whose records do not fit in the bytes given are not counted anyway.
_MAX_STREAMS = 1 << 16
# (record size, [(offset of a DataSize u32 with its Rva u32 after it)]) of the lists whose
# records point at more bytes
_POINTING = {
    _THREAD_LIST: (48, (32, 40)),  # MINIDUMP_THREAD: the stack's descriptor, the context's
    _THREAD_EX_LIST: (64, (32, 40, 56)),  # MINIDUMP_THREAD_EX: and the backing store's
    _MODULE_LIST: (108, (76, 84)),  # MINIDUMP_MODULE: the CodeView and misc records
    _MEMORY_LIST: (16, (8,)),  # MINIDUMP_MEMORY_DESCRIPTOR
}


def accounted_size(head: bytes) -> Optional[int]:
    """The bytes the minidump whose file begins with `head` accounts for, or None when
    `head` does not hold enough of it to tell (its directory, or a list the count needs,
    lies further on): then nothing is known."""
    if len(head) < _HEADER or head[:4] != b"MDMP":
        return None
    nstreams, dir_rva = struct.unpack_from("<II", head, 8)
    dir_end = dir_rva + 12 * nstreams
    if nstreams > _MAX_STREAMS or dir_end > len(head):
        return None
    end = max(_HEADER, dir_end)
    for stype, size, rva in struct.iter_unpack("<III", head[dir_rva:dir_end]):
        end = max(end, rva + size)
        if stype == _MEMORY64_LIST:
            reach = _memory64_end(head, rva, size)
        elif stype == _EXCEPTION:
            reach = _pointer_end(head, rva + _EXCEPTION_CONTEXT_AT) if size >= _EXCEPTION_CONTEXT_AT + 8 else 0
        elif stype in _POINTING:
            reach = _pointed_end(head, rva, size, *_POINTING[stype])
        else:
            continue
        if reach is None:
            return None
        end = max(end, reach)
    return end


def _memory64_end(head: bytes, rva: int, size: int) -> Optional[int]:
    """Where a Memory64List's ranges end: they follow one another from its BaseRva."""
    if size < 16 or rva + 16 > len(head):
        return None
    count, base = struct.unpack_from("<QQ", head, rva)
    if count > (size - 16) // 16 or rva + 16 + 16 * count > len(head):
        return None
    total = sum(s for _, s in struct.iter_unpack("<QQ", head[rva + 16 : rva + 16 + 16 * count]))
    return base + total


def _pointed_end(head: bytes, rva: int, size: int, record: int, pointers: tuple) -> Optional[int]:
    """The furthest byte a list's records point at (a u32 count, then the records)."""
    if size < 4 or rva + 4 > len(head):
        return None
    (count,) = struct.unpack_from("<I", head, rva)
    # MINIDUMP_MEMORY_LIST and the thread lists start with their count; the records follow
    first = rva + 4
    if count > (size - 4) // record or first + record * count > len(head):
        return None
    end = 0
    for i in range(count):
        at = first + i * record
        for offset in pointers:
            end = max(end, _pointer_end(head, at + offset) or 0)
    return end


def _pointer_end(head: bytes, at: int) -> Optional[int]:
    """Where the bytes a location descriptor at `at` (DataSize u32, Rva u32) end."""
    if at + 8 > len(head):
        return None
    dsize, drva = struct.unpack_from("<II", head, at)
    return drva + dsize
