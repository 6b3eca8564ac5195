"""Symbol stores and symbol servers: the layout Microsoft's symstore and symbol server use,
`NAME/KEY/NAME` (KEY is an image's TimeDateStamp and SizeOfImage, or a PDB's GUID and age).

- Where they are: a symbol path (`_NT_ALT_SYMBOL_PATH`, then `_NT_SYMBOL_PATH`, as WinDbg
  searches them) names local stores and `srv*CACHE*URL` servers; a server without a CACHE
  downloads into dumpkit's cache folder (`$DUMPKIT_CACHE/symbols`, else the per-OS user
  cache folder that platformdirs names, e.g. ~/.cache/dumpkit/symbols on Linux).
- What a store may hold under a key instead of the file: `file.ptr` (symstore /p: a pointer
  to the real file) or `NAME.dl_` / `NAME.pd_` (symstore /compress: a cabinet).
- How a file enters a store: fetched (from a server, or expanded from a cabinet) into a
  temporary file beside its place, capped in size, checked by the caller's `Check` (is it
  the build the key names?), and only then renamed into place. Anything else is deleted,
  so a store never holds a partial, junk or wrong-build file.

Checking what a file is (PE headers, PDB GUID) is the caller's: this module knows layouts
and transport, not file formats other than the cabinet.
"""

from __future__ import annotations

import os
import re
import time
from typing import BinaryIO, Callable, Dict, Iterator, List, Optional, Tuple

from dumpkit.records import record

__all__ = [
    "Check",
    "Fetched",
    "StoreKey",
    "SymbolServer",
    "download",
    "download_limit",
    "environment_symbol_paths",
    "expand",
    "install",
    "parse_symbol_spec",
    "read_pointer",
    "resolve_case_insensitive",
    "store_files",
    "symbol_cache",
]

CACHE_ENV = "DUMPKIT_CACHE"
LIMIT_ENV = "DUMPKIT_MAX_DOWNLOAD"
# WinDbg's order: the alternate path is searched first, so it can override the usual one.
SYMBOL_PATH_ENVS = ("_NT_ALT_SYMBOL_PATH", "_NT_SYMBOL_PATH")
# The largest file a server may send or a cabinet may expand to. Images and PDBs of big
# native extensions reach hundreds of MB; more than 2 GiB is a misbehaving server.
DEFAULT_LIMIT = 2 << 30
DOWNLOAD_TIMEOUT = 60  # seconds a server may stay silent
MAX_FILE_PTR = 4096
_CHUNK = 1 << 20
_PARTIAL = ".dumpkit-partial-"
_STALE_PARTIAL = 24 * 3600  # a partial file this old was left by a process that was killed

Check = Callable[[str], Optional[str]]
"""check(path): None when the file at `path` is the build its key names, else why not
(one line, e.g. "another build (TimeDateStamp ...)")."""


def symbol_cache() -> str:
    """Where downloads go when a symbol path names no cache: `$DUMPKIT_CACHE/symbols`, else
    `symbols` in the per-OS user cache folder (platformdirs: ~/.cache/dumpkit on Linux,
    ~/Library/Caches/dumpkit on macOS, %LOCALAPPDATA%\\dumpkit\\Cache on Windows)."""
    base = os.environ.get(CACHE_ENV)
    if not base:
        import platformdirs

        base = platformdirs.user_cache_dir("dumpkit", appauthor=False)
    return os.path.join(base, "symbols")


