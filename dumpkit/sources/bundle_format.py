"""The bundle format (docs/bundle-format.md): a zip whose `manifest.json` names the dump and,
per module, the ranges of the original image file that the analysis read, and per PDB (named
by GUID and age) the ranges of the PDB file it read; the bytes of those ranges are one member
per file, concatenated in range order.

Read by sources/bundle.py (opening a bundle) and written by dumpkit/bundle (writing one).
Only data and its checks live here: the manifest as frozen dataclasses, its JSON (sorted,
compact, so the same bundle is written byte for byte the same) and a parser that refuses a
hostile manifest with one line saying what is wrong."""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional, Set, Tuple
from dumpkit.records import record

FORMAT_NAME = "dumpkit-bundle"
FORMAT_VERSION = 2  # 2 added `pdbs`, and is what a bundle of the whole dump is written as
# 3: `dump.kept`, the member the whole dump with zeros outside it (read, no longer written);
# 4: `dump.kept`, the member only the kept ranges back to back (bundle --only-used-memory)
PACKED_VERSION = 4
READABLE_VERSIONS = (1, 2, 3, 4)
MANIFEST = "manifest.json"
DUMP_MEMBER = "dump.dmp"
IMAGES_FOLDER = "images/"
PDBS_FOLDER = "pdbs/"

MAX_MANIFEST = 16 << 20  # bytes of manifest.json
MAX_MODULES = 1 << 16
MAX_RANGES = 1 << 20  # per module, and kept ranges of the dump
MAX_IMAGE_FILE = 4 << 30  # an original image file (PE32+ images are < 4 GiB)
MAX_IMAGE_BYTES = 1 << 30  # captured bytes over all modules and PDBs
MAX_PDB_FILE = 1 << 40  # an original PDB file (MSF 7.00 with 64 KiB blocks stays far below)
MAX_DUMP = 4 << 30  # bytes of dump a bundle stores: they are for sharing; more is refused on both sides
MAX_PACKED_DUMP = 1 << 40  # the original size of a dump whose kept pieces alone are stored
MAX_TEXT = 4096  # a name or path in the manifest

# Member names are ours: plain ASCII, no folders but images/, nothing a file system would
# read as a path. A reader never extracts anything, but a name outside this is a sign of a
# bundle not written by dumpkit and is refused.
_MEMBER_NAME = re.compile(r"^(?:manifest\.json|dump\.dmp|(?:images|pdbs)/[A-Za-z0-9][A-Za-z0-9._-]{0,200})$")


class BundleError(ValueError):
    """A bundle that cannot be used: one line, without the file's name (the caller adds it)."""


@record
class DumpEntry:
    name: str  # the dump's file name when it was bundled
    size: int
    sha256: str
    member: str = DUMP_MEMBER
    # (file offset, length) of the bytes that are the dump's, sorted and disjoint; the rest
    # is memory the analysis did not read. None: the whole dump.
    kept: Optional[Tuple[Tuple[int, int], ...]] = None
    # True (version 4): the member holds only the kept ranges, back to back; else the member
    # is the dump's layout, `size` bytes (zeros outside `kept`, version 3)
    packed: bool = False

    @property
    def stored(self) -> int:
        """Bytes of the member: what `sha256` covers."""
        return sum(n for _, n in self.kept) if self.packed and self.kept is not None else self.size


@record
class ImageEntry:
    """The captured part of one module's image file."""

    name: str  # the module's name as the dump records it
    base: int
    timestamp: int  # TimeDateStamp
    size_of_image: int
    path: str  # the path the dump recorded for the module
    file_size: int  # of the original image file
    file_sha256: str  # of the original image file
    source: str  # where the analysis found the file (image-path, symbol-store, ...)
    member: str
    ranges: Tuple[Tuple[int, int], ...]  # (file offset, length), sorted, disjoint

    @property
    def captured(self) -> int:
        return sum(n for _, n in self.ranges)


