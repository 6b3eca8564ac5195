"""The streams of a minidump file, read into one frozen record (`read_streams`).

The stream directory, bounds checks, the string budget and the fixed-layout records
(struct, each from a slice already bounds-checked) are ours; stream names come from the
`minidump` package's constants. That package alone raises on stream types it does not know
and on reads that cross memory ranges; here an unknown stream is listed and skipped, and
damage in one stream is a soft error that leaves the others readable. What memory the
target serves from the ranges read here is `sources/minidump.py`'s.
"""

from __future__ import annotations

import operator
import re
import struct
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, overload

from minidump.constants import MINIDUMP_STREAM_TYPE

from dumpkit.console import shell_quote
from dumpkit.context import parse_context
from dumpkit.function_tables import FunctionTable
from dumpkit.problems import Problems
from dumpkit.records import record, replace
from dumpkit.sources.memory import Buffer
from dumpkit.sources.memory_counters import parse_system_memory, parse_vm_counters
from dumpkit.target import (
    X86_FAMILY,
    CodeViewRecord,
    DumpError,
    DumpInfo,
    ExceptionInfo,
    Handle,
    MemoryRegion,
    Module,
    ProcessInfo,
    ProcessMemory,
    Registers,
    StreamEntry,
    SystemInfo,
    SystemMemory,
    Thread,
    UnloadedModule,
)
from dumpkit.words import listing, plural


MDMP_SIGNATURE = 0x504D444D  # "MDMP"
MDMP_VERSION = 0xA793

# Streams that other writers add; named so a listing is readable. Not an error to meet.
EXTRA_STREAM_NAMES = {
    0x18: "ThreadNamesStream",
    0xFFF0: "WineHostLibraries",
    0x43500001: "CrashpadInfo",
    0x47670001: "BreakpadInfo",
    0x47670002: "BreakpadAssertionInfo",
    0x47670003: "LinuxCpuInfo",
    0x4D7A0001: "MozLinuxLimits",
    0x53740001: "SentryEvent",
}

# Fixed-layout records (minidumpapiset.h), read with struct: the `minidump` package's
# classes for them live in its `minidump.streams` package, whose __init__ imports all its
# stream modules and logging (~7.5 ms of every start-up) for two records.
# MINIDUMP_THREAD: ThreadId, SuspendCount, PriorityClass, Priority, Teb, Stack
# (StartOfMemoryRange, DataSize, Rva), ThreadContext (DataSize, Rva).
_THREAD = struct.Struct("<IIIIQQIIII")
# MINIDUMP_MODULE, 108 bytes: BaseOfImage, SizeOfImage, CheckSum, TimeDateStamp,
# ModuleNameRva; VS_FIXEDFILEINFO's dwSignature, dwStrucVersion and file and product versions
# (MS, LS), then its last seven fields (28 bytes, unused); the CvRecord (DataSize, Rva); the
# MiscRecord and two reserved quadwords (24 bytes, unused).
_MODULE = struct.Struct("<QIIIIIIIIII28xII24x")
HEADER_SIZE = 32  # MINIDUMP_HEADER: nothing a stream points at can start inside it
MAX_HANDLE_NAME = 512  # characters of a handle's type or object name kept


def _printable(text: Optional[str]) -> Optional[str]:
    """A name from the dump, as reports may show it: printable characters, bounded."""
    if not text:
        return None
    return "".join(c if c.isprintable() else "?" for c in text[:MAX_HANDLE_NAME])


MAX_HANDLES = 1 << 16  # handles kept (a process rarely has more than a few thousand)
MAX_COMMENT = 16384  # characters of a writer's comment kept (ProcDump writes a few lines)
MAX_RECORDS = 1 << 23  # per list stream, beyond what its bytes hold; anything beyond is reported and skipped
MAX_STRING_BYTES = 64 * 1024
# All names together: thousands of 64 KiB module paths would make every report hundreds
# of MB. Past this budget names are cut to SMALL_STRING_BYTES (with a soft error).
STRING_BUDGET = 4 << 20
SMALL_STRING_BYTES = 1024
MAX_NAME_COMPONENT = 255


# A plain dict: a hostile directory has thousands of entries, and an enum lookup that
# fails costs an exception each.
_KNOWN_STREAMS = {member.value: member.name for member in MINIDUMP_STREAM_TYPE}


# Dumps are shared compressed (the sample dumps ship as .xz): name the format and the
# command that unpacks it instead of "not a minidump".
_COMPRESSED = (
    (b"\xfd7zXZ\x00", "xz-compressed", "xz -dk {}"),
    (b"\x1f\x8b", "gzip-compressed", "gunzip -k {}"),
    (b"BZh", "bzip2-compressed", "bunzip2 -k {}"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed", "zstd -d {}"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive", "7z x {}"),
    (b"PK\x03\x04", "a zip archive", "unzip {}"),
    (b"MSCF", "a cabinet (.cab) archive", "expand {} OUT.dmp"),
)


