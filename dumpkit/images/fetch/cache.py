"""Where fetched images are kept: `$DUMPKIT_CACHE/images/NAME/KEY/NAME` (else the per-OS
user cache folder's `images`), the symbol-store layout, so a second run opens the file
without asking anyone. KEY is the module's TimeDateStamp and SizeOfImage, as symbol stores
key images; where TimeDateStamp is 0 the CheckSum and the CodeView GUID and age join it,
since reproducible builds of one size would otherwise share a key.

A file enters only whole and checked (a partial file beside its place, renamed when the
caller's check accepts it), so parallel runs and triage workers share the cache safely: a
reader sees a whole file or none, and two writers of one key write the same bytes. A
module found nowhere leaves a `miss` note (why, one line) that saves asking again for a
day; being offline leaves none. An `origin` note beside a fetched file names the archive it
came from (a wheel's file name says which distribution and version hold that build), so a
run that finds the file cached knows it as well as the run that fetched it."""

from __future__ import annotations

import os
import time
from typing import Optional

from dumpkit.images.checks import image_key
from dumpkit.symbols.store import Check, Fetched, StoreKey, install, symbol_cache
from dumpkit.target import Module

MISS_TTL = 24 * 3600
_MAX_MISS = 2048
_MAX_ORIGIN = 512


def images_cache() -> str:
    """`$DUMPKIT_CACHE/images`, else `images` in the per-OS user cache folder."""
    return os.path.join(os.path.dirname(symbol_cache()), "images")


def safe_name(name: str) -> bool:
    """A module name the dump gives is used as a file name only when it is one: no folder,
    no drive, no `..`, nothing a file system would read as a path."""
    return (
        0 < len(name) <= 255
        and name not in (".", "..")
        and not any(c in name for c in "/\\:\0")
        and not name.endswith((" ", "."))
    )


def cache_key(module: Module) -> Optional[StoreKey]:
    """The module's key in the cache; None when its name is not a safe file name or the
    dump records too little to tell its build."""
    if not safe_name(module.name) or not module.size:
        return None
    if module.timestamp:
        return image_key(module)
    key = f"00000000{module.size:x}-{module.checksum:08x}"
    if module.cv_record is not None:
        key += f"-{module.cv_record.symbol_id}"
    return StoreKey(module.name, key)


class ImageCache:
    def __init__(self, root: Optional[str] = None):
        self.root = os.path.abspath(root or images_cache())

    def place(self, key: StoreKey) -> str:
        dest = os.path.abspath(key.where(self.root))
        # the name was checked; this holds even if a check is ever missed
        if os.path.commonpath([dest, self.root]) != self.root:
            raise ValueError(f"{key.name}: would leave the cache")
        return dest

    def get(self, key: StoreKey, check: Check) -> Optional[str]:
        """The cached file when it is there and passes `check` (else it is removed)."""
        dest = self.place(key)
        if not os.path.isfile(dest):
            return None
        if check(dest) is None:
            return dest
        _unlink(dest)  # damaged or another build (written by hand?): fetched again
        return None

    def partial(self, key: StoreKey):
        """A new temporary file beside the key's place: (file object, path)."""
        import tempfile

        folder = os.path.dirname(self.place(key))
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".dumpkit-partial-", dir=folder)
        return os.fdopen(fd, "w+b"), tmp

    def admit(self, key: StoreKey, tmp: str, check: Check, what: str, origin: Optional[str] = None) -> Fetched:
        """`tmp` renamed into the key's place when `check` accepts it; else deleted.
        `origin`: the archive's file name, kept beside it (`origin`)."""
        dest = self.place(key)
        try:
            why = check(tmp)
            if why is not None:
                return Fetched(problem=f"{what} is {why}; not cached")
            if origin:
                self._note(key, "origin", origin)  # first: a reader that sees the file sees its note
            install(tmp, dest, check)  # another worker's copy of it may be there and open
            self.forget_miss(key)
            return Fetched(dest)
        finally:
            _unlink(tmp)

    def origin(self, key: StoreKey) -> Optional[str]:
        """The file name of the archive the cached file came from, when a fetch noted it."""
        try:
            with open(os.path.join(os.path.dirname(self.place(key)), "origin"), encoding="utf-8") as f:
                text = f.read(_MAX_ORIGIN).strip()
        except (OSError, ValueError):
            return None
        return text if text and "/" not in text and "\\" not in text else None

    def miss(self, key: StoreKey) -> Optional[str]:
        """Why the module was found nowhere, when a run said so less than MISS_TTL ago."""
        path = os.path.join(os.path.dirname(self.place(key)), "miss")
        try:
            if time.time() - os.path.getmtime(path) > MISS_TTL:
                return None
            with open(path, encoding="utf-8", errors="replace") as f:
                return f.read(_MAX_MISS).strip() or None
        except OSError:
            return None

    def remember_miss(self, key: StoreKey, why: str) -> None:
        self._note(key, "miss", why[:_MAX_MISS])

    def _note(self, key: StoreKey, name: str, text: str) -> None:
        path = os.path.join(os.path.dirname(self.place(key)), name)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.{os.getpid()}"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only cache still fetches; it just asks again next time

    def forget_miss(self, key: StoreKey) -> None:
        _unlink(os.path.join(os.path.dirname(self.place(key)), "miss"))


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
