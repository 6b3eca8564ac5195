"""`--fetch-images`: a module's image fetched from where it is published, checked, cached.

One ImageFetcher per run (the locator asks it last, for a module no other source had):
the cache first (no network at all on a warm cache), then the module's publisher
(published.py): the wheels of its distribution on pip's package index, python.org's
embeddable zip, Microsoft's symbol server. A wheel or zip is read by ranges: its
directory, then the member's first page to check the build (identity.py), and the member
is taken whole only when it is the module's. Everything is bounded: candidates per module
(MAX_CANDIDATES), bytes per module (DUMPKIT_MAX_DOWNLOAD), and what any one answer may be.
What it could not find is one line per module in `lines`, grouped by reason in the report."""

from __future__ import annotations

import os
import re
from collections import deque
from typing import TYPE_CHECKING, Callable, Deque, Dict, List, Optional, Set, Tuple

from dumpkit.images.checks import image_check, pdb_check
from dumpkit.images.fetch.cache import ImageCache, cache_key, safe_name
from dumpkit.images.fetch.errors import FetchError
from dumpkit.images.fetch.identity import MemberPrefix, mismatch
from dumpkit.images.fetch.pipconfig import IndexConfig, public, read_pip_config
from dumpkit.images.fetch.published import (
    PYTHON_ORG,
    Process,
    Release,
    Unpublished,
    Wheel,
    Windows,
    pdb_package,
    plan_line,
    published,
)
from dumpkit.images.fetch.ziparchive import Directory, ZipError, extract, find, head, read_directory
from dumpkit.pe import PEError, PEImage
from dumpkit.symbols.store import StoreKey, SymbolServer, download, store_files, symbol_cache
from dumpkit.target import CodeViewRecord, Module

if TYPE_CHECKING:  # the network side is imported when the cache does not have the image
    from dumpkit.images.fetch.http import Client, RemoteFile
    from dumpkit.images.fetch.index import IndexFile

MAX_CANDIDATES = 12  # wheels read per module: its directory and one page of the member
MAX_FOLLOWED = 4  # distributions a wheel without the module may send the search on to
MAX_METADATA = 256 * 1024
PYTHON_ORG_ENV = "DUMPKIT_PYTHON_ORG_URL"  # a mirror of python.org's release files

ProgressHook = Callable[[str, int, Optional[int]], None]
"""progress(what, bytes so far, bytes in all or None): a download under way."""


class _Missing(Exception):
    """The archive holds no such member; `requires` are the Windows requirements its
    metadata names (distributions that may hold it), with pinned versions."""

    def __init__(self, requires: List[Tuple[str, Optional[str]]]):
        super().__init__("no such member")
        self.requires = requires


