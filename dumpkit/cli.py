"""`dumpkit` command line: parse arguments, call the engine, render. Nothing else.

Exit codes: 0 analysed; 1 analysed, but problems were met reading the dump (listed);
2 unusable input or arguments (one line on stderr, no traceback)."""

from __future__ import annotations

import os
import sys
from typing import List, Optional

import typer

from dumpkit.commands.analyze import run_analyze
from dumpkit.commands.exits import EXIT_OK, EXIT_PROBLEMS, fail, guarded, warn_problems
from dumpkit.commands.explain import run_explain
from dumpkit.commands.inputs import open_target as _open, symbol_paths as _symbol_paths
from dumpkit.commands.output import Format, report_format, write_output
from dumpkit.limits import MAX_FRAMES, OVERSIZED_FRAME

app = typer.Typer(
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Say what killed a Windows Python/TensorFlow process, from its crash dump.",
)


ImagePathOpt = typer.Option(
    None,
    "--image-path",
    "-i",
    help="Folder searched (recursively) for module images (exe/dll/pyd), matched by name, timestamp and size. Repeatable.",
)
SymbolPathOpt = typer.Option(
    None,
    "--symbol-path",
    help="Symbol store folder (NAME/TIMESTAMPSIZE/NAME, compressed NAME.dl_ read too) or _NT_SYMBOL_PATH-style srv*cache*url string. Repeatable; _NT_ALT_SYMBOL_PATH, then _NT_SYMBOL_PATH, are read too. Downloads without a cache go to $DUMPKIT_CACHE/symbols or the user cache folder; each is checked against the module and capped by DUMPKIT_MAX_DOWNLOAD (default 2G).",
)
RecordedPathsOpt = typer.Option(
    True,
    "--recorded-paths/--no-recorded-paths",
    help="Look for images at the paths the dump recorded (--no-recorded-paths: see what a machine without the crashed program's files sees).",
)


def _version(asked: bool) -> None:
    if asked:
        from dumpkit import __version__

        sys.stdout.write(f"dumpkit {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _options(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print dumpkit's version and exit."
    ),
) -> None:
    """Say what killed a Windows Python/TensorFlow process, from its crash dump."""


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
    max_frames: int = typer.Option(MAX_FRAMES, help="Most frames walked on the crashing thread."),
    threshold: int = typer.Option(OVERSIZED_FRAME, help="Frames at least this many bytes are flagged as oversized."),
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
    code = run_analyze(
        dump,
        image_path=image_path or (),
        symbol_path=symbol_path or (),
        recorded_paths=recorded_paths,
        fmt_name=fmt_name,
        output=output,
        max_frames=max_frames,
        threshold=threshold,
        color=color,
        width_asked=width_asked,
        redact=redact,
    )
    raise typer.Exit(code)


