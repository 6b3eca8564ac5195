"""What the commands do, without the argument parser: typer's declarations in cli.py and
the fast path in frontdoor.py both call these, so a command behaves the same whichever
parsed its arguments. Nothing here imports typer (~60 ms) or the engine at import time.

Exit codes: 0 analysed; 1 analysed, but problems were met reading the dump (listed);
2 unusable input or arguments (one line on stderr, no traceback)."""

from __future__ import annotations

import os
import sys
from enum import Enum
from typing import Callable, List, Optional, Sequence
from dumpkit.limits import MAX_FRAMES, OVERSIZED_FRAME

EXIT_OK, EXIT_PROBLEMS, EXIT_UNUSABLE = 0, 1, 2


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


def new_file_mode(path: str) -> int:
    """The permissions a report written to `path` gets: those of the file it replaces, or
    what the umask gives a new file (a temporary file starts at 0600)."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        pass
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


class Exit(SystemExit):
    """Leave with this exit code: any message is on stderr already. A SystemExit, so that
    it ends the process the same way whichever parser called the command."""


def fail(message: str) -> Exit:
    sys.stderr.write(f"dumpkit: error: {message}\n")
    return Exit(EXIT_UNUSABLE)


def open_target(path: str):
    from dumpkit.analysis.facts import nothing_to_analyse
    from dumpkit.sources.minidump import open_dump
    from dumpkit.target import DumpError

    if os.path.isdir(path):
        raise fail(f"{path}: is a directory, not a dump file")
    if not os.path.exists(path):
        raise fail(f"{path}: no such file")
    opener = open_dump
    if path.lower().endswith(BUNDLE_SUFFIX):  # its modules' images are served from it too
        from dumpkit.bundle.reader import open_bundle as opener
    try:
        target = opener(path)
    except DumpError as e:
        raise fail(f"{path}: {e}") from None
    except MemoryError:
        raise fail(f"{path}: not enough memory to map the file") from None
    # the same rule for every command: what one calls unusable, none reports on
    why = nothing_to_analyse(target)
    if why is not None:
        target.close()
        raise fail(f"{path}: {why}")
    return target


BUNDLE_SUFFIX = ".dkb"


MAX_WARNINGS = 20


def warn_problems(problems: List[str]) -> None:
    """Exit code 1 always comes with its reasons on stderr (whatever stdout holds): a count,
    then the problems themselves (the first MAX_WARNINGS)."""
    if not problems:
        return
    from dumpkit.report.escape import clean  # a problem may quote dump-controlled text

    n = len(problems)
    sys.stderr.write(f"dumpkit: warning: {n} problem{'s' if n != 1 else ''} reading the dump (see the report)\n")
    for e in problems[:MAX_WARNINGS]:
        sys.stderr.write(f"dumpkit: warning: {clean(e, 1000)}\n")
    if n > MAX_WARNINGS:
        sys.stderr.write(f"dumpkit: warning: ... and {n - MAX_WARNINGS} more in the report\n")


def write_output(text: str, output: Optional[str], dump_path: str) -> None:
    """Print, or write atomically (temp file + rename) so a reader never sees half a report."""
    if not output or output == "-":
        sys.stdout.write(text)
        return
    if os.path.exists(output) and os.path.exists(dump_path) and os.path.samefile(output, dump_path):
        raise fail(f"{output}: refusing to overwrite the dump being read")
    import tempfile

    folder = os.path.dirname(os.path.abspath(output))
    mode = new_file_mode(output)
    try:
        fd, tmp = tempfile.mkstemp(prefix=".dumpkit-", dir=folder)
    except OSError as e:
        raise fail(f"{output}: cannot write report ({e.strerror or e})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, output)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise fail(f"{output}: cannot write report ({e.strerror or e})") from None


MIN_WIDTH = 40


def text_width(tty: bool, asked: Optional[int]) -> int:
    """`--width`, else the terminal's columns, else 120 (into a pipe or a file, where
    nothing says how wide the reader's screen is)."""
    import shutil

    if asked is not None:
        return max(MIN_WIDTH, asked)
    return max(MIN_WIDTH, shutil.get_terminal_size((120, 24)).columns) if tty else 120


