"""The one seam between where bytes come from (a .dmp file, a live WinDbg session) and
everything that analyses them.

Everything below this module (unwinding, analysis, reports) sees only a `Target` and the
plain data classes defined here. Sources (`dumpkit.sources.minidump`,
`dumpkit.sources.bundle`, `dumpkit.sources.pykd`) build them; nothing else knows which
source is in use. What only some sources have is declared here too, as a protocol of its
own on an optional field (`ImageStore`, `BundleManifest`, `DumpFile`): a reader asks the
field, never the source's class.
"""

from __future__ import annotations

import bisect
import functools
import struct
from typing import Dict, Iterator, List, Optional, Protocol, Sequence, Set, Tuple, runtime_checkable
from dumpkit.problems import Problems
from dumpkit.records import record


class DumpError(Exception):
    """The input cannot be used at all (not a minidump, unreadable header...).

    The message is one line naming what is wrong; the CLI prefixes the file name."""


class MemoryNotInDump(Exception):
    """A read touched an address whose bytes the source does not have."""

    def __init__(self, address: int, size: int):
        super().__init__(f"memory at {address:#x} (+{size:#x}) is not in the dump")
        self.address = address
        self.size = size


# x64 general-purpose registers in CONTEXT order; also the unwinder's register numbering
# (UNWIND_CODE register numbers 0..15 index this tuple).
GPR_NAMES: Tuple[str, ...] = (
    "rax",
    "rcx",
    "rdx",
    "rbx",
    "rsp",
    "rbp",
    "rsi",
    "rdi",
    "r8",
    "r9",
    "r10",
    "r11",
    "r12",
    "r13",
    "r14",
    "r15",
)


@record
class Registers:
    """A thread's register state. `values` maps lowercase dbgeng names (rip, rsp, rax...,
    eflags, cs...) to integers; registers the source did not supply are absent."""

    values: Dict[str, int]
    context_flags: int = 0
    context_size: int = 0

    @property
    def ip(self) -> int:
        return self.values.get("rip", self.values.get("eip", 0))

    @property
    def sp(self) -> int:
        return self.values.get("rsp", self.values.get("esp", 0))

    def get(self, name: str, default: Optional[int] = None) -> Optional[int]:
        return self.values.get(name, default)


def format_guid(raw: bytes) -> str:
    """A GUID's 16 bytes as Windows prints it (Data1-Data2-Data3 little-endian): how an
    image's CodeView record and its PDB's info stream are compared."""
    d1, d2, d3 = struct.unpack_from("<IHH", raw, 0)
    d4 = raw[8:16]
    return f"{d1:08X}-{d2:04X}-{d3:04X}-{d4[:2].hex().upper()}-{d4[2:].hex().upper()}"


@record
class CodeViewRecord:
    """Which PDB a module was linked with (RSDS record), as symbol servers key it."""

    pdb_name: str
    guid: str
    age: int

    @functools.cached_property  # asked per module by the report, the image and PDB search
    def symbol_id(self) -> str:
        return f"{self.guid.replace('-', '').upper()}{self.age:X}"


@record
class Module:
    name: str  # file name only, e.g. "opkernels.dll"
    path: str  # full path as the dump recorded it
    base: int
    size: int
    timestamp: int = 0
    checksum: int = 0
    file_version: Optional[str] = None  # from VS_FIXEDFILEINFO, "a.b.c.d"
    product_version: Optional[str] = None
    cv_record: Optional[CodeViewRecord] = None

    @property
    def end(self) -> int:
        return self.base + self.size

    def contains(self, address: int) -> bool:
        return self.base <= address < self.base + self.size


@record
class UnloadedModule:
    name: str
    base: int
    size: int
    timestamp: int = 0


@record
class Thread:
    tid: int
    context: Optional[Registers]
    stack_start: int = 0  # lowest captured stack address
    stack_size: int = 0  # bytes captured
    teb: int = 0
    name: Optional[str] = None
    suspend_count: int = 0
    priority: int = 0

    @property
    def stack_end(self) -> int:
        return self.stack_start + self.stack_size