_SIZE_RE = re.compile(r"^\s*(\d+)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)


def download_limit() -> int:
    """The download cap: `$DUMPKIT_MAX_DOWNLOAD` (bytes, or with a K/M/G/T suffix,
    binary), else DEFAULT_LIMIT. A value that is not a size is an error that says so."""
    text = os.environ.get(LIMIT_ENV)
    if not text:
        return DEFAULT_LIMIT
    m = _SIZE_RE.match(text)
    if m is None or int(m.group(1)) == 0:
        raise ValueError(f"{LIMIT_ENV}={text!r} is not a size (e.g. 500M, 4G or a number of bytes)")
    return int(m.group(1)) << (10 * " kmgt".index(m.group(2).lower() or " "))


def environment_symbol_paths() -> List[str]:
    """The symbol paths the environment sets, in WinDbg's search order."""
    return [v for v in (os.environ.get(name) for name in SYMBOL_PATH_ENVS) if v]


# ----------------------------------------------------------------------------- symbol paths
@record
class SymbolServer:
    url: str  # base URL; files are served at URL/NAME/KEY/NAME
    cache: str  # local store the downloads go into (NAME/KEY/NAME)


def parse_symbol_spec(spec: str) -> Tuple[List[str], List[SymbolServer]]:
    """The local directories and HTTP(S) servers of an `_NT_SYMBOL_PATH`-style string.

    Elements are separated by ';'. `srv*DIR*URL`, `symsrv*symsrv.dll*DIR*URL` and
    `cache*DIR` contribute their local directories, plain elements are directories. A
    server's downloads go to the last local directory before it in the same element (as
    symsrv does), else to `symbol_cache()`; those caches are searched as stores too."""
    dirs: List[str] = []
    servers: List[SymbolServer] = []
    for element in spec.split(";"):
        element = element.strip()
        if not element:
            continue
        parts = element.split("*")
        head = parts[0].lower()
        if head in ("srv", "symsrv", "cache") and len(parts) > 1:
            rest = parts[1:]
            if head == "symsrv" and rest and rest[0].lower().endswith(".dll"):
                rest = rest[1:]
        else:
            rest = [element]
        cache = None
        for p in rest:
            if not p:
                continue
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", p):
                if p.lower().startswith(("http://", "https://")):
                    servers.append(SymbolServer(p.rstrip("/"), cache or symbol_cache()))
                continue
            cache = p
            if p not in dirs:
                dirs.append(p)
    for srv in servers:
        if srv.cache not in dirs:
            dirs.append(srv.cache)
    return dirs, servers


# ----------------------------------------------------------------------------- store layout
@record
class StoreKey:
    """Where a file lives in a store: NAME/KEY/NAME."""

    name: str  # the file's name, e.g. ntdll.dll or ntdll.pdb
    key: str  # TimeDateStamp %08X + SizeOfImage %x for an image; GUID + age for a PDB

    @property
    def compressed(self) -> str:
        """The name symstore /compress gives it: the last character replaced by '_'."""
        return self.name[:-1] + "_"

    def where(self, base: str, leaf: Optional[str] = None) -> str:
        return os.path.join(base, self.name, self.key, leaf or self.name)

    def url(self, server: SymbolServer, leaf: Optional[str] = None) -> str:
        return f"{server.url}/{self.name}/{self.key}/{leaf or self.name}"


def resolve_case_insensitive(path: str, folders: Optional[Dict[str, Optional[str]]] = None) -> Optional[str]:
    """`path` if it exists, else the existing path that equals it ignoring case in each
    component (Windows paths are case-insensitive; POSIX file systems are not).

    `folders`: the folders resolved so far in one run (folder as asked -> as found, or
    None when there is none), kept by the caller: a dump's 600 modules recorded in a few
    folders have them looked up once, not component by component for each module."""
    head, name = os.path.split(path.rstrip("/"))
    if folders is not None and head in folders and folders[head] is None:
        return None  # its folder is not here: neither is it
    if os.path.exists(path):
        return path
    if not os.path.isabs(path) or not name:
        return None
    folder = _resolve_folder(head, folders)
    found = _entry(folder, name) if folder is not None else None
    return found if found is not None and os.path.exists(found) else None


_FOLDERS_LIMIT = 4096  # folders a run keeps resolved; all are forgotten when it is reached


def _entry(folder: str, name: str) -> Optional[str]:
    """`folder`'s entry `name`, as named there or equal ignoring case; None when it has none."""
    exact = os.path.join(folder, name)
    if os.path.exists(exact):
        return exact
    match = _names_by_case(folder).get(name.lower())
    return None if match is None else os.path.join(folder, match)


def _resolve_folder(path: str, folders: Optional[Dict[str, Optional[str]]] = None) -> Optional[str]:
    """The existing folder that equals `path` (absolute) ignoring case in each component;
    each folder on the way taken from and kept in `folders` when given, and `path` itself
    kept as None when it is not here."""
    cur: Optional[str] = "/"
    asked = ""
    for comp in (c for c in path.split("/") if c):
        asked += "/" + comp
        if folders is not None and asked in folders:
            cur = folders[asked]
        else:
            assert cur is not None
            cur = _entry(cur, comp)
            if folders is not None:
                if len(folders) >= _FOLDERS_LIMIT:
                    folders.clear()
                folders[asked] = cur
        if cur is None:
            if folders is not None:
                folders[path] = None  # a file asked for there next is answered without a look
            return None
    return cur


# Folder -> (its stat signature, its entries by lower-cased name). A dump's modules are
# looked for under the same few folders (a Wine prefix's C:/windows/system32 once per
# module, ~80 us a listing there): a folder is listed again when its stat says it changed.
# A listing is kept only of a folder unchanged for _SETTLED_NS: file systems stamp times
# coarsely (Linux by the tick, FAT by 2 s), so two changes close together can leave the
# same stamp, and the listing taken between them must not be kept.
_LISTINGS: Dict[str, Tuple[Tuple[int, int, int], Dict[str, str]]] = {}
_LISTINGS_LIMIT = 1024  # folders kept; all are forgotten when it is reached
_SETTLED_NS = 3_000_000_000


def _names_by_case(folder: str) -> Dict[str, str]:
    """The entries of `folder` by lower-cased name (the first listed of names equal but
    for case), or none when it cannot be listed."""
    try:
        st = os.stat(folder)
    except OSError:
        return {}
    signature = (st.st_mtime_ns, st.st_ino, st.st_size)
    kept = _LISTINGS.get(folder)
    if kept is not None and kept[0] == signature:
        return kept[1]
    try:
        entries = os.listdir(folder)
    except OSError:
        return {}
    names: Dict[str, str] = {}
    for entry in entries:
        names.setdefault(entry.lower(), entry)
    if time.time_ns() - st.st_mtime_ns > _SETTLED_NS:
        if len(_LISTINGS) >= _LISTINGS_LIMIT:
            _LISTINGS.clear()
        _LISTINGS[folder] = (signature, names)
    return names


def store_files(base: str, key: StoreKey, leaf: Optional[str] = None) -> Iterator[str]:
    """The file NAME/KEY/LEAF (LEAF defaults to NAME) under `base`, if there is one,
    tolerating case differences (stores written on Windows differ in case)."""
    direct = key.where(base, leaf)
    if os.path.isfile(direct):
        yield direct
        return
    real = resolve_case_insensitive(os.path.abspath(direct)) if os.sep == "/" else None
    if real and os.path.isfile(real):
        yield real


def read_pointer(ptr: str) -> Tuple[Optional[str], Optional[str]]:
    """A store's file.ptr (symstore /p): (the path it names, None), or (None, why not) for a
    `MSG:` pointer or one that cannot be read."""
    try:
        with open(ptr, "rb") as f:
            text = f.read(MAX_FILE_PTR).decode("utf-8", "replace").strip()
    except OSError as e:
        return None, f"{ptr}: {e.strerror or e}"
    kind, _, value = text.partition(":")
    value = value.strip()
    if kind.upper() != "PATH" or not value:
        return None, f"{ptr} says {text[:200]!r}"
    return value, None


# ----------------------------------------------------------------------------- fetching
@record
class Fetched:
    """What came of fetching a file into a store: its path there, or why there is none."""

    path: Optional[str] = None
    problem: Optional[str] = None  # one line, when there is no path


class _Refused(Exception):
    """A fetch that must not enter the store; the message says why (one line)."""


def _partial_file(dest: str) -> Tuple[BinaryIO, str]:
    """A new temporary file beside `dest` (so the final rename is atomic). Partial files
    left there by a killed process long ago are removed first: nothing else would."""
    folder = os.path.dirname(dest)
    os.makedirs(folder, exist_ok=True)
    now = time.time()
    for entry in os.scandir(folder):
        if entry.name.startswith(_PARTIAL):
            try:
                if now - entry.stat().st_mtime > _STALE_PARTIAL:
                    os.unlink(entry.path)
            except OSError:
                pass
    import tempfile  # here: a store that is only read never writes (start-up, issue #34)

    fd, tmp = tempfile.mkstemp(prefix=_PARTIAL, dir=folder)
    return os.fdopen(fd, "w+b"), tmp


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _expand_into(fh: BinaryIO, size: int, source: str, member: str, dest: str, limit: int) -> str:
    """The cabinet in `fh` expanded into a new partial file beside `dest`; its path."""
    from dumpkit.symbols.cabinet import CabinetError, open_cabinet  # only a compressed file needs it

    try:
        cab = open_cabinet(fh, size, source)
        if cab is None:
            raise _Refused(f"{source} is not a cabinet")
        out, tmp = _partial_file(dest)
        try:
            with out:
                cab.extract(cab.member(member), out, limit)
        except BaseException:
            _unlink(tmp)
            raise
    except CabinetError as e:
        raise _Refused(str(e)) from None
    return tmp


def install(tmp: str, dest: str, check: Check) -> None:
    """Rename the checked partial file `tmp` to `dest`. On Windows a rename cannot replace a
    file another process or thread has open (WinError 5): parallel triage workers fetching
    one file meet that. When the file there passes `check`, it is the same build, admitted
    first, and stands."""
    try:
        os.replace(tmp, dest)
    except PermissionError:
        if not os.path.isfile(dest) or check(dest) is not None:
            raise


def _admit(tmp: str, dest: str, check: Check, what: str) -> Fetched:
    """Rename the partial file `tmp` to `dest` when `check` accepts it; else delete it."""
    try:
        why = check(tmp)
        if why is not None:
            raise _Refused(f"{what} is {why}; not cached")
        install(tmp, dest, check)
    finally:
        _unlink(tmp)  # a no-op once renamed
    return Fetched(dest)


def expand(cabinet: str, key: StoreKey, cache: str, check: Check, limit: int) -> Fetched:
    """A store's compressed file (`cabinet`, e.g. NAME.dl_) expanded into the store
    `cache` at KEY, when it is the build `check` wants."""
    dest = key.where(cache)
    try:
        with open(cabinet, "rb") as fh:
            tmp = _expand_into(fh, os.fstat(fh.fileno()).st_size, cabinet, key.name, dest, limit)
        return _admit(tmp, dest, check, f"{cabinet} expanded")
    except _Refused as e:
        return Fetched(problem=str(e))
    except OSError as e:
        return Fetched(problem=f"{cabinet}: cannot expand into {cache} ({e.strerror or e})")


def download(server: SymbolServer, key: StoreKey, check: Check, limit: int) -> Fetched:
    """KEY from `server` into its cache: NAME first, then the compressed NAME_ (as symsrv
    asks); a cabinet is expanded. The problem is "HTTP 404" when the server has neither."""
    import urllib.error

    dest = key.where(server.cache)
    for leaf in (key.name, key.compressed):
        url = key.url(server, leaf)
        try:
            tmp = _receive(url, dest, limit)
        except urllib.error.HTTPError as e:
            if e.code == 404:
                continue
            return Fetched(problem=f"HTTP {e.code} for {leaf}")
        except _Refused as e:
            return Fetched(problem=str(e))
        except (urllib.error.URLError, OSError, ValueError) as e:
            return Fetched(problem=str(getattr(e, "reason", None) or e))
        try:
            with open(tmp, "rb") as fh:  # a cabinet is what symstore /compress and Microsoft's server send as NAME_
                size = os.fstat(fh.fileno()).st_size
                cab = fh.read(4) == b"MSCF"
                expanded = _expand_into(fh, size, f"{leaf} from {server.url}", key.name, dest, limit) if cab else None
            if expanded is not None:  # the cabinet goes once closed (Windows cannot delete an open file)
                _unlink(tmp)
                tmp = expanded
            return _admit(tmp, dest, check, f"its {leaf}")
        except _Refused as e:
            return Fetched(problem=str(e))
        except OSError as e:
            return Fetched(problem=f"{leaf}: {e.strerror or e}")
        finally:
            _unlink(tmp)
    return Fetched(problem="HTTP 404")


def _receive(url: str, dest: str, limit: int) -> str:
    """The body at `url` in a new partial file beside `dest`, at most `limit` bytes; its
    path. A refused or interrupted transfer leaves nothing behind."""
    import http.client
    import urllib.request

    req = urllib.request.Request(url, headers={"User-Agent": "Microsoft-Symbol-Server/10.0.0.0 dumpkit"})
    with urllib.request.urlopen(req, timeout=DOWNLOAD_TIMEOUT) as resp:
        header = resp.headers.get("Content-Length")
        length = int(header) if header is not None and header.strip().isdigit() else None
        if length is not None and length > limit:
            raise _Refused(f"{url} is {length:,} bytes, more than the limit of {limit:,} ({LIMIT_ENV}); not fetched")
        out, tmp = _partial_file(dest)
        total = 0
        try:
            with out:
                while True:  # bounded: stops at `limit` bytes
                    try:
                        chunk = resp.read(_CHUNK)
                    except (http.client.HTTPException, OSError) as e:
                        raise _Refused(
                            f"{url}: connection lost after {total:,} bytes ({e or type(e).__name__}); not cached"
                        ) from None
                    if not chunk:
                        break
                    total += len(chunk)
                    if total > limit:
                        raise _Refused(f"{url} sent more than the limit of {limit:,} bytes ({LIMIT_ENV}); not cached")
                    out.write(chunk)
                if length is not None and total != length:  # read(n) returns short, not an error, at a close
                    raise _Refused(f"{url}: connection lost after {total:,} of {length:,} bytes; not cached")
        except BaseException:
            _unlink(tmp)
            raise
    return tmp
