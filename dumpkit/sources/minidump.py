"""Target over a .dmp file.

The file is mapped read-only and never written. The stream directory, bounds checks and
memory lookup are ours; fixed-layout records (MINIDUMP_MODULE, MINIDUMP_THREAD) and
stream names come from the `minidump` package, always fed a slice we have already
bounds-checked (MINIDUMP_MEMORY_INFO is read with struct: a dump has thousands). The package alone raises on stream types it does
not know and on reads that cross memory ranges; here an unknown stream is listed and
skipped, and damage in one stream is a soft error that leaves the others readable.
"""

from __future__ import annotations

import io
import mmap
import os
import re
import struct
from dataclasses import replace
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

from minidump.constants import MINIDUMP_STREAM_TYPE
from minidump.streams.ModuleListStream import MINIDUMP_MODULE
from minidump.streams.ThreadListStream import MINIDUMP_THREAD

from dumpkit.console import shell_quote
from dumpkit.context import parse_context
from dumpkit.sources.memory import Buffer, CapturedMemory, MemoryNotInBundle, keep_only
from dumpkit.sources.pieced import PiecedFile
from dumpkit.words import listing, plural
from dumpkit.problems import Problems
from dumpkit.target import (
    X86_FAMILY,
    BundleManifest,
    CodeViewRecord,
    DumpError,
    DumpInfo,
    ExceptionInfo,
    ImageStore,
    MemoryNotInDump,
    MemoryRegion,
    Module,
    ModuleMap,
    ProcessInfo,
    Registers,
    StreamEntry,
    SystemInfo,
    Thread,
    UnloadedModule,
)


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

HEADER_SIZE = 32  # MINIDUMP_HEADER: nothing a stream points at can start inside it
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


def _fmt_version(ms: int, ls: int) -> str:
    return f"{ms >> 16}.{ms & 0xFFFF}.{ls >> 16}.{ls & 0xFFFF}"


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


