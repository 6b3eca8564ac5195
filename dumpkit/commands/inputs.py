"""What a command reads besides its options: the dump (or bundle), opened under one rule
for every command into the run's problems collector, and the symbol path with the
debugger's environment variables."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, List, Optional, Tuple

from dumpkit.commands.exits import fail

if TYPE_CHECKING:
    from dumpkit.problems import Problems
    from dumpkit.sources.minidump import MinidumpTarget
    from dumpkit.target import Target

BUNDLE_SUFFIX = ".dkb"


def open_target(path: str) -> Tuple[Target, Problems]:
    """The dump (or bundle) at `path`, opened into a new problems collector, the run's one:
    what reading meets is its first lines, and the command hands it to the engine."""
    from dumpkit.analysis.facts import nothing_to_analyse
    from dumpkit.problems import Problems
    from dumpkit.target import DumpError

    from dumpkit.sources.streamed import STDIN

    if path != STDIN:
        if os.path.isdir(path):
            raise fail(f"{path}: is a directory, not a dump file{_dumps_in(path)}")
        if not os.path.exists(path):
            raise fail(f"{path}: no such file")
    problems = Problems()
    try:
        target = _open(path, problems)
    except DumpError as e:
        raise fail(f"{path}: {e}") from None
    except MemoryError:
        raise fail(f"{path}: not enough memory to map the file") from None
    # the same rule for every command: what one calls unusable, none reports on
    why = nothing_to_analyse(target, problems)
    if why is not None:
        target.close()
        raise fail(f"{path}: {why}")
    return target, problems


def _dumps_in(folder: str) -> str:
    """What to do with a folder given as a dump (e.g. a WER report folder: memory.hdmp,
    triagedump.dmp), when it holds files named like dumps."""
    from dumpkit.triage.collect import is_dump_name

    try:
        with os.scandir(folder) as entries:
            names = sorted(e.name for _, e in zip(range(10_000), entries) if is_dump_name(e.name) and e.is_file())
    except OSError:
        return ""
    if not names:
        return ""
    shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    if len(names) == 1:
        return f"; it holds {shown}: name that file"
    return f"; it holds {len(names)} dump files ({shown}): name one, or run dumpkit triage on the folder"


def _open(path: str, problems: "Problems") -> "MinidumpTarget":
    """A bundle (its modules' images are served from it too), a dump as shared (compressed,
    or zipped: unpacked into a private copy), or a minidump; from a file, or from a stream
    (`-`, a pipe: read once, sources/streamed.py)."""
    from dumpkit.sources.packed import open_packed, packing_of
    from dumpkit.sources.streamed import is_stream, open_stream

    if is_stream(path):
        return open_stream(path, problems)
    named_bundle = path.lower().endswith(BUNDLE_SUFFIX)
    packing = None if named_bundle else packing_of(path)
    if named_bundle or (packing is not None and packing.bundle):
        from dumpkit.sources.bundle import open_bundle

        return open_bundle(path, problems)
    if packing is not None:
        return open_packed(path, packing, problems)
    from dumpkit.sources.minidump import open_dump

    return open_dump(path, problems)


def symbol_paths(explicit: Optional[List[str]]) -> List[str]:
    """--symbol-path values, then _NT_ALT_SYMBOL_PATH and _NT_SYMBOL_PATH (WinDbg's order).
    A DUMPKIT_MAX_DOWNLOAD that is not a size stops here, before any search."""
    from dumpkit.symbols.store import download_limit, environment_symbol_paths

    try:
        download_limit()
    except ValueError as e:
        raise fail(str(e)) from None
    return list(explicit or []) + environment_symbol_paths()