@record
class ExceptionInfo:
    code: int
    flags: int
    address: int
    parameters: Tuple[int, ...]
    thread_id: int
    context: Optional[Registers]
    nested: bool = False  # ExceptionRecord pointer was non-null


# MINIDUMP_SYSTEM_INFO.ProcessorArchitecture: winnt.h's PROCESSOR_ARCHITECTURE_* values,
# named here once for every reader of the field.
PROCESSOR_ARCHITECTURE_INTEL = 0
PROCESSOR_ARCHITECTURE_ARM = 5
PROCESSOR_ARCHITECTURE_IA64 = 6
PROCESSOR_ARCHITECTURE_AMD64 = 9
PROCESSOR_ARCHITECTURE_ARM64 = 12
ARCHITECTURE_NAMES = {
    PROCESSOR_ARCHITECTURE_INTEL: "x86",
    PROCESSOR_ARCHITECTURE_ARM: "ARM",
    PROCESSOR_ARCHITECTURE_IA64: "IA64",
    PROCESSOR_ARCHITECTURE_AMD64: "AMD64",
    PROCESSOR_ARCHITECTURE_ARM64: "ARM64",
}
# the CPUs whose code dumpkit decodes and walks (x86 and x64 share CPUID and the ISA family)
X86_FAMILY = (PROCESSOR_ARCHITECTURE_INTEL, PROCESSOR_ARCHITECTURE_AMD64)


@record
class Handle:
    """One of the process's open handles, from the dump's HandleDataStream (procdump -ma and
    WinDbg's .dump /ma write it; Wine's writer does not): its value, the kernel object's
    type ("Event", "Semaphore", "Mutant", "Thread", "File"...) and name, where recorded."""

    value: int
    type_name: Optional[str]
    object_name: Optional[str]


@record
class SystemInfo:
    processor_architecture: int  # PROCESSOR_ARCHITECTURE_*
    processor_level: int = 0
    processor_revision: int = 0
    number_of_processors: int = 0
    product_type: int = 0
    os_major: int = 0
    os_minor: int = 0
    os_build: int = 0
    platform_id: int = 0
    csd_version: str = ""
    cpu_vendor: Optional[str] = None  # "GenuineIntel", "AuthenticAMD" (x86/x64 dumps only)
    cpuid_version: int = 0  # CPUID leaf 1 EAX
    cpuid_features: int = 0  # CPUID leaf 1 EDX
    amd_extended_features: int = 0
    processor_features: Tuple[int, int] = (0, 0)  # non-x86 layout, as recorded
    wine_version: Optional[str] = None  # Wine writes its own marker after the struct

    @property
    def is_x64(self) -> bool:
        return self.processor_architecture == PROCESSOR_ARCHITECTURE_AMD64

    @property
    def pointer_mask(self) -> int:
        """What is significant in a 64-bit field that holds an address of this CPU: a 32-bit
        process's exception address and parameters may carry garbage in the upper half
        (Breakpad's minidump_32bit_crash_addr.dmp records 0xffffffff00000045 for 0x45)."""
        narrow = (PROCESSOR_ARCHITECTURE_INTEL, PROCESSOR_ARCHITECTURE_ARM)
        return 0xFFFFFFFF if self.processor_architecture in narrow else 0xFFFFFFFFFFFFFFFF

    @property
    def arch_name(self) -> str:
        return ARCHITECTURE_NAMES.get(self.processor_architecture, f"arch {self.processor_architecture}")

    # Family/model/stepping come from the CPUID signature when the dump carries one (x86
    # dumps); x64 dumps carry none, and then, as Windows itself does, from ProcessorLevel
    # (the display family) and ProcessorRevision (model in the high byte, stepping low).
    @property
    def _x86_family_cpu(self) -> bool:
        return self.processor_architecture in X86_FAMILY

    @property
    def cpu_signature_known(self) -> bool:
        return bool(self.cpuid_version) or (self._x86_family_cpu and self.processor_level != 0)

    @property
    def cpu_family(self) -> int:
        v = self.cpuid_version
        if not v:
            return self.processor_level if self._x86_family_cpu else 0
        fam = (v >> 8) & 0xF
        return fam + ((v >> 20) & 0xFF) if fam == 0xF else fam

    @property
    def cpu_model(self) -> int:
        v = self.cpuid_version
        if not v:
            return self.processor_revision >> 8 if self._x86_family_cpu else 0
        model = (v >> 4) & 0xF
        fam = (v >> 8) & 0xF
        return model | (((v >> 16) & 0xF) << 4) if fam in (6, 0xF) else model

    @property
    def cpu_stepping(self) -> int:
        if not self.cpuid_version:
            return self.processor_revision & 0xFF if self._x86_family_cpu else 0
        return self.cpuid_version & 0xF

    @property
    def cpu_description(self) -> str:
        """'GenuineIntel family 6 model 85 stepping 4' (the vendor only when recorded)."""
        who = self.cpu_vendor or self.arch_name
        if not self.cpu_signature_known:
            return who
        return f"{who} family {self.cpu_family} model {self.cpu_model} stepping {self.cpu_stepping}"


