"""Writing a bundle: run the analyses every command runs (`analyze`, and `stack --all
--python` for the rest of the threads and every Python frame) with an image locator that
records each page of each image file and PDB file read, then write the dump and exactly
those pages.

The output is deterministic: members in a fixed order, fixed timestamps and attributes,
the manifest as sorted JSON; the same dump and images give the same bundle byte for byte."""

from __future__ import annotations

import hashlib
import lzma
import os
import zipfile
from typing import IO, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple

from dumpkit import __version__
from dumpkit.destinations import write_replacing
from dumpkit.sources.bundle_format import (
    DUMP_MEMBER,
    FORMAT_VERSION,
    MANIFEST,
    MAX_DUMP,
    MAX_IMAGE_BYTES,
    MAX_PACKED_DUMP,
    PACKED_VERSION,
    PDBS_FOLDER,
    BundleError,
    DumpEntry,
    ImageEntry,
    Manifest,
    PackageEntry,
    PdbEntry,
    manifest_json,
    member_name,
)
from dumpkit.engine import Options, analyze, image_fetcher, stacks
from dumpkit.bundle.slim import check_same_dump, kept_ranges
from dumpkit.images import ImageLocator, ImageStore, LocatedImage, LocatedPdb, RecordingBacking
from dumpkit.problems import Problems
from dumpkit.target import CodeViewRecord, DumpFile, Module, Target
from dumpkit.words import human_bytes
from dumpkit.records import record

__all__ = ["BundleSummary", "write_bundle"]

_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # the zip epoch: no build time leaks into the bytes
_CHUNK = 1 << 20


@record
class BundleSummary:
    """What was written, for the command's report."""

    path: str
    size: int  # bytes of the bundle file
    manifest: Manifest
    image_files: Tuple[Tuple[str, int], ...]  # (module, original file size) of each captured image
    not_found: Tuple[str, ...]  # modules the analysis wanted an image of and found none
    verdict: str


def _file_digest(path: str) -> Tuple[int, str]:
    """(size, sha256) of an image file as the loader sees it (an .xz decompressed)."""
    digest = hashlib.sha256()
    size = 0
    opener = lzma.open if path.lower().endswith(".xz") else open
    with opener(path, "rb") as f:
        while True:
            chunk = f.read(_CHUNK)
            if not chunk:
                break
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def _captured(recording: RecordingBacking) -> Tuple[Tuple[Tuple[int, int], ...], bytes]:
    ranges = tuple(recording.ranges())
    data = b"".join(recording.inner.read(off, n) for off, n in ranges)
    return ranges, data


def _info(name: str, method: int = zipfile.ZIP_LZMA) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
    info.compress_type = method
    info.create_system = 3  # the same on every host (zipfile says 0 on Windows)
    info.external_attr = 0o644 << 16
    return info


def _dump_chunks(path: str, data: Optional[bytes], target: Target) -> Iterator[bytes]:
    """The bytes the bundle stores as its dump: `data` when given (a redacted copy), else
    the dump the target reads (the file, a bundle's member, a compressed dump's unpacked
    copy), else the file at `path`."""
    if data is not None:
        for at in range(0, len(data), _CHUNK):
            yield data[at : at + _CHUNK]
        return
    file = target.dump_file
    if file is not None:
        yield from file.file_chunks(_CHUNK)
        return
    with open(path, "rb") as f:
        while True:
            chunk = f.read(_CHUNK)
            if not chunk:
                return
            yield chunk


def _dump_name(path: str) -> str:
    """What the bundle calls its dump: the file's name, without the compression it was
    shared in (crash.dmp.xz, crash.zip: the bundle holds the minidump itself)."""
    name = os.path.basename(path)
    stem, ext = os.path.splitext(name)
    if ext.lower() in (".xz", ".gz", ".bz2"):
        return stem
    return stem + ".dmp" if ext.lower() == ".zip" else name


def _kept_chunks(file: DumpFile, kept: Sequence[Tuple[int, int]]) -> Iterator[bytes]:
    """The dump file's kept ranges, back to back, read from where the target reads its dump
    (the file, a redacted copy, or the bundle being bundled again)."""
    for off, n in kept:
        for at in range(off, off + n, _CHUNK):
            yield file.file_bytes(at, min(_CHUNK, off + n - at))


