"""Module file names and paths: a Windows path recorded in a dump, tried as this machine
would find it; `_NT_SYMBOL_PATH`-style strings read into stores and servers."""

from __future__ import annotations

import ntpath
import os
import re
import stat
from typing import TYPE_CHECKING, Callable, Dict, Iterable, Iterator, List, Optional, Set, Tuple

from dumpkit.symbols.store import SymbolServer, parse_symbol_spec, resolve_case_insensitive
from dumpkit.target import Module

if TYPE_CHECKING:  # the PDB reader is imported when a PDB is found (most dumps have none)
    pass


def parse_symbol_path(spec: str) -> List[str]:
    """Local directories named by an `_NT_SYMBOL_PATH`-style string (store.parse_symbol_spec)."""
    return parse_symbol_spec(spec)[0]


def parse_symbol_servers(spec: str) -> List[SymbolServer]:
    """The HTTP(S) symbol servers of a symbol path, each with the local store its downloads go to."""
    return parse_symbol_spec(spec)[1]


_DRIVE_RE = re.compile(r"^([a-zA-Z]):[\\/](.*)$")


_PREFIXES: Dict[Tuple[Optional[str], Optional[str]], Tuple[str, ...]] = {}


def _wine_prefixes() -> Tuple[str, ...]:
    """The Wine prefixes there are: $WINEPREFIX, ~/.wine. A prefix that is not there holds
    nothing: one stat, where each of its paths would cost a case-insensitive search. Asked
    for every recorded path of every module a triage looks for, so the answer is kept per
    setting of the two variables (a prefix made while dumpkit runs is not seen by it)."""
    key = (os.environ.get("WINEPREFIX"), os.environ.get("HOME"))
    found = _PREFIXES.get(key)
    if found is None:
        prefixes = [key[0]] if key[0] else []
        prefixes.append(os.path.join(os.path.expanduser("~"), ".wine"))
        if len(_PREFIXES) >= 16:  # a test suite sets $WINEPREFIX to a new folder per test
            _PREFIXES.clear()
        found = _PREFIXES[key] = tuple(filter(os.path.isdir, prefixes))
    return found


def windows_path_candidates(path: str) -> List[str]:
    """Where a path recorded on Windows might be on this machine, best first.

    The path itself; with `\\\\?\\` / `\\??\\` prefixes removed; on a POSIX host, a drive
    path `X:\\rest` under Wine's layout ($WINEPREFIX or ~/.wine: `dosdevices/x:` and
    `drive_x`), and `Z:\\rest` as `/rest` (Wine maps Z: to the root)."""
    if not path:
        return []
    out: List[str] = []

    def add(p: str) -> None:
        if p and p not in out:
            out.append(p)

    p = path
    for prefix in ("\\\\?\\", "\\??\\", "//?/"):
        if p.startswith(prefix):
            p = p[len(prefix) :]
    add(path)
    add(p)
    if os.sep == "/":
        m = _DRIVE_RE.match(p)
        if m:
            drive, rest = m.group(1).lower(), m.group(2).replace("\\", "/")
            for pre in _wine_prefixes():
                add(os.path.join(pre, "dosdevices", f"{drive}:", rest))
                add(os.path.join(pre, f"drive_{drive}", rest))
            if drive == "z":
                add("/" + rest)
        elif "\\" in p:
            add(p.replace("\\", "/"))
    return out


def existing_files(candidates: Iterable[str], folders: Optional[Dict[str, Optional[str]]] = None) -> Iterator[str]:
    """The candidates that are files here, resolved case-insensitively on POSIX (a path a
    Windows machine recorded may differ in case from the file on this one), each file once:
    a Wine prefix's `dosdevices/c:` is a link to its `drive_c`, so a recorded `C:\\` path
    names every file there twice, and each would be opened and refused twice. `folders`:
    the folders one run has resolved (`resolve_case_insensitive`)."""
    seen: Set[Tuple[int, int]] = set()
    for cand in candidates:
        real = resolve_case_insensitive(cand, folders) if os.sep == "/" else cand
        if not real:
            continue
        try:
            st = os.stat(real)
        except (OSError, ValueError):  # what os.path.isfile answers False to
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        if st.st_ino:  # 0 where a file system has no file ids: every path kept
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
        yield real


