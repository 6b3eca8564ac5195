"""A bundle (.dkb, docs/bundle-format.md) as a source: its dump read from its member (in
memory; a private temporary copy when it is too big for that; for a version 4 bundle, the
kept pieces served at their places in the dump), and each module's image and PDB served
from the pages captured in it: a Target whose `image_store` (target.ImageStore) is the
bundle's pages and whose `bundle` (target.BundleManifest) is what the bundle says of its
dump. Writing a bundle runs the analyses, so it lives above them, in dumpkit/bundle.

Everything is checked when the bundle is opened (manifest, member names, sizes, CRCs, the
dump's sha256), so a damaged or hostile bundle is one `BundleError` line before any analysis
starts. A read of the image outside the captured pages raises `NotInBundle`, a `PEError`:
the PE and unwind code treat it as they treat any unreadable part of an image, and never
see zeros in its place. A PDB's raises `PdbNotInBundle`, a `PdbError`, likewise."""

from __future__ import annotations

import hashlib
import lzma
import mmap
import os
import tempfile
import zipfile
import zlib
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Type, Union

from dumpkit.sources.bundle_format import (
    MANIFEST,
    MAX_MANIFEST,
    BundleError,
    DumpEntry,
    ImageEntry,
    Manifest,
    PackageEntry,
    PdbEntry,
    check_member_name,
    parse_manifest,
)
from dumpkit.pe import PEError
from dumpkit.problems import Problems
from dumpkit.sources.minidump import MinidumpTarget, open_dump_bytes, open_dump_copy, open_dump_pieces
from dumpkit.sources.packed import remove_quietly, unlink_mapped
from dumpkit.sources.pieced import PiecedFile
from dumpkit.symbols.pdb import PdbError
from dumpkit.target import CodeViewRecord, DumpError, FileBytes, InstalledPackage, Module, OriginalFile, Target

__all__ = [
    "BundleBacking",
    "BundleImages",
    "BundlePdb",
    "NotInBundle",
    "PdbNotInBundle",
    "open_bundle",
    "open_redacted_copy",
    "read_bundle",
]

DUMP_IN_MEMORY = 1 << 30  # larger dumps go to a private temporary file, mapped
_READ = 1 << 12  # zipfile decompresses one read's worth of input at a time: keep bursts small


class NotInBundle(PEError):
    """A read of an image range the bundle did not capture."""


class PdbNotInBundle(PdbError):
    """A read of a PDB range the bundle did not capture."""


class BundleBacking:
    """One module's image file, as far as the bundle holds it: reads inside the captured
    ranges are served; reads past the file's end fail as they would on the file; anything
    else raises NotInBundle."""

    lazy = False
    _past_end: Type[Exception] = PEError
    _missing: Type[Exception] = NotInBundle

    def __init__(self, entry: Union[ImageEntry, PdbEntry], data: bytes, where: str, misses: Optional[List[str]] = None):
        self._where = where
        self._misses = misses  # where reads outside the captured pages are noted
        # the captured ranges, back to back in `data` (their sizes were checked on reading)
        self._pieces = PiecedFile(entry.file_size, entry.ranges, data)
        self._size = entry.file_size

    @property
    def size(self) -> int:
        return self._size

    def holds(self, offset: int, size: int) -> bool:
        """Whether a read of these bytes would be served: what the analysis reads only when
        its image had it at hand (long section names, which a compressed image leaves unread)
        asks first, so that their absence is not a miss."""
        return 0 <= offset and 0 <= size and offset + size <= self._size and self._pieces.held(offset, size) is not None

    def read(self, offset: int, size: int) -> bytes:
        if offset < 0 or size < 0 or offset + size > self._size:
            raise self._past_end(f"file offset {offset:#x} (+{size:#x}) is past the end of the file")
        if size == 0:
            return b""
        data = self._pieces.held(offset, size)
        if data is None:
            why = f"{self._where}: file offset {offset:#x} (+{size:#x}) is not in the bundle"
            if self._misses is not None and len(self._misses) < 1000:
                self._misses.append(why)
            raise self._missing(why)
        return data

    def close(self) -> None:
        pass  # the bytes belong to the bundle: a module's image may be opened again


class BundlePdb(BundleBacking):
    """One PDB file, as far as the bundle holds it; the PDB reader's errors instead of PE's."""

    _past_end = PdbError
    _missing = PdbNotInBundle


