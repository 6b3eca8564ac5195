"""Where each module's PE image (and so its unwind data) comes from.

Order, as in DESIGN.md "Where unwind data comes from":
1. the dump's own memory, if the PE header at the module's base is readable and so is
   its unwind data (the exception directory, and the UNWIND_INFO of entries sampled
   over it); an image without them is kept as a fallback, used only when nothing below
   matches;
1b. an image store that travels with the dump (a bundle, dumpkit.bundle: the pages of the
   image file an earlier analysis read), so a bundle gives the same answer on any machine;
2. the file at the path the dump recorded, if it exists on this machine and its
   TimeDateStamp and SizeOfImage match the module's;
3. each `--image-path DIR`, searched recursively (one case-insensitive name index per
   directory, built on first use), matched by name + TimeDateStamp + SizeOfImage;
4. symbol-store layouts `DIR/NAME/<TIMESTAMP %08X><SIZEOFIMAGE %x>/NAME`, following a
   `file.ptr` there and expanding a compressed `NAME.dl_` (a cabinet) into dumpkit's cache;
5. HTTP symbol servers named in a symbol path (`srv*CACHE*https://...`): NAME/KEY/NAME
   (or NAME_, compressed) is downloaded into CACHE, capped, and kept only when it is the
   module's build (dumpkit.symbols.store; nothing else is ever written).

Results are cached per module; `close()` releases the files. A locator made with
`record_reads=True` wraps every image file it serves in a `RecordingBacking`, so that a
bundle can be written with exactly the pages an analysis read; the PDB files it opens too.

A module's PDB (named by its CodeView record, matched by GUID and age) is looked for in the
image store (a bundle's PDB pages), the symbol stores (NAME.pdb/<GUID><AGE>/NAME.pdb, servers' caches included), next to the image
file and at the recorded paths, in each `--image-path` folder, and last on the HTTP symbol
servers; one that is not the build's is refused with the reason, never used.
"""

from __future__ import annotations

import ntpath
import os
import re
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING,
    Any,
    BinaryIO,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Optional,
    Sequence,
    Set,
    Tuple,
    TypeVar,
)

from dumpkit.pe import PEError, PEImage, ReadVA
from dumpkit.pe.backing import Backing, FileBacking
from dumpkit.pe.xz import XzBlocks, read_index
from dumpkit.symbols.store import (
    Check,
    Fetched,
    StoreKey,
    SymbolServer,
    download,
    download_limit,
    expand,
    parse_symbol_spec,
    read_pointer,
    resolve_case_insensitive,
    store_files,
    symbol_cache,
)
from dumpkit.target import CodeViewRecord, MemoryNotInDump, Module, Target
from dumpkit.words import listing, plural
from dumpkit.records import record

if TYPE_CHECKING:  # the PDB reader is imported when a PDB is found (most dumps have none)
    from dumpkit.symbols.pdb import PdbFunction, PdbSource, PdbSymbols, SourceLine

__all__ = [
    "LocatedImage",
    "LocatedPdb",
    "ImageLocator",
    "ImageProvider",
    "ImageStore",
    "RecordingBacking",
    "parse_symbol_path",
    "windows_path_candidates",
]

T = TypeVar("T")

SOURCES = ("dump-memory", "bundle", "recorded-path", "image-path", "symbol-store", "symbol-server")

_PDATA_PROBE_CHUNK = 1 << 20
_PDATA_FULL_CHECK = 1 << 20  # bytes of .pdata read in full to accept a memory image
_UNWIND_SAMPLES = 64  # .pdata entries whose UNWIND_INFO must be in memory too
_MAX_INDEX_FILES = 2_000_000  # per --image-path directory


@dataclass
class LocatedImage:
    image: PEImage
    source: str  # one of SOURCES
    detail: str  # one line: which file / why it was accepted
    path: Optional[str] = None  # the local file, when the image is one
    recording: Optional["RecordingBacking"] = None  # the pages read, when the locator records


PAGE = 4096  # reads are recorded page-granular: a later read of a nearby byte is served too


