"""Where a report or bundle asked for with `-o` goes, and whether it can be written
atomically.

A report is written to a temporary file beside its destination and renamed over it, so a
reader never sees half of one. That is right for a regular file and wrong for anything
else: renamed over /dev/null, a FIFO or /dev/stdout, the temporary file replaces the
device itself (as root, /dev/null became a regular file for every program on the machine;
as anyone else the write failed). On Windows, NUL or CON has no folder to put a temporary
file in. Those destinations are written straight through. A symbolic link stays a link:
the file it points to is the one replaced. `write_replacing` does all of it, for reports
(text) and bundles (bytes) alike."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from typing import IO, Any, Callable, NamedTuple, Union

# Names Windows gives to devices in every folder, with or without an extension.
_WINDOWS_DEVICES = frozenset(
    ["CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"] + [f"{port}{n}" for port in ("COM", "LPT") for n in range(1, 10)]
)


class Destination(NamedTuple):
    path: str  # where to write
    atomic: bool  # through a temporary file renamed over `path`; else opened and written


def destination(path: str, windows: bool = os.name == "nt") -> Destination:
    """Where writing `path` should go, and how."""
    if windows and _windows_device(path):
        return Destination(path, False)
    if not windows and path.startswith(("/dev/", "/proc/")):
        return Destination(path, False)  # /dev/stdout, /dev/fd/3: a stream, whatever file it is now
    link = os.path.islink(path)
    try:
        mode = os.stat(path).st_mode  # of what a link leads to
    except OSError:  # not there yet: a new regular file (where a dangling link points)
        return Destination(os.path.realpath(path) if link else path, True)
    if not stat.S_ISREG(mode):
        return Destination(path, stat.S_ISDIR(mode))  # a FIFO, a socket, a device; a folder: the rename says why not
    return Destination(os.path.realpath(path) if link else path, True)


def _windows_device(path: str) -> bool:
    if path.startswith(("\\\\.\\", "//./")):
        return True
    name = path.replace("/", "\\").rsplit("\\", 1)[-1].rstrip(":").split(":")[-1]  # C:\\out\\NUL.txt, NUL:, nul
    return name.split(".", 1)[0].rstrip(" ").upper() in _WINDOWS_DEVICES


def new_file_mode(path: str) -> int:
    """The permissions a file written to `path` gets: those of the file it replaces, or
    what the umask gives a new file (a temporary file starts at 0600)."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        pass
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def write_replacing(path: str, write: Callable[[IO[Any]], object], binary: bool, make_folder: bool = False) -> None:
    """`write` fills the file `path` (opened as bytes, or as UTF-8 text): a regular file
    through a temporary file beside it renamed over it once complete (a reader never sees
    half of it, a failure leaves the old one and no temporary file), with the mode the file
    it replaces had or a new one gets; anything else `destination` says is written straight
    through. Raises OSError; `make_folder` makes the folder first."""
    to = destination(path)
    if not to.atomic:
        with _opened(to.path, binary) as f:
            write(f)
        return
    folder = os.path.dirname(os.path.abspath(to.path))
    mode = new_file_mode(to.path)
    if make_folder:
        os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".dumpkit-", dir=folder)
    try:
        with _opened(fd, binary) as f:
            write(f)
        os.chmod(tmp, mode)
        os.replace(tmp, to.path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _opened(file: Union[str, int], binary: bool) -> IO[Any]:
    """A path, or a descriptor (closed with what is returned), opened to write bytes or UTF-8 text."""
    return open(file, "wb") if binary else open(file, "w", encoding="utf-8")