def compressed_format(head: bytes) -> Optional[Tuple[str, str]]:
    """(what the file is, command template) when `head` starts like a compressed file."""
    for magic, kind, how in _COMPRESSED:
        if head.startswith(magic):
            return kind, how
    return None


def stream_name(stream_type: int) -> Tuple[str, bool]:
    known = _KNOWN_STREAMS.get(stream_type)
    if known is not None:
        return known, True
    if stream_type in EXTRA_STREAM_NAMES:
        return EXTRA_STREAM_NAMES[stream_type], stream_type == 0x18
    return f"Unknown({stream_type:#x})", False


_VERSIONS: Dict[Tuple[int, int], str] = {}  # a dump's modules share a few versions (the OS's)


def _fmt_version(ms: int, ls: int) -> str:
    text = _VERSIONS.get((ms, ls))
    if text is None:
        if len(_VERSIONS) >= 4096:
            _VERSIONS.clear()
        text = _VERSIONS[ms, ls] = f"{ms >> 16}.{ms & 0xFFFF}.{ls >> 16}.{ls & 0xFFFF}"
    return text


# CodeView records read, by their bytes: a fleet's dumps of one program name the same PDBs
# (bounded: cleared when full)
_CODEVIEWS: Dict[bytes, Optional[CodeViewRecord]] = {}
_CODEVIEW_KEPT_BYTES = 600  # 24 bytes of RSDS header and a path of up to MAX_PATH (260) characters


def _read_codeview(raw: bytes) -> Optional[CodeViewRecord]:
    """The PDB a module's CodeView record names (RSDS or NB10), None for any other kind."""
    if raw[:4] == b"RSDS" and len(raw) >= 24:
        name = raw[24:].split(b"\0", 1)[0].decode("utf-8", "replace")
        return CodeViewRecord(name, _guid(raw[4:20]), struct.unpack_from("<I", raw, 20)[0])
    if raw[:4] == b"NB10" and len(raw) >= 16:
        sig, age = struct.unpack_from("<II", raw, 8)
        name = raw[16:].split(b"\0", 1)[0].decode("utf-8", "replace")
        return CodeViewRecord(name, f"{sig:08X}", age)
    return None


def _guid(raw: bytes) -> str:
    d1, d2, d3 = struct.unpack_from("<IHH", raw)
    d4 = raw[8:16].hex().upper()
    return f"{d1:08X}-{d2:04X}-{d3:04X}-{d4[:4]}-{d4[4:]}"


_STRUCT_NEED = re.compile(r"at least (\d+) bytes")


def _plain_problem(e: Exception, available: int) -> str:
    """A parser's exception in words a user can act on (struct's own message names
    unpack_from and buffer sizes)."""
    if isinstance(e, struct.error):
        need = _STRUCT_NEED.search(str(e))
        if need and int(need.group(1)) > available:
            return f"cut short: {available} bytes, a record in it needs {int(need.group(1))}"
        return f"cut short: a record runs past the stream's {available} bytes"
    return str(e)


class MemoryInfoRows(Sequence[MemoryRegion]):
    """The MemoryInfoList's entries by base address, a sequence of MemoryRegion records
    made when an entry is first asked for: a process maps thousands of regions, and most
    analyses only count them (the stack budget reads the map, for a thread whose TEB is not
    in the dump). The stream's bytes (a copy, not a view of the mapped file) are kept until
    then."""

    __slots__ = ("_count", "_data", "_header", "_size", "_regions")

    def __init__(self, data: bytes = b"", header: int = 0, size: int = 48, count: int = 0):
        self._count = count
        self._data, self._header, self._size = data, header, size
        self._regions: Optional[List[MemoryRegion]] = None if count else []

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> MemoryRegion: ...

    @overload
    def __getitem__(self, index: slice) -> List[MemoryRegion]: ...

    def __getitem__(self, index):
        return self._read()[index]

    def __iter__(self) -> Iterator[MemoryRegion]:
        return iter(self._read())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and self._read() == list(other)

    __hash__ = None  # type: ignore[assignment]  # compared by content, as a list is

    def __repr__(self) -> str:
        return f"MemoryInfoRows({self._read()!r})"

    def _read(self) -> List[MemoryRegion]:
        if self._regions is None:
            # Read with struct, not the package's MINIDUMP_MEMORY_INFO.parse: a parse through
            # BytesIO per region was the largest cost of analysing a small dump (issue #34).
            # Layout (minidumpapiset.h): BaseAddress, AllocationBase, AllocationProtect, (pad),
            # RegionSize, State, Protect, Type.
            data, header, size, count = self._data, self._header, self._size, self._count
            if size == 48:  # every writer's: the entries read in one pass (a 4-byte tail each)
                rows: Iterable[Tuple[int, ...]] = struct.iter_unpack(
                    "<QQI4xQIII4x", memoryview(data)[header : header + 48 * count]
                )
            else:
                entry = struct.Struct("<QQI4xQIII")
                rows = (entry.unpack_from(data, header + size * i) for i in range(count))
            self._regions = sorted((MemoryRegion(*row) for row in rows), key=_BASE)
            self._data = b""
        return self._regions


