"""Where and how a command's report is written: the format asked for (by name or by the
output file's extension), an atomic write, the text report's width, and the progress bar
of --fetch-images' downloads."""

from __future__ import annotations

import os
import sys
import time
from enum import Enum
from typing import Callable, Dict, Optional

from dumpkit.commands.exits import fail


class Format(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"
    html = "html"


# What `--format` accepts (any case), and what an `--output` file's extension implies
# when no format is given.
FORMAT_NAMES = {"text": Format.text, "txt": Format.text, "json": Format.json, "markdown": Format.markdown}
FORMAT_NAMES.update({"md": Format.markdown, "html": Format.html, "htm": Format.html})
FORMAT_EXTENSIONS = {".txt": Format.text, ".json": Format.json, ".md": Format.markdown, ".markdown": Format.markdown}
FORMAT_EXTENSIONS.update({".html": Format.html, ".htm": Format.html})


# Formats made to be pasted or attached somewhere others read them: user names in paths
# are redacted unless --no-redact. Text goes to the user's own terminal and JSON to tools
# (where exact paths matter); --redact covers them when they are shared too.
SHARED_FORMATS = (Format.markdown, Format.html)


def report_format(name: Optional[str], output: Optional[str]) -> Format:
    """The format asked for by name (case-insensitive), else the one `output`'s extension
    implies, else text. A name that is no format is a usage error."""
    if name is not None:
        fmt = FORMAT_NAMES.get(name.strip().lower())
        if fmt is None:
            raise fail(f"unknown format {name!r}: use text, json, markdown (md) or html")
        return fmt
    if output and output != "-":
        return FORMAT_EXTENSIONS.get(os.path.splitext(output)[1].lower(), Format.text)
    return Format.text


def write_output(text: str, output: Optional[str], dump_path: str) -> None:
    """Print, or write atomically (temp file + rename) so a reader never sees half a report."""
    if not output or output == "-":
        sys.stdout.write(text)
        return
    if os.path.exists(output) and os.path.exists(dump_path) and os.path.samefile(output, dump_path):
        raise fail(f"{output}: refusing to overwrite the dump being read")
    write_file(text, output)


def write_file(text: str, output: str, make_folder: bool = False) -> None:
    """`text` into the file `output`, atomically (a temporary file beside it, then a rename:
    a reader never sees half a report, and on Windows a file another program holds open is
    left as it was), with the mode a new file would get. A device, FIFO or stream (/dev/null,
    NUL, /dev/stdout) is written straight through (dumpkit/destinations.py). A failure is one
    error line."""
    from dumpkit.destinations import write_replacing

    try:
        write_replacing(output, lambda f: f.write(text), binary=False, make_folder=make_folder)
    except OSError as e:
        raise fail(f"{output}: cannot write report ({e.strerror or e})") from None


MIN_WIDTH = 40


def text_width(tty: bool, asked: Optional[int]) -> int:
    """`--width`, else the terminal's columns, else 120 (into a pipe or a file, where
    nothing says how wide the reader's screen is)."""
    if asked is not None:
        return max(MIN_WIDTH, asked)
    if not tty:
        return 120
    import shutil  # here: its import (~1 ms, bz2 with it) is for a terminal only

    return max(MIN_WIDTH, shutil.get_terminal_size((120, 24)).columns)


# --fetch-images: a progress bar per download on standard error when that is a terminal
# (nothing in a pipe or a log: the report says what was fetched)
_WIDTH = 24
_EVERY = 0.1  # seconds between redraws


def fetch_progress(stream=None) -> Optional[Callable[[str, int, Optional[int]], None]]:
    """A progress hook drawing on `stream` (standard error), or None when it is not a terminal."""
    out = stream or sys.stderr
    if not getattr(out, "isatty", lambda: False)():
        return None
    last: Dict[str, float] = {}

    def draw(what: str, done: int, total: Optional[int]) -> None:
        now = time.monotonic()
        finished = total is not None and done >= total
        if not finished and now - last.get(what, 0.0) < _EVERY:
            return
        last[what] = now
        if total:
            filled = min(_WIDTH, _WIDTH * done // total)
            bar = "#" * filled + "-" * (_WIDTH - filled)
            line = f"fetching {what} [{bar}] {done / 1e6:,.1f} of {total / 1e6:,.1f} MB"
        else:
            line = f"fetching {what} {done / 1e6:,.1f} MB"
        out.write("\r" + line[:110].ljust(110) + ("\n" if finished else ""))
        out.flush()

    return draw