# Writers save some bytes twice (Wine: a stack and the memory around each pointer in it;
# dbghelp: a stack and the code around an IP). Overlaps are compared byte for byte, so
# agreeing copies pass silently and only different bytes for one address are a problem.
class MinidumpTarget:
    """A crash dump file as a `dumpkit.target.Target`."""

    def __init__(
        self,
        path: str,
        data: Optional[Buffer] = None,
        name: Optional[str] = None,
        kept: Optional[Sequence[Tuple[int, int]]] = None,
        problems: Optional[Problems] = None,
    ):
        """`data`: the dump's bytes already in memory (a bundle's member), `path` then only
        names it; `name`: what reports call the dump, when not `path` (a private copy);
        `kept`: the file ranges whose bytes are the dump's (a bundle that kept only the
        memory its analysis read): memory elsewhere is not served; `problems`: the run's
        collector, which what reading meets is added to (a new one when none is given)."""
        self.path = name or path
        self.kept = tuple(kept) if kept is not None else None
        self.soft_errors = problems if problems is not None else Problems()
        self.system: Optional[SystemInfo] = None
        self.process: Optional[ProcessInfo] = None
        self.threads: List[Thread] = []
        self.modules: List[Module] = []
        self.unloaded_modules: List[UnloadedModule] = []
        self.exception: Optional[ExceptionInfo] = None
        self.memory_regions: List[MemoryRegion] = []
        self.function_tables: List[Tuple[int, int, int, int]] = []
        self.build_string: Optional[str] = None
        self.image_store: Optional[ImageStore] = None  # a bundle's (sources/bundle.py)
        self.bundle: Optional[BundleManifest] = None
        self.xstate_enabled_features: Optional[int] = None
        self._thread_names: Dict[int, str] = {}
        self._string_budget = STRING_BUDGET
        if data is not None:
            if not data:
                raise DumpError("file is empty, not a minidump")
            self._data: Buffer = data
            self._size = len(data)
            self._parse()
            return
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        except OSError as e:
            raise DumpError(f"cannot open: {e.strerror or e}") from None
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                raise DumpError("file is empty, not a minidump")
            try:
                self._data = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError) as e:
                raise DumpError(f"cannot map file: {e}") from None
        finally:
            os.close(fd)
        self._size = size
        self._parse()

    # -- Target API ---------------------------------------------------------------------
    def read(self, address: int, size: int) -> bytes:
        got = self._memory.read_available(address, size)
        if len(got) != size:
            if self._captured is not self._memory and self._captured.read_available(address + len(got), 1):
                raise MemoryNotInBundle(address, size)
            raise MemoryNotInDump(address, size)
        return got

    def read_available(self, address: int, size: int) -> bytes:
        return self._memory.read_available(address, size)

    def module_at(self, address: int) -> Optional[Module]:
        return self._module_map.find(address)

    def symbol_at(self, address: int) -> Optional[str]:
        return None  # a dump file carries no symbols; names come from PE exports

    def function_table_entries(self) -> List[Tuple[int, int, int, int]]:
        return self.function_tables

    def close(self) -> None:
        if isinstance(self._data, bytes):
            self._data = b""
            return
        try:
            self._data.close()
        except (BufferError, ValueError):
            pass

    def __enter__(self) -> "MinidumpTarget":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def dump_file(self) -> "MinidumpTarget":
        return self  # the file's bytes and memory ranges are read below (target.DumpFile)

    def file_chunks(self, chunk: int = 1 << 20) -> Iterator[bytes]:
        """The dump file's bytes in order, `chunk` at a time (what a bundle of it stores)."""
        for at in range(0, self._size, chunk):
            yield self._data[at : min(at + chunk, self._size)]

    def file_bytes(self, offset: int, size: int) -> bytes:
        """The dump file's bytes at [offset, offset + size), clipped to its end."""
        return bytes(self._data[offset : min(offset + size, self._size)])

    @property
    def file_size(self) -> int:
        return self._size

    @property
    def memory_range_count(self) -> int:
        return len(self._captured)

    def memory_ranges(self) -> List[Tuple[int, int]]:
        return list(zip(self._captured.starts, self._captured.ends))

    def memory_pieces(self) -> List[Tuple[int, int, int]]:
        """Every memory range the file holds: (address, size, file offset), sorted."""
        return self._mem_ranges

    def record_memory_reads(self) -> Set[int]:
        """From now on, the page numbers (address // MEMORY_PAGE) of every byte of memory
        read are added to the returned set."""
        pages: Set[int] = set()
        self._memory.pages = pages
        return pages

    # -- parsing ------------------------------------------------------------------------
    def _slice(self, offset: int, size: int, what: str) -> bytes:
        """Bytes of the file, clipped to its end; clipping is a soft error."""
        if offset >= self._size:
            self.soft_errors.add(f"{what}: points past the end of the file (offset {offset:#x})")
            return b""
        end = offset + size
        if end > self._size:
            self.soft_errors.add(f"{what}: truncated ({end - self._size} of {size} bytes missing)")
            end = self._size
        return self._data[offset:end]

    def _string(self, rva: int, what: str) -> Optional[str]:
        if rva == 0 or rva + 4 > self._size:
            if rva:
                self.soft_errors.add(f"{what}: name points past the end of the file")
            return None
        (length,) = struct.unpack("<I", self._data[rva : rva + 4])
        cap = MAX_STRING_BYTES if self._string_budget > 0 else SMALL_STRING_BYTES
        if length > cap:
            self.soft_errors.add(f"{what}: name of {length} bytes truncated to {cap}")
            length = cap
        raw = self._data[rva + 4 : min(rva + 4 + length, self._size)]
        self._string_budget -= len(raw)
        return raw.decode("utf-16-le", errors="replace")

    def _parse(self) -> None:
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
            self.soft_errors.add(f"header: unexpected version {ver & 0xFFFF:#x} (expected {MDMP_VERSION:#x})")
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
            self.soft_errors.add(self._truncation)
        if nstreams > fit:
            self.soft_errors.add(f"header: claims {nstreams} streams but only {fit} fit in the file")

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
            self.soft_errors.add(
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
            self.soft_errors.add(
                f"stream directory: {plural(len(beyond), 'stream')} dumpkit does not read "
                f"{'lies' if len(beyond) == 1 else 'lie'} (partly) past the end of the {self._size:,}-byte file "
                f"({listing(list(dict.fromkeys(beyond)), 5)})"
            )
        self._mem_ranges: List[Tuple[int, int, int]] = []
        self._stack_ranges: List[Tuple[int, int, int]] = []
        self._range_problems: Dict[Tuple[str, str], Tuple[int, int]] = {}
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
        self._memory = CapturedMemory(self._data, self._mem_ranges)
        # Some writers put a thread's stack only in its thread record, not the memory list.
        missing = [r for r in self._stack_ranges if not self._memory.read_available(r[0], 1)]
        if missing:
            for start, size, rva in missing:
                self._add_range(start, size, rva, "thread stack", past_end_reported=True)
            self._memory = CapturedMemory(self._data, self._mem_ranges)
        self._captured = self._memory  # what the file captured; what it serves may be less
        if self.kept is not None:
            # Overlapping copies are compared (problems) over what was captured: a bundle
            # keeps every byte of them, so the comparison says what it said on the original.
            self._memory = CapturedMemory(self._data, keep_only(self._mem_ranges, self.kept), budget=0)
        for problem in self._captured.problems():
            self.soft_errors.add(problem)
        self._report_range_problems()
        self._module_map = ModuleMap(self.modules)
        # Unknown streams are listed (DumpInfo.streams, `known=False`) but are no error:
        # Wine, Breakpad and Crashpad all add streams of their own.
        if 3 not in by_type:
            self.soft_errors.add("dump has no thread list")
        if 4 not in by_type:
            self.soft_errors.add("dump has no module list")

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
            self.soft_errors.add(f"{entry.name}: {why}")
            return why
        data = self._slice(entry.offset, entry.size, entry.name)
        try:
            handler(data)
        except (struct.error, ValueError, IndexError, OverflowError) as e:
            why = _plain_problem(e, len(data))
            self.soft_errors.add(f"{entry.name}: unreadable ({why})")
            return why
        return None

    def _records(self, data: bytes, header: int, count: int, size: int, what: str) -> int:
        """How many `size`-byte records after `header` bytes are really present."""
        fit = max(0, (len(data) - header) // size) if size else 0
        if count > fit:
            self.soft_errors.add(f"{what}: claims {count} entries but holds only {fit}")
            count = fit
        if count > MAX_RECORDS:
            self.soft_errors.add(f"{what}: {count} entries; only the first {MAX_RECORDS} are read")
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

    def _parse_memory_list(self, data: bytes) -> None:
        (count,) = struct.unpack_from("<I", data, 0)
        count = self._records(data, 4, count, 16, "MemoryList")
        # Wine writes a range per unwind record: a million entries is real. Plain ranges
        # go straight in; only suspicious ones take the checked path.
        size, append = self._size, self._mem_ranges.append
        for start, dsize, rva in struct.iter_unpack("<QII", data[4 : 4 + 16 * count]):
            if dsize and rva + dsize <= size and start + dsize <= 1 << 64:
                append((start, dsize, rva))
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

    def _add_range(self, start: int, size: int, offset: int, what: str, past_end_reported: bool = False) -> None:
        if size == 0:
            return
        if offset >= self._size:
            if not past_end_reported:
                self._range_problem(what, "point past the end of the file", start)
            return
        if offset + size > self._size:
            if not past_end_reported:
                self._range_problem(what, "are truncated by the end of the file", start)
            size = self._size - offset
        if start + size > 1 << 64:
            self._range_problem(what, "wrap the address space", start)
            return
        self._mem_ranges.append((start, size, offset))

    def _range_problem(self, what: str, problem: str, start: int) -> None:
        """Counted, and reported once per kind (a damaged list can have a million)."""
        key = (what, problem)
        count, first = self._range_problems.get(key, (0, start))
        self._range_problems[key] = (count + 1, first)

    def _report_range_problems(self) -> None:
        for (what, problem), (count, first) in self._range_problems.items():
            self.soft_errors.add(f"{what}: {count} range(s) {problem} (the first at {first:#x})")
        self._range_problems.clear()

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
            self.soft_errors.add(f"{what}: no register context")
            return None
        if rva < HEADER_SIZE:
            # offset 0 is how some writers leave a context out; the bytes there are the file
            # header ("MDMP", version...), which decoded as registers read as eip 0xa, esp 0x2
            self.soft_errors.add(f"{what}: no register context (its location is offset {rva:#x}, the file header)")
            return None
        if rva >= self._size:
            self.soft_errors.add(f"{what}: register context lies past the end of the file (offset {rva:#x})")
            return None
        raw = self._data[rva : min(rva + size, self._size)]
        arch = self.system.processor_architecture if self.system else None
        regs, problem = parse_context(raw, arch)
        if len(raw) < size:
            # One line: what the cut cost, not also what the parser then missed.
            lost = "unusable" if regs is None else "registers kept"
            self.soft_errors.add(
                f"{what}: register context cut short by the end of the file ({len(raw)} of {size} bytes; {lost})"
            )
        elif problem:
            self.soft_errors.add(f"{what}: {problem}")
        return regs

    def _parse_thread_list(self, data: bytes) -> None:
        (count,) = struct.unpack_from("<I", data, 0)
        count = self._records(data, 4, count, 48, "ThreadList")
        for i in range(count):
            t = MINIDUMP_THREAD.parse(io.BytesIO(data[4 + 48 * i : 4 + 48 * (i + 1)]))
            stack = t.Stack
            mem = stack.MemoryLocation
            ctx = self._context(t.ThreadContext.DataSize, t.ThreadContext.Rva, f"thread {t.ThreadId}")
            self.threads.append(
                Thread(
                    tid=t.ThreadId,
                    context=ctx,
                    stack_start=stack.StartOfMemoryRange,
                    stack_size=mem.DataSize,
                    teb=t.Teb,
                    name=self._thread_names.get(t.ThreadId),
                    suspend_count=t.SuspendCount,
                    priority=t.Priority,
                )
            )
            if mem.DataSize:
                if mem.Rva + mem.DataSize > self._size:
                    # Said here, once per thread; not again when the range is added below.
                    self.soft_errors.add(
                        f"thread {t.ThreadId}: stack memory ({mem.DataSize} bytes at offset "
                        f"{mem.Rva:#x}) runs past the end of the file"
                    )
                self._stack_ranges.append((stack.StartOfMemoryRange, mem.DataSize, mem.Rva))

    def _parse_module_list(self, data: bytes) -> None:
        (count,) = struct.unpack_from("<I", data, 0)
        count = self._records(data, 4, count, 108, "ModuleList")
        for i in range(count):
            m = MINIDUMP_MODULE.parse(io.BytesIO(data[4 + 108 * i : 4 + 108 * (i + 1)]))
            path = self._string(m.ModuleNameRva, f"module {i}") or f"<module {i}>"
            name = path.replace("/", "\\").rsplit("\\", 1)[-1]
            if len(name) > MAX_NAME_COMPONENT:
                # NTFS allows 255 characters per path component; the name is repeated
                # in every frame of every report, so a garbage one is cut here.
                self.soft_errors.add(f"module {i}: file name of {len(name)} characters cut to {MAX_NAME_COMPONENT}")
                name = name[:MAX_NAME_COMPONENT]
            vi = m.VersionInfo
            fv = pv = None
            if vi.dwSignature == 0xFEEF04BD:
                fv = _fmt_version(vi.dwFileVersionMS, vi.dwFileVersionLS)
                pv = _fmt_version(vi.dwProductVersionMS, vi.dwProductVersionLS)
            cv = self._codeview(m.CvRecord.DataSize, m.CvRecord.Rva, name)
            self.modules.append(
                Module(
                    name=name,
                    path=path,
                    base=m.BaseOfImage,
                    size=m.SizeOfImage,
                    timestamp=m.TimeDateStamp,
                    checksum=m.CheckSum,
                    file_version=fv,
                    product_version=pv,
                    cv_record=cv,
                )
            )

    def _codeview(self, size: int, rva: int, what: str) -> Optional[CodeViewRecord]:
        if size < 24 or size > 4096:
            return None
        raw = self._slice(rva, size, f"module {what} CodeView record")
        if raw[:4] == b"RSDS" and len(raw) >= 24:
            name = raw[24:].split(b"\0", 1)[0].decode("utf-8", "replace")
            return CodeViewRecord(name, _guid(raw[4:20]), struct.unpack_from("<I", raw, 20)[0])
        if raw[:4] == b"NB10" and len(raw) >= 16:
            sig, age = struct.unpack_from("<II", raw, 8)
            name = raw[16:].split(b"\0", 1)[0].decode("utf-8", "replace")
            return CodeViewRecord(name, f"{sig:08X}", age)
        return None

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
            self.soft_errors.add(f"ExceptionStream: claims {nparams} parameters; at most 15 exist")
            nparams = 15
        csize, crva = struct.unpack_from("<II", data, 160)
        ctx = self._context(csize, crva, "exception")
        self.exception = ExceptionInfo(code, flags, address, tuple(params[:nparams]), tid, ctx, record != 0)

    def _parse_memory_info(self, data: bytes) -> None:
        hsize, esize, count = struct.unpack_from("<IIQ", data, 0)
        if esize < 48:
            raise ValueError(f"entry size {esize} too small")
        count = self._records(data, hsize, count, esize, "MemoryInfoList")
        # Read with struct, not the package's MINIDUMP_MEMORY_INFO.parse: a process maps
        # thousands of regions, and a parse through BytesIO per region was the largest
        # cost of analysing a small dump (issue #34). Layout (minidumpapiset.h):
        # BaseAddress, AllocationBase, AllocationProtect, (pad), RegionSize, State, Protect, Type.
        record = struct.Struct("<QQI4xQIII")
        for i in range(count):
            base, allocation_base, allocation_protect, size, state, protect, mtype = record.unpack_from(
                data, hsize + esize * i
            )
            self.memory_regions.append(
                MemoryRegion(base, allocation_base, allocation_protect, size, state, protect, mtype)
            )
        self.memory_regions.sort(key=lambda r: r.base)

    def _parse_function_table(self, data: bytes) -> None:
        hsize, dsize, nsize, fsize, ndesc, pad = struct.unpack_from("<6I", data, 0)
        if dsize < 32 or fsize < 12:
            raise ValueError(f"descriptor size {dsize} / entry size {fsize} too small")
        off = hsize + pad  # the header is followed by its own alignment padding
        for _ in range(min(ndesc, 4096)):
            if off + dsize > len(data):
                self.soft_errors.add("FunctionTableStream: truncated descriptor")
                break
            _min, _max, base, count, align = struct.unpack_from("<QQQII", data, off)
            off += dsize + nsize
            count = self._records(data, off, count, fsize, "FunctionTableStream")
            for j in range(count):
                b, e, u = struct.unpack_from("<III", data, off + fsize * j)
                # Keep bit 0: it marks an indirect entry (the unwind field points at
                # another RUNTIME_FUNCTION), which the walker resolves.
                self.function_tables.append((base + b, base + e, base + u, base))
            off += count * fsize + align
        self.function_tables.sort()


def open_dump(path: str, problems: Optional[Problems] = None) -> MinidumpTarget:
    """Open a minidump read-only; what reading it meets goes to `problems` (the run's
    collector; a new one when none is given). Raises DumpError (one line) when it cannot
    be used."""
    return MinidumpTarget(path, problems=problems)


def open_dump_bytes(
    data: bytes, name: str, kept: Optional[Sequence[Tuple[int, int]]] = None, problems: Optional[Problems] = None
) -> MinidumpTarget:
    """A minidump held in memory (a bundle's member), named `name` in reports; `kept` and
    `problems`: see MinidumpTarget."""
    return MinidumpTarget(name, data, kept=kept, problems=problems)


def open_dump_pieces(
    size: int,
    kept: Sequence[Tuple[int, int]],
    data: Union[bytes, mmap.mmap],
    name: str,
    problems: Optional[Problems] = None,
) -> MinidumpTarget:
    """A minidump of `size` bytes of which only the `kept` file ranges are held, back to
    back in `data` (a bundle written with --only-used-memory), named `name` in reports.
    Raises DumpError when the pieces do not fit the size."""
    try:
        pieces = PiecedFile(size, kept, data)
    except ValueError as e:
        raise DumpError(f"the dump's kept pieces do not fit it ({e})") from None
    return MinidumpTarget(name, pieces, kept=kept, problems=problems)


def open_dump_copy(
    path: str, name: str, kept: Optional[Sequence[Tuple[int, int]]] = None, problems: Optional[Problems] = None
) -> MinidumpTarget:
    """A private copy of a minidump (a bundle's member too big to hold in memory), named
    `name` in reports."""
    return MinidumpTarget(path, name=name, kept=kept, problems=problems)
