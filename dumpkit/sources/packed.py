"""Dumps as people share them: compressed (crash.dmp.xz, .gz, .bz2) or zipped (GitHub takes
no .dmp attachment, so an issue's dump comes as crash.zip). Each is unpacked, bounded, in
memory or (past IN_MEMORY) into a private temporary copy, and read as a minidump under its
own name: the file itself is never written to. zstd, 7-Zip and cabinet files are only
named (minidump_streams): Python has no reader for them.

A zip counts as one dump when exactly one of its members is a minidump (by name, .dmp,
.mdmp or .hdmp; else by its first bytes); a zip of several is refused with their names, for
triage of the unpacked folder. A dumpkit bundle is a zip too: `packing_of` says so
(`Packing.bundle`), for the bundle source to read it.

What unpacks far beyond any real dump is refused as it unpacks, in one line: past the bytes
its minidump header and streams account for (sources/accounted.py), the rest is no dump
(the zeros of a bomb behind a header); past DUMPKIT_MAX_UNPACK_RATIO times the packed file's
size (default DEFAULT_RATIO), no real dump is that compressible."""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
from typing import IO, TYPE_CHECKING, Callable, Iterator, List, Optional, Tuple

from dumpkit.records import record
from dumpkit.sources.accounted import accounted_size
from dumpkit.target import DumpError
from dumpkit.words import human_bytes

if TYPE_CHECKING:  # the readers are imported when a packed file is met: a plain dump needs none
    import zipfile

    from dumpkit.problems import Problems
    from dumpkit.sources.minidump import MinidumpTarget

__all__ = [
    "DEFAULT_RATIO",
    "IN_MEMORY",
    "MAX_UNPACKED",
    "MIN_FREE",
    "Packing",
    "RATIO_ENV",
    "holds_dump",
    "open_packed",
    "packing_of",
    "check_room",
    "remove_quietly",
    "take_whole",
    "temporary_name",
    "unlink_mapped",
    "unpack",
    "unpack_ratio",
]

# An unpacked dump larger than this is refused: a small .xz can claim terabytes.
MAX_UNPACKED = 32 << 30
# A packed dump may unpack to at most this many times the packed file's size. The real dumps
# here compress at most 210 times (xz of a million-frame recursion; gzip at most 122); a
# full-memory dump of a process that committed gigabytes it never touched, some 400-550
# (bench/README.md, "Packed dumps"). A gzip of zeros is 1,030 times.
DEFAULT_RATIO = 1000
RATIO_ENV = "DUMPKIT_MAX_UNPACK_RATIO"
# Bytes past those its records account for that a dump may unpack to: a real dump has none
# (module names are not counted: a few hundred bytes each).
UNACCOUNTED = 16 << 20
# Up to this, the unpacked dump is held in memory (no file to delete, on Windows neither);
# beyond, a private temporary copy is mapped. Most dumps as shared are well under it.
IN_MEMORY = 256 << 20
CHUNK = 1 << 20  # what one read of a packed or streamed dump asks for
# While a dump is unpacked to a file, every _ROOM_EVERY bytes the temporary folder must
# still have MIN_FREE left.
_ROOM_EVERY = 64 << 20
MIN_FREE = 1 << 30
MINIDUMP_SIGNATURE = b"MDMP"
_DUMP_NAMES = (".dmp", ".mdmp", ".hdmp")  # .hdmp: WER's full-memory dump
# Members looked into for a minidump signature when none is named like one (each look
# starts a decompression): a zip of thousands is not a dump as shared.
_MAX_SNIFFED = 64
_STREAMS = (  # (first bytes, what it is, the stdlib module whose open() reads it)
    (b"\xfd7zXZ\x00", "xz-compressed", "lzma"),
    (b"\x1f\x8b", "gzip-compressed", "gzip"),
    (b"BZh", "bzip2-compressed", "bz2"),
)
_ZIP = b"PK\x03\x04"