@app.command()
def stack(
    dump: str = typer.Argument(..., help="The .dmp file."),
    thread: Optional[int] = typer.Option(None, "--thread", "-t", help="Thread id (default: the crashing thread)."),
    all_threads: bool = typer.Option(False, "--all", help="Every thread."),
    image_path: Optional[List[str]] = ImagePathOpt,
    symbol_path: Optional[List[str]] = SymbolPathOpt,
    recorded_paths: bool = RecordedPathsOpt,
    max_frames: int = typer.Option(MAX_FRAMES, help="Most frames walked per thread."),
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
    dump: str = typer.Argument(..., help="The .dmp file, or a .dkb bundle to bundle again (e.g. with --redact)."),
    output: str = typer.Option(..., "--output", "-o", help="The bundle to write (CRASH.dkb)."),
    image_path: Optional[List[str]] = ImagePathOpt,
    symbol_path: Optional[List[str]] = SymbolPathOpt,
    redact: bool = typer.Option(
        False, "--redact", help="Replace user names in paths and blank the process environment block, in the bundle."
    ),
    only_used_memory: bool = typer.Option(
        False,
        "--only-used-memory",
        help="Keep only the dump memory the analysis read (reads of the rest say 'not in the bundle'): "
        "a multi-GB full-memory dump's bundle holds a few MB.",
    ),
) -> None:
    """Write a bundle: the dump plus exactly the image and PDB pages its analysis read, so
    that `dumpkit analyze CRASH.dkb` gives the same report on a machine without them. A
    bundle given as input is bundled again: its dump and pages, plus what --image-path or
    --symbol-path add, with --redact applied."""
    from dumpkit.bundle.format import BundleError
    from dumpkit.bundle.writer import write_bundle
    from dumpkit.report.escape import clean
    from dumpkit.words import human_bytes, plural

    if os.path.exists(output) and os.path.exists(dump) and os.path.samefile(output, dump):
        raise fail(f"{output}: refusing to overwrite the dump being read")
    target = _open(dump)
    data: Optional[bytes] = None
    redacted: tuple = ()
    if redact:
        from dumpkit.bundle.format import MAX_DUMP
        from dumpkit.bundle.redact import redact_dump
        from dumpkit.sources.minidump import open_dump_bytes

        if target.file_size > MAX_DUMP:  # redaction searches a copy of the whole dump in memory
            raise fail(
                f"{dump}: --redact takes a dump of at most {human_bytes(MAX_DUMP)}; this one is "
                f"{human_bytes(target.file_size)}"
            )

        if target.bundle is not None:
            original = b"".join(target.file_chunks())
        else:
            with open(dump, "rb") as f:
                original = f.read()
        data, redacted = redact_dump(original, target)
        redacted_target = open_dump_bytes(data, dump, target.kept)
        # a bundle's pages and manifest go along
        redacted_target.image_store, redacted_target.bundle = target.image_store, target.bundle
        target = redacted_target
    try:
        done = write_bundle(
            target,
            dump,
            output,
            image_paths=image_path or (),
            symbol_paths=_symbol_paths(symbol_path),
            dump_data=data,
            redacted=redacted,
            only_used_memory=only_used_memory,
        )
    except BundleError as e:
        raise fail(f"{output}: {e}") from None
    m = done.manifest
    pages = sum(i.captured for i in m.images)
    out = [
        f"wrote {clean(output, 500)}: {human_bytes(done.size)}, holding the dump "
        f"({clean(m.dump.name, 200)}, {human_bytes(m.dump.size)}) and {human_bytes(pages)} of image pages "
        f"from {plural(len(m.images), 'module')}"
        + (f", and {human_bytes(sum(p.captured for p in m.pdbs))} of {plural(len(m.pdbs), 'PDB')}" if m.pdbs else "")
    ]
    for image, (_, file_size) in zip(m.images, done.image_files):
        out.append(
            f"  {clean(image.name, 200)}: {human_bytes(image.captured)} of {human_bytes(file_size)} "
            f"in {plural(len(image.ranges), 'range')} (from {image.source})"
        )
    for pdb in m.pdbs:
        out.append(
            f"  {clean(pdb.name, 200)}: {human_bytes(pdb.captured)} of {human_bytes(pdb.file_size)} "
            f"in {plural(len(pdb.ranges), 'range')} (PDB {pdb.guid} age {pdb.age})"
        )
    if done.not_found:
        out.append(
            f"  no image found for {', '.join(clean(n, 100) for n in done.not_found)}: "
            "frames in them are found by stack scanning, from the bundle too"
        )
    if m.dump.kept is not None:
        out.append(
            f"  dump: {human_bytes(sum(n for _, n in m.dump.kept))} of {human_bytes(m.dump.size)} kept "
            "(the rest is memory the analysis did not read, left out)"
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
    run_explain(code or (), how_to_capture)


@app.command()
def triage(
    paths: List[str] = typer.Argument(..., help="Dump files, folders (searched recursively) and globs."),
    image_path: Optional[List[str]] = ImagePathOpt,
    symbol_path: Optional[List[str]] = SymbolPathOpt,
    fmt_name: Optional[str] = typer.Option(
        None,
        "--format",
        "-f",
        help="text, json, markdown (md) or html. Default: what --output's extension says, else text.",
    ),
    output: Optional[str] = typer.Option(
        None,
        "--output",
        "-o",
        help="Write here instead of stdout. For html: a folder (or an .html file) that also gets one report per example dump.",
    ),
    jobs: Optional[int] = typer.Option(
        None, "--jobs", "-j", help="Dumps analysed at once, in worker processes. Default: the CPU count."
    ),
    timeout: float = typer.Option(
        600.0, "--timeout", help="Seconds one dump may take before it is listed as timed out (0: no limit)."
    ),
    cache: Optional[str] = typer.Option(
        None, "--cache", help="Folder of earlier results: dumps already analysed by this dumpkit version are skipped."
    ),
    scheduler: Optional[str] = typer.Option(
        None,
        "--scheduler",
        help="Run on this Dask scheduler (tcp://HOST:PORT); needs the triage-dask extra and dumps the workers can read.",
    ),
    progress: Optional[bool] = typer.Option(
        None, "--progress/--no-progress", help="Progress bar on stderr (default: when stderr is a terminal)."
    ),
    memory_cap: Optional[str] = typer.Option(
        None,
        "--memory-cap",
        help="Most memory one worker process may take (800M, 4G; 0: no cap): a dump needing more is listed "
        "as failed and the run goes on. Default: half the machine's memory over the workers, 1G at least. "
        "Worker processes on Linux (--jobs 2+).",
    ),
) -> None:
    """Analyse many dumps and group them by crash signature: one line per distinct crash."""
    from dumpkit.triage.run import default_jobs
    from dumpkit.commands.triage import UsageError, run_triage

    fmt = report_format(fmt_name, output if output and os.path.splitext(output)[1] else None)
    if output and fmt is Format.text and not fmt_name and not os.path.splitext(output)[1]:
        fmt = Format.html  # a folder: the HTML page and its per-dump reports
    try:
        code = run_triage(
            paths,
            fmt.value,
            output,
            max(1, jobs) if jobs is not None else default_jobs(),
            timeout if timeout > 0 else None,
            cache,
            scheduler,
            image_path or (),
            _symbol_paths(symbol_path),
            progress,
            memory_cap,
        )
    except UsageError as e:
        raise fail(str(e)) from None
    raise typer.Exit(code)


@app.command()
def capture(
    program: Optional[List[str]] = typer.Argument(
        None, help="The program to run and its arguments, after --: dumpkit capture -- python train.py --epochs 3"
    ),
    output: str = typer.Option(".", "--output", "-o", help="Folder the dump is written to."),
    full: bool = typer.Option(
        False, "--full", help="Write a full-memory dump (MiniDumpWithFullMemory) instead of the Python-aware minidump."
    ),
    attach: Optional[int] = typer.Option(
        None, "--attach", help="Watch this running process instead (Ctrl-C detaches and leaves it running)."
    ),
) -> None:
    """Windows: run a program under dumpkit's debug loop; on a crash, write a dump that holds every thread's Python stack and say what happened."""
    from dumpkit.commands.capture import run_capture

    raise typer.Exit(run_capture(program or (), output, full, attach))


wer_app = typer.Typer(
    no_args_is_help=True,
    help="Windows: Windows Error Reporting's LocalDumps for an executable (a dump of every crash, no tool running).",
)
app.add_typer(wer_app, name="wer")
WerExe = typer.Argument("python.exe", help="The executable's file name.")


@wer_app.command("enable")
def wer_enable(
    exe: str = WerExe,
    folder: str = typer.Option(r"%LOCALAPPDATA%\CrashDumps", "--folder", help="Where WER writes the dumps."),
    dump_type: str = typer.Option("full", "--type", help="full (what the Python stack needs) or mini."),
    count: int = typer.Option(10, "--count", help="How many dumps WER keeps."),
) -> None:
    """Set LocalDumps for EXE (administrator rights)."""
    from dumpkit.commands.wer import run_wer

    raise typer.Exit(run_wer("enable", exe, folder, dump_type, count))


@wer_app.command("disable")
def wer_disable(exe: str = WerExe) -> None:
    """Remove EXE's LocalDumps key, and no other (administrator rights)."""
    from dumpkit.commands.wer import run_wer

    raise typer.Exit(run_wer("disable", exe, None, "full", 0))


@wer_app.command("status")
def wer_status(exe: Optional[str] = typer.Argument(None, help="The executable's file name.")) -> None:
    """Show LocalDumps for EXE and for every program."""
    from dumpkit.commands.wer import run_wer

    raise typer.Exit(run_wer("status", exe, None, "full", 0))


def main() -> None:
    """typer alone; the `dumpkit` command is frontdoor.main, which comes here for all but
    the plain spellings of `explain` and `analyze`."""
    from dumpkit.console import prepare_streams

    prepare_streams()
    guarded(app)


if __name__ == "__main__":
    main()