class ImageFetcher:
    def __init__(
        self,
        process: Process,
        limit: int,
        cache: Optional[ImageCache] = None,
        progress: Optional[ProgressHook] = None,
        config: Optional[Callable[[], IndexConfig]] = None,
        max_candidates: int = MAX_CANDIDATES,
    ):
        self.process = process
        self.limit = limit
        self.cache = cache or ImageCache()
        self.progress = progress
        self.max_candidates = max_candidates
        self.python_org = os.environ.get(PYTHON_ORG_ENV) or PYTHON_ORG
        self.lines: List[Tuple[str, str]] = []  # (module, why it was not fetched)
        self.fetched: List[Tuple[str, str]] = []  # (module, where it came from)
        self.pdb_lines: List[Tuple[str, str]] = []  # (module, why its PDB was not fetched)
        self._config = config or read_pip_config
        self._client: Optional[Client] = None
        self._files: Dict[str, List["IndexFile"]] = {}
        self._remotes: Dict[str, "RemoteFile"] = {}
        self._dirs: Dict[str, Directory] = {}
        self._held: Dict[str, str] = {}  # project -> the wheel that held one of its modules

    def close(self) -> None:
        for remote in self._remotes.values():
            remote.close()
        self._remotes.clear()

    # ---------------------------------------------------------------- what the report says
    def plan(self, module: Module) -> Optional[str]:
        return plan_line(published(module, self.process, self.python_org))

    def not_found(self, module: Module) -> Optional[str]:
        """Why a module dumpkit could fetch was not fetched (None: it was, or it is
        published nowhere dumpkit knows, which the report says otherwise)."""
        if isinstance(published(module, self.process, self.python_org), Unpublished):
            return None
        return next((why for name, why in reversed(self.lines) if name == module.name), None)

    # ---------------------------------------------------------------- fetching
    def fetch(self, module: Module, header: Optional[bytes]) -> Optional[str]:
        """The cached image file of `module` (fetched now if need be), or None with a line
        saying why. `header`: the module's first page from the dump's memory, if there."""
        key = cache_key(module)
        if key is None:
            return self._fail(module, "its name or size in the dump cannot key a cache entry")
        where = published(module, self.process, self.python_org)
        if isinstance(where, Unpublished):
            return self._fail(module, where.why)
        if isinstance(where, Windows):
            return self._from_microsoft(module, where)
        check = self._check(module, header)

        def fetch() -> Tuple[Optional[str], str]:
            if isinstance(where, Wheel):
                return self._from_wheels(module, where, key, header, check)
            assert isinstance(where, Release)
            return self._from_release(module, where, key, header, check)

        return self._through_cache(key, check, fetch, lambda why: self._fail(module, why))

    def _through_cache(
        self,
        key: StoreKey,
        check: Callable[[str], Optional[str]],
        fetch: Callable[[], Tuple[Optional[str], str]],
        fail: Callable[[str], Optional[str]],
    ) -> Optional[str]:
        """The cached file at `key`, else what `fetch` gets (None and `fail(why)` when it gets
        nothing). A definite "not there" is remembered for a day; being offline is not."""
        cached = self.cache.get(key, check)
        if cached is not None:
            return cached
        missed = self.cache.miss(key)
        if missed is not None:
            return fail(f"{missed} (remembered from a run within the last day)")
        try:
            got, why = fetch()
        except FetchError as e:
            if e.status in (404, 410):  # the release or file is not there: no use asking again today
                self.cache.remember_miss(key, str(e))
            return fail(f"offline? {e}" if e.offline else str(e))
        if got is None:
            self.cache.remember_miss(key, why)
            return fail(why)
        return got

    def origin(self, module: Module) -> Optional[str]:
        """The file name of the archive (a wheel, python.org's zip) the module's cached image
        came from, when the fetch that put it there noted it."""
        key = cache_key(module)
        return self.cache.origin(key) if key is not None else None

    def _fail(self, module: Module, why: str) -> Optional[str]:
        self.lines.append((module.name, why))
        return None

    def _no_pdb(self, module: Module, why: str) -> Optional[str]:
        self.pdb_lines.append((module.name, why))
        return None

    def _check(self, module: Module, header: Optional[bytes]) -> Callable[[str], Optional[str]]:
        """A cached or fetched file is the module's: whole (image_check) and its build."""
        whole = image_check(module)

        def check(path: str) -> Optional[str]:
            why = whole(path)
            if why is not None or module.timestamp:
                return why
            try:
                img = PEImage.from_file(path)
            except PEError as e:
                return f"not a PE image ({e})"
            try:
                return mismatch(img, module, header)
            finally:
                img.close()

        return check

    def client(self) -> "Client":
        from dumpkit.images.fetch.http import Client

        if self._client is None:
            config = self._config()
            self._client = Client(config)
        return self._client

    # ---------------------------------------------------------------- Microsoft
    def _from_microsoft(self, module: Module, where: Windows) -> Optional[str]:
        """Windows' DLL from Microsoft's symbol server, into the symbol cache `srv*` uses."""
        from dumpkit.images.checks import image_key

        key = image_key(module)
        if key is None:
            return self._fail(module, "the dump records no TimeDateStamp for it: Microsoft's server keys files by it")
        check = image_check(module)
        cache = symbol_cache()
        for path in store_files(cache, key):
            if check(path) is None:
                return path
        got = download(SymbolServer(where.url, cache), key, check, self.limit)
        if got.path is None:
            return self._fail(module, f"Microsoft's symbol server: {got.problem}")
        self.fetched.append((module.name, f"Microsoft's symbol server ({where.url})"))
        return got.path

    # ---------------------------------------------------------------- wheels
    def _project_files(self, project: str) -> List["IndexFile"]:
        """The project's files over every index pip is configured for (asked once a run)."""
        from dumpkit.images.fetch.index import normalize, project_files

        name = normalize(project)
        if name not in self._files:
            client = self.client()
            files: List[IndexFile] = []
            errors: List[FetchError] = []
            for idx in client.config.indexes:
                try:
                    files += project_files(client, idx, name)
                except FetchError as e:
                    errors.append(e)
            if not files and errors:  # none answered: the project may be on the one that did not
                raise FetchError("; ".join(str(e) for e in errors[:3]), offline=any(e.offline for e in errors))
            self._files[name] = files
        return self._files[name]

    def _from_wheels(
        self, module: Module, where: Wheel, key: StoreKey, header: Optional[bytes], check
    ) -> Tuple[Optional[str], str]:
        from dumpkit.images.fetch.index import normalize
        from dumpkit.images.fetch.wheels import candidates

        config = self.client().config
        if not config.indexes:
            raise FetchError(config.problem or "pip names no package index", offline=True)
        queue: Deque[Tuple[str, Tuple[str, ...]]] = deque((p, ()) for p in where.projects)
        asked: Set[str] = set()
        refused: List[str] = []
        tried = followed = 0
        start = self._received()
        while queue and tried < self.max_candidates:  # bounded: candidates and follow-ups
            project, pinned = queue.popleft()
            if normalize(project) in asked:
                continue
            asked.add(normalize(project))
            files = self._project_files(project)
            when = module.timestamp or self.process.link_time(project)  # 0: a reproducible build
            wheels = candidates(files, project, self.process.python_minor, self.process.platform, when, pinned)
            held = self._held.get(normalize(project))
            wheels.sort(key=lambda f: 0 if f.url == held else 1)
            if not wheels:
                tag = f"cp3{self.process.python_minor}" if self.process.python_minor is not None else "CPython"
                refused.append(
                    f"{project}: {'no such project' if not files else f'no {tag} {self.process.platform} wheel'}"
                )
                continue
            for f in wheels:
                if tried >= self.max_candidates:
                    break
                if self._received() - start > self.limit:
                    refused.append(f"read {self._received() - start:,} bytes of candidates, past the limit")
                    queue.clear()
                    break
                tried += 1
                try:
                    got = self._take(module, f.url, f.size, where.member, key, header, check, f.filename)
                except _Missing as missing:
                    refused.append(f"{f.filename} has no {where.member}")
                    follow = [(n, (v,) if v else ()) for n, v in missing.requires if normalize(n) not in asked]
                    if follow and followed < MAX_FOLLOWED:
                        followed += len(follow)
                        queue.extendleft(reversed(follow[:MAX_FOLLOWED]))
                        break
                    continue
                except (ZipError, PEError) as e:
                    refused.append(f"{f.filename}: {e}")
                    continue
                if got.startswith("\0"):  # a refusal
                    refused.append(got[1:])
                    continue
                self._held[normalize(project)] = f.url
                self.fetched.append((module.name, f"{f.filename} ({public(f.url)})"))
                return got, ""
        if not refused:
            return None, "no wheel to try"
        shown = "; ".join(refused[-4:])
        return None, f"no wheel holds this build ({tried} read: {shown})"

    def _received(self) -> int:
        return sum(r.received for r in self._remotes.values())

    def _remote(self, url: str, size: Optional[int]) -> "RemoteFile":
        from dumpkit.images.fetch.http import RemoteFile

        if url not in self._remotes:
            remote = RemoteFile(self.client(), url.split("#", 1)[0], size, self.limit, self.cache.root)
            if size is not None:  # a server without ranges: the whole file, with a bar
                remote.progress = self._progress_for(url.rsplit("/", 1)[-1].split("#", 1)[0], size)
            self._remotes[url] = remote
        return self._remotes[url]

    def _directory(self, remote: "RemoteFile") -> Directory:
        if remote.url not in self._dirs:
            self._dirs[remote.url] = read_directory(remote)
        return self._dirs[remote.url]

    def _take(
        self,
        module: Module,
        url: str,
        size: Optional[int],
        member: str,
        key: StoreKey,
        header: Optional[bytes],
        check,
        label: str,
    ) -> str:
        """The member's path in the cache when it is the module's build; "\\0why" when it
        is not; _Missing when the archive does not hold it."""
        remote = self._remote(url, size)
        directory = self._directory(remote)
        m = find(directory, member)
        if m is None:
            raise _Missing(self._windows_requirements(remote, directory))
        prefix = MemberPrefix(lambda n: head(remote, directory, m, n, self.limit), m.size, m.name)
        try:
            img = PEImage.from_backing(prefix, m.name)
        except PEError as e:
            return f"\0{label}: its {member} is not a PE image ({e})"
        try:
            why = mismatch(img, module, header)
        finally:
            img.close()
        if why is not None:
            return f"\0{label}: its {member} is {why}"
        out, tmp = self.cache.partial(key)
        try:
            with out:
                extract(remote, directory, m, out, self.limit, self._progress_for(module.name, m.compressed))
        except (ZipError, FetchError, OSError) as e:
            _unlink(tmp)
            return f"\0{label}: {e}; not cached"
        fetched = self.cache.admit(key, tmp, check, f"{member} from {label}", origin=os.path.basename(label))
        if fetched.path is None:
            return f"\0{fetched.problem}"
        return fetched.path

    def _progress_for(self, name: str, total: int):
        hook = self.progress
        if hook is None:
            return None
        return lambda done: hook(name, done, total)

    def _windows_requirements(self, remote: "RemoteFile", directory: Directory) -> List[Tuple[str, Optional[str]]]:
        """What a wheel that lacks the module requires on Windows (tensorflow's Windows
        wheels are a shell around tensorflow-intel's): from its METADATA's Requires-Dist."""
        meta = next(
            (m for k, m in directory.members.items() if k.count("/") == 1 and k.endswith(".dist-info/metadata")), None
        )
        if meta is None or meta.size > MAX_METADATA:
            return []
        try:
            text = head(remote, directory, meta, meta.size, MAX_METADATA).decode("utf-8", "replace")
        except (ZipError, FetchError):
            return []
        out: List[Tuple[str, Optional[str]]] = []
        for line in text.splitlines():
            if not line.strip():
                break  # the headers end; the description follows
            if not line.lower().startswith("requires-dist:"):
                continue
            req, _, marker = line.split(":", 1)[1].partition(";")
            low = marker.lower()
            if "windows" not in low and "win32" not in low and "nt" not in re.findall(r"[a-z_]+", low):
                continue
            m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*\(?\s*(?:===?\s*([A-Za-z0-9.+!_-]+))?", req)
            if m is not None:
                out.append((m.group(1), m.group(2)))
        return out[:MAX_FOLLOWED]

    # ---------------------------------------------------------------- python.org
    def fetch_pdb(self, module: Module, cv: CodeViewRecord) -> Optional[str]:
        """The PDB `cv` names for one of the interpreter's files, out of the release's PDB
        package on python.org (an MSI holding a cabinet), cached; None with a line when not."""
        import ntpath

        where = published(module, self.process, self.python_org)
        name = ntpath.basename(cv.pdb_name.replace("/", "\\"))
        if not isinstance(where, Release) or not safe_name(name):
            return None
        key = StoreKey(name, cv.symbol_id)
        check = pdb_check(cv)
        url = pdb_package(where, module.name, self.process.embed_arch, self.python_org)
        got = self._through_cache(
            key, check, lambda: self._pdb_from_package(module, url, key, check), lambda why: self._no_pdb(module, why)
        )
        if got is not None:
            self.fetched.append((name, f"python.org's {url.rsplit('/', 2)[-2]}/{url.rsplit('/', 1)[-1]}"))
        return got

    def _pdb_from_package(self, module: Module, url: str, key: StoreKey, check) -> Tuple[Optional[str], str]:
        """The MSI at `url` downloaded (bounded), its cabinets' members tried as the PDB."""
        import io

        from dumpkit.images.fetch.msi import MsiError, cabinet_streams
        from dumpkit.symbols.cabinet import CabinetError, open_cabinet

        label = url.rsplit("/", 1)[-1]
        remote = self._remote(url, None)
        size = remote.size
        if size > self.limit:
            return None, f"{label} is {size:,} bytes, more than the limit of {self.limit:,}"
        out, spooled = self.cache.partial(key)
        try:
            with out:
                remote.stream_to(0, size, out, self._progress_for(label, size))
            with open(spooled, "rb") as fh:
                streams = cabinet_streams(fh, size, self.limit)
        except (MsiError, OSError) as e:
            return None, f"{label}: {e}"
        finally:
            _unlink(spooled)
        stem = key.name.lower().rsplit(".", 1)[0]
        tried: List[str] = []
        for _, data in streams:
            try:
                cab = open_cabinet(io.BytesIO(data), len(data), label)
                members = sorted(cab.members, key=lambda m: 0 if stem in m.name.lower() else 1) if cab else []
                for m in members[:MAX_CANDIDATES]:
                    tried.append(m.name)
                    part, tmp = self.cache.partial(key)
                    with part:
                        cab.extract(m, part, self.limit)  # type: ignore[union-attr]
                    got = self.cache.admit(key, tmp, check, f"{m.name} from {label}")
                    if got.path is not None:
                        return got.path, ""
            except CabinetError as e:
                return None, f"{label}: {e}"
        return None, f"{label} holds no PDB of this build ({len(tried)} tried)"

    def _from_release(
        self, module: Module, where: Release, key: StoreKey, header: Optional[bytes], check
    ) -> Tuple[Optional[str], str]:
        label = where.url.rsplit("/", 1)[-1]
        try:
            got = self._take(module, where.url, None, where.member, key, header, check, label)
        except _Missing:
            return None, f"python.org's {label} has no {where.member}"
        except (ZipError, PEError) as e:
            return None, f"{label}: {e}"
        if got.startswith("\0"):
            return None, got[1:]
        self.fetched.append((module.name, f"python.org's {label}"))
        return got, ""


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
