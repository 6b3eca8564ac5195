"""The `dumpkit` entry point: the plain spellings of `explain`, `analyze`, `triage`, `stack`
and `info` are parsed here, without importing typer; anything else (help, other commands,
an option or value this table does not know) goes to typer in cli.py, which gives the same
answers and all the messages.

Why: typer 0.2x imports ~60 ms of its own and builds a pydantic validator for every
parameter it converts (pydantic alone ~50 ms to import), before the command runs: most
of `explain`'s time and a third of a small `analyze`. tests/test_frontdoor.py keeps this
table equal to typer's declarations and the two paths' outputs equal."""

from __future__ import annotations

import contextlib
import gc
import sys
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

# What an option does with its value.
TEXT, MANY, NUMBER, DECIMAL, ON, OFF = "text", "many", "number", "decimal", "on", "off"

# option spelling -> (keyword of the command's run_* in dumpkit.commands, kind); typer's
# declarations in cli.py are the reference (a test compares them).
# Where images and symbols come from, the format and the output: analyze's and triage's alike.
_DUMP_OPTIONS: Dict[str, Tuple[str, str]] = {
    "--image-path": ("image_path", MANY),
    "-i": ("image_path", MANY),
    "--symbol-path": ("symbol_path", MANY),
    "--fetch-images": ("fetch_images", ON),
    "--no-fetch-images": ("fetch_images", OFF),
    "--format": ("fmt_name", TEXT),
    "-f": ("fmt_name", TEXT),
    "--output": ("output", TEXT),
    "-o": ("output", TEXT),
}
ANALYZE_OPTIONS: Dict[str, Tuple[str, str]] = {
    **_DUMP_OPTIONS,
    "--recorded-paths": ("recorded_paths", ON),
    "--no-recorded-paths": ("recorded_paths", OFF),
    "--max-frames": ("max_frames", NUMBER),
    "--threshold": ("threshold", NUMBER),
    "--color": ("color", ON),
    "--no-color": ("color", OFF),
    "--width": ("width_asked", NUMBER),
    "--redact": ("redact", ON),
    "--no-redact": ("redact", OFF),
}
EXPLAIN_OPTIONS: Dict[str, Tuple[str, str]] = {"--how-to-capture": ("how_to_capture", ON)}
TRIAGE_OPTIONS: Dict[str, Tuple[str, str]] = {
    **_DUMP_OPTIONS,
    "--jobs": ("jobs", NUMBER),
    "-j": ("jobs", NUMBER),
    "--timeout": ("timeout", DECIMAL),
    "--cache": ("cache", TEXT),
    "--scheduler": ("scheduler", TEXT),
    "--progress": ("progress", ON),
    "--no-progress": ("progress", OFF),
    "--memory-cap": ("memory_cap", TEXT),
    "--recorded-paths": ("recorded_paths", ON),
    "--no-recorded-paths": ("recorded_paths", OFF),
}

# `stack` and `info`: where images come from, as analyze's, and their own options
_IMAGE_OPTIONS = {k: v for k, v in _DUMP_OPTIONS.items() if v[0] in ("image_path", "symbol_path", "fetch_images")}
STACK_OPTIONS: Dict[str, Tuple[str, str]] = {
    **_IMAGE_OPTIONS,
    "--recorded-paths": ("recorded_paths", ON),
    "--no-recorded-paths": ("recorded_paths", OFF),
    "--thread": ("thread", NUMBER),
    "-t": ("thread", NUMBER),
    "--all": ("all_threads", ON),
    "--max-frames": ("max_frames", NUMBER),
    "--json": ("json_out", ON),
    "--full": ("full", ON),
    "--python": ("python", ON),
}
INFO_OPTIONS: Dict[str, Tuple[str, str]] = {
    "--json": ("json_out", ON),
    "--fetch-images": ("fetch_images", ON),
    "--no-fetch-images": ("fetch_images", OFF),
}

Value = Union[str, int, float, bool, List[str]]