@record
class PdbEntry:
    """The captured part of one PDB file, named as a module's CodeView record names it."""

    name: str  # the PDB's file name (the CodeView record's path, without folders)
    guid: str  # as CodeViewRecord.guid writes it
    age: int
    file_size: int  # of the original PDB file
    file_sha256: str
    member: str
    ranges: Tuple[Tuple[int, int], ...]  # (file offset, length), sorted, disjoint

    @property
    def captured(self) -> int:
        return sum(n for _, n in self.ranges)


@record
class PackageEntry:
    """The installed Python distribution that owns a module's file, as found where the
    bundle was written (dumpkit.packages): the installation does not travel, this fact does."""

    module: str
    base: int
    name: str
    version: str
    record: str  # the dist-info folder whose RECORD lists the module's file


@record
class Manifest:
    dumpkit_version: str
    dump: DumpEntry
    images: Tuple[ImageEntry, ...]
    redacted: Tuple[str, ...] = ()  # what --redact removed, one line each
    version: int = FORMAT_VERSION
    packages: Tuple[PackageEntry, ...] = ()
    pdbs: Tuple[PdbEntry, ...] = ()

    # what a target read from the bundle says of it (target.BundleManifest)
    @property
    def dump_name(self) -> str:
        return self.dump.name

    @property
    def kept(self) -> Optional[Tuple[Tuple[int, int], ...]]:
        return self.dump.kept


def member_name(index: int, module_name: str, folder: str = IMAGES_FOLDER) -> str:
    """images/NNN-NAME (or pdbs/NNN-NAME) with NAME reduced to safe characters (it comes
    from the dump)."""
    base = re.sub(r"[^A-Za-z0-9._-]", "_", module_name.replace("\\", "/").rsplit("/", 1)[-1])[:100]
    return f"{folder}{index:03d}-{base or 'module'}"


def check_member_name(name: str) -> None:
    if not _MEMBER_NAME.match(name) or ".." in name:
        raise BundleError(f"member {name[:200]!r} is not a name a dumpkit bundle uses (a path?)")


# ----------------------------------------------------------------------------- JSON
def manifest_json(m: Manifest) -> bytes:
    dump: Dict[str, Any] = {"member": m.dump.member, "name": m.dump.name, "size": m.dump.size, "sha256": m.dump.sha256}
    if m.version >= 3 and m.dump.kept is not None:
        dump["kept"] = [[off, n] for off, n in m.dump.kept]
    doc = {
        "format": FORMAT_NAME,
        "version": m.version,
        "dumpkit_version": m.dumpkit_version,
        "dump": dump,
        "redacted": list(m.redacted),
        "packages": [
            {"module": p.module, "base": f"{p.base:#x}", "name": p.name, "version": p.version, "record": p.record}
            for p in m.packages
        ],
        "modules": [
            {
                "name": i.name,
                "base": f"{i.base:#x}",
                "timestamp": f"{i.timestamp:#010x}",
                "size_of_image": f"{i.size_of_image:#x}",
                "path": i.path,
                "file": {"size": i.file_size, "sha256": i.file_sha256, "found_in": i.source},
                "member": i.member,
                "ranges": [[off, n] for off, n in i.ranges],
            }
            for i in m.images
        ],
    }
    if m.version >= 2:
        doc["pdbs"] = [
            {
                "name": p.name,
                "guid": p.guid,
                "age": p.age,
                "file": {"size": p.file_size, "sha256": p.file_sha256},
                "member": p.member,
                "ranges": [[off, n] for off, n in p.ranges],
            }
            for p in m.pdbs
        ]
    return (json.dumps(doc, sort_keys=True, indent=1, ensure_ascii=True) + "\n").encode("ascii")