@record
class ProcessInfo:
    """MINIDUMP_MISC_INFO: who the process was and when."""

    pid: Optional[int] = None
    create_time: Optional[int] = None  # seconds since the Unix epoch
    user_time: Optional[int] = None
    kernel_time: Optional[int] = None
    processor_max_mhz: Optional[int] = None
    processor_current_mhz: Optional[int] = None


@record
class ProcessMemory:
    """MINIDUMP_PROCESS_VM_COUNTERS_1/_2 (ProcessVmCountersStream): what the process used
    when the dump was written, in bytes. Windows 10's dbghelp writes it (older ones and
    Wine's do not). None where the record's revision or flags leave a counter out."""

    private_commit: int  # PrivateUsage: the commit charge the process alone holds ("private bytes")
    peak_private_commit: int  # PeakPagefileUsage
    working_set: int
    peak_working_set: int
    virtual_size: Optional[int] = None  # reserved and committed address space (flag VIRTUALSIZE)
    peak_virtual_size: Optional[int] = None
    # The job object's counters (flag JOB), kept only when it sets a limit. Both limits are
    # the job's, over all its processes: the private one on its private commit, the total
    # one on that plus its shared commit. A per-process limit is not recorded.
    job_private_commit: Optional[int] = None
    job_peak_private_commit: Optional[int] = None
    job_shared_commit: Optional[int] = None
    job_private_commit_limit: Optional[int] = None  # None: the job sets no such limit
    job_total_commit_limit: Optional[int] = None


@record
class SystemMemory:
    """MINIDUMP_SYSTEM_MEMORY_INFO_1 (SystemMemoryInfoStream): the machine's memory when the
    dump was written, in bytes. The commit limit is RAM plus the paging files: past it no
    process can commit memory, whatever RAM is free. None where the flags leave it out."""

    page_size: int
    physical_memory: int  # NumberOfPhysicalPages
    processors: int
    lowest_user_address: int  # the process's own address space, from MinimumUserModeAddress
    highest_user_address: int  # MaximumUserModeAddress: 0x7ffeffff for a 32-bit process without /LARGEADDRESSAWARE
    available_memory: Optional[int] = None  # the basic performance part (flag BASICPERF)
    committed: Optional[int] = None  # the commit charge of every process and the kernel
    commit_limit: Optional[int] = None
    peak_commitment: Optional[int] = None  # since the machine started


@record
class MemoryRegion:
    """One MINIDUMP_MEMORY_INFO entry: the process's address-space map, not captured bytes."""

    base: int
    allocation_base: int
    allocation_protect: int
    size: int
    state: int  # 0x1000 commit, 0x2000 reserve, 0x10000 free
    protect: int
    type: int

    @property
    def end(self) -> int:
        return self.base + self.size


@record
class StreamEntry:
    index: int
    type: int
    name: str
    offset: int
    size: int
    known: bool