def _write_zip(out: IO[bytes], manifest: Manifest, dump: Iterator[bytes], images: Sequence[bytes]) -> None:
    with zipfile.ZipFile(out, "w") as zf:
        # Deflate for the manifest: every zip tool reads it (Info-ZIP's unzip has no LZMA);
        # LZMA for the rest, the TensorFlow sample's bundle is 4 MB with it, 6+ with Deflate.
        zf.writestr(_info(MANIFEST, zipfile.ZIP_DEFLATED), manifest_json(manifest))
        with zf.open(_info(DUMP_MEMBER), "w", force_zip64=manifest.dump.stored >= (1 << 31)) as w:
            for chunk in dump:
                w.write(chunk)
        for member, data in zip([i.member for i in manifest.images] + [p.member for p in manifest.pdbs], images):
            zf.writestr(_info(member), data)


def write_bundle(
    target: Target,
    dump_path: str,
    out_path: str,
    image_paths: Sequence[str] = (),
    symbol_paths: Sequence[str] = (),
    dump_data: Optional[bytes] = None,
    redacted: Tuple[str, ...] = (),
    only_used_memory: bool = False,
    fetch_images: bool = False,
    fetch_progress: Optional[Callable[[str, int, Optional[int]], None]] = None,
    *,
    problems: Problems,
) -> BundleSummary:
    """Analyse `target` (opened from `dump_path`, or from `dump_data` when given: a redacted
    copy) recording the image and PDB pages read, and write the bundle to `out_path`
    atomically. `target` may be a bundle (sources/bundle.py): its dump, the pages it holds that
    this analysis reads and what it says of their original files go into the new one.
    `only_used_memory`: the bundle's dump keeps only the memory the analysis read (slim.py).
    `fetch_images`: modules without an image are fetched (--fetch-images), and the pages of
    the fetched images the analysis reads travel in the bundle like any other's.
    `problems`: the run's collector, which `target` was opened with.
    Raises BundleError when it cannot be written."""
    source = target.bundle
    store = target.image_store
    file = target.dump_file  # None for a live session: it has no dump file to keep part of
    if dump_data is not None:
        dump_size = len(dump_data)
    elif file is not None:
        dump_size = file.file_size
    else:
        dump_size = os.path.getsize(dump_path)
    # A bundle stores at most MAX_DUMP bytes of dump: the whole dump, or (--only-used-memory,
    # or a bundle that already left memory out) only the kept pieces of a bigger one.
    pieces = only_used_memory or (source is not None and source.kept is not None)
    name = os.path.basename(dump_path)
    if dump_size > (MAX_PACKED_DUMP if pieces else MAX_DUMP):
        hint = "" if pieces else ": --only-used-memory stores only the memory the analysis reads"
        raise BundleError(
            f"{name} is {human_bytes(dump_size)}; a bundle holds at most {human_bytes(MAX_DUMP)} of it{hint}"
        )
    if source is not None:  # what the bundle read says stays said
        redacted = tuple(dict.fromkeys(source.redacted + redacted))
    locator = ImageLocator(
        image_paths=list(image_paths),
        symbol_paths=list(symbol_paths),
        store=store,
        given_first=source is not None,  # re-bundling: whole images given here fill the bundle's gaps
        record_reads=True,
        fetcher=image_fetcher(target, Options(fetch_images=fetch_images, fetch_progress=fetch_progress)),
    )
    pages: Optional[Set[int]] = None
    if only_used_memory:
        if file is None:
            raise BundleError("--only-used-memory needs a minidump")
        pages = file.record_memory_reads()
    try:
        options = Options(locator=locator)
        done = analyze(target, options, problems=problems)
        report = done.report
        by_base = {m.base: m for m in target.modules}
        packages = tuple(
            PackageEntry(
                by_base[base].name, base, p.name, p.version, os.path.basename(p.record) if redacted else p.record
            )
            for base, p in sorted(done.packages.items())
            if p is not None and base in by_base
        )
        stacks(target, options, list(target.threads), python=True, problems=problems)
        entries: List[ImageEntry] = []
        blobs: List[bytes] = []
        sizes: List[Tuple[str, int]] = []
        recorded = sorted(locator.recorded, key=lambda r: (r[0].base, r[0].name.lower()))
        for index, (module, found) in enumerate(recorded):
            original = _original_image(found, module, store)
            if found.recording is None or original is None:
                continue  # only file images are recorded
            ranges, data = _captured(found.recording)
            if not ranges:
                continue
            file_size, sha, found_in = original
            # (name, base, TimeDateStamp, SizeOfImage, recorded path) as the dump has them
            where = (module.name, module.base, module.timestamp, module.size, module.path)
            member = member_name(index, module.name)
            entries.append(ImageEntry(*where, file_size, sha, found_in, member, ranges))
            blobs.append(data)
            sizes.append((module.name, file_size))
        pdbs: List[PdbEntry] = []
        # One entry per PDB (GUID, age), with the pages every module that used it read.
        by_id: Dict[Tuple[str, int], Tuple[CodeViewRecord, LocatedPdb]] = {}
        for cv, located in locator.recorded_pdbs:
            first = by_id.setdefault((cv.guid.upper(), cv.age), (cv, located))[1]
            if first is not located and first.recording is not None and located.recording is not None:
                first.recording.pages |= located.recording.pages
        for index, (cv, located) in enumerate(v for _, v in sorted(by_id.items())):
            pdb_file = _original_pdb(located, cv, store)
            if located.recording is None or pdb_file is None:
                continue
            ranges, data = _captured(located.recording)
            if not ranges:
                continue
            file_size, sha = pdb_file
            name = os.path.basename(cv.pdb_name.replace("\\", "/"))
            member = member_name(index, name, PDBS_FOLDER)
            pdbs.append(PdbEntry(name, cv.guid.upper(), cv.age, file_size, sha, member, ranges))
            blobs.append(data)
        if sum(len(b) for b in blobs) > MAX_IMAGE_BYTES:
            raise BundleError(f"the analysis read more than {MAX_IMAGE_BYTES} bytes of images and PDBs")
    finally:
        locator.close()
    kept = source.kept if source is not None else None  # what a bundle left out stays out
    if pages is not None and file is not None:
        kept = kept_ranges(target, file, pages, kept)
    packed: Optional[bytes] = None  # only the kept pieces are stored (version 4)
    if kept is not None:
        if file is None:
            raise BundleError("a bundle that keeps part of the dump needs a minidump")
        stored = sum(n for _, n in kept)
        if stored > MAX_DUMP:
            raise BundleError(
                f"{name}: the analysis read {human_bytes(stored)}; a bundle holds at most {human_bytes(MAX_DUMP)}"
            )
        packed = b"".join(_kept_chunks(file, kept))
        check_same_dump(target, problems, file, packed, kept)

    def chunks() -> Iterator[bytes]:  # the member's bytes, once for the digest and once stored
        return iter((packed,)) if packed is not None else _dump_chunks(dump_path, dump_data, target)

    digest = hashlib.sha256()
    for chunk in chunks():
        digest.update(chunk)
    manifest = Manifest(
        dumpkit_version=__version__,
        dump=DumpEntry(
            name=source.dump_name if source is not None else _dump_name(dump_path),
            size=dump_size,
            sha256=digest.hexdigest(),
            kept=kept,
            packed=kept is not None,
        ),
        version=PACKED_VERSION if kept is not None else FORMAT_VERSION,  # 4 only says what `kept` adds
        images=tuple(entries),
        redacted=redacted,
        packages=packages,
        pdbs=tuple(pdbs),
    )
    _atomic_write(out_path, lambda f: _write_zip(f, manifest, chunks(), blobs))
    not_found = tuple(
        sorted({m.name for m in report.modules if m.image_source and m.image_source.startswith("not found")})
    )
    return BundleSummary(
        out_path, os.path.getsize(out_path), manifest, tuple(sizes), not_found, report.verdict.headline
    )


