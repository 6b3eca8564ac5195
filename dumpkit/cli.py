"""`dumpkit` command line: parse arguments, call the engine, render. Nothing else.

Exit codes: 0 analysed; 1 analysed, but problems were met reading the dump (listed);
2 unusable input or arguments (one line on stderr, no traceback)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from enum import Enum
from typing import List, Optional

import typer

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Say what killed a Windows Python/TensorFlow process, from its crash dump.",
)

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


def fail(message: str) -> "typer.Exit":
    sys.stderr.write(f"dumpkit: error: {message}\n")
    return typer.Exit(EXIT_UNUSABLE)


def _open(path: str):
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
    if asked is not None:
        return max(MIN_WIDTH, asked)
    return max(MIN_WIDTH, shutil.get_terminal_size((120, 24)).columns) if tty else 120


def _symbol_paths(explicit: Optional[List[str]]) -> List[str]:
    paths = list(explicit or [])
    env = os.environ.get("_NT_SYMBOL_PATH")
    if env:
        paths.append(env)
    return paths


ImagePathOpt = typer.Option(
    None,
    "--image-path",
    "-i",
    help="Folder searched (recursively) for module images (exe/dll/pyd), matched by name, timestamp and size. Repeatable.",
)
SymbolPathOpt = typer.Option(
    None,
    "--symbol-path",
    help="Symbol store folder (NAME/TIMESTAMPSIZE/NAME) or _NT_SYMBOL_PATH-style srv*cache*url string. Repeatable; _NT_SYMBOL_PATH is read too.",
)
RecordedPathsOpt = typer.Option(
    True,
    "--recorded-paths/--no-recorded-paths",
    help="Look for images at the paths the dump recorded (--no-recorded-paths: see what a machine without the crashed program's files sees).",
)


@app.command()
def analyze(
    dump: str = typer.Argument(..., help="The .dmp file."),
    image_path: Optional[List[str]] = ImagePathOpt,
    symbol_path: Optional[List[str]] = SymbolPathOpt,
    recorded_paths: bool = RecordedPathsOpt,
    fmt_name: Optional[str] = typer.Option(
        None,
        "--format",
        "-f",
        help="text, json, markdown (md) or html, in any case. Default: what --output's extension "
        "says (.txt .json .md .html), else text.",
    ),
    output: Optional[str] = typer.Option(
        None, "--output", "-o", help="Write the report here (atomically) instead of stdout."
    ),
    max_frames: int = typer.Option(2_000_000, help="Most frames walked on the crashing thread."),
    threshold: int = typer.Option(64 * 1024, help="Frames at least this many bytes are flagged as oversized."),
    color: Optional[bool] = typer.Option(
        None, "--color/--no-color", help="Colour the text report (default: when stdout is a terminal)."
    ),
    width_asked: Optional[int] = typer.Option(
        None, "--width", help="Columns of the text report (default: the terminal's, or 120 into a pipe or file)."
    ),
    redact: Optional[bool] = typer.Option(
        None,
        "--redact/--no-redact",
        help="Replace user names in paths (C:\\Users\\NAME\\... -> C:\\Users\\<user>\\..., /home/NAME). "
        "Default: on for markdown and html (made to be shared), off for text and json.",
    ),
) -> None:
    """Analyse a crash dump: verdict, evidence, next steps, stacks, environment."""
    from dumpkit.engine import Options, analyze as run

    fmt = report_format(fmt_name, output)
    target = _open(dump)
    opts = Options(
        image_paths=image_path or (),
        symbol_paths=_symbol_paths(symbol_path),
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
        width = text_width(tty, width_asked)
        text = render_text(report, color=use_color and not output, width=width)
    write_output(text, output, dump)
    warn_problems(list(report.soft_errors))
    raise typer.Exit(EXIT_PROBLEMS if report.soft_errors else EXIT_OK)


@app.command()
def stack(
    dump: str = typer.Argument(..., help="The .dmp file."),
    thread: Optional[int] = typer.Option(None, "--thread", "-t", help="Thread id (default: the crashing thread)."),
    all_threads: bool = typer.Option(False, "--all", help="Every thread."),
    image_path: Optional[List[str]] = ImagePathOpt,
    symbol_path: Optional[List[str]] = SymbolPathOpt,
    recorded_paths: bool = RecordedPathsOpt,
    max_frames: int = typer.Option(2_000_000, help="Most frames walked per thread."),
    json_out: bool = typer.Option(False, "--json", help="JSON instead of a table (every frame, always)."),
    full: bool = typer.Option(False, "--full", help="Every frame in the table: recursion not folded."),
    python: bool = typer.Option(
        False,
        "--python",
        help="Also the Python stack of each thread shown (CPython processes; needs a full-memory dump).",
    ),
) -> None:
    """Print stack frames like WinDbg's `kf` (frame size, SP, return address, call site, how found)."""
    from dumpkit.engine import Options, crashing_thread, stacks, walker_for

    target = _open(dump)
    if walker_for(target) is None:
        arch = target.system.arch_name if target.system is not None else "of an unknown architecture"
        raise fail(f"{dump}: stack walking supports x64 and x86 dumps (this one is {arch})")
    opts = Options(
        image_paths=image_path or (),
        symbol_paths=_symbol_paths(symbol_path),
        use_recorded_paths=recorded_paths,
        max_frames=max(1, max_frames),
    )
    crash = crashing_thread(target)
    if all_threads:
        chosen = list(target.threads)
    elif thread is not None:
        chosen = [t for t in target.threads if t.tid == thread]
        if not chosen:
            raise fail(f"{dump}: no thread {thread} (threads: {', '.join(str(t.tid) for t in target.threads)})")
    elif crash is not None:
        chosen = [crash]
    else:
        chosen = list(target.threads[:1])
    # Streamed: a million-frame stack is written a row at a time, never held as a document.
    doc, frames = stacks(target, opts, chosen, python=python, cycles=not (json_out or full))
    if json_out:
        from dumpkit.report.stream import write_stacks_json

        write_stacks_json(doc, frames, sys.stdout)
    else:
        from rich.console import Console

        from dumpkit.report.stream import write_stacks_text

        console = Console(highlight=False, soft_wrap=False, width=max(120, Console().width))
        write_stacks_text(doc, frames, console, sys.stdout, full=full)
    sys.stdout.flush()
    warn_problems(list(doc.soft_errors))
    raise typer.Exit(EXIT_PROBLEMS if doc.soft_errors else EXIT_OK)