@record
class DumpInfo:
    path: str
    file_size: int
    version: int = 0
    flags: int = 0
    timestamp: int = 0
    streams: Tuple[StreamEntry, ...] = ()
    # (stream type, why it could not be read): a stream that is listed but damaged is not
    # the same as one that is absent (an unreadable Exception stream is not "no crash").
    unreadable: Tuple[Tuple[int, str], ...] = ()

    def has_stream(self, stream_type: int) -> bool:
        return any(e.type == stream_type for e in self.streams)

    def stream_problem(self, stream_type: int) -> Optional[str]:
        return next((why for t, why in self.unreadable if t == stream_type), None)


class ModuleMap:
    """Address -> module by binary search over sorted bases (modules never overlap in a
    sane dump; on overlap, the highest base at or below the address wins)."""

    def __init__(self, modules: Sequence[Module]):
        self._mods = sorted(modules, key=lambda m: m.base)
        self._bases = [m.base for m in self._mods]

    def find(self, address: int) -> Optional[Module]:
        i = bisect.bisect_right(self._bases, address) - 1
        if i >= 0 and self._mods[i].contains(address):
            return self._mods[i]
        return None

    def by_name(self, name: str) -> Optional[Module]:
        low = name.lower()
        for m in self._mods:
            if m.name.lower() == low:
                return m
        return None


@record
class InstalledPackage:
    """The Python distribution that installed a module (its dist-info RECORD lists the
    file): found beside the module's files (dumpkit.packages), or as a bundle recorded it."""

    name: str  # as METADATA spells it, e.g. "tensorflow-intel"
    version: str
    record: str  # the dist-info folder whose RECORD lists the file


@record
class OriginalFile:
    """What an image store says of a file it holds only some pages of: the original's size
    and sha256, and where the analysis that kept the pages found it (images.SOURCES)."""

    size: int
    sha256: str
    found_in: Optional[str] = None  # None: not recorded (a PDB's)


class FileBytes(Protocol):
    """A file's bytes by offset, as far as they are held: `read` raises the reader's own
    error (PEError for an image, PdbError for a PDB) for bytes past the end or not held,
    never returns zeros for them. An image's backing and a PDB's source are both this."""

    @property
    def size(self) -> int: ...

    def read(self, offset: int, size: int) -> bytes: ...

    def close(self) -> None: ...


class ImageStore(Protocol):
    """Image and PDB files that travel with a dump (a bundle's pages: sources/bundle.py),
    asked before any file on this machine (images/locator.py)."""

    def backing_for(self, module: Module) -> Optional[Tuple[FileBytes, str]]:
        """`module`'s image file (by base address and name) and one line saying where it
        is; None when the store does not hold it."""
        ...

    def pdb_for(self, cv: CodeViewRecord) -> Optional[Tuple[FileBytes, str]]:
        """The PDB `cv` names (by GUID and age) and one line saying where it is, or None."""
        ...

    def package_for(self, module: Module) -> Optional[InstalledPackage]:
        """The distribution that owned `module` on the machine the dump came from, as the
        store recorded it; None when it did not."""
        ...

    def original_image(self, module: Module) -> Optional[OriginalFile]:
        """The image file the store holds pages of for `module`, as it was; None when none."""
        ...

    def original_pdb(self, cv: CodeViewRecord) -> Optional[OriginalFile]:
        """The PDB file the store holds pages of for `cv`, as it was; None when none."""
        ...


class BundleManifest(Protocol):
    """What a bundle says of the dump it carries (docs/bundle-format.md), for a bundle
    written from it again: the dump's original name, what was redacted, and which of the
    dump file's bytes it kept (None: all of them)."""

    @property
    def version(self) -> int: ...

    @property
    def dump_name(self) -> str: ...

    @property
    def redacted(self) -> Tuple[str, ...]: ...

    @property
    def kept(self) -> Optional[Tuple[Tuple[int, int], ...]]: ...


