"""`dumpkit` command line as typer declares it: each command parses its arguments and
calls its body in dumpkit.commands, which does the rest and says the exit code
(commands/exits.py). Nothing else is done here."""

from __future__ import annotations

import sys
from typing import List, Optional

import typer

from dumpkit.commands.analyze import run_analyze
from dumpkit.commands.exits import guarded
from dumpkit.commands.explain import run_explain
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
FetchImagesOpt = typer.Option(
    False,
    "--fetch-images/--no-fetch-images",
    help="Fetch each module image not at hand from where it is published: its wheel on the package index pip "
    "is configured for, python.org's embeddable zip, Microsoft's symbol server (also DUMPKIT_FETCH_IMAGES=1). "
    "Checked against the dump, cached in $DUMPKIT_CACHE/images, capped by DUMPKIT_MAX_DOWNLOAD. Off by default.",
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
    dump: str = typer.Argument(
        ...,
        help="The .dmp file (or .dkb bundle; .dmp.xz/.gz/.bz2 or a .zip holding one .dmp are unpacked); "
        "- reads it from standard input.",
    ),
    image_path: Optional[List[str]] = ImagePathOpt,
    symbol_path: Optional[List[str]] = SymbolPathOpt,
    recorded_paths: bool = RecordedPathsOpt,
    fetch_images: bool = FetchImagesOpt,
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
        fetch_images=fetch_images,
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
    dump: str = typer.Argument(
        ...,
        help="The .dmp file (or .dkb bundle; .dmp.xz/.gz/.bz2 or a .zip holding one .dmp are unpacked); "
        "- reads it from standard input.",
    ),
    thread: Optional[int] = typer.Option(None, "--thread", "-t", help="Thread id (default: the crashing thread)."),
    all_threads: bool = typer.Option(False, "--all", help="Every thread."),
    image_path: Optional[List[str]] = ImagePathOpt,
    symbol_path: Optional[List[str]] = SymbolPathOpt,
    recorded_paths: bool = RecordedPathsOpt,
    fetch_images: bool = FetchImagesOpt,
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
    from dumpkit.commands.stack import run_stack

    code = run_stack(
        dump,
        thread=thread,
        all_threads=all_threads,
        image_path=image_path or (),
        symbol_path=symbol_path or (),
        recorded_paths=recorded_paths,
        fetch_images=fetch_images,
        max_frames=max_frames,
        json_out=json_out,
        full=full,
        python=python,
    )
    raise typer.Exit(code)


@app.command()
def info(
    dump: str = typer.Argument(
        ...,
        help="The .dmp file (or .dkb bundle; .dmp.xz/.gz/.bz2 or a .zip holding one .dmp are unpacked); "
        "- reads it from standard input.",
    ),
    json_out: bool = typer.Option(False, "--json", help="JSON instead of tables."),
    fetch_images: bool = FetchImagesOpt,
) -> None:
    """What the dump holds: system, process, exception, threads, modules, streams."""
    from dumpkit.commands.info import run_info

    raise typer.Exit(run_info(dump, json_out=json_out, fetch_images=fetch_images))


@app.command()
def bundle(
    dump: str = typer.Argument(..., help="The .dmp file, or a .dkb bundle to bundle again (e.g. with --redact)."),
    output: str = typer.Option(..., "--output", "-o", help="The bundle to write (CRASH.dkb)."),
    image_path: Optional[List[str]] = ImagePathOpt,
    symbol_path: Optional[List[str]] = SymbolPathOpt,
    fetch_images: bool = FetchImagesOpt,
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
    from dumpkit.commands.bundle import run_bundle

    code = run_bundle(
        dump,
        output,
        image_path=image_path or (),
        symbol_path=symbol_path or (),
        redact=redact,
        only_used_memory=only_used_memory,
        fetch_images=fetch_images,
    )
    raise typer.Exit(code)


# A negative exit code (-1073741571) looks like an option to click: take it as the code.
@app.command(context_settings={"ignore_unknown_options": True})
def explain(
    code: Optional[List[str]] = typer.Argument(
        None,
        help="An exit code, NTSTATUS, HRESULT or Win32 error, by number or name, or in words: -1073741571, "
        "0xC00000FD, STATUS_STACK_OVERFLOW, 0xC0000409/7, 0x8007000E, ERROR_ACCESS_DENIED, stack overflow, abort, "
        "or the line Python printed ('Windows fatal exception: code 0xc06d007e', 'DLL load failed ...') ...",
    ),
    how_to_capture: bool = typer.Option(
        False, "--how-to-capture", help="How to capture a dump next time, in full (else one line points to it)."
    ),
) -> None:
    """Explain an exit code or exception code; no dump needed."""
    raise typer.Exit(run_explain(code or (), how_to_capture))


@app.command()
def triage(
    paths: List[str] = typer.Argument(..., help="Dump files, folders (searched recursively) and globs."),
    image_path: Optional[List[str]] = ImagePathOpt,
    symbol_path: Optional[List[str]] = SymbolPathOpt,
    fetch_images: bool = FetchImagesOpt,
    recorded_paths: bool = RecordedPathsOpt,
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
    from dumpkit.commands.triage import run_triage

    code = run_triage(
        paths,
        fmt_name=fmt_name,
        output=output,
        jobs=jobs,
        timeout=timeout,
        cache=cache,
        scheduler=scheduler,
        image_path=image_path or (),
        symbol_path=symbol_path or (),
        progress=progress,
        memory_cap=memory_cap,
        fetch_images=fetch_images,
        recorded_paths=recorded_paths,
    )
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
    on_exit: str = typer.Option(
        "abnormal",
        "--on-exit",
        help="Which exits without a crash to dump: abnormal (exit code 3 from abort(), raise(SIGABRT), "
        "Py_FatalError or OpenMP; an error status; TerminateProcess on itself), nonzero (any nonzero "
        "exit code), never.",
    ),
    now: bool = typer.Option(
        False,
        "--now",
        help="With --attach: dump the running (e.g. hung) process at once and leave it running, as procdump "
        "PID does; Python-aware, or full memory with --full (procdump -ma).",
    ),
) -> None:
    """Windows: run a program under dumpkit's debug loop; on a crash or an abnormal exit, write a dump that holds every thread's Python stack and say what happened. --attach PID --now dumps a running (hung) process at once."""
    from dumpkit.commands.capture import run_capture

    raise typer.Exit(run_capture(program or (), output, full, attach, on_exit, now))


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