@app.command()
def info(
    dump: str = typer.Argument(..., help="The .dmp file."),
    json_out: bool = typer.Option(False, "--json", help="JSON instead of tables."),
) -> None:
    """What the dump holds: system, process, exception, threads, modules, streams."""
    from dumpkit.engine import contents

    doc = contents(_open(dump))
    if json_out:
        from dumpkit.report.json_report import render_json

        write_output(render_json(doc, indent=1) + "\n", None, dump)
    else:
        from rich.console import Console

        from dumpkit.report.contents import render_contents

        render_contents(doc, Console(highlight=False, soft_wrap=False, width=max(120, Console().width)))
    warn_problems(list(doc.soft_errors))
    raise typer.Exit(EXIT_PROBLEMS if doc.soft_errors else EXIT_OK)


@app.command()
def bundle(
    dump: str = typer.Argument(..., help="The .dmp file."),
    output: str = typer.Option(..., "--output", "-o", help="The bundle to write (CRASH.dkb)."),
    image_path: Optional[List[str]] = ImagePathOpt,
    symbol_path: Optional[List[str]] = SymbolPathOpt,
    redact: bool = typer.Option(
        False, "--redact", help="Replace user names in paths and blank the process environment block, in the bundle."
    ),
) -> None:
    """Write a bundle: the dump plus exactly the image pages its analysis read, so that
    `dumpkit analyze CRASH.dkb` gives the same report on a machine without the images."""
    from dumpkit.bundle.format import BundleError
    from dumpkit.bundle.writer import write_bundle
    from dumpkit.report.escape import clean
    from dumpkit.words import human_bytes, plural

    if dump.lower().endswith(BUNDLE_SUFFIX):
        raise fail(f"{dump}: is a bundle already; bundle the .dmp it was made from")
    if os.path.exists(output) and os.path.exists(dump) and os.path.samefile(output, dump):
        raise fail(f"{output}: refusing to overwrite the dump being read")
    target = _open(dump)
    data: Optional[bytes] = None
    redacted: tuple = ()
    if redact:
        from dumpkit.bundle.redact import redact_dump
        from dumpkit.sources.minidump import open_dump_bytes

        with open(dump, "rb") as f:
            data, redacted = redact_dump(f.read(), target)
        target = open_dump_bytes(data, dump)
    try:
        done = write_bundle(
            target,
            dump,
            output,
            image_paths=image_path or (),
            symbol_paths=_symbol_paths(symbol_path),
            dump_data=data,
            redacted=redacted,
        )
    except BundleError as e:
        raise fail(f"{output}: {e}") from None
    m = done.manifest
    pages = sum(i.captured for i in m.images)
    out = [
        f"wrote {clean(output, 500)}: {human_bytes(done.size)}, holding the dump "
        f"({clean(m.dump.name, 200)}, {human_bytes(m.dump.size)}) and {human_bytes(pages)} of image pages "
        f"from {plural(len(m.images), 'module')}"
    ]
    for image, (_, file_size) in zip(m.images, done.image_files):
        out.append(
            f"  {clean(image.name, 200)}: {human_bytes(image.captured)} of {human_bytes(file_size)} "
            f"in {plural(len(image.ranges), 'range')} (from {image.source})"
        )
    if done.not_found:
        out.append(
            f"  no image found for {', '.join(clean(n, 100) for n in done.not_found)}: "
            "frames in them are found by stack scanning, from the bundle too"
        )
    for line in m.redacted:
        out.append(f"  redacted: {clean(line, 300)}")
    out.append(f"verdict: {clean(done.verdict, 300)}")
    sys.stdout.write("\n".join(out) + "\n")


