"""`dumpkit stack`: the threads asked for, walked, and their frames written like WinDbg's
`kf` (or as JSON), a row at a time."""

from __future__ import annotations

import sys
from typing import Optional, Sequence

from dumpkit.commands.exits import EXIT_OK, EXIT_PROBLEMS, fail, warn_problems

from dumpkit.commands.inputs import open_target, symbol_paths
from dumpkit.commands.output import fetch_progress
from dumpkit.limits import MAX_FRAMES


def run_stack(
    dump: str,
    thread: Optional[int] = None,
    all_threads: bool = False,
    image_path: Sequence[str] = (),
    symbol_path: Sequence[str] = (),
    recorded_paths: bool = True,
    fetch_images: bool = False,
    max_frames: int = MAX_FRAMES,
    json_out: bool = False,
    full: bool = False,
    python: bool = False,
) -> int:
    """The stacks written to stdout; returns the exit code."""
    from dumpkit.engine import Options, crashing_thread, stacks, walker_for

    target, problems = open_target(dump)
    if walker_for(target) is None:
        arch = target.system.arch_name if target.system is not None else "of an unknown architecture"
        raise fail(f"{dump}: stack walking supports x64 and x86 dumps (this one is {arch})")
    opts = Options(
        image_paths=image_path,
        symbol_paths=symbol_paths(list(symbol_path)),
        use_recorded_paths=recorded_paths,
        max_frames=max(1, max_frames),
        fetch_images=fetch_images,
        fetch_progress=fetch_progress(),
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
    doc, frames, supports = stacks(
        target, opts, chosen, python=python, cycles=not (json_out or full), problems=problems
    )
    if json_out:
        from dumpkit.report.stream import write_stacks_json

        write_stacks_json(doc, frames, sys.stdout, supports=supports)
    else:
        from rich.console import Console

        from dumpkit.report.stream import write_stacks_text

        console = Console(highlight=False, soft_wrap=False, width=max(120, Console().width))
        write_stacks_text(doc, frames, console, sys.stdout, full=full, supports=supports)
    sys.stdout.flush()
    warn_problems(list(doc.soft_errors))
    return EXIT_PROBLEMS if doc.soft_errors else EXIT_OK