def parse(
    args: Sequence[str], options: Dict[str, Tuple[str, str]], negative_numbers: bool = False
) -> Optional[Tuple[List[str], Dict[str, Value]]]:
    """(positional arguments, keyword values) when every token is a plain spelling:
    `--opt value`, `--opt=value`, `-o value`, a flag, or an argument. None for anything
    else, which typer is left to answer (its help and usage errors included).
    `negative_numbers`: "-1073741571" is an argument (as `explain` declares)."""
    positional: List[str] = []
    values: Dict[str, Value] = {}
    i = 0
    while i < len(args):  # bounded: i grows every turn
        tok = args[i]
        i += 1
        if not tok.startswith("-") or tok == "-":  # "-": standard input
            positional.append(tok)
            continue
        if negative_numbers and tok[1:2].isdigit():
            positional.append(tok)
            continue
        name, eq, inline = tok.partition("=") if tok.startswith("--") else (tok, "", "")
        spec = options.get(name)
        if spec is None:
            return None
        dest, kind = spec
        if kind in (ON, OFF):
            if eq:
                return None
            values[dest] = kind == ON
            continue
        if eq:
            value = inline
        elif i < len(args) and not (args[i].startswith("-") and args[i] != "-"):
            value = args[i]
            i += 1
        else:
            return None
        if kind == NUMBER:
            if not (value.isascii() and value.isdigit()):
                return None
            values[dest] = int(value)
        elif kind == DECIMAL:  # 600, 2.5: what float() and typer read alike; the rest is typer's
            whole, point, fraction = value.partition(".")
            if not (whole.isascii() and whole.isdigit() and (not point or (fraction.isascii() and fraction.isdigit()))):
                return None
            values[dest] = float(value)
        elif kind == MANY:
            many = values.setdefault(dest, [])
            assert isinstance(many, list)
            many.append(value)
        else:
            values[dest] = value
    return positional, values


def quick(argv: Sequence[str]) -> Optional[int]:
    """Run `explain`, `analyze`, `triage`, `stack` or `info` when their arguments parse here; the
    exit code, or None when typer must parse them."""
    if not argv:
        return None
    if list(argv) == ["--version"]:
        from dumpkit import __version__

        sys.stdout.write(f"dumpkit {__version__}\n")
        return 0
    command, rest = argv[0], argv[1:]
    if command == "explain":
        parsed = parse(rest, EXPLAIN_OPTIONS, negative_numbers=True)
        if parsed is None:
            return None
        from dumpkit.commands.explain import run_explain

        return run_explain(parsed[0], bool(parsed[1].get("how_to_capture", False)))
    if command == "analyze":
        parsed = parse(rest, ANALYZE_OPTIONS)
        if parsed is None or len(parsed[0]) != 1:
            return None
        with _importing():
            from dumpkit.commands.analyze import run_analyze
            import dumpkit.engine  # noqa: F401  (run_analyze's first import)

        from dumpkit.gcpause import paused

        with paused():  # the analysis makes no cycles to collect (gcpause.py)
            return run_analyze(parsed[0][0], **parsed[1])  # type: ignore[arg-type]
    if command in ("stack", "info"):
        parsed = parse(rest, STACK_OPTIONS if command == "stack" else INFO_OPTIONS)
        if parsed is None or len(parsed[0]) != 1:
            return None
        from dumpkit.gcpause import paused

        with paused():  # the engine is imported and run without the collector, as analyze's
            if command == "stack":
                from dumpkit.commands.stack import run_stack

                return run_stack(parsed[0][0], **parsed[1])  # type: ignore[arg-type]
            from dumpkit.commands.info import run_info

            return run_info(parsed[0][0], **parsed[1])  # type: ignore[arg-type]
    if command == "triage":
        parsed = parse(rest, TRIAGE_OPTIONS)
        if parsed is None or not parsed[0]:
            return None
        from dumpkit.triage.forkserver import start_early

        # the workers' fork server imports the analysis on another core while this process does
        start_early(parsed[1].get("jobs"), parsed[1].get("scheduler"))  # type: ignore[arg-type]
        from dumpkit.commands.triage import run_triage

        return run_triage(parsed[0], **parsed[1])  # type: ignore[arg-type]
    return None


@contextlib.contextmanager
def _importing() -> Iterator[None]:
    """No garbage collection while the analysis is imported: its modules make ~25,000
    tracked objects that live as long as the process, and collecting over them as they come
    finds nothing (2% of a small `analyze`). Frozen after, later collections pass them over."""
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def run(argv: Sequence[str]) -> Optional[int]:
    code = quick(argv)
    if code is None:
        from dumpkit.cli import app

        app()  # exits
    return code


def main() -> None:
    from dumpkit.commands.exits import guarded
    from dumpkit.console import prepare_streams

    prepare_streams()  # Windows pipes and files: UTF-8, not the ANSI code page
    try:
        guarded(lambda: run(sys.argv[1:]))
    finally:
        # The command is done. At exit the interpreter collects garbage over every object
        # the run made, more than once (~15 ms of a small `analyze`'s ~100 ms); frozen,
        # they are left to be freed by reference counting as modules are torn down, and
        # what only a cycle holds to the operating system. atexit hooks still run and the
        # standard streams are still flushed.
        gc.freeze()


if __name__ == "__main__":
    main()