class RecordingBacking:
    """An image file's backing that remembers which pages were read (successful reads
    only: a read past the end fails the same way when the bundle replays it)."""

    def __init__(self, inner: Backing):
        self.inner = inner
        self.lazy = getattr(inner, "lazy", False)
        self.pages: Set[int] = set()

    @property
    def size(self) -> int:
        return self.inner.size

    def read(self, offset: int, size: int) -> bytes:
        data = self.inner.read(offset, size)
        if data:
            self.pages.update(range(offset // PAGE, (offset + len(data) - 1) // PAGE + 1))
        return data

    def ranges(self) -> List[Tuple[int, int]]:
        """The recorded pages as sorted, merged (file offset, length) ranges, clipped to the file."""
        out: List[Tuple[int, int]] = []
        total = self.inner.size
        for page in sorted(self.pages):
            start = page * PAGE
            end = min(start + PAGE, total)
            if end <= start:
                continue
            if out and out[-1][0] + out[-1][1] == start:
                out[-1] = (out[-1][0], end - out[-1][0])
            else:
                out.append((start, end - start))
        return out

    def close(self) -> None:
        self.inner.close()


class ImageStore:
    """Image files that travel with a dump (a bundle): `backing_for` gives a module's file
    (a Backing whose unread parts raise PEError) and one line saying where it is, or None."""

    def backing_for(self, module: Module) -> Optional[Tuple[Backing, str]]:
        raise NotImplementedError

    def pdb_for(self, cv: CodeViewRecord) -> Optional[Tuple[PdbSource, str]]:
        """The PDB that `cv` names (by GUID and age), as far as the store holds it, and one
        line saying where it is; None when the store has no such PDB."""
        return None

    def package_for(self, module: Module) -> Optional[Any]:
        """The installed package (a packages.InstalledPackage) that owned `module` on the
        machine the dump came from, as the store recorded it; None when it did not."""
        return None


# ----------------------------------------------------------------------------- paths
def parse_symbol_path(spec: str) -> List[str]:
    """Local directories named by an `_NT_SYMBOL_PATH`-style string (store.parse_symbol_spec)."""
    return parse_symbol_spec(spec)[0]


def parse_symbol_servers(spec: str) -> List[SymbolServer]:
    """The HTTP(S) symbol servers of a symbol path, each with the local store its downloads go to."""
    return parse_symbol_spec(spec)[1]


_DRIVE_RE = re.compile(r"^([a-zA-Z]):[\\/](.*)$")


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
            prefixes = []
            env = os.environ.get("WINEPREFIX")
            if env:
                prefixes.append(env)
            prefixes.append(os.path.join(os.path.expanduser("~"), ".wine"))
            for pre in prefixes:
                add(os.path.join(pre, "dosdevices", f"{drive}:", rest))
                add(os.path.join(pre, f"drive_{drive}", rest))
            if drive == "z":
                add("/" + rest)
        elif "\\" in p:
            add(p.replace("\\", "/"))
    return out


def _existing_files(candidates: Iterable[str]) -> Iterator[str]:
    """The candidates that are files here, resolved case-insensitively on POSIX (a path a
    Windows machine recorded may differ in case from the file on this one)."""
    for cand in candidates:
        real = resolve_case_insensitive(cand) if os.sep == "/" else cand
        if real and os.path.isfile(real):
            yield real


def _module_file_name(module: Module) -> str:
    if module.name:
        return ntpath.basename(module.name.replace("/", "\\"))
    return ntpath.basename(module.path.replace("/", "\\")) if module.path else ""


# ----------------------------------------------------------------------------- locator
class ImageLocator:
    def __init__(
        self,
        image_paths: Sequence[str] = (),
        symbol_paths: Sequence[str] = (),
        use_recorded_path: bool = True,
        store: Optional[ImageStore] = None,
        record_reads: bool = False,
        max_download: Optional[int] = None,
    ):
        self.image_paths = list(image_paths)
        # the largest file a server may send or a cabinet expand to (DUMPKIT_MAX_DOWNLOAD)
        self.max_download = download_limit() if max_download is None else max_download
        self.store = store
        self.record_reads = record_reads
        self.recorded: List[Tuple[Module, LocatedImage]] = []  # served file images, in order (record_reads)
        self.symbol_dirs: List[str] = []
        self.symbol_servers: List[SymbolServer] = []
        for sp in symbol_paths:
            dirs, servers = parse_symbol_spec(sp)
            for d in dirs:
                if d not in self.symbol_dirs:
                    self.symbol_dirs.append(d)
            for srv in servers:
                if srv not in self.symbol_servers:
                    self.symbol_servers.append(srv)
        self.downloads: List[str] = []  # what was fetched (for the report and tests)
        self.failures: List[str] = []  # "NAME: where: why", one line per store/server miss
        self.use_recorded_path = use_recorded_path
        self._cache: Dict[Tuple, Optional[LocatedImage]] = {}
        self._indexes: Dict[str, Dict[str, List[str]]] = {}
        self._opened: List[PEImage] = []
        self._pdb_cache: Dict[Tuple, LocatedPdb] = {}
        self.recorded_pdbs: List[Tuple[CodeViewRecord, "LocatedPdb"]] = []  # served PDB files (record_reads)
        self._opened_pdbs: List[PdbSymbols] = []
        self.index_builds = 0  # how many directory indexes were built (for tests/diagnostics)
        # per --image-path folder: the modules looked for there, and how many it served
        self._sought: Dict[str, List[str]] = {}
        self._served: Dict[str, int] = {}

    def close(self) -> None:
        for img in self._opened:
            img.close()
        self._opened.clear()
        self._cache.clear()
        for pdb in self._opened_pdbs:
            pdb.close()
        self._opened_pdbs.clear()
        self._pdb_cache.clear()

    def __enter__(self) -> "ImageLocator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def misses(self, module: Module) -> List[str]:
        """Why the stores and servers did not give this module's image ("where: why")."""
        name = _module_file_name(module).lower()
        return [f.split(": ", 1)[1] for f in self.failures if f.split(": ", 1)[0].lower() == name]

    @staticmethod
    def _key(module: Module) -> Tuple:
        return (module.name.lower(), module.path.lower(), module.base, module.size, module.timestamp)

    def locate(self, module: Module, read_va: Optional[ReadVA]) -> Optional[LocatedImage]:
        key = self._key(module)
        if key in self._cache:
            return self._cache[key]
        found = self._locate(module, read_va)
        self._cache[key] = found
        if found is not None and found.recording is not None:
            self.recorded.append((module, found))
        return found

    # ---------------------------------------------------------------- the search
    def _locate(self, module: Module, read_va: Optional[ReadVA]) -> Optional[LocatedImage]:
        fallback: Optional[LocatedImage] = None
        if read_va is not None:
            mem, why = self._from_memory(module, read_va)
            if mem is not None and why is None:
                return self._keep(mem)
            if mem is not None:
                fallback = mem
        for search in (
            self._from_store,
            self._from_recorded_path,
            self._from_image_paths,
            self._from_symbol_store,
            self._from_symbol_server,
        ):
            found = search(module)
            if found is not None:
                if fallback is not None:
                    fallback.image.close()
                return self._keep(found)
        if fallback is not None:
            return self._keep(fallback)
        return None

    def _keep(self, found: LocatedImage) -> LocatedImage:
        self._opened.append(found.image)
        return found

    def _from_memory(self, module: Module, read_va: ReadVA) -> Tuple[Optional[LocatedImage], Optional[str]]:
        """(image, None) when usable; (image, reason) when only the header is there."""
        try:
            img = PEImage.from_memory(read_va, module.base)
        except (PEError, MemoryNotInDump):
            return None, "no header"
        reason = _pdata_unreadable(img)
        if reason is None:
            detail = f"PE header and exception directory ({img.pdata_count} entries) at {module.base:#x}"
            return LocatedImage(img, "dump-memory", detail), None
        return LocatedImage(img, "dump-memory", f"PE header at {module.base:#x}; {reason}"), reason

    def _verify(self, img: PEImage, module: Module) -> Tuple[bool, str]:
        if not module.timestamp or not module.size:
            return True, "not verified: the dump records no TimeDateStamp/SizeOfImage for this module"
        if img.timestamp == module.timestamp and img.size_of_image == module.size:
            return True, f"TimeDateStamp {img.timestamp:#010x} and SizeOfImage {img.size_of_image:#x} match"
        return False, (
            f"mismatch: file has TimeDateStamp {img.timestamp:#010x} SizeOfImage "
            f"{img.size_of_image:#x}, dump has {module.timestamp:#010x} {module.size:#x}"
        )

    def _try_file(self, path: str, module: Module, source: str) -> Optional[LocatedImage]:
        try:
            # An .xz is decompressed only as far as reads reach: the header check below
            # costs the first few KB, and a mismatching candidate nothing more.
            backing: Backing = XzBacking(path) if path.lower().endswith(".xz") else FileBacking(path)
        except PEError:
            return None
        return self._try_backing(backing, path, module, source, path, path)

    def _try_backing(
        self, backing: Backing, name: str, module: Module, source: str, where: str, path: Optional[str] = None
    ) -> Optional[LocatedImage]:
        recording = RecordingBacking(backing) if self.record_reads else None
        try:
            img = PEImage.from_backing(recording or backing, name)
        except PEError:
            return None
        img.path = name
        ok, why = self._verify(img, module)
        if not ok:
            img.close()
            return None
        return LocatedImage(img, source, f"{where} ({why})", path=path, recording=recording)

    def _from_store(self, module: Module) -> Optional[LocatedImage]:
        if self.store is None:
            return None
        served = self.store.backing_for(module)
        if served is None:
            return None
        backing, where = served
        return self._try_backing(backing, _module_file_name(module) or where, module, "bundle", where)

    def _from_recorded_path(self, module: Module) -> Optional[LocatedImage]:
        if not self.use_recorded_path or not module.path:
            return None
        for real in _existing_files(windows_path_candidates(module.path)):
            found = self._try_file(real, module, "recorded-path")
            if found is not None:
                return found
        return None

    def _index(self, directory: str) -> Dict[str, List[str]]:
        idx = self._indexes.get(directory)
        if idx is None:
            idx = {}
            self.index_builds += 1
            count = 0
            for root, dirs, files in os.walk(directory, followlinks=False):
                dirs.sort()
                for f in sorted(files):
                    low = f.lower()
                    # NAME.dll.xz serves NAME.dll: images can be kept compressed.
                    key = low[:-3] if low.endswith(".xz") else low
                    idx.setdefault(key, []).append(os.path.join(root, f))
                    count += 1
                if count > _MAX_INDEX_FILES:
                    break
            self._indexes[directory] = idx
        return idx

    def _from_image_paths(self, module: Module) -> Optional[LocatedImage]:
        name = _module_file_name(module).lower()
        if not name:
            return None
        for d in self.image_paths:
            self._sought.setdefault(d, []).append(_module_file_name(module))
            for path in self._index(d).get(name, ()):
                found = self._try_file(path, module, "image-path")
                if found is not None:
                    self._served[d] = self._served.get(d, 0) + 1
                    return found
        return None

    def search_problems(self) -> List[str]:
        """The searches the user asked for that gave nothing, one line each: --image-path
        and --symbol-path folders that do not exist, --image-path folders searched that
        matched no module, symbol servers that failed (with the modules not found)."""
        out: List[str] = []
        for d in self.image_paths:
            if not os.path.exists(d):
                out.append(f"--image-path {d}: no such folder")
            elif not os.path.isdir(d):
                out.append(f"--image-path {d}: not a folder")
            elif d in self._sought and not self._served.get(d):
                names = sorted(set(self._sought[d]), key=str.lower)
                files = sum(len(v) for v in self._indexes.get(d, {}).values())
                out.append(
                    f"--image-path {d}: none of its {files:,} files is an image of the "
                    f"{plural(len(names), 'module')} looked for there "
                    f"({listing(names, 6)}; matched by name, TimeDateStamp and SizeOfImage)"
                )
        for d in self.symbol_dirs:
            if not any(os.path.isdir(c) for c in (windows_path_candidates(d) if os.sep == "/" else [d])):
                out.append(f"--symbol-path {d}: no such folder")
        by_server: Dict[str, Dict[str, List[str]]] = {}
        for f in self.failures:
            name, _, rest = f.partition(": ")
            if rest.startswith("symbol server "):
                url, _, why = rest[len("symbol server ") :].partition(": ")
                by_server.setdefault(url, {}).setdefault(why, []).append(name)
        for url, whys in by_server.items():
            parts = "; ".join(f"{why}: {listing(sorted(set(names), key=str.lower), 6)}" for why, names in whys.items())
            out.append(f"symbol server {url}: failed ({parts})")
        return out

    def _from_symbol_server(self, module: Module) -> Optional[LocatedImage]:
        """NAME/KEY/NAME from each configured HTTP symbol server (or its compressed NAME_),
        checked against the module before it enters the server's local store."""
        key = _image_key(module)
        if not self.symbol_servers or key is None:
            return None
        for srv in self.symbol_servers:
            dest = key.where(srv.cache)
            if os.path.isfile(dest):
                found = self._try_file(dest, module, "symbol-store")
                if found is not None:
                    return found
                # not the build its key names (older dumpkits cached servers' junk): a
                # checked download replaces it
            got = download(srv, key, _image_check(module), self.max_download)
            if got.path is None:
                self.failures.append(f"{key.name}: symbol server {srv.url}: {got.problem}")
                continue
            self.downloads.append(got.path)
            found = self._try_file(got.path, module, "symbol-server")
            if found is not None:
                found.detail = f"{srv.url} -> {found.detail}"
                return found
        return None

    def _from_symbol_store(self, module: Module) -> Optional[LocatedImage]:
        """NAME/KEY/NAME in each store; else what a store may hold instead: a `file.ptr`
        (symstore /p: a pointer to the real file) is followed; a compressed `NAME.dl_`
        (symstore /compress, a cabinet) is expanded into dumpkit's cache, once checked."""
        key = _image_key(module)
        if key is None:
            return None  # the store key needs both TimeDateStamp and SizeOfImage
        for d in self.symbol_dirs:
            for base in windows_path_candidates(d) if os.sep == "/" else [d]:
                for path in store_files(base, key):
                    found = self._try_file(path, module, "symbol-store")
                    if found is not None:
                        return found
                for ptr in store_files(base, key, "file.ptr"):
                    found = self._follow_pointer(ptr, module)
                    if found is not None:
                        return found
                for packed in store_files(base, key, key.compressed):
                    got = self._expand(packed, key, _image_check(module))
                    if got.path is None:
                        self.failures.append(f"{key.name}: symbol store: {got.problem}")
                        continue
                    found = self._try_file(got.path, module, "symbol-store")
                    if found is not None:
                        found.detail = f"{packed} expanded into {got.path} -> {found.detail}"
                        return found
        return None

    def _expand(self, packed: str, key: StoreKey, check: Check) -> Fetched:
        """A store's cabinet `packed` expanded into dumpkit's cache, once: a checked copy
        already there is used (expanding LZX in Python costs seconds per MB of code)."""
        cache = symbol_cache()
        for done in store_files(cache, key):
            if check(done) is None:
                return Fetched(done)
        return expand(packed, key, cache, check, self.max_download)

    def _follow_pointer(self, ptr: str, module: Module) -> Optional[LocatedImage]:
        """A store's file.ptr holds `PATH:<where the file is>` or `MSG:<why it is not>`."""
        name = _module_file_name(module)
        targets, why = _pointed_files(ptr)
        for real in targets:
            found = self._try_file(real, module, "symbol-store")
            if found is not None:
                found.detail = f"{ptr} -> {found.detail}"
                return found
        self.failures.append(f"{name}: symbol store: {why or f'{ptr} points to a file that does not match'}")
        return None

    # ---------------------------------------------------------------- PDBs
    def locate_pdb(self, module: Module, cv: CodeViewRecord, image_file: Optional[str]) -> "LocatedPdb":
        """The PDB that `cv` (the module's CodeView record) names, cached per module. A candidate
        that is damaged or of another build is refused (the reasons are kept); the
        search goes on to the next one."""
        key = ("pdb",) + self._key(module)
        found = self._pdb_cache.get(key)
        if found is None:
            found = self._pdb_cache[key] = self._locate_pdb(module, cv, image_file)
            if found.recording is not None:
                self.recorded_pdbs.append((cv, found))
        return found

    def _locate_pdb(self, module: Module, cv: CodeViewRecord, image_file: Optional[str]) -> "LocatedPdb":
        name = ntpath.basename(cv.pdb_name.replace("/", "\\"))
        if not name:
            return LocatedPdb(None, None, ())
        refused: List[str] = []
        served = self.store.pdb_for(cv) if self.store is not None else None
        if served is not None:
            found = self._try_pdb(served[1], cv, refused, served[0])
            if found is not None:
                return LocatedPdb(found.pdb, found.path, found.refused, found.recording, from_store=True)
        seen: List[str] = []
        for path in self._pdb_candidates(module, cv, name, image_file, refused):
            real = os.path.realpath(path)
            if real in seen:
                continue
            seen.append(real)
            found = self._try_pdb(path, cv, refused)
            if found is not None:
                return found
        key = StoreKey(name, cv.symbol_id)
        for srv in self.symbol_servers:
            # a file already in the cache was a store candidate above, refused if we are
            # here: a checked download replaces it
            got = download(srv, key, _pdb_check(cv), self.max_download)
            if got.path is None:
                refused.append(f"symbol server {srv.url}: {got.problem}")
                continue
            self.downloads.append(got.path)
            found = self._try_pdb(got.path, cv, refused)
            if found is not None:
                return found
        return LocatedPdb(None, None, tuple(refused))

    def _pdb_candidates(
        self, module: Module, cv: CodeViewRecord, name: str, image_file: Optional[str], refused: List[str]
    ) -> Iterator[str]:
        """Where `cv`'s PDB may be, in search order. A store may hold, instead of the file,
        a file.ptr (followed) or a compressed NAME.pd_ (expanded into dumpkit's cache once
        checked), as for images."""
        key = StoreKey(name, cv.symbol_id)
        for d in self.symbol_dirs:
            for base in windows_path_candidates(d) if os.sep == "/" else [d]:
                yield from store_files(base, key)
                for ptr in store_files(base, key, "file.ptr"):
                    targets, why = _pointed_files(ptr)
                    yield from targets
                    if why:
                        refused.append(why)
                for packed in store_files(base, key, key.compressed):
                    got = self._expand(packed, key, _pdb_check(cv))
                    if got.path is not None:
                        yield got.path
                    else:
                        refused.append(str(got.problem))
        beside = [image_file] if image_file else []
        if self.use_recorded_path:
            beside += windows_path_candidates(module.path) if module.path else []
        for image in beside:
            folder = os.path.dirname(image.replace("\\", "/") if os.sep == "/" else image)
            real = resolve_case_insensitive(os.path.join(folder, name)) if os.sep == "/" else None
            cand = real or os.path.join(folder, name)
            if os.path.isfile(cand):
                yield cand
        if self.use_recorded_path:
            yield from _existing_files(windows_path_candidates(cv.pdb_name))
        for d in self.image_paths:
            yield from self._index(d).get(name.lower(), ())

    def _try_pdb(
        self, path: str, cv: CodeViewRecord, refused: List[str], source: Optional[PdbSource] = None
    ) -> Optional["LocatedPdb"]:
        """The PDB at `path` (read from `source` when given: a bundle's pages) when it is
        readable and `cv`'s build; else None, the reason added to `refused`. A file is read
        through a recording when the locator records, so that a bundle can carry its pages."""
        from dumpkit.symbols.pdb import PdbError, PdbFile, open_pdb

        recording = None
        try:
            if source is None:
                source = PdbFile(path)
        except PdbError as e:
            refused.append(f"{path}: unreadable ({e})")
            return None
        if self.record_reads:
            source = recording = RecordingBacking(source)
        try:
            pdb = open_pdb(path, source)
        except PdbError as e:
            refused.append(f"{path}: unreadable ({e})")
            return None
        why = pdb.mismatch(cv)
        if why is not None:
            pdb.close()
            refused.append(f"{path}: another build ({why})")
            return None
        self._opened_pdbs.append(pdb)
        return LocatedPdb(pdb, path, tuple(refused), recording)


@record
class LocatedPdb:
    pdb: Optional[PdbSymbols]
    path: Optional[str]  # the file, or where in a bundle
    refused: Tuple[str, ...]  # "PATH: why", each candidate not used
    recording: Optional[RecordingBacking] = None  # the pages read, when the locator records
    from_store: bool = False  # served by the image store (a bundle), not a file here


# ----------------------------------------------------------------------------- per target
class ImageProvider:
    """Which PE image serves each module of one target (cached per module base); `None`
    when none can be found. An image that cannot be used is a soft error, once."""

    def __init__(self, target: Target, locator: Optional[ImageLocator] = None):
        self._target = target
        self._locator = locator
        self._cache: Dict[int, Optional[LocatedImage]] = {}
        self._pdbs: Dict[int, Optional[LocatedPdb]] = {}
        self._no_lines: Set[int] = set()  # modules whose PDB line records could not be read

    def located(self, module: Module) -> Optional[LocatedImage]:
        if module.base not in self._cache:
            found = None
            if self._locator is not None:
                try:
                    found = self._locator.locate(module, self._target.read)
                except (PEError, OSError, ValueError, MemoryNotInDump) as e:
                    self._target.soft_errors.add(f"{module.name}: image unusable ({e})")
            self._cache[module.base] = found
        return self._cache[module.base]

    def image(self, module: Module) -> Optional[PEImage]:
        found = self.located(module)
        return found.image if found is not None else None

    def files(self, module: Module) -> List[str]:
        """Local files that are this module's: the one its image was read from, then the
        recorded path where it exists here. Its installation (e.g. the Python package that
        owns it) is found next to them."""
        out: List[str] = []
        found = self.located(module)
        if found is not None and found.path:
            out.append(found.path)
        if self._locator is not None and self._locator.use_recorded_path and module.path:
            out += [f for f in _existing_files(windows_path_candidates(module.path)) if f not in out]
        return out

    def search_problems(self) -> List[str]:
        return self._locator.search_problems() if self._locator is not None else []

    def pdb(self, module: Module) -> Optional[PdbSymbols]:
        """The module's own PDB (GUID and age checked), or None. Candidates that were
        refused are one soft error when no PDB could be used."""
        if module.base not in self._pdbs:
            found = None
            image = self.located(module)
            cv = module.cv_record or (self._codeview(image.image) if image is not None else None)
            if self._locator is not None and cv is not None:
                found = self._locator.locate_pdb(module, cv, image.path if image is not None else None)
                if found.pdb is None and found.refused:
                    self._target.soft_errors.add(
                        f"{module.name}: PDB {cv.pdb_name} not used: " + "; ".join(found.refused)
                    )
            self._pdbs[module.base] = found
        found = self._pdbs[module.base]
        return found.pdb if found is not None else None

    @staticmethod
    def _codeview(image: PEImage) -> Optional[CodeViewRecord]:
        """The image's own CodeView record: Wine's dumps record none in the module list."""
        try:
            return image.codeview()
        except (PEError, MemoryNotInDump):
            return None

    def pdb_function(self, module: Module, rva: int) -> Optional[PdbFunction]:
        """The PDB's name for the code at `rva`."""
        return self._ask_pdb(module, lambda pdb: pdb.function_at(rva))

    def pdb_line(self, module: Module, rva: int) -> Optional[SourceLine]:
        """The PDB's source file and line for the code at `rva`, when it has line records.
        Line records that cannot be read (damaged, or not in an older bundle) cost the
        module its lines, not its names."""
        if module.base in self._no_lines:
            return None
        return self._ask_pdb(module, lambda pdb: pdb.line_at(rva), "source lines")

    def _ask_pdb(self, module: Module, ask: Callable[[PdbSymbols], Optional[T]], what: str = "names") -> Optional[T]:
        """`ask` of the module's PDB; a PDB that turns out damaged (or, from a bundle, short
        of a page) while being read is a soft error once, and its `what` are not asked again."""
        pdb = self.pdb(module)
        if pdb is None:
            return None
        from dumpkit.symbols.pdb import PdbError

        try:
            return ask(pdb)
        except PdbError as e:
            self._target.soft_errors.add(f"{module.name}: PDB {pdb.path} cannot be read ({e}); its {what} are not used")
            if what == "names":
                self._pdbs[module.base] = LocatedPdb(None, None, ())
            self._no_lines.add(module.base)
            return None

    def symbol_sources(self) -> Dict[str, str]:
        """module name -> where names for its code came from (for the report), for the
        modules whose image or PDB was looked for."""
        out = {}
        for m in self._target.modules:
            if m.base not in self._cache and m.base not in self._pdbs:
                continue
            located = self._pdbs.get(m.base)
            if located is not None and located.pdb is not None:
                out[m.name] = f"pdb: {located.path}"
                continue
            image = self._cache.get(m.base)
            out[m.name] = "image: exports and COFF symbols" if image is not None else "none: no image, no PDB"
            if located is not None and located.refused:
                out[m.name] += f" (PDB not used: {'; '.join(located.refused)})"
        return out

    def sources(self) -> Dict[str, str]:
        """module name -> where its image came from (for the report)."""
        out = {}
        for m in self._target.modules:
            if m.base in self._cache:
                found = self._cache[m.base]
                if found:
                    out[m.name] = f"{found.source}: {found.detail}"
                else:
                    why = self._locator.misses(m) if self._locator is not None else []
                    out[m.name] = "not found" + (f" ({'; '.join(why)})" if why else "")
        return out


MAX_FILE_PTR = 4096


MAX_XZ_IMAGE = 1 << 30
_XZ_IN_CHUNK = 1 << 16
_XZ_OUT_CHUNK = 1 << 18


class XzBacking:
    """An xz-compressed image file, decompressed into memory only as far as reads
    reach (headers, .text, .pdata/.xdata and exports usually sit well before the
    debug sections and COFF symbols at the end). Bounded; nothing is written."""

    lazy = True

    def __init__(self, path: str):
        import lzma

        self._lzma = lzma
        self.path = path
        try:
            self._fh: Optional[BinaryIO] = open(path, "rb")
        except OSError as e:
            raise PEError(f"cannot open {path}: {e.strerror or e}") from None
        self._dec = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
        self._data = bytearray()
        self._ended = False
        self.decompressions = 0  # decompress calls made (for tests)
        # Written in blocks (`xz --block-size`): a read decompresses only its blocks.
        self._blocks: Optional[XzBlocks] = None
        try:
            found = read_index(self._fh, os.fstat(self._fh.fileno()).st_size)
        except OSError:
            found = None
        if found is not None and len(found[1]) > 1:
            blocks = XzBlocks(self._fh, *found)
            if blocks.size <= MAX_XZ_IMAGE:
                self._blocks = blocks
        self._fh.seek(0)

    def _fill(self, end: int) -> None:
        """Decompress until `end` bytes are out or the stream ends."""
        while len(self._data) < end and not self._ended:
            if self._fh is None:
                raise PEError(f"{self.path}: image is closed")
            chunk = b""
            if self._dec.needs_input:
                chunk = self._fh.read(_XZ_IN_CHUNK)
                if not chunk:
                    self._ended = True
                    raise PEError(f"{self.path}: cannot decompress (truncated xz stream)")
            try:
                self._data += self._dec.decompress(chunk, max_length=_XZ_OUT_CHUNK)
            except (self._lzma.LZMAError, EOFError) as e:
                self._ended = True
                raise PEError(f"{self.path}: cannot decompress ({e})") from None
            self.decompressions += 1
            if self._dec.eof:
                self._ended = True
            if len(self._data) > MAX_XZ_IMAGE:
                self._ended = True
                raise PEError(f"{self.path}: decompressed image larger than {MAX_XZ_IMAGE} bytes")

    @property
    def decompressed(self) -> int:
        return self._blocks.decompressed if self._blocks is not None else len(self._data)

    @property
    def size(self) -> int:
        if self._blocks is not None:
            return self._blocks.size
        self._fill(MAX_XZ_IMAGE + 1)
        return len(self._data)

    def read(self, offset: int, size: int) -> bytes:
        if offset < 0 or size < 0:
            raise PEError(f"file offset {offset:#x} (+{size:#x}) is past the end of the file")
        if self._blocks is not None:
            if offset + size > self._blocks.size:
                raise PEError(f"file offset {offset:#x} (+{size:#x}) is past the end of the file")
            if self._fh is None:
                raise PEError(f"{self.path}: image is closed")
            try:
                return self._blocks.read(offset, size)
            except (self._lzma.LZMAError, EOFError, ValueError) as e:
                raise PEError(f"{self.path}: cannot decompress ({e})") from None
        self._fill(offset + size)
        if offset + size > len(self._data):
            raise PEError(f"file offset {offset:#x} (+{size:#x}) is past the end of the file")
        return bytes(self._data[offset : offset + size])

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        self._data = bytearray()
        self._blocks = None
        self._ended = True


def _pointed_files(ptr: str) -> Tuple[List[str], Optional[str]]:
    """The existing files a store's file.ptr points to here, and why there are none (None
    when there are)."""
    value, why = read_pointer(ptr)
    if value is None:
        return [], why
    found = list(_existing_files(windows_path_candidates(value) if os.sep == "/" else [value]))
    return found, None if found else f"{ptr} points to {value}, which is not here"


def _image_key(module: Module) -> Optional[StoreKey]:
    name = _module_file_name(module)
    if not name or not module.timestamp or not module.size:
        return None
    return StoreKey(name, f"{module.timestamp:08X}{module.size:x}")


def _image_check(module: Module) -> Check:
    """A store candidate is the module's image when its PE headers parse, its TimeDateStamp
    and SizeOfImage are the module's, and the file holds all of its sections' data (a
    transfer cut short can leave the headers whole)."""

    def check(path: str) -> Optional[str]:
        try:
            img = PEImage.from_file(path)
        except PEError as e:
            return f"not a PE image ({e})"
        try:
            if img.timestamp != module.timestamp or img.size_of_image != module.size:
                return (
                    f"another build (TimeDateStamp {img.timestamp:#010x} SizeOfImage {img.size_of_image:#x}, "
                    f"the dump has {module.timestamp:#010x} {module.size:#x})"
                )
            size = os.path.getsize(path)
            end = max((s.raw_offset + s.raw_size for s in img.sections if s.raw_size), default=0)
            if end > size:
                return f"cut short ({size:,} bytes; its sections' data ends at {end:,})"
        finally:
            img.close()
        return None

    return check


def _pdb_check(cv: CodeViewRecord) -> Check:
    """A store candidate is the PDB `cv` names when it reads as one and its GUID and age are `cv`'s."""

    def check(path: str) -> Optional[str]:
        from dumpkit.symbols.pdb import PdbError, open_pdb

        try:
            pdb = open_pdb(path)
        except PdbError as e:
            return f"not a readable PDB ({e})"
        try:
            why = pdb.mismatch(cv)
        finally:
            pdb.close()
        return None if why is None else f"another build ({why})"

    return check


def _pdata_unreadable(img: PEImage) -> Optional[str]:
    """None when the image's unwind data reads from memory, else why not: the exception
    directory in full when it is at most _PDATA_FULL_CHECK bytes (a few probes of a huge
    one, which a lookup's binary search touches only a few entries of), and the
    UNWIND_INFO headers of up to _UNWIND_SAMPLES entries spread over it (a dump can
    hold .pdata but not .xdata, and then a file image unwinds where memory cannot)."""
    if not img.pdata_count:
        exc = img.directory(3)
        if exc is None:
            return "no exception directory"
        return "exception directory not usable for this machine"
    total = img.pdata_count * 12
    rva = img.directory(3).rva  # type: ignore[union-attr]
    if total <= _PDATA_FULL_CHECK:
        pos = 0
        while pos < total:
            n = min(_PDATA_PROBE_CHUNK, total - pos)
            try:
                img.read_rva(rva + pos, n)
            except (MemoryNotInDump, PEError):
                return f"exception directory not in the dump (from RVA {rva + pos:#x})"
            pos += n
    for index in _spread(img.pdata_count, _UNWIND_SAMPLES):
        try:
            entry = img.pdata_entry(index)
        except (MemoryNotInDump, PEError):
            return f"exception directory not in the dump (entry {index} at RVA {rva + 12 * index:#x})"
        if entry.unwind_rva & 1:
            continue  # points at another entry, not at unwind info
        try:
            img.read_rva(entry.unwind_rva, 4)
        except (MemoryNotInDump, PEError):
            return f"unwind info not in the dump (RVA {entry.unwind_rva:#x}, for the function at {entry.begin_rva:#x})"
    return None


def _spread(count: int, samples: int) -> List[int]:
    """Up to `samples` indexes spread evenly over range(count), first and last included."""
    if count <= samples:
        return list(range(count))
    return sorted({(count - 1) * k // (samples - 1) for k in range(samples)})