@record
class Packing:
    """How a file holds its dump: `kind` for messages, `member` the zip member (None for a
    compressed stream); `bundle`: the zip is a dumpkit bundle, read by sources.bundle."""

    kind: str
    member: Optional[str] = None
    bundle: bool = False


def _head(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(8)
    except OSError as e:
        raise DumpError(f"cannot open: {e.strerror or e}") from None


def plain_head(head: bytes) -> bool:
    """Do a file's first bytes rule out every packing `packing_of` knows (a compressed
    stream, a zip)? Then the file is read as a minidump, whatever it holds."""
    return not head.startswith(_ZIP) and not any(head.startswith(magic) for magic, _, _ in _STREAMS)


def packing_of(path: str) -> Optional[Packing]:
    """How the file at `path` packs one minidump, or that it is a bundle (a zip holding a
    bundle's manifest, whatever it is called); None when it is not a packing dumpkit
    unpacks (a plain dump, or anything else: the minidump reader then says what it is).
    Raises DumpError for a zip that does not hold exactly one minidump."""
    head = _head(path)
    for magic, kind, _ in _STREAMS:
        if head.startswith(magic):
            return Packing(kind)
    if head.startswith(_ZIP):
        return _zip_packing(path)
    return None


def holds_dump(path: str) -> bool:
    """Is the zip at `path` a dump as shared, for a folder's search to take: one holding a
    minidump or a bundle, or several minidumps (refused with their names when read), or
    one that cannot be read (listed with why); not a zip of other files."""
    try:
        bundle, dumps, _ = _zip_contents(path)
    except DumpError:
        return True
    return bundle or bool(dumps)


def _zip_contents(path: str) -> Tuple[bool, List["zipfile.ZipInfo"], int]:
    """(whether the zip is a dumpkit bundle, its minidump members, how many files it has).
    Raises DumpError when it cannot be read."""
    import zipfile

    from dumpkit.sources.bundle_format import MANIFEST

    try:
        with zipfile.ZipFile(path) as zf:
            if MANIFEST in zf.namelist():
                return True, [], 0
            files = [i for i in zf.infolist() if not i.is_dir() and not _mac_metadata(i.filename)]
            dumps = [i for i in files if i.filename.lower().endswith(_DUMP_NAMES)]
            if not dumps:
                dumps = [i for i in files[:_MAX_SNIFFED] if _starts_as_minidump(zf, i)]
    except (zipfile.BadZipFile, zipfile.LargeZipFile) as e:
        raise DumpError(f"not a minidump, and not a usable zip archive either ({e})") from None
    except (OSError, ValueError) as e:
        raise DumpError(f"cannot read the zip archive ({getattr(e, 'strerror', None) or e})") from None
    return False, dumps, len(files)


def _zip_packing(path: str) -> Packing:
    bundle, dumps, files = _zip_contents(path)
    if bundle:
        return Packing("a dumpkit bundle", bundle=True)
    if not dumps:
        raise DumpError(f"a zip archive of {files} files, none of them a minidump (.dmp)")
    if len(dumps) > 1:
        names = ", ".join(i.filename for i in dumps[:3]) + (", ..." if len(dumps) > 3 else "")
        raise DumpError(
            f"a zip archive of {len(dumps)} minidumps ({names}): unpack it and run dumpkit triage on the folder"
        )
    if dumps[0].flag_bits & 0x1:
        raise DumpError(f"{dumps[0].filename} is encrypted in the zip archive: unpack it first")
    return Packing("a zip archive", dumps[0].filename)


def _mac_metadata(name: str) -> bool:
    """What macOS's Finder adds to a zip it makes: a __MACOSX/ folder of ._NAME files
    (resource forks), which are named like the dumps they stand beside."""
    return name.startswith("__MACOSX/") or name.rsplit("/", 1)[-1].startswith("._")


def _starts_as_minidump(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> bool:
    if info.flag_bits & 0x1 or info.file_size < len(MINIDUMP_SIGNATURE):
        return False
    try:
        with zf.open(info) as f:
            return f.read(len(MINIDUMP_SIGNATURE)) == MINIDUMP_SIGNATURE
    except _unpack_errors() + (OSError,):
        return False


def _unpack_errors() -> tuple:
    """What a damaged compressed stream or zip member raises while it is read."""
    import lzma
    import zipfile
    import zlib

    return (zipfile.BadZipFile, lzma.LZMAError, zlib.error, EOFError, NotImplementedError, RuntimeError)


@contextlib.contextmanager
def _opened(path: str, packing: Packing) -> Iterator[IO[bytes]]:
    """The packed dump's bytes as a stream: the compressed file decompressed, or the zip
    member."""
    if packing.member is None:
        module = next(module for _, kind, module in _STREAMS if kind == packing.kind)
        with importlib.import_module(module).open(path, "rb") as stream:
            yield stream
        return
    import zipfile

    with zipfile.ZipFile(path) as zf, zf.open(packing.member) as stream:
        yield stream


def temporary_name() -> str:
    """A new file name in the temporary folder, for a private plain copy. Named before it
    exists, so that whoever deletes it knows its name before a time limit can strike."""
    import tempfile
    import uuid

    return os.path.join(tempfile.gettempdir(), f"dumpkit-unpacked-{uuid.uuid4().hex}.dmp")


def unpack_ratio() -> int:
    """How many times its packed size a dump may unpack to: $DUMPKIT_MAX_UNPACK_RATIO, else
    DEFAULT_RATIO. A value that is not a whole number above 0 is a ValueError that says so."""
    text = os.environ.get(RATIO_ENV)
    if not text:
        return DEFAULT_RATIO
    try:
        ratio = int(text.strip().rstrip("xX"))
    except ValueError:
        ratio = 0
    if ratio <= 0:
        raise ValueError(f"{RATIO_ENV}={text!r} is not a whole number above 0 (e.g. 2000)")
    return ratio


class _Bound:
    """Where unpacking `what` stops: MAX_UNPACKED, `ratio` times the packed size, and the
    bytes the dump accounts for (None: its head does not tell) with UNACCOUNTED to spare."""

    def __init__(self, what: str, packed: int, ratio: int, accounted: Optional[int]):
        self.what, self.packed, self.ratio, self.accounted = what, packed, ratio, accounted
        self.limit = min(
            MAX_UNPACKED, ratio * max(packed, 1), MAX_UNPACKED if accounted is None else accounted + UNACCOUNTED
        )

    def check(self, total: int) -> None:
        if total <= self.limit:
            return
        if total > MAX_UNPACKED:
            raise DumpError(f"{self.what}: unpacks to more than {MAX_UNPACKED >> 30} GiB")
        if self.accounted is not None and total > self.accounted + UNACCOUNTED:
            raise DumpError(
                f"{self.what}: unpacks past the {human_bytes(self.accounted)} its minidump header and streams "
                "account for: what follows is no dump (a decompression bomb?); refused"
            )
        raise DumpError(
            f"{self.what}: unpacks to more than {self.ratio:,} times its {human_bytes(self.packed)}, beyond any "
            f"real dump: refused ({RATIO_ENV} sets how many times, now {self.ratio:,})"
        )


def unpack(path: str, packing: Packing, dest: str, in_memory: int = 0, ratio: Optional[int] = None) -> Optional[bytes]:
    """The dump packed in `path`: its bytes when they are at most `in_memory`, else a
    private plain copy at `dest`, a new file (the caller deletes it, written or not).
    `ratio`: how many times its packed size it may unpack to (default: `unpack_ratio()`).
    Raises DumpError (one line, without the file name)."""
    what = packing.kind + (f" ({packing.member})" if packing.member else "")
    if ratio is None:
        try:
            ratio = unpack_ratio()
        except ValueError as e:
            raise DumpError(str(e)) from None
    try:
        with _opened(path, packing) as src:
            head = src.read(CHUNK)  # a buffered read: all of it, or to the end
            _check_signature(head, what)  # before a bomb of anything is unpacked
            bound = _Bound(what, os.path.getsize(path), ratio, accounted_size(head))
            return take_whole(src, head, dest, in_memory, bound.check, what)
    except _unpack_errors() as e:
        raise DumpError(f"{what}: cannot unpack it ({e or type(e).__name__})") from None
    except OSError as e:
        raise DumpError(f"{what}: cannot unpack it ({e.strerror or e})") from None
    return None


def take_whole(
    src: IO[bytes], head: bytes, dest: str, in_memory: int, check: Callable[[int], None], what: str
) -> Optional[bytes]:
    """The rest of `src` after `head` (read already): all the bytes when they end within
    `in_memory` (0: never), else everything written to `dest`, a new file, and None.
    `check(total)` raises DumpError past a bound; the disk keeps MIN_FREE (check_room)."""
    total = len(head)
    check(total)
    chunks = [head]
    while in_memory and total <= in_memory:
        chunk = src.read(CHUNK)
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        check(total)
        chunks.append(chunk)
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)
    with os.fdopen(fd, "wb") as dst:
        check_room(dest, what)
        for chunk in chunks:
            dst.write(chunk)
        del chunks
        for chunk in iter(lambda: src.read(CHUNK), b""):
            total += len(chunk)
            check(total)
            if (total - len(chunk)) // _ROOM_EVERY != total // _ROOM_EVERY:
                check_room(dest, what)
            dst.write(chunk)
    return None


def _check_signature(head: bytes, what: str) -> None:
    if head.startswith(MINIDUMP_SIGNATURE):
        return
    from dumpkit.sources.minidump_streams import compressed_format

    inner = compressed_format(head[:8])
    if inner is not None:
        raise DumpError(f"{what}, and what it holds is {inner[0]} again, not a minidump: unpack it by hand")
    raise DumpError(
        f"{what}, but what it holds is not a minidump (it starts with {head[:4]!r}, not {MINIDUMP_SIGNATURE!r})"
    )


def check_room(dest: str, what: str) -> None:
    """Stop unpacking before the temporary folder's disk is full: a small packed file can
    claim many GB, and a user's disk full of it is worse than a dump left unread."""
    import shutil

    folder = os.path.dirname(dest)
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return  # the write itself fails if there is no room
    if free < MIN_FREE:
        raise DumpError(
            f"{what}: the temporary folder {folder} has {free >> 20} MiB left; unpack it where there is room "
            "(or point TMPDIR/TEMP elsewhere)"
        )


def open_packed(
    path: str, packing: Packing, problems: Optional[Problems] = None, name: Optional[str] = None
) -> MinidumpTarget:
    """The dump packed in `path`, unpacked in memory (up to IN_MEMORY) or into a private
    temporary copy that is gone when the target is closed (at exit on Windows, where a
    mapped file cannot be deleted); reports name `name` (default: `path`). Raises DumpError."""
    from dumpkit.sources.minidump import open_dump_bytes, open_dump_copy

    tmp = temporary_name()
    try:
        data = unpack(path, packing, tmp, IN_MEMORY)
        if data is not None:
            return open_dump_bytes(data, name or path, problems=problems)
        target = open_dump_copy(tmp, name or path, problems=problems)
    except BaseException:
        remove_quietly(tmp)
        raise
    unlink_mapped(tmp, target.close)
    return target


def unlink_mapped(tmp: str, close: Callable[[], None]) -> None:
    """Delete a private copy that is mapped: at once on POSIX (the mapping stays valid and
    nothing is left behind); on Windows, where a mapped file cannot be deleted, at exit,
    after `close` has let go of the mapping (commands leave their target open to the end)."""
    try:
        os.unlink(tmp)
    except OSError:
        atexit.register(_close_and_remove, close, tmp)


def _close_and_remove(close: Callable[[], None], tmp: str) -> None:
    try:
        close()
    except Exception:
        pass
    remove_quietly(tmp)


def remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