class BundleImages:
    """The image files a bundle holds, by module (base address and name; the locator then
    checks TimeDateStamp and SizeOfImage as for any file), and its PDBs: a target.ImageStore."""

    def __init__(
        self,
        bundle_name: str,
        images: List[Tuple[ImageEntry, bytes]],
        packages: Sequence[PackageEntry] = (),
        pdbs: Sequence[Tuple[PdbEntry, bytes]] = (),
    ):
        self._by_module: Dict[Tuple[int, str], Tuple[ImageEntry, bytes]] = {}
        for entry, data in images:
            self._by_module[(entry.base, entry.name.lower())] = (entry, data)
        self._pdbs = {(p.guid.upper(), p.age): (p, data) for p, data in pdbs}
        self._packages = {(p.base, p.module.lower()): p for p in packages}
        self._name = bundle_name
        # Reads the analysis made outside the captured pages (up to 1000): none when the
        # bundle was written by this dumpkit's analysis; some when a later dumpkit reads more.
        self.misses: List[str] = []

    def package_for(self, module: Module) -> Optional[InstalledPackage]:
        """The installed distribution that owned the module where the bundle was written."""
        p = self._packages.get((module.base, module.name.lower()))
        return InstalledPackage(p.name, p.version, p.record) if p is not None else None

    def backing_for(self, module: Module) -> Optional[Tuple[FileBytes, str]]:
        found = self._by_module.get((module.base, module.name.lower()))
        if found is None:
            return None
        entry, data = found
        where = f"{self._name}:{entry.member}"
        return BundleBacking(entry, data, where, self.misses), where

    def original_image(self, module: Module) -> Optional[OriginalFile]:
        """What the bundle says of the module's image file (for writing a bundle of it)."""
        found = self._by_module.get((module.base, module.name.lower()))
        if found is None:
            return None
        entry = found[0]
        return OriginalFile(entry.file_size, entry.file_sha256, entry.source)

    def original_pdb(self, cv: CodeViewRecord) -> Optional[OriginalFile]:
        found = self._pdbs.get((cv.guid.upper(), cv.age))
        return OriginalFile(found[0].file_size, found[0].file_sha256) if found is not None else None

    def pdb_for(self, cv: CodeViewRecord) -> Optional[Tuple[FileBytes, str]]:
        found = self._pdbs.get((cv.guid.upper(), cv.age))
        if found is None:
            return None
        entry, data = found
        where = f"{self._name}:{entry.member}"
        return BundlePdb(entry, data, where, self.misses), where


def _chunks(zf: zipfile.ZipFile, info: zipfile.ZipInfo, expected: int) -> Iterator[bytes]:
    """A member's bytes in pieces, bounded: its declared size must be `expected` (which the
    manifest's limits bound) before anything is decompressed, no more than that is ever
    produced, and the CRC is checked at its end."""
    if info.file_size != expected:
        raise BundleError(f"member {info.filename} holds {info.file_size} bytes; the manifest says {expected}")
    got = 0
    with zf.open(info) as f:
        while got < expected:
            chunk = f.read(min(_READ, expected - got))
            if not chunk:
                break
            got += len(chunk)
            yield chunk
        f.read(1)  # reaches the end of the member, where zipfile checks the CRC
    if got != expected:
        raise BundleError(f"member {info.filename} is truncated ({got} of {expected} bytes)")


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, expected: int) -> bytes:
    return b"".join(_chunks(zf, info, expected))


def _read_dump(zf: zipfile.ZipFile, info: zipfile.ZipInfo, entry: DumpEntry) -> Union[bytes, str]:
    """The member's bytes, or (over DUMP_IN_MEMORY) the path of a private temporary copy;
    its sha256 checked against the manifest's either way."""
    digest = hashlib.sha256()
    if entry.stored <= DUMP_IN_MEMORY:
        parts = []
        for chunk in _chunks(zf, info, entry.stored):
            digest.update(chunk)
            parts.append(chunk)
        data = b"".join(parts)
        if digest.hexdigest() != entry.sha256:
            raise BundleError("the dump's sha256 differs from the manifest's")
        return data
    fd, tmp = tempfile.mkstemp(prefix="dumpkit-bundle-", suffix=".dmp")
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in _chunks(zf, info, entry.stored):
                digest.update(chunk)
                f.write(chunk)
        if digest.hexdigest() != entry.sha256:
            raise BundleError("the dump's sha256 differs from the manifest's")
    except BaseException:
        remove_quietly(tmp)
        raise
    return tmp


def _members(zf: zipfile.ZipFile) -> Dict[str, zipfile.ZipInfo]:
    out: Dict[str, zipfile.ZipInfo] = {}
    for info in zf.infolist():
        check_member_name(info.filename)
        if info.filename in out:
            raise BundleError(f"member {info.filename} appears twice")
        if info.flag_bits & 0x1:
            raise BundleError(f"member {info.filename} is encrypted")
        out[info.filename] = info
    return out