class DumpFile(Protocol):
    """The minidump file a target reads (a file, a bundle's member, a redacted copy), as a
    writer of bundles needs it: its bytes, its memory ranges, and the pages of memory the
    analysis reads."""

    @property
    def path(self) -> str: ...

    @property
    def file_size(self) -> int: ...

    @property
    def kept(self) -> Optional[Tuple[Tuple[int, int], ...]]:
        """The file ranges whose bytes are the dump's (a bundle that kept only the memory
        its analysis read); None: the whole file."""
        ...

    def file_chunks(self, chunk: int = 1 << 20) -> Iterator[bytes]:
        """The file's bytes in order, `chunk` at a time."""
        ...

    def file_bytes(self, offset: int, size: int) -> bytes:
        """The file's bytes at [offset, offset + size), clipped to its end."""
        ...

    def memory_pieces(self) -> List[Tuple[int, int, int]]:
        """Every memory range the file holds: (address, size, file offset), sorted."""
        ...

    def record_memory_reads(self) -> Set[int]:
        """From now on, the page numbers (address // 4096) of every byte of memory read are
        added to the returned set."""
        ...


@runtime_checkable
class Target(Protocol):
    """What every analysis may ask of a crashed (or live) process.

    Reads are by virtual address. `read` raises MemoryNotInDump when any byte is missing;
    `read_available` returns the longest readable prefix (possibly empty)."""

    dump: DumpInfo
    system: Optional[SystemInfo]
    process: Optional[ProcessInfo]
    threads: List[Thread]
    modules: List[Module]
    unloaded_modules: List[UnloadedModule]
    exception: Optional[ExceptionInfo]
    memory_regions: Sequence[MemoryRegion]
    # what the OS said of itself beyond the version numbers (MiscInfo BuildString, e.g.
    # "19041.1.amd64fre.vb_release.191206-1406"), and the XSTATE features it enabled
    build_string: Optional[str]
    xstate_enabled_features: Optional[int]
    # what the dump's writer wrote in its comment streams (ProcDump: its command line and
    # trigger; dumpkit capture: why it stopped the process); None when there are none
    comment: Optional[str]
    # the process's open handles (HandleDataStream), empty when the dump has none
    handles: Tuple[Handle, ...]
    # what the process and the machine had committed when the dump was written
    # (ProcessVmCountersStream, SystemMemoryInfoStream); None when the dump lacks them
    process_memory: Optional[ProcessMemory]
    system_memory: Optional[SystemMemory]
    # What travelled with a dump read from a bundle (sources/bundle.py): the image and PDB
    # pages its first analysis read, with the installation's facts, and what the bundle
    # says of the dump. None for a plain dump and a live session.
    image_store: Optional[ImageStore]
    bundle: Optional[BundleManifest]

    @property
    def soft_errors(self) -> Problems:
        """The collector the source was opened with (`problems=`; a new one when none was
        handed in), which it adds to as it reads: at opening, and for a debugger session at
        every later read. The run that opened the target hands the same collector to the
        engine; this is for whoever opened it without one (a test, a tool) to read."""
        ...

    @property
    def dump_file(self) -> Optional[DumpFile]:
        """The minidump file the target reads; None for a live session."""
        ...

    @property
    def memory_range_count(self) -> Optional[int]:
        """How many captured memory ranges the source holds; None when it cannot tell."""
        ...

    def read(self, address: int, size: int) -> bytes: ...

    def read_available(self, address: int, size: int) -> bytes: ...

    def module_at(self, address: int) -> Optional[Module]: ...

    def symbol_at(self, address: int) -> Optional[str]:
        """A name from the source's own symbols (the debugger's), if it has one."""
        ...

    def function_table_entries(self) -> Sequence[Tuple[int, int, int, int]]:
        """Dynamic function tables (FunctionTable stream): (begin, end, unwind_va, base),
        sorted (a dump's is a function_tables.FunctionTable, decoded as lookups need)."""
        ...


def significant_exception(exception: ExceptionInfo, system: Optional[SystemInfo]) -> Tuple[int, Tuple[int, ...]]:
    """The exception's address and parameters with what the CPU's pointers cannot hold
    masked off. The dump keeps them raw (`dumpkit info --json` shows them so)."""
    mask = system.pointer_mask if system is not None else 0xFFFFFFFFFFFFFFFF
    return exception.address & mask, tuple(p & mask for p in exception.parameters)
