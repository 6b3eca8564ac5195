"""Where each module's PE image (and so its unwind data) comes from.

Order, as in DESIGN.md "Where unwind data comes from":
1. the dump's own memory, if the PE header at the module's base is readable and so is
   its unwind data (the exception directory, and the UNWIND_INFO of entries sampled
   over it); an image without them is kept as a fallback, used only when nothing below
   matches;
1b. an image store that travels with the dump (target.ImageStore; a bundle's,
   dumpkit.sources.bundle: the pages of the image file an earlier analysis read), so a
   bundle gives the same answer on any machine;
2. the file at the path the dump recorded, if it exists on this machine and its
   TimeDateStamp and SizeOfImage match the module's;
3. each `--image-path DIR`, searched recursively (one case-insensitive name index per
   directory, built on first use), matched by name + TimeDateStamp + SizeOfImage;
4. symbol-store layouts `DIR/NAME/<TIMESTAMP %08X><SIZEOFIMAGE %x>/NAME`, following a
   `file.ptr` there and expanding a compressed `NAME.dl_` (a cabinet) into dumpkit's cache;
5. HTTP symbol servers named in a symbol path (`srv*CACHE*https://...`): NAME/KEY/NAME
   (or NAME_, compressed) is downloaded into CACHE, capped, and kept only when it is the
   module's build (dumpkit.symbols.store; nothing else is ever written);
6. with `--fetch-images`, where the module is published (dumpkit.images.fetch: a wheel on
   pip's package index, python.org's embeddable zip, Microsoft's symbol server), through
   the fetched-images cache; only for a module nothing above had.

Results are cached per module; `close()` releases the files. A locator made with
`record_reads=True` wraps every image file it serves in a `RecordingBacking`, so that a
bundle can be written with exactly the pages an analysis read; the PDB files it opens too.

A module's PDB (named by its CodeView record, matched by GUID and age) is looked for in the
image store (a bundle's PDB pages), the symbol stores (NAME.pdb/<GUID><AGE>/NAME.pdb, servers' caches included), next to the image
file and at the recorded paths, in each `--image-path` folder, and last on the HTTP symbol
servers; one that is not the build's is refused with the reason, never used."""

from __future__ import annotations

import ntpath
import os
from typing import TYPE_CHECKING, Dict, Iterator, List, Optional, Sequence, Tuple

from dumpkit.pe import PEError, PEImage, ReadVA
from dumpkit.pe.backing import Backing, FileBacking
from dumpkit.symbols.store import (
    Check,
    Fetched,
    StoreKey,
    SymbolServer,
    download,
    download_limit,
    expand,
    parse_symbol_spec,
    store_files,
    symbol_cache,
)
from dumpkit.target import CodeViewRecord, ImageStore, MemoryNotInDump, Module
from dumpkit.words import listing, plural
from dumpkit.records import record

if TYPE_CHECKING:  # the PDB reader is imported when a PDB is found (most dumps have none)
    from dumpkit.images.fetch.fetcher import ImageFetcher
    from dumpkit.symbols.pdb import PdbSource, PdbSymbols
from dumpkit.images.backings import RecordingBacking, XzBacking
from dumpkit.images.paths import LIVE, NOT_PE, FileProbe, module_file_name, windows_path_candidates
from dumpkit.images.checks import image_check, image_key, code_in_dump, pdata_unreadable, pdb_check, pointed_files


SOURCES = ("dump-memory", "bundle", "recorded-path", "image-path", "symbol-store", "symbol-server", "fetched")
_MAX_INDEX_FILES = 2_000_000  # per --image-path directory


@record(frozen=False)
class LocatedImage:
    image: PEImage
    source: str  # one of SOURCES
    detail: str  # one line: which file / why it was accepted
    path: Optional[str] = None  # the local file, when the image is one
    recording: Optional["RecordingBacking"] = None  # the pages read, when the locator records