class FileProbe:
    """Which files a path recorded on Windows names on this machine, as the file system
    says at each question (`analyze`, the debugger extension: a file put in place between
    two runs is found by the second)."""

    # The folders resolved on the way to recorded paths (None: none kept, each question
    # looks again): `for_one_run` keeps them for a run, as a RememberingProbe does.
    _folders: Optional[Dict[str, Optional[str]]] = None

    def for_one_run(self) -> "FileProbe":
        """This probe for one analysis: a probe that keeps nothing gives one that resolves
        each folder once in the run (an Unreal editor's 600 modules, recorded in ~140
        folders, were looked up component by component each: a tenth of its `analyze`);
        files are still looked for at each question."""
        if self._folders is not None:
            return self
        run = type(self).__new__(type(self))  # the same probe (a subclass's too), with a memory
        run.__dict__.update(vars(self))
        run._folders = {}
        return run

    def recorded(self, path: str) -> List[str]:
        """The files here that the recorded `path` may be (`windows_path_candidates`)."""
        return list(existing_files(windows_path_candidates(path), self._folders))

    def beside(self, path: str, name: str) -> List[str]:
        """The files named `name` (any case, on POSIX) in the folder of each place the
        recorded `path` may be: where a module's PDB is looked for next to it."""
        out: List[str] = []
        for image in windows_path_candidates(path):
            if os.sep == "/":  # the file as named there, in any case; None when it is not there
                cand = resolve_case_insensitive(
                    os.path.join(os.path.dirname(image.replace("\\", "/")), name), self._folders
                )
            else:
                cand = os.path.join(os.path.dirname(image), name)
            if cand is not None and os.path.isfile(cand):
                out.append(cand)
        return out

    def stamp(self, path: str) -> Optional[Tuple[int, int]]:
        """The (TimeDateStamp, SizeOfImage) the image file `path` was found to have, NOT_PE
        for a file that is no image; None when not known (this probe keeps nothing: each
        question opens the file)."""
        return None

    def note_stamp(self, path: str, stamp: Tuple[int, int]) -> None:
        """What reading the image file `path` found (`stamp`)."""


NOT_PE = (-1, -1)  # the stamp of a file that is no PE image


class RememberingProbe(FileProbe):
    """A FileProbe that keeps its answers: one triage asks about the same recorded paths for
    every dump of a fleet (the same program's modules), so the file system is asked once a
    path. For a run that reads many dumps at once; a file put in place during it is not seen.
    Bounded: a fleet of unrelated programs records many paths."""

    LIMIT = 16_384  # answers kept; all are forgotten when it is reached

    def __init__(self) -> None:
        self._answers: Dict[Tuple[str, str], List[str]] = {}
        self._folders = {}  # kept as its answers are
        # Image files' stamps: a fleet's dumps name the same system DLLs, and the file of
        # that name here (Windows' own, a Wine prefix's) is read and refused once, not once
        # a dump (about a tenth of a small dump's instructions)
        self._stamps: Dict[str, Tuple[int, int]] = {}

    def _kept(self, key: Tuple[str, str], ask: Callable[[], List[str]]) -> List[str]:
        found = self._answers.get(key)
        if found is None:
            if len(self._answers) >= self.LIMIT:
                self._answers.clear()
            found = self._answers[key] = ask()
        return list(found)

    def recorded(self, path: str) -> List[str]:
        return self._kept(("", path), lambda: FileProbe.recorded(self, path))

    def beside(self, path: str, name: str) -> List[str]:
        return self._kept((name, path), lambda: FileProbe.beside(self, path, name))

    def stamp(self, path: str) -> Optional[Tuple[int, int]]:
        return self._stamps.get(path)

    def note_stamp(self, path: str, stamp: Tuple[int, int]) -> None:
        if len(self._stamps) >= self.LIMIT:
            self._stamps.clear()
        self._stamps[path] = stamp


LIVE = FileProbe()


def module_file_name(module: Module) -> str:
    name = module.name
    if name and "\\" not in name and "/" not in name and ":" not in name:
        return name  # already a file name, as the dump parser leaves almost every one
    if module.name:
        return ntpath.basename(module.name.replace("/", "\\"))
    return ntpath.basename(module.path.replace("/", "\\")) if module.path else ""