def _original_image(found: LocatedImage, module: Module, store: Optional[ImageStore]) -> Optional[Tuple[int, str, str]]:
    """(size, sha256, where it was found) of the image file `found` was read from: the file
    here, or the one a bundle being re-bundled describes."""
    if found.path is not None:
        return _file_digest(found.path) + (found.source,)
    was = store.original_image(module) if found.source == "bundle" and store is not None else None
    return (was.size, was.sha256, was.found_in) if was is not None and was.found_in is not None else None


def _original_pdb(located: LocatedPdb, cv: CodeViewRecord, store: Optional[ImageStore]) -> Optional[Tuple[int, str]]:
    """(size, sha256) of the PDB file `located` was read from, here or as a bundle says."""
    if located.from_store:
        was = store.original_pdb(cv) if store is not None else None
        return (was.size, was.sha256) if was is not None else None
    return _file_digest(located.path) if located.path is not None else None


def _atomic_write(out_path: str, write: Callable[[IO[bytes]], None]) -> None:
    """Write through a temporary file in the same folder, renamed over `out_path` only once
    complete: a reader never sees half a bundle, and a failure leaves nothing behind."""
    try:
        write_replacing(out_path, write, binary=True)
    except OSError as e:
        raise BundleError(f"cannot write {out_path} ({e.strerror or e})") from None