_BASE = operator.attrgetter("base")


@record
class MinidumpStreams:
    """What a minidump's streams say, read once by `read_streams`; a `MinidumpTarget` is
    built from it. `memory_ranges` is every range the memory lists hold that lies in the
    file, (address, size, file offset) in file order: the parser's own list, handed over
    (the target sorts it in place; a copy of a million ranges is not free).
    `stack_ranges`: the thread list's stacks, which some writers leave out of the memory
    list (the target adds those it lacks with `add_range`). `range_problems` and
    `missing_lists` are said after the problems of the memory built from the ranges."""

    dump: DumpInfo
    system: Optional[SystemInfo]
    process: Optional[ProcessInfo]
    build_string: Optional[str]
    xstate_enabled_features: Optional[int]
    threads: List[Thread]
    modules: List[Module]
    unloaded_modules: List[UnloadedModule]
    exception: Optional[ExceptionInfo]
    memory_info: MemoryInfoRows
    function_tables: FunctionTable
    memory_ranges: List[Tuple[int, int, int]]
    stack_ranges: Tuple[Tuple[int, int, int], ...]
    range_problems: Tuple[str, ...]
    missing_lists: Tuple[str, ...]
    comment: Optional[str] = None  # CommentStreamA / CommentStreamW: what the dump's writer said
    handles: Tuple[Handle, ...] = ()  # HandleDataStream: the process's open handles
    process_memory: Optional[ProcessMemory] = None  # ProcessVmCountersStream
    system_memory: Optional[SystemMemory] = None  # SystemMemoryInfoStream


def read_streams(data: Buffer, size: int, path: str, problems: Problems) -> MinidumpStreams:
    """Read the minidump `data` (`size` bytes, named `path` in messages); what the streams
    hold that is damaged is added to `problems`, in file-reading order. Raises DumpError
    (one line) when the file is no minidump or no stream in it could be read."""
    return _StreamReader(data, size, path, problems).read()


def add_range(
    ranges: List[Tuple[int, int, int]],
    counts: Dict[Tuple[str, str], Tuple[int, int]],
    file_size: int,
    start: int,
    size: int,
    offset: int,
    what: str,
    past_end_reported: bool = False,
) -> None:
    """Append the memory range at `offset` to `ranges` as far as it lies in the file; a
    range that does not is counted in `counts` (per list and kind, with the first
    address: a damaged list can have a million), said by `range_problem_lines`."""
    if size == 0:
        return
    if offset >= file_size:
        if not past_end_reported:
            _count(counts, what, "point past the end of the file", start)
        return
    if offset + size > file_size:
        if not past_end_reported:
            _count(counts, what, "are truncated by the end of the file", start)
        size = file_size - offset
    if start + size > 1 << 64:
        _count(counts, what, "wrap the address space", start)
        return
    ranges.append((start, size, offset))


def _count(counts: Dict[Tuple[str, str], Tuple[int, int]], what: str, problem: str, start: int) -> None:
    key = (what, problem)
    count, first = counts.get(key, (0, start))
    counts[key] = (count + 1, first)


def range_problem_lines(counts: Dict[Tuple[str, str], Tuple[int, int]]) -> List[str]:
    return [
        f"{what}: {count} range(s) {problem} (the first at {first:#x})"
        for (what, problem), (count, first) in counts.items()
    ]


