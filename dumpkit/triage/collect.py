"""Which files a triage reads: the paths given, folders searched recursively, globs. A
folder's zip archives are taken when they hold a dump, as GitHub and crash uploads carry
one (CRASH.zip), and passed over when they hold other files (sources/packed.holds_dump)."""

from __future__ import annotations

import glob
import os
from typing import Iterable, List, Set, Tuple

from dumpkit.sources.packed import holds_dump

# What a dump file is called: plain, compressed as shared (analyse.py unpacks these), or
# a dumpkit bundle.
COMPRESSED_SUFFIXES = (".xz", ".gz", ".bz2", ".zip")
# .hdmp: Windows Error Reporting's full-memory ("heap") dump beside its .mdmp in a report
# folder (ProgramData\Microsoft\Windows\WER\ReportArchive\...): a minidump too.
DUMP_SUFFIXES = (".dmp", ".mdmp", ".hdmp", ".dkb") + tuple(".dmp" + c for c in COMPRESSED_SUFFIXES)
MAX_FILES = 1_000_000  # a folder tree is dump-controlled input too


def is_dump_name(name: str) -> bool:
    return name.lower().endswith(DUMP_SUFFIXES)


def _is_dump(path: str) -> bool:
    """A file a search takes: named like a dump, or a zip archive holding one."""
    name = path.lower()
    return name.endswith(DUMP_SUFFIXES) or (name.endswith(".zip") and holds_dump(path))


def _walk(folder: str, out: List[str], seen: Set[str]) -> None:
    """Dump files under `folder`, depth-first in name order, without following symlinked
    folders (os.walk's default: a link loop cannot trap it)."""
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            if len(out) >= MAX_FILES:
                return
            path = os.path.join(root, name)
            if _is_dump(path):
                _add(path, out, seen)


def _add(path: str, out: List[str], seen: Set[str]) -> None:
    key = os.path.realpath(path)
    if key not in seen:
        seen.add(key)
        out.append(path)


def collect(paths: Iterable[str]) -> Tuple[List[str], List[str]]:
    """(dump files, arguments that matched nothing). A file named explicitly is taken
    whatever its name; folders and globs contribute files named like dumps."""
    out: List[str] = []
    seen: Set[str] = set()
    missing: List[str] = []
    for arg in paths:
        if os.path.isdir(arg):
            _walk(arg, out, seen)
        elif os.path.isfile(arg):
            _add(arg, out, seen)
        elif glob.has_magic(arg):
            before = len(out)
            for match in sorted(glob.glob(arg, recursive=True)):
                if os.path.isdir(match):
                    _walk(match, out, seen)
                elif os.path.isfile(match) and _is_dump(match):
                    _add(match, out, seen)
            if len(out) == before:
                missing.append(arg)
        else:
            missing.append(arg)
    return out[:MAX_FILES], missing