class ImageLocator:
    def __init__(
        self,
        image_paths: Sequence[str] = (),
        symbol_paths: Sequence[str] = (),
        use_recorded_path: bool = True,
        store: Optional[ImageStore] = None,
        record_reads: bool = False,
        max_download: Optional[int] = None,
        fetcher: Optional["ImageFetcher"] = None,
        probe: FileProbe = LIVE,
        given_first: bool = False,
    ):
        self.image_paths = list(image_paths)
        # Re-bundling: a whole image in a folder or store given here is searched before the
        # bundle's own copy, which holds only the pages an earlier analysis read.
        self.given_first = given_first
        # which files the recorded paths name here (a triage keeps the answers; one run its folders)
        self.probe = probe.for_one_run()
        self.fetcher = fetcher  # --fetch-images: asked last, for what nothing else had
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
        if self.fetcher is not None:
            self.fetcher.close()
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
        name = module_file_name(module).lower()
        out = [f.split(": ", 1)[1] for f in self.failures if f.split(": ", 1)[0].lower() == name]
        if self.fetcher is not None:
            out += [f"--fetch-images: {why}" for n, why in self.fetcher.lines if n.lower() == name]
        return out

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
        given = (self._from_image_paths, self._from_symbol_store)
        searches = (
            (*given, self._from_store, self._from_recorded_path)
            if self.given_first
            else (self._from_store, self._from_recorded_path, *given)
        )
        for search in (*searches, self._from_symbol_server):
            found = search(module)
            if found is not None:
                if fallback is not None:
                    fallback.image.close()
                return self._keep(found)
        if self.fetcher is not None:
            found = self._fetched(module, read_va)
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
        reason = pdata_unreadable(img)
        if reason is None:
            detail = f"PE header and exception directory ({img.pdata_count} entries) at {module.base:#x}"
            if not code_in_dump(img):  # the tables alone (a capture's dump): a file first, where one is found
                return LocatedImage(img, "dump-memory", f"{detail}, without its code"), "its code is not in the dump"
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
        known = self.probe.stamp(path)
        if known is not None and module.timestamp and module.size and known != (module.timestamp, module.size):
            return None  # this file was read before (a triage's earlier dump) and is not this module's
        try:
            # An .xz is decompressed only as far as reads reach: the header check below
            # costs the first few KB, and a mismatching candidate nothing more.
            backing: Backing = XzBacking(path) if path.lower().endswith(".xz") else FileBacking(path)
        except PEError:
            self.probe.note_stamp(path, NOT_PE)
            return None
        return self._try_backing(backing, path, module, source, path, path)

    def _try_backing(
        self, backing: Backing, name: str, module: Module, source: str, where: str, path: Optional[str] = None
    ) -> Optional[LocatedImage]:
        recording = RecordingBacking(backing) if self.record_reads else None
        try:
            img = PEImage.from_backing(recording or backing, name)
        except PEError:
            if path is not None:
                self.probe.note_stamp(path, NOT_PE)
            return None
        if path is not None:
            self.probe.note_stamp(path, (img.timestamp, img.size_of_image))
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
        return self._try_backing(backing, module_file_name(module) or where, module, "bundle", where)

    def _from_recorded_path(self, module: Module) -> Optional[LocatedImage]:
        if not self.use_recorded_path or not module.path:
            return None
        for real in self.probe.recorded(module.path):
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
        name = module_file_name(module).lower()
        if not name:
            return None
        for d in self.image_paths:
            self._sought.setdefault(d, []).append(module_file_name(module))
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
        if self.fetcher is not None:
            by_why: Dict[str, List[str]] = {}
            for name, why in self.fetcher.lines:
                by_why.setdefault(why, []).append(name)
            for why, names in by_why.items():
                out.append(f"--fetch-images found no image of {listing(sorted(set(names), key=str.lower), 6)}: {why}")
            for name, why in self.fetcher.pdb_lines:
                out.append(f"--fetch-images found no PDB for {name}: {why}")
        return out

    def _from_symbol_server(self, module: Module) -> Optional[LocatedImage]:
        """NAME/KEY/NAME from each configured HTTP symbol server (or its compressed NAME_),
        checked against the module before it enters the server's local store."""
        key = image_key(module)
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
            got = download(srv, key, image_check(module), self.max_download)
            if got.path is None:
                self.failures.append(f"{key.name}: symbol server {srv.url}: {got.problem}")
                continue
            self.downloads.append(got.path)
            found = self._try_file(got.path, module, "symbol-server")
            if found is not None:
                found.detail = f"{srv.url} -> {found.detail}"
                return found
        return None

    def _fetched(self, module: Module, read_va: Optional[ReadVA]) -> Optional[LocatedImage]:
        """The module's image from where it is published (--fetch-images), via its cache."""
        from dumpkit.images.fetch.identity import dump_header

        assert self.fetcher is not None
        path = self.fetcher.fetch(module, dump_header(read_va, module))
        if path is None:
            return None
        found = self._try_file(path, module, "fetched")
        if found is not None and self.fetcher.fetched and self.fetcher.fetched[-1][0] == module.name:
            found.detail = f"{self.fetcher.fetched[-1][1]} -> {found.detail}"
        elif found is not None:
            origin = self.fetcher.origin(module)  # fetched by an earlier run: from where, as it noted
            found.detail = f"{origin}, cached -> {found.detail}" if origin else found.detail
        return found

    def fetch_plan(self, module: Module) -> Optional[str]:
        """What --fetch-images would do (or did not manage) for a module without an image."""
        if self.fetcher is None:
            return None
        why = self.fetcher.not_found(module)
        return "--fetch-images found nothing (why: below)" if why else None

    def _from_symbol_store(self, module: Module) -> Optional[LocatedImage]:
        """NAME/KEY/NAME in each store; else what a store may hold instead: a `file.ptr`
        (symstore /p: a pointer to the real file) is followed; a compressed `NAME.dl_`
        (symstore /compress, a cabinet) is expanded into dumpkit's cache, once checked."""
        key = image_key(module)
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
                    got = self._expand(packed, key, image_check(module))
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
        name = module_file_name(module)
        targets, why = pointed_files(ptr)
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
            got = download(srv, key, pdb_check(cv), self.max_download)
            if got.path is None:
                refused.append(f"symbol server {srv.url}: {got.problem}")
                continue
            self.downloads.append(got.path)
            found = self._try_pdb(got.path, cv, refused)
            if found is not None:
                return found
        fetched = self.fetcher.fetch_pdb(module, cv) if self.fetcher is not None else None
        if fetched is not None:  # --fetch-images: the release's PDB package (python.org)
            found = self._try_pdb(fetched, cv, refused)
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
                    targets, why = pointed_files(ptr)
                    yield from targets
                    if why:
                        refused.append(why)
                for packed in store_files(base, key, key.compressed):
                    got = self._expand(packed, key, pdb_check(cv))
                    if got.path is not None:
                        yield got.path
                    else:
                        refused.append(str(got.problem))
        if image_file:
            yield from LIVE.beside(image_file, name)
        if self.use_recorded_path:
            yield from self.probe.beside(module.path, name) if module.path else ()
            yield from self.probe.recorded(cv.pdb_name)
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