def read_bundle(
    path: str,
) -> Tuple[Manifest, Union[bytes, str], List[Tuple[ImageEntry, bytes]], List[Tuple[PdbEntry, bytes]]]:
    """(manifest, the dump's bytes or the path of a private copy of it, each module's
    captured bytes, each PDB's), every part checked. Raises BundleError (one line, without
    the file name)."""
    try:
        with zipfile.ZipFile(path) as zf:
            members = _members(zf)
            info = members.get(MANIFEST)
            if info is None:
                raise BundleError("no manifest.json: not a dumpkit bundle")
            if info.file_size > MAX_MANIFEST:
                raise BundleError(f"manifest.json is {info.file_size} bytes (at most {MAX_MANIFEST})")
            manifest = parse_manifest(_read_member(zf, info, info.file_size))
            needed = [manifest.dump.member] + [i.member for i in manifest.images] + [p.member for p in manifest.pdbs]
            missing = [m for m in needed if m not in members]
            if missing:
                raise BundleError(f"the manifest names member {missing[0]}, which the bundle does not hold")
            extra = sorted(set(members) - set(needed) - {MANIFEST})
            if extra:  # dumpkit writes none: a sign of a bundle changed after it was written
                raise BundleError(f"member {extra[0]} is not in the manifest")
            images = [(i, _read_member(zf, members[i.member], i.captured)) for i in manifest.images]
            pdbs = [(p, _read_member(zf, members[p.member], p.captured)) for p in manifest.pdbs]
            dump = _read_dump(zf, members[manifest.dump.member], manifest.dump)
    except BundleError:
        raise
    except FileNotFoundError:
        raise BundleError("no such file") from None
    except IsADirectoryError:
        raise BundleError("is a directory, not a bundle") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile) as e:
        raise BundleError(f"not a usable zip file ({e})") from None
    except (lzma.LZMAError, zlib.error, EOFError) as e:
        raise BundleError(f"a member cannot be decompressed ({e})") from None
    except NotImplementedError as e:
        raise BundleError(f"a member uses a compression this Python cannot read ({e})") from None
    except (OSError, RuntimeError, ValueError) as e:
        raise BundleError(f"cannot read ({getattr(e, 'strerror', None) or e})") from None
    return manifest, dump, images, pdbs


def open_bundle(path: str, problems: Optional[Problems] = None, name: Optional[str] = None) -> MinidumpTarget:
    """The bundle's dump as a Target whose modules' images are served from the bundle
    (`image_store`, which the engine hands to its image locator) and whose `bundle` is its
    manifest; what reading the dump meets goes to `problems` (the run's collector; a new
    one when none is given); reports call it `name` (default: `path`). Raises DumpError."""
    try:
        manifest, dump, images, pdbs = read_bundle(path)
    except BundleError as e:
        raise DumpError(str(e)) from None
    # Reports name the bundle: it is what their "dumpkit stack --all PATH" hints must open.
    # A bundle that kept only the memory its analysis read serves that memory and says "not
    # in the bundle" for the rest (dump.kept), never the zeros its member holds there.
    kept = manifest.dump.kept
    name = name or path
    if manifest.dump.packed and kept is not None:
        target = _open_pieces(dump, manifest.dump.size, kept, name, problems)
    elif isinstance(dump, bytes):
        target = open_dump_bytes(dump, name, kept, problems)
    else:
        target = _open_private_copy(dump, name, kept, problems)
    target.image_store = BundleImages(os.path.basename(name), images, manifest.packages, pdbs)
    target.bundle = manifest
    return target


def open_redacted_copy(data: bytes, name: str, original: Target, problems: Optional[Problems] = None) -> MinidumpTarget:
    """`data`, a redacted copy of `original`'s dump file, as a Target that carries what
    `original` carried from its bundle (its pages, its manifest, the bytes it kept); what
    reading the copy meets goes to `problems` (a new collector when none is given)."""
    file = original.dump_file
    target = open_dump_bytes(data, name, file.kept if file is not None else None, problems)
    target.image_store, target.bundle = original.image_store, original.bundle
    return target


def _open_pieces(
    dump: Union[bytes, str], size: int, kept: Tuple[Tuple[int, int], ...], name: str, problems: Optional[Problems]
) -> MinidumpTarget:
    """A version 4 dump: its kept pieces (in memory, or a private copy, mapped) at their
    places in a `size`-byte dump."""
    if isinstance(dump, bytes):
        return open_dump_pieces(size, kept, dump, name, problems)
    try:
        with open(dump, "rb") as f:
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as e:
        remove_quietly(dump)
        raise DumpError(f"cannot map the bundle's dump ({e})") from None
    try:
        target = open_dump_pieces(size, kept, data, name, problems)
    except BaseException:
        data.close()
        remove_quietly(dump)
        raise
    unlink_mapped(dump, target.close)
    return target


def _open_private_copy(
    tmp: str, name: str, kept: Optional[Tuple[Tuple[int, int], ...]], problems: Optional[Problems]
) -> MinidumpTarget:
    try:
        target = open_dump_copy(tmp, name, kept, problems)
    except BaseException:
        remove_quietly(tmp)
        raise
    unlink_mapped(tmp, target.close)
    return target
