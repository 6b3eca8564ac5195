"""A dump read from a stream: `dumpkit analyze -` with the dump on standard input, a FIFO,
/dev/stdin, bash's `<(zcat crash.dmp.gz)`. A stream can be read once, from its start, and
not mapped: a file's way of opening it (sniff the first bytes, close, open again, map)
lost the bytes already read, and the second open of a FIFO waited for a writer that had
gone: the command hung.

Its first bytes must say it is a dump as a file could hold it: a minidump, a compressed or
zipped one, a bundle; anything else (a terminal's input, /dev/zero, /dev/urandom) is refused
before more is read. Then it is read whole: a plain minidump of up to IN_MEMORY into memory,
anything else into a private temporary copy (bounded as unpacking is: MAX_UNPACKED, what a
minidump's header accounts for, room left on the disk), which is opened as a file of its
kind is, and gone once opened (at exit on Windows). Reports name the stream as given."""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from typing import IO, TYPE_CHECKING, Iterator, Optional

from dumpkit.sources.accounted import accounted_size
from dumpkit.sources.packed import (
    CHUNK,
    IN_MEMORY,
    MAX_UNPACKED,
    MINIDUMP_SIGNATURE,
    UNACCOUNTED,
    open_packed,
    packing_of,
    plain_head,
    remove_quietly,
    take_whole,
    temporary_name,
    unlink_mapped,
)
from dumpkit.target import DumpError
from dumpkit.words import human_bytes

if TYPE_CHECKING:
    from dumpkit.problems import Problems
    from dumpkit.sources.minidump import MinidumpTarget

STDIN = "-"


def is_stream(path: str) -> bool:
    """`-` (standard input), or a pipe, FIFO, socket or character device."""
    if path == STDIN:
        return True
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False  # opening it says why
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISSOCK(mode)


@contextlib.contextmanager
def _reading(path: str) -> Iterator[IO[bytes]]:
    if path == STDIN:
        if sys.stdin is None:
            raise DumpError("there is no standard input to read the dump from")
        if sys.stdin.isatty():
            raise DumpError("standard input is a terminal: pipe the dump in (dumpkit analyze - < crash.dmp)")
        yield sys.stdin.buffer
        return
    try:
        f = open(path, "rb")
    except OSError as e:
        raise DumpError(f"cannot open: {e.strerror or e}") from None
    with f:
        yield f


def _what_it_is(head: bytes) -> None:
    """Refuse, before reading more, a stream whose first bytes are no dump's a file can hold."""
    if head.startswith(MINIDUMP_SIGNATURE) or not plain_head(head[:8]):
        return
    shown = head[:4]
    raise DumpError(f"not a minidump (it starts with {shown!r}, not {MINIDUMP_SIGNATURE!r}); nothing more was read")


def open_stream(path: str, problems: Optional["Problems"] = None) -> "MinidumpTarget":
    """The dump on the stream `path` (`is_stream`), as its first bytes say it is held.
    Raises DumpError (one line, without the stream's name)."""
    from dumpkit.sources.minidump import open_dump_bytes, open_dump_copy

    tmp = temporary_name()
    try:
        with _reading(path) as src:
            try:
                head = src.read(CHUNK)  # a buffered read: all of it, or up to the end
            except OSError as e:
                raise DumpError(f"cannot read: {e.strerror or e}") from None
            if not head:
                raise DumpError("the stream is empty, not a minidump")
            _what_it_is(head)
            plain = head.startswith(MINIDUMP_SIGNATURE)
            accounted = accounted_size(head) if plain else None
            limit = MAX_UNPACKED if accounted is None else min(MAX_UNPACKED, accounted + UNACCOUNTED)
            data = _take(src, head, tmp, limit, IN_MEMORY if plain else 0)
            if data is not None:
                return open_dump_bytes(data, path, problems=problems)
        if plain:
            target = open_dump_copy(tmp, path, problems=problems)
        else:
            packing = packing_of(tmp)
            if packing is not None and packing.bundle:
                from dumpkit.sources.bundle import open_bundle

                target = open_bundle(tmp, problems, name=path)
            else:
                assert packing is not None  # _what_it_is let only packed or plain heads through
                target = open_packed(tmp, packing, problems, name=path)
    except BaseException:
        remove_quietly(tmp)
        raise
    unlink_mapped(tmp, target.close)
    return target


def _take(src: IO[bytes], head: bytes, tmp: str, limit: int, in_memory: int) -> Optional[bytes]:
    """The stream's bytes when they end within `in_memory` (0: never); else all of them
    written to `tmp`, a new file, and None. Past `limit` bytes: DumpError."""
    try:
        return take_whole(src, head, tmp, in_memory, lambda total: _counted(total, limit), "the dump")
    except OSError as e:
        raise DumpError(f"cannot read it into a temporary copy ({e.strerror or e})") from None


def _counted(total: int, limit: int) -> None:
    if total > limit:
        if limit < MAX_UNPACKED:
            raise DumpError(
                f"the stream goes on past the {human_bytes(limit - UNACCOUNTED)} its minidump header and streams "
                "account for: what follows is no dump; refused"
            )
        raise DumpError(f"the stream holds more than {MAX_UNPACKED >> 30} GiB: refused")