def _get(obj: Dict[str, Any], key: str, kind: type, where: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise BundleError(f"manifest: {where} has no {key!r}")
    value: Any = obj[key]
    if (kind is int and isinstance(value, bool)) or not isinstance(value, kind):
        raise BundleError(f"manifest: {where}.{key} is not a {kind.__name__}")
    if isinstance(value, str) and len(value) > MAX_TEXT:
        raise BundleError(f"manifest: {where}.{key} is longer than {MAX_TEXT} characters")
    return value


def _number(obj: Dict[str, Any], key: str, where: str, limit: int) -> int:
    """An integer written as a number or as a hex string ("0x...")."""
    raw = obj.get(key) if isinstance(obj, dict) else None
    value: Optional[int] = None
    if isinstance(raw, int) and not isinstance(raw, bool):
        value = raw
    elif isinstance(raw, str) and re.match(r"^0x[0-9a-fA-F]{1,16}$", raw):
        value = int(raw, 16)
    if value is None:
        raise BundleError(f"manifest: {where}.{key} is missing or not a number")
    if not 0 <= value <= limit:
        raise BundleError(f"manifest: {where}.{key} = {value} is out of range")
    return value


def _sha(obj: Dict[str, Any], key: str, where: str) -> str:
    value = _get(obj, key, str, where)
    if not re.match(r"^[0-9a-f]{64}$", value):
        raise BundleError(f"manifest: {where}.{key} is not a sha256 in hex")
    return value


def _ranges(raw: Any, where: str, file_size: int, name: str = "ranges") -> Tuple[Tuple[int, int], ...]:
    if not isinstance(raw, list):
        raise BundleError(f"manifest: {where}.{name} is not a list")
    if len(raw) > MAX_RANGES:
        raise BundleError(f"manifest: {where} has {len(raw)} {name} (at most {MAX_RANGES})")
    out: List[Tuple[int, int]] = []
    end = 0
    for k, r in enumerate(raw):
        if not isinstance(r, list) or len(r) != 2 or not all(isinstance(x, int) and not isinstance(x, bool) for x in r):
            raise BundleError(f"manifest: {where}.{name}[{k}] is not [offset, length]")
        off, n = r
        if off < 0 or n <= 0 or off + n > file_size:
            raise BundleError(f"manifest: {where}.{name}[{k}] ({off:#x}, +{n:#x}) is outside the {file_size}-byte file")
        if off < end:
            raise BundleError(f"manifest: {where}.{name}[{k}] at {off:#x} overlaps or precedes the range before it")
        out.append((off, n))
        end = off + n
    return tuple(out)


def _claim(members: Set[str], member: str, where: str, total: int) -> int:
    """Check a file entry's member name (ours, not used yet) and the captured bytes so far
    (`total`, returned) against the limit."""
    check_member_name(member)
    if member in members:
        raise BundleError(f"manifest: {where}.member {member!r} is used twice")
    members.add(member)
    if total > MAX_IMAGE_BYTES:
        raise BundleError(f"manifest: more than {MAX_IMAGE_BYTES} bytes of image and PDB pages")
    return total


def parse_manifest(raw: bytes) -> Manifest:
    """The manifest, checked: every field typed and bounded, ranges sorted and disjoint,
    member names ours. Raises BundleError."""
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise BundleError(f"manifest.json is not JSON ({str(e)[:200]})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
        raise BundleError(f"manifest.json does not say format {FORMAT_NAME!r}")
    version = doc.get("version")
    if isinstance(version, bool) or version not in READABLE_VERSIONS:
        readable = ", ".join(str(v) for v in READABLE_VERSIONS)
        raise BundleError(f"bundle format version {str(version)[:20]} is not one this dumpkit reads ({readable})")
    d = _get(doc, "dump", dict, "manifest")
    packed = version >= PACKED_VERSION
    size = _number(d, "size", "dump", MAX_PACKED_DUMP if packed else MAX_DUMP)
    kept: Optional[Tuple[Tuple[int, int], ...]] = None
    if version >= 3:  # a version 3 or 4 bundle says which bytes of its dump are real
        kept = _ranges(d.get("kept"), "dump", size, "kept")
        if packed and sum(n for _, n in kept) > MAX_DUMP:
            raise BundleError(f"manifest: dump.kept holds more than {MAX_DUMP} bytes")
    dump = DumpEntry(
        name=_get(d, "name", str, "dump"),
        size=size,
        sha256=_sha(d, "sha256", "dump"),
        member=_get(d, "member", str, "dump"),
        kept=kept,
        packed=packed,
    )
    check_member_name(dump.member)
    modules = _get(doc, "modules", list, "manifest")
    if len(modules) > MAX_MODULES:
        raise BundleError(f"manifest: {len(modules)} modules (at most {MAX_MODULES})")
    images: List[ImageEntry] = []
    members = {dump.member}
    total = 0
    for k, m in enumerate(modules):
        where = f"modules[{k}]"
        f = _get(m, "file", dict, where)
        file_size = _number(f, "size", f"{where}.file", MAX_IMAGE_FILE)
        entry = ImageEntry(
            name=_get(m, "name", str, where),
            base=_number(m, "base", where, (1 << 64) - 1),
            timestamp=_number(m, "timestamp", where, (1 << 32) - 1),
            size_of_image=_number(m, "size_of_image", where, (1 << 32) - 1),
            path=_get(m, "path", str, where),
            file_size=file_size,
            file_sha256=_sha(f, "sha256", f"{where}.file"),
            source=_get(f, "found_in", str, f"{where}.file"),
            member=_get(m, "member", str, where),
            ranges=_ranges(m.get("ranges") if isinstance(m, dict) else None, where, file_size),
        )
        total = _claim(members, entry.member, where, total + entry.captured)
        images.append(entry)
    pdbs: List[PdbEntry] = []
    raw_pdbs = doc.get("pdbs", []) if version >= 2 else []
    if not isinstance(raw_pdbs, list) or len(raw_pdbs) > MAX_MODULES:
        raise BundleError(f"manifest: pdbs is not a list of at most {MAX_MODULES} entries")
    for k, p in enumerate(raw_pdbs):
        where = f"pdbs[{k}]"
        f = _get(p, "file", dict, where)
        file_size = _number(f, "size", f"{where}.file", MAX_PDB_FILE)
        guid = _get(p, "guid", str, where)
        if not re.match(r"^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$", guid):
            raise BundleError(f"manifest: {where}.guid is not a GUID")
        pdb = PdbEntry(
            name=_get(p, "name", str, where),
            guid=guid,
            age=_number(p, "age", where, (1 << 32) - 1),
            file_size=file_size,
            file_sha256=_sha(f, "sha256", f"{where}.file"),
            member=_get(p, "member", str, where),
            ranges=_ranges(p.get("ranges") if isinstance(p, dict) else None, where, file_size),
        )
        total = _claim(members, pdb.member, where, total + pdb.captured)
        pdbs.append(pdb)
    redacted = doc.get("redacted", [])
    if not isinstance(redacted, list) or not all(isinstance(x, str) and len(x) <= MAX_TEXT for x in redacted):
        raise BundleError("manifest: redacted is not a list of strings")
    raw_packages = doc.get("packages", [])
    if not isinstance(raw_packages, list) or len(raw_packages) > MAX_MODULES:
        raise BundleError(f"manifest: packages is not a list of at most {MAX_MODULES} entries")
    packages = tuple(
        PackageEntry(
            module=_get(p, "module", str, f"packages[{k}]"),
            base=_number(p, "base", f"packages[{k}]", (1 << 64) - 1),
            name=_get(p, "name", str, f"packages[{k}]"),
            version=_get(p, "version", str, f"packages[{k}]"),
            record=_get(p, "record", str, f"packages[{k}]"),
        )
        for k, p in enumerate(raw_packages)
    )
    return Manifest(
        dumpkit_version=_get(doc, "dumpkit_version", str, "manifest"),
        dump=dump,
        images=tuple(images),
        redacted=tuple(redacted[:64]),
        version=version,
        packages=packages,
        pdbs=tuple(pdbs),
    )