# A negative exit code (-1073741571) looks like an option to click: take it as the code.
@app.command(context_settings={"ignore_unknown_options": True})
def explain(
    code: Optional[List[str]] = typer.Argument(
        None,
        help="An exit code, NTSTATUS, HRESULT or Win32 error, by number or name, or in words: -1073741571, "
        "0xC00000FD, STATUS_STACK_OVERFLOW, 0xC0000409/7, 0x8007000E, ERROR_ACCESS_DENIED, stack overflow, abort ...",
    ),
    how_to_capture: bool = typer.Option(
        False, "--how-to-capture", help="How to capture a dump next time, in full (else one line points to it)."
    ),
) -> None:
    """Explain an exit code or exception code; no dump needed."""
    from dumpkit.analysis.codes import parse_code
    from dumpkit.analysis.explain import explain as run
    from dumpkit.report.explanation import render_capture_advice, render_explanation_text

    text = " ".join(code or ())  # `dumpkit explain stack overflow` needs no quotes
    if not text.strip():
        if not how_to_capture:
            raise fail("name a code to explain (or give --how-to-capture alone for the dump-capture advice)")
        sys.stdout.write(render_capture_advice().rstrip("\n") + "\n")
        return
    try:
        parsed = parse_code(text)
    except ValueError as e:
        raise fail(str(e)) from None
    sys.stdout.write(render_explanation_text(run(parsed), how_to_capture).rstrip("\n") + "\n")


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.stderr.write("dumpkit: interrupted\n")
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)


if __name__ == "__main__":
    main()