class _StreamReader:
    """One reading of one file: the state the streams share (the CPU, for contexts; the
    thread names, for threads; the string budget) while `read` builds the record."""

    def __init__(self, data: Buffer, size: int, path: str, problems: Problems):
        self._data = data
        self._size = size
        self.path = path
        self.problems = problems
        self.system: Optional[SystemInfo] = None
        self.process: Optional[ProcessInfo] = None
        self.threads: List[Thread] = []
        self.modules: List[Module] = []
        self.unloaded_modules: List[UnloadedModule] = []
        self.exception: Optional[ExceptionInfo] = None
        self.memory_info = MemoryInfoRows()
        self.function_tables = FunctionTable()
        self.build_string: Optional[str] = None
        self.xstate_enabled_features: Optional[int] = None
        self.comments: List[str] = []
        self.handles: List[Handle] = []
        self.process_memory: Optional[ProcessMemory] = None
        self.system_memory: Optional[SystemMemory] = None
        self._thread_names: Dict[int, str] = {}
        self._string_budget = STRING_BUDGET
        self._mem_ranges: List[Tuple[int, int, int]] = []
        self._stack_ranges: List[Tuple[int, int, int]] = []
        self._range_problems: Dict[Tuple[str, str], Tuple[int, int]] = {}

    def _slice(self, offset: int, size: int, what: str) -> bytes:
        """Bytes of the file, clipped to its end; clipping is a soft error."""
        if offset >= self._size:
            self.problems.add(f"{what}: points past the end of the file (offset {offset:#x})")
            return b""
        end = offset + size
        if end > self._size:
            self.problems.add(f"{what}: truncated ({end - self._size} of {size} bytes missing)")
            end = self._size
        return self._data[offset:end]

    def _string(self, rva: int, what: str) -> Optional[str]:
        if rva == 0 or rva + 4 > self._size:
            if rva:
                self.problems.add(f"{what}: name points past the end of the file")
            return None
        (length,) = struct.unpack("<I", self._data[rva : rva + 4])
        cap = MAX_STRING_BYTES if self._string_budget > 0 else SMALL_STRING_BYTES
        if length > cap:
            self.problems.add(f"{what}: name of {length} bytes truncated to {cap}")
            length = cap
        raw = self._data[rva + 4 : min(rva + 4 + length, self._size)]
        self._string_budget -= len(raw)
        return raw.decode("utf-16-le", errors="replace")

    def read(self) -> MinidumpStreams:
        if self._size < HEADER_SIZE:
            raise DumpError(f"file is {self._size} bytes, too small for a minidump header")
        sig, ver, nstreams, dir_rva, _cksum, stamp, flags = struct.unpack("<IIIIIIQ", self._data[:HEADER_SIZE])
        if sig != MDMP_SIGNATURE:
            if self._data[:4] in (b"PAGE", b"PAGEDU64"[:4]):
                raise DumpError("this is a kernel (PAGEDUMP) crash dump, not a user-mode minidump")
            packed = compressed_format(self._data[:8])
            if packed is not None:
                kind, how = packed
                raise DumpError(
                    f"the file is {kind}, not a minidump: decompress it first ({how.format(shell_quote(self.path))})"
                )
            raise DumpError(f"not a minidump (signature {self._data[:4]!r}, expected b'MDMP')")
        if ver & 0xFFFF != MDMP_VERSION:
            self.problems.add(f"header: unexpected version {ver & 0xFFFF:#x} (expected {MDMP_VERSION:#x})")
        fit = max(0, (self._size - dir_rva) // 12) if dir_rva < self._size else 0
        if fit == 0 and nstreams:
            raise DumpError(f"stream directory at {dir_rva:#x} lies outside the {self._size}-byte file")
        entries: List[StreamEntry] = []
        directory = self._data[dir_rva : dir_rva + 12 * min(nstreams, fit)]
        for i, (stype, dsize, rva) in enumerate(struct.iter_unpack("<III", directory)):
            name, known = stream_name(stype)
            entries.append(StreamEntry(i, stype, name, rva, dsize, known))
        self.dump = DumpInfo(self.path, self._size, ver, flags, stamp, tuple(entries))
        # One line that says what all the "past the end" lines below have in common.
        expected = self._expected_size(dir_rva, nstreams, entries)
        self._truncation: Optional[str] = None
        if expected > self._size:
            self._truncation = (
                f"file is truncated: {self._size:,} bytes, the stream directory expects at least {expected:,}"
            )
            self.problems.add(self._truncation)
        if nstreams > fit:
            self.problems.add(f"header: claims {nstreams} streams but only {fit} fit in the file")

        by_type: Dict[int, StreamEntry] = {}
        duplicates: List[str] = []
        for e in entries:
            if e.type == 0:
                continue
            if e.type in by_type:
                duplicates.append(e.name)
                continue
            by_type[e.type] = e
        if duplicates:
            # One line, however many: a garbage directory can repeat thousands of types.
            shown = ", ".join(dict.fromkeys(duplicates[:5]))
            more = f" and {len(duplicates) - 5} more" if len(duplicates) > 5 else ""
            self.problems.add(
                f"stream directory: {len(duplicates)} duplicate entr"
                f"{'y' if len(duplicates) == 1 else 'ies'} ({shown}{more}); the first of each type is used"
            )

        handlers: List[Tuple[int, Callable[[bytes], None]]] = [
            (7, self._parse_system_info),  # first: the context layout depends on the CPU
            (15, self._parse_misc_info),
            (5, self._parse_memory_list),
            (9, self._parse_memory64_list),
            (24, self._parse_thread_names),
            (3, self._parse_thread_list),
            (4, self._parse_module_list),
            (14, self._parse_unloaded_modules),
            (6, self._parse_exception),
            (16, self._parse_memory_info),
            (13, self._parse_function_table),
            (10, self._parse_comment_a),
            (11, self._parse_comment_w),
            (12, self._parse_handle_data),
            (21, self._parse_system_memory),
            (22, self._parse_vm_counters),
        ]
        handled = {stype for stype, _h in handlers}
        beyond = [
            e.name
            for e in entries
            if e.type and not (e.type in handled and by_type.get(e.type) is e) and e.offset + e.size > self._size
        ]
        if beyond:
            # Streams dumpkit does not parse are still part of the file: one lying outside it
            # is damage (a garbage directory, a cut copy) the reader must hear about.
            self.problems.add(
                f"stream directory: {plural(len(beyond), 'stream')} dumpkit does not read "
                f"{'lies' if len(beyond) == 1 else 'lie'} (partly) past the end of the {self._size:,}-byte file "
                f"({listing(list(dict.fromkeys(beyond)), 5)})"
            )
        unreadable: List[Tuple[int, str]] = []
        for stype, handler in handlers:
            entry = by_type.get(stype)
            if entry is None:
                continue
            problem = self._read_stream(entry, handler)
            if problem is not None:
                unreadable.append((stype, problem))
        self.dump = replace(self.dump, unreadable=tuple(unreadable))
        attempted = sum(1 for stype, _h in handlers if stype in by_type)
        if attempted and len(unreadable) == attempted:
            # Nothing at all came out of the file: a report would be empty, not partial.
            stype, problem = unreadable[0]
            why = self._truncation or f"every stream is damaged ({by_type[stype].name}: {problem})"
            raise DumpError(f"{why}; no stream in it could be read")
        # Unknown streams are listed (DumpInfo.streams, `known=False`) but are no error:
        # Wine, Breakpad and Crashpad all add streams of their own.
        missing_lists = tuple(
            f"dump has no {what} list" for stype, what in ((3, "thread"), (4, "module")) if stype not in by_type
        )
        return MinidumpStreams(
            dump=self.dump,
            system=self.system,
            process=self.process,
            build_string=self.build_string,
            xstate_enabled_features=self.xstate_enabled_features,
            threads=self.threads,
            modules=self.modules,
            unloaded_modules=self.unloaded_modules,
            exception=self.exception,
            memory_info=self.memory_info,
            function_tables=self.function_tables,
            memory_ranges=self._mem_ranges,
            stack_ranges=tuple(self._stack_ranges),
            range_problems=tuple(range_problem_lines(self._range_problems)),
            missing_lists=missing_lists,
            comment="\n".join(self.comments) or None,
            handles=tuple(self.handles),
            process_memory=self.process_memory,
            system_memory=self.system_memory,
        )

    def _expected_size(self, dir_rva: int, claimed: int, entries: List[StreamEntry]) -> int:
        """How long the file must be for its directory and streams to fit; 0 when nothing
        says the file was cut. A stream that starts inside the file but claims more bytes
        than it has is damage of that stream (its own soft error), not a cut file; entries
        of unknown types are left out (in a garbage directory they are most of it)."""
        dir_end = dir_rva + 12 * min(claimed, len(entries) + 1)
        streams = [e for e in entries if e.type and e.known]
        if dir_end <= self._size and all(e.offset < self._size for e in streams):
            return 0
        return max([dir_end] + [e.offset + e.size for e in streams])

    def _read_stream(self, entry: StreamEntry, handler: Callable[[bytes], None]) -> Optional[str]:
        """Run one stream's parser; None when it ran, else why it could not (also a soft
        error). A stream that starts past the end of the file is reported once, here."""
        if entry.offset >= self._size:
            why = f"lies past the end of the file (offset {entry.offset:#x})"
            self.problems.add(f"{entry.name}: {why}")
            return why
        data = self._slice(entry.offset, entry.size, entry.name)
        try:
            handler(data)
        except (struct.error, ValueError, IndexError, OverflowError) as e:
            why = _plain_problem(e, len(data))
            self.problems.add(f"{entry.name}: unreadable ({why})")
            return why
        return None

    def _records(self, data: bytes, header: int, count: int, size: int, what: str) -> int:
        """How many `size`-byte records after `header` bytes are really present."""
        fit = max(0, (len(data) - header) // size) if size else 0
        if count > fit:
            self.problems.add(f"{what}: claims {count} entries but holds only {fit}")
            count = fit
        if count > MAX_RECORDS:
            self.problems.add(f"{what}: {count} entries; only the first {MAX_RECORDS} are read")
            count = MAX_RECORDS
        return count

    def _parse_system_info(self, data: bytes) -> None:
        if len(data) < 32:
            raise ValueError(f"{len(data)} bytes, need at least 32")
        arch, level, rev, nproc, ptype, major, minor, build, platform, csd_rva, _suite, _r2 = struct.unpack_from(
            "<HHHBBIIIIIHH", data, 0
        )
        vendor = None
        ver_info = feat = amd = 0
        pf = (0, 0)
        if len(data) >= 56:
            raw_vendor = data[32:44]
            pf = struct.unpack_from("<QQ", data, 32)
            if arch in X86_FAMILY and all(0x20 <= b < 0x7F for b in raw_vendor):
                vendor = raw_vendor.decode("ascii")
                ver_info, feat, amd = struct.unpack_from("<III", data, 44)
        wine = self._wine_marker()
        csd = self._string(csd_rva, "SystemInfo CSD version") or ""
        self.system = SystemInfo(
            processor_architecture=arch,
            processor_level=level,
            processor_revision=rev,
            number_of_processors=nproc,
            product_type=ptype,
            os_major=major,
            os_minor=minor,
            os_build=build,
            platform_id=platform,
            csd_version=csd,
            cpu_vendor=vendor,
            cpuid_version=ver_info,
            cpuid_features=feat,
            amd_extended_features=amd,
            processor_features=pf,
            wine_version=wine,
        )

    def _wine_marker(self) -> Optional[str]:
        """Wine writes "WINE", four u32s and NUL-separated strings (Wine version, host OS,
        host release) right after the 56-byte SystemInfo record, outside the stream."""
        entry = next((e for e in self.dump.streams if e.type == 7), None)
        if entry is None:
            return None
        at = entry.offset + entry.size
        tail = self._data[at : min(at + 256, self._size)]
        if tail[:4] != b"WINE":
            return None
        parts = [p.decode("ascii", "replace") for p in tail[20:].split(b"\0")[:3] if p]
        return " / ".join(parts) if parts else "unknown Wine"

    def _parse_misc_info(self, data: bytes) -> None:
        if len(data) < 24:
            raise ValueError(f"{len(data)} bytes, need at least 24")
        size, flags1, pid, ctime, utime, ktime = struct.unpack_from("<6I", data, 0)
        max_mhz = cur_mhz = None
        if len(data) >= 44 and flags1 & 0x4:
            max_mhz, cur_mhz = struct.unpack_from("<II", data, 24)
        self.process = ProcessInfo(
            pid=pid if flags1 & 1 else None,
            create_time=ctime if flags1 & 2 else None,
            user_time=utime if flags1 & 2 else None,
            kernel_time=ktime if flags1 & 2 else None,
            processor_max_mhz=max_mhz,
            processor_current_mhz=cur_mhz,
        )
        if len(data) >= 832 and flags1 & 0x100:
            raw = data[232 : 232 + 520]
            self.build_string = raw.decode("utf-16-le", "replace").split("\0", 1)[0] or None
        if len(data) >= 848:
            xsize, _ctx_size, enabled = struct.unpack_from("<IIQ", data, 832)
            if xsize:
                self.xstate_enabled_features = enabled

    def _parse_vm_counters(self, data: bytes) -> None:
        self.process_memory = parse_vm_counters(data)

    def _parse_system_memory(self, data: bytes) -> None:
        self.system_memory = parse_system_memory(data)

    def _parse_memory_list(self, data: bytes) -> None:
        (count,) = struct.unpack_from("<I", data, 0)
        count = self._records(data, 4, count, 16, "MemoryList")
        # Wine writes a range per unwind record: a million entries is real. Plain ranges
        # go straight in; only suspicious ones take the checked path.
        size, append = self._size, self._mem_ranges.append
        for entry in struct.iter_unpack("<QII", data[4 : 4 + 16 * count]):
            start, dsize, rva = entry
            if dsize and rva + dsize <= size and start + dsize <= 1 << 64:
                append(entry)  # the tuple as unpacked: (address, size, file offset)
            else:
                self._add_range(start, dsize, rva, "MemoryList")

    def _parse_memory64_list(self, data: bytes) -> None:
        count, base_rva = struct.unpack_from("<QQ", data, 0)
        count = self._records(data, 16, count, 16, "Memory64List")
        off = base_rva
        size, append = self._size, self._mem_ranges.append
        for start, dsize in struct.iter_unpack("<QQ", data[16 : 16 + 16 * count]):
            if dsize and off + dsize <= size and start + dsize <= 1 << 64:
                append((start, dsize, off))
            else:
                self._add_range(start, dsize, off, "Memory64List")
            off += dsize

    def _add_range(self, start: int, size: int, offset: int, what: str) -> None:
        add_range(self._mem_ranges, self._range_problems, self._size, start, size, offset, what)

    def _parse_handle_data(self, data: bytes) -> None:
        """MINIDUMP_HANDLE_DATA_STREAM: a 16-byte header (its own size, each descriptor's,
        their count), then MINIDUMP_HANDLE_DESCRIPTOR(_2)s of 32 (40) bytes: the handle, the
        RVAs of its type's and object's names, then counts dumpkit does not use."""
        if len(data) < 16:
            raise ValueError(f"{len(data)} bytes, need at least 16")
        header, size, count, _reserved = struct.unpack_from("<IIII", data)
        if header < 16 or size < 32:
            raise ValueError(f"header of {header} bytes, descriptors of {size}: need 16 and 32 at least")
        count = min(self._records(data, header, count, size, "HandleDataStream"), MAX_HANDLES)
        for i in range(count):
            value, type_rva, name_rva = struct.unpack_from("<QII", data, header + i * size)
            type_name = self._string(type_rva, f"handle {value:#x}") if type_rva else None
            object_name = self._string(name_rva, f"handle {value:#x}") if name_rva else None
            self.handles.append(Handle(value, _printable(type_name), _printable(object_name)))

    def _parse_comment_a(self, data: bytes) -> None:
        self._comment(data[:MAX_COMMENT].split(b"\0", 1)[0].decode("latin-1"))

    def _parse_comment_w(self, data: bytes) -> None:
        self._comment(data[: 2 * MAX_COMMENT].decode("utf-16-le", "replace").split("\0", 1)[0])

    def _comment(self, text: str) -> None:
        # a writer's words, shown in reports: printable characters only
        text = "".join(c if c.isprintable() or c in "\n\t" else "?" for c in text).strip()
        if text:
            self.comments.append(text)

    def _parse_thread_names(self, data: bytes) -> None:
        (count,) = struct.unpack_from("<I", data, 0)
        count = self._records(data, 4, count, 12, "ThreadNamesStream")
        for i in range(count):
            tid, rva = struct.unpack_from("<IQ", data, 4 + 12 * i)
            name = self._string(rva, f"thread {tid}")
            if name:
                self._thread_names[tid] = name

    def _context(self, size: int, rva: int, what: str) -> Optional[Registers]:
        if size == 0:
            self.problems.add(f"{what}: no register context")
            return None
        if rva < HEADER_SIZE:
            # offset 0 is how some writers leave a context out; the bytes there are the file
            # header ("MDMP", version...), which decoded as registers read as eip 0xa, esp 0x2
            self.problems.add(f"{what}: no register context (its location is offset {rva:#x}, the file header)")
            return None
        if rva >= self._size:
            self.problems.add(f"{what}: register context lies past the end of the file (offset {rva:#x})")
            return None
        raw = self._data[rva : min(rva + size, self._size)]
        arch = self.system.processor_architecture if self.system else None
        regs, problem = parse_context(raw, arch)
        if len(raw) < size:
            # One line: what the cut cost, not also what the parser then missed.
            lost = "unusable" if regs is None else "registers kept"
            self.problems.add(
                f"{what}: register context cut short by the end of the file ({len(raw)} of {size} bytes; {lost})"
            )
        elif problem:
            self.problems.add(f"{what}: {problem}")
        return regs

    def _parse_thread_list(self, data: bytes) -> None:
        (count,) = struct.unpack_from("<I", data, 0)
        count = self._records(data, 4, count, 48, "ThreadList")
        for i in range(count):
            tid, suspend, _priority_class, priority, teb, stack_start, stack_size, stack_rva, ctx_size, ctx_rva = (
                _THREAD.unpack_from(data, 4 + 48 * i)
            )
            ctx = self._context(ctx_size, ctx_rva, f"thread {tid}")
            self.threads.append(
                Thread(
                    tid=tid,
                    context=ctx,
                    stack_start=stack_start,
                    stack_size=stack_size,
                    teb=teb,
                    name=self._thread_names.get(tid),
                    suspend_count=suspend,
                    priority=priority,
                )
            )
            if stack_size:
                if stack_rva + stack_size > self._size:
                    # Said here, once per thread; not again when the range is added below.
                    self.problems.add(
                        f"thread {tid}: stack memory ({stack_size} bytes at offset "
                        f"{stack_rva:#x}) runs past the end of the file"
                    )
                self._stack_ranges.append((stack_start, stack_size, stack_rva))

    def _parse_module_list(self, data: bytes) -> None:
        (count,) = struct.unpack_from("<I", data, 0)
        count = self._records(data, 4, count, 108, "ModuleList")
        entries = _MODULE.iter_unpack(memoryview(data)[4 : 4 + 108 * count])
        for i, entry in enumerate(entries):
            base, image_size, checksum, stamp, name_rva, signature, _struc, *versions, cv_size, cv_rva = entry
            file_ms, file_ls, product_ms, product_ls = versions
            path = self._string(name_rva, f"module {i}") or f"<module {i}>"
            name = path.replace("/", "\\").rsplit("\\", 1)[-1]
            if len(name) > MAX_NAME_COMPONENT:
                # NTFS allows 255 characters per path component; the name is repeated
                # in every frame of every report, so a garbage one is cut here.
                self.problems.add(f"module {i}: file name of {len(name)} characters cut to {MAX_NAME_COMPONENT}")
                name = name[:MAX_NAME_COMPONENT]
            fv = pv = None
            if signature == 0xFEEF04BD:
                fv = _fmt_version(file_ms, file_ls)
                pv = _fmt_version(product_ms, product_ls)
            cv = self._codeview(cv_size, cv_rva, name)
            # positional, in Module's field order: made for every module of every dump
            self.modules.append(Module(name, path, base, image_size, stamp, checksum, fv, pv, cv))

    def _codeview(self, size: int, rva: int, what: str) -> Optional[CodeViewRecord]:
        if size < 24 or size > 4096:
            return None
        raw = self._slice(rva, size, f"module {what} CodeView record")
        if len(raw) > _CODEVIEW_KEPT_BYTES:  # a real one names a path; a longer one is read, not kept
            return _read_codeview(raw)
        try:
            return _CODEVIEWS[raw]
        except KeyError:
            pass
        if len(_CODEVIEWS) >= 4096:
            _CODEVIEWS.clear()
        cv = _CODEVIEWS[raw] = _read_codeview(raw)
        return cv

    def _parse_unloaded_modules(self, data: bytes) -> None:
        hsize, esize, count = struct.unpack_from("<III", data, 0)
        if esize < 24:
            raise ValueError(f"entry size {esize} too small")
        count = self._records(data, hsize, count, esize, "UnloadedModuleList")
        for i in range(count):
            base, size, _ck, stamp, name_rva = struct.unpack_from("<QIIII", data, hsize + esize * i)
            path = self._string(name_rva, f"unloaded module {i}") or ""
            self.unloaded_modules.append(UnloadedModule(path.replace("/", "\\").rsplit("\\", 1)[-1], base, size, stamp))

    def _parse_exception(self, data: bytes) -> None:
        if len(data) < 168:
            raise ValueError(f"{len(data)} bytes, need 168")
        tid, _align, code, flags, record, address, nparams, _u = struct.unpack_from("<IIIIQQII", data, 0)
        params = struct.unpack_from("<15Q", data, 40)
        if nparams > 15:
            self.problems.add(f"ExceptionStream: claims {nparams} parameters; at most 15 exist")
            nparams = 15
        csize, crva = struct.unpack_from("<II", data, 160)
        ctx = self._context(csize, crva, "exception")
        self.exception = ExceptionInfo(code, flags, address, tuple(params[:nparams]), tid, ctx, record != 0)

    def _parse_memory_info(self, data: bytes) -> None:
        hsize, esize, count = struct.unpack_from("<IIQ", data, 0)
        if esize < 48:
            raise ValueError(f"entry size {esize} too small")
        count = self._records(data, hsize, count, esize, "MemoryInfoList")
        self.memory_info = MemoryInfoRows(data if isinstance(data, bytes) else bytes(data), hsize, esize, count)

    def _parse_function_table(self, data: bytes) -> None:
        hsize, dsize, nsize, fsize, ndesc, pad = struct.unpack_from("<6I", data, 0)
        if dsize < 32 or fsize < 12:
            raise ValueError(f"descriptor size {dsize} / entry size {fsize} too small")
        data = data if isinstance(data, bytes) else bytes(data)  # kept: not a view of the file
        off = hsize + pad  # the header is followed by its own alignment padding
        runs: List[Tuple[int, int, int]] = []
        others: List[Tuple[int, int, int, int]] = []
        for _ in range(min(ndesc, 4096)):
            if off + dsize > len(data):
                self.problems.add("FunctionTableStream: truncated descriptor")
                break
            _min, _max, base, count, align = struct.unpack_from("<QQQII", data, off)
            off += dsize + nsize
            count = self._records(data, off, count, fsize, "FunctionTableStream")
            # Keep bit 0 of the unwind field: it marks an indirect entry (it points at
            # another RUNTIME_FUNCTION), which the walker resolves. A JIT's table can hold
            # tens of thousands of entries (Mono: one per method): 12-byte entries are
            # decoded when a lookup needs them (function_tables.py).
            if fsize == 12:
                runs.append((off, count, base))
            else:
                for j in range(count):
                    b, e, u = struct.unpack_from("<III", data, off + fsize * j)
                    others.append((base + b, base + e, base + u, base))
            off += count * fsize + align
        self.function_tables = FunctionTable(data, runs, others)