def symbol_paths(explicit: Optional[List[str]]) -> List[str]:
    """--symbol-path values, then _NT_ALT_SYMBOL_PATH and _NT_SYMBOL_PATH (WinDbg's order).
    A DUMPKIT_MAX_DOWNLOAD that is not a size stops here, before any search."""
    from dumpkit.symbols.store import download_limit, environment_symbol_paths

    try:
        download_limit()
    except ValueError as e:
        raise fail(str(e)) from None
    return list(explicit or []) + environment_symbol_paths()


def run_analyze(
    dump: str,
    image_path: Sequence[str] = (),
    symbol_path: Sequence[str] = (),
    recorded_paths: bool = True,
    fmt_name: Optional[str] = None,
    output: Optional[str] = None,
    max_frames: int = MAX_FRAMES,
    threshold: int = OVERSIZED_FRAME,
    color: Optional[bool] = None,
    width_asked: Optional[int] = None,
    redact: Optional[bool] = None,
) -> int:
    """`dumpkit analyze`: the report written where asked; returns the exit code."""
    from dumpkit.engine import Options, analyze as run

    fmt = report_format(fmt_name, output)
    target = open_target(dump)
    opts = Options(
        image_paths=tuple(image_path),
        symbol_paths=symbol_paths(list(symbol_path)),
        use_recorded_paths=recorded_paths,
        max_frames=max(1, max_frames),
        oversized_threshold=max(1, threshold),
    )
    result = run(target, opts)
    report = result.report
    if redact if redact is not None else fmt in SHARED_FORMATS:
        from dumpkit.report.redact import redact_report

        report = redact_report(report)
    if fmt is Format.json:
        from dumpkit.report.json_report import render_json

        text = render_json(report) + "\n"
    elif fmt is Format.markdown:
        from dumpkit.report.markdown import render_markdown

        text = render_markdown(report)
    elif fmt is Format.html:
        from dumpkit.report.html import render_html

        text = render_html(report)
    else:
        from dumpkit.report.text import render_text

        tty = sys.stdout.isatty() and not output
        use_color = tty if color is None else color
        if use_color and not output:
            from dumpkit.console import colour_ready

            use_color = colour_ready()  # a Windows console shows escapes as text until told
        width = text_width(tty, width_asked)
        text = render_text(report, color=use_color and not output, width=width)
    write_output(text, output, dump)
    warn_problems(list(report.soft_errors))
    return EXIT_PROBLEMS if report.soft_errors else EXIT_OK


def run_explain(words: Sequence[str], how_to_capture: bool) -> int:
    """`dumpkit explain`: what a code means, or the dump-capture advice alone."""
    text = " ".join(words)  # `dumpkit explain stack overflow` needs no quotes
    if not text.strip():
        if not how_to_capture:
            raise fail("name a code to explain (or give --how-to-capture alone for the dump-capture advice)")
        from dumpkit.report.explanation import render_capture_advice

        sys.stdout.write(render_capture_advice().rstrip("\n") + "\n")
        return EXIT_OK
    from dumpkit.analysis.codes import parse_code
    from dumpkit.analysis.explain import explain
    from dumpkit.report.explanation import render_explanation_text

    try:
        parsed = parse_code(text)
    except ValueError as e:
        raise fail(str(e)) from None
    sys.stdout.write(render_explanation_text(explain(parsed), how_to_capture).rstrip("\n") + "\n")
    return EXIT_OK


def guarded(run: Callable[[], Optional[int]]) -> None:
    """Run a command line to its exit: Ctrl-C is one line and 130, a closed pipe (`| head`)
    is a quiet 0, not a traceback."""
    try:
        sys.exit(run())
    except KeyboardInterrupt:
        sys.stderr.write("dumpkit: interrupted\n")
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
