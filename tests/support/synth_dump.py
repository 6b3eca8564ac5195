"""Build complete, valid minidumps in code, for reader, engine and hostile tests.

The real sample dumps stay the main evidence; this builder makes what they cannot show on
demand: every stream the reader parses, with values a test chooses, and precise damage.
Layouts follow minidumpapiset.h / winnt.h (offsets noted where they are not obvious):

    d = SynthDump()                                   # x64; SystemInfo and MiscInfo included
    stack = d.memory(0x10000, bytes(0x1000))          # a MemoryList range
    d.thread(7, context=x64_context(rip=0x140001000, rsp=0x10f00), stack=stack, name="main")
    d.module("C:\\app\\app.exe", 0x140000000, 0x5000, version=(1, 2, 3, 4), pdb=("app.pdb", GUID, 1))
    d.exception(7, 0xC0000005, 0x140001000, params=(0, 0), context=x64_context(rip=0x140001000))
    built = d.build()                                 # a SynthFile: bytes + where each stream is
    built.lie_count(3, 99)                            # damage: the ThreadList claims 99 threads
    path = built.write(tmp_path / "x.dmp")

Streams are written in the order SystemInfo, MiscInfo, ThreadList, ThreadNames, ModuleList,
UnloadedModuleList, MemoryList, MemoryInfoList, Exception, FunctionTable, raw streams,
Memory64List (whose bytes, as in real full-memory dumps, end the file); each only when
something was added to it (SystemInfo and MiscInfo unless switched off).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

X64 = 9  # PROCESSOR_ARCHITECTURE_AMD64
X86 = 0  # PROCESSOR_ARCHITECTURE_INTEL

SIGNATURE = 0x504D444D  # "MDMP"
VERSION = 0xA793

THREAD_LIST, MODULE_LIST, MEMORY_LIST, EXCEPTION, SYSTEM_INFO = 3, 4, 5, 6, 7
MEMORY64_LIST, FUNCTION_TABLE, UNLOADED_MODULE_LIST, MISC_INFO = 9, 13, 14, 15
MEMORY_INFO_LIST, THREAD_NAMES = 16, 24
WINE_HOST_LIBRARIES = 0xFFF0  # Wine's own stream: the reader lists it and skips it

# ContextFlags (winnt.h)
CONTEXT_AMD64 = 0x00100000
CONTEXT_I386 = 0x00010000
CONTROL, INTEGER, SEGMENTS, FLOATING_POINT, XSTATE = 0x1, 0x2, 0x4, 0x8, 0x40
X64_CONTEXT_SIZE = 1232
X86_CONTEXT_SIZE = 716

_X64_GPRS = ("rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi") + tuple(f"r{i}" for i in range(8, 16))
_X64_SEGS = ("cs", "ds", "es", "fs", "gs", "ss")  # u16 each from 0x38
_X86_REGS = {  # name: offset in the 716-byte CONTEXT
    "gs": 0x8C,
    "fs": 0x90,
    "es": 0x94,
    "ds": 0x98,
    "edi": 0x9C,
    "esi": 0xA0,
    "ebx": 0xA4,
    "edx": 0xA8,
    "ecx": 0xAC,
    "eax": 0xB0,
    "ebp": 0xB4,
    "eip": 0xB8,
    "cs": 0xBC,
    "eflags": 0xC0,
    "esp": 0xC4,
    "ss": 0xC8,
}


# ----------------------------------------------------------------------------- contexts
def x64_context(
    *, flags: int = CONTEXT_AMD64 | CONTROL | INTEGER | SEGMENTS | FLOATING_POINT, xstate: bool = False, **regs: int
) -> bytes:
    """An AMD64 CONTEXT (1232 bytes) holding `regs` (rip, rsp, rax..r15, eflags, mxcsr,
    cs..ss). With `xstate`, CONTEXT_XSTATE is set and a CONTEXT_EX plus an XSAVE area
    (header and AVX upper halves) follow, as Windows writes for AVX-capable threads."""
    out = bytearray(X64_CONTEXT_SIZE)
    unknown = set(regs) - set(_X64_GPRS) - set(_X64_SEGS) - {"rip", "eflags", "mxcsr"}
    if unknown:
        raise ValueError(f"not x64 CONTEXT registers: {sorted(unknown)}")
    struct.pack_into("<II", out, 0x30, flags | (XSTATE if xstate else 0), regs.get("mxcsr", 0x1F80))
    struct.pack_into(
        "<6H", out, 0x38, *(regs.get(s, d) for s, d in zip(_X64_SEGS, (0x33, 0x2B, 0x2B, 0x53, 0x2B, 0x2B)))
    )
    struct.pack_into("<I", out, 0x44, regs.get("eflags", 0x246))
    struct.pack_into("<16Q", out, 0x78, *(regs.get(r, 0) for r in _X64_GPRS))
    struct.pack_into("<Q", out, 0xF8, regs.get("rip", 0))
    if not xstate:
        return bytes(out)
    # CONTEXT_EX: three CONTEXT_CHUNKs {LONG Offset; DWORD Length} relative to itself:
    # All (from the CONTEXT's start), Legacy (the CONTEXT), XState (64-byte aligned).
    ex_at = X64_CONTEXT_SIZE
    xs_at = (ex_at + 24 + 63) & ~63
    xs_len = 64 + 256  # XSAVE_AREA_HEADER, then YMM0-15 upper halves
    total = xs_at + xs_len
    out += struct.pack("<iIiIiI", -ex_at, total, -ex_at, X64_CONTEXT_SIZE, xs_at - ex_at, xs_len)
    out += bytes(xs_at - len(out))
    out += struct.pack("<QQ", 0x7, 0) + bytes(48)  # Mask: x87 | SSE | AVX
    out += bytes(range(256))
    return bytes(out)


def x86_context(*, flags: int = CONTEXT_I386 | CONTROL | INTEGER | SEGMENTS, **regs: int) -> bytes:
    """An i386 CONTEXT (716 bytes) holding `regs` (eip, esp, ebp, eax..edi, eflags, segments)."""
    unknown = set(regs) - set(_X86_REGS)
    if unknown:
        raise ValueError(f"not x86 CONTEXT registers: {sorted(unknown)}")
    out = bytearray(X86_CONTEXT_SIZE)
    struct.pack_into("<I", out, 0, flags)
    defaults = {"cs": 0x23, "ds": 0x2B, "es": 0x2B, "fs": 0x53, "gs": 0x2B, "ss": 0x2B, "eflags": 0x246}
    for name, off in _X86_REGS.items():
        struct.pack_into("<I", out, off, regs.get(name, defaults.get(name, 0)))
    return bytes(out)


# ----------------------------------------------------------------------------- records
@dataclass(frozen=True)
class Range:
    """Memory captured at `address`; `file_offset` is filled in by `build`."""

    address: int
    data: bytes

    @property
    def end(self) -> int:
        return self.address + len(self.data)


@dataclass
class _Thread:
    tid: int
    context: Optional[bytes]
    stack: Optional[Range]
    teb: int
    suspend_count: int
    priority_class: int
    priority: int
    name: Optional[str]


@dataclass
class _Module:
    path: str
    base: int
    size: int
    timestamp: int
    checksum: int
    version: Optional[Tuple[int, int, int, int]]
    product_version: Optional[Tuple[int, int, int, int]]
    cv: Optional[bytes]


@dataclass
class _Exception:
    tid: int
    code: int
    address: int
    flags: int
    params: Tuple[int, ...]
    number_parameters: int
    context: Optional[bytes]
    nested_record: int


def rsds(pdb: str, guid: bytes, age: int) -> bytes:
    """A CodeView RSDS record: signature, GUID (16 bytes as stored), age, UTF-8 PDB path."""
    if len(guid) != 16:
        raise ValueError("a GUID is 16 bytes")
    return b"RSDS" + guid + struct.pack("<I", age) + pdb.encode() + b"\0"


def _ms_ls(v: Tuple[int, int, int, int]) -> Tuple[int, int]:
    return (v[0] << 16) | v[1], (v[2] << 16) | v[3]


def fixed_file_info(file_version: Tuple[int, int, int, int], product_version: Tuple[int, int, int, int]) -> bytes:
    """VS_FIXEDFILEINFO (52 bytes), as MINIDUMP_MODULE embeds it."""
    fms, fls = _ms_ls(file_version)
    pms, pls = _ms_ls(product_version)
    return struct.pack("<13I", 0xFEEF04BD, 0x10000, fms, fls, pms, pls, 0x3F, 0, 0x40004, 2, 0, 0, 0)


def minidump_string(text: str) -> bytes:
    """MINIDUMP_STRING: byte length (without the terminator), UTF-16LE, a NUL character."""
    raw = text.encode("utf-16-le", "surrogatepass")
    return struct.pack("<I", len(raw)) + raw + b"\0\0"


# ----------------------------------------------------------------------------- the file
class _Writer:
    """The file being laid out: blobs appended at aligned offsets, patched in place."""

    def __init__(self) -> None:
        self.data = bytearray()

    def put(self, blob: bytes, align: int = 4) -> int:
        self.data += bytes(-len(self.data) % align)
        at = len(self.data)
        self.data += blob
        return at


@dataclass
class SynthFile:
    """A built dump: its bytes and where each stream landed, with helpers to damage it."""

    data: bytearray
    dir_rva: int
    streams: List[Tuple[int, int, int]]  # (type, size, rva) in directory order
    # named file offsets: "thread 7 context", "exception context", "module 0 name", "SystemInfo",
    # "memory 0x10000" (the bytes of the first range listed at that address)
    where: Dict[str, int] = field(default_factory=dict)

    def stream(self, stype: int) -> Tuple[int, int]:
        """(rva, size) of the first stream of `stype`."""
        for t, size, rva in self.streams:
            if t == stype:
                return rva, size
        raise KeyError(stype)

    def entry(self, stype: int) -> int:
        """File offset of the stream's directory entry (type, size, rva)."""
        for i, (t, _s, _r) in enumerate(self.streams):
            if t == stype:
                return self.dir_rva + 12 * i
        raise KeyError(stype)

    def set_u32(self, offset: int, value: int) -> "SynthFile":
        struct.pack_into("<I", self.data, offset, value & 0xFFFFFFFF)
        return self

    def set_u64(self, offset: int, value: int) -> "SynthFile":
        struct.pack_into("<Q", self.data, offset, value & 0xFFFFFFFFFFFFFFFF)
        return self

    def u32(self, offset: int) -> int:
        return struct.unpack_from("<I", self.data, offset)[0]

    # -- damage ---------------------------------------------------------------------
    _COUNT_FIELD = {  # stream type: (offset of its entry count, width)
        THREAD_LIST: (0, 4),
        MODULE_LIST: (0, 4),
        MEMORY_LIST: (0, 4),
        THREAD_NAMES: (0, 4),
        MEMORY64_LIST: (0, 8),
        UNLOADED_MODULE_LIST: (8, 4),
        MEMORY_INFO_LIST: (8, 8),
        FUNCTION_TABLE: (16, 4),  # NumberOfDescriptors
    }

    def lie_count(self, stype: int, count: int) -> "SynthFile":
        """Make a list stream claim `count` entries (the records stay as they were)."""
        at, width = self._COUNT_FIELD[stype]
        rva, _size = self.stream(stype)
        return (self.set_u64 if width == 8 else self.set_u32)(rva + at, count)

    def move_stream(self, stype: int, rva: int) -> "SynthFile":
        """Point the stream's directory entry at `rva` (past the end, into another stream...)."""
        return self.set_u32(self.entry(stype) + 8, rva)

    def resize_stream(self, stype: int, size: int) -> "SynthFile":
        """Make the directory entry claim `size` bytes for the stream."""
        return self.set_u32(self.entry(stype) + 4, size)

    def cut(self, size: int) -> "SynthFile":
        """The file truncated to `size` bytes (a copy; this one is unchanged)."""
        return SynthFile(bytearray(self.data[:size]), self.dir_rva, list(self.streams), dict(self.where))

    def cut_stream(self, stype: int, keep: int) -> "SynthFile":
        """The file cut `keep` bytes into the stream (everything after it lost)."""
        rva, _size = self.stream(stype)
        return self.cut(rva + keep)

    def write(self, path: Union[str, Path]) -> str:
        Path(path).write_bytes(bytes(self.data))
        return str(path)


def _settings(args: Dict[str, object]) -> Dict[str, Any]:
    """A setter's keyword arguments, kept until `build` lays the stream out."""
    return {k: v for k, v in args.items() if k != "self"}


class SynthDump:
    """A minidump described in code; `build()` lays it out. See the module docstring."""

    def __init__(self, arch: int = X64, *, timestamp: int = 0x65000000, flags: int = 0, version_high: int = 0):
        self.arch = arch
        self.timestamp = timestamp
        self.flags = flags  # MINIDUMP_TYPE: 0 MiniDumpNormal, 2 WithFullMemory...
        self.version_high = version_high
        self._system: Optional[Dict[str, Any]] = None
        self._misc: Optional[Dict[str, Any]] = None
        self._threads: List[_Thread] = []
        self._modules: List[_Module] = []
        self._unloaded: List[Tuple[str, int, int, int, int]] = []
        self._memory: List[Range] = []
        self._memory64: List[Range] = []
        self._memory_info: List[Tuple[int, int, int, int, int, int, int]] = []
        self._exception: Optional[_Exception] = None
        self._function_tables: List[Tuple[int, int, int, Sequence[Tuple[int, int, int]], bytes]] = []
        self._raw: List[Tuple[int, bytes]] = []
        self._named_thread = False
        self.system_info()
        self.misc_info()

    # -- system -------------------------------------------------------------------------
    def system_info(
        self,
        *,
        os_version: Tuple[int, int, int] = (10, 0, 19045),
        processors: int = 8,
        level: int = 6,
        revision: int = 0x5504,
        product_type: int = 1,
        platform_id: int = 2,
        csd: str = "",
        vendor: Optional[str] = "GenuineIntel",
        cpuid: Tuple[int, int, int] = (0x50654, 0xBFEBFBFF, 0),
        processor_features: Tuple[int, int] = (0, 0),
        wine: Optional[Tuple[str, str, str]] = None,
    ) -> "SynthDump":
        """MINIDUMP_SYSTEM_INFO. The CPU union holds X86CpuInfo (vendor, CPUID leaf 1
        EAX/EDX, AMD extended features) when `vendor` is given, else OtherCpuInfo
        (`processor_features`). `wine`: (version, host OS, host release) written after the
        record as Wine does ("WINE", a count, three offsets, NUL-separated strings)."""
        self._system = _settings(locals())
        return self

    def no_system_info(self) -> "SynthDump":
        self._system = None
        return self

    def misc_info(
        self,
        *,
        pid: Optional[int] = 4242,
        times: Optional[Tuple[int, int, int]] = None,
        mhz: Optional[Tuple[int, int]] = None,
        build_string: Optional[str] = None,
        xstate_features: Optional[int] = None,
        size: Optional[int] = None,
    ) -> "SynthDump":
        """MINIDUMP_MISC_INFO, grown to _2 (processor MHz), _4 (build string) or _5 (XState
        configuration) as the fields given need. `times`: (create, user, kernel) seconds.
        `size` overrides SizeOfInfo and the stream's length (short or odd records)."""
        self._misc = _settings(locals())
        return self

    def no_misc_info(self) -> "SynthDump":
        self._misc = None
        return self

    # -- memory -------------------------------------------------------------------------
    def memory(self, address: int, data: bytes) -> Range:
        """A MemoryList range (MiniDumpNormal dumps). Ranges may overlap: writers do that."""
        r = Range(address, bytes(data))
        self._memory.append(r)
        return r

    def memory64(self, address: int, data: bytes) -> Range:
        """A Memory64List range (full-memory dumps): its bytes follow the previous range's."""
        r = Range(address, bytes(data))
        self._memory64.append(r)
        return r

    def memory_info(
        self,
        base: int,
        size: int,
        *,
        allocation_base: Optional[int] = None,
        allocation_protect: int = 0x04,
        state: int = 0x1000,
        protect: int = 0x04,
        type: int = 0x20000,
    ) -> "SynthDump":
        """A MINIDUMP_MEMORY_INFO entry (state 0x1000 commit / 0x2000 reserve / 0x10000 free)."""
        ab = base if allocation_base is None else allocation_base
        self._memory_info.append((base, ab, allocation_protect, size, state, protect, type))
        return self

    # -- threads, modules, exception ----------------------------------------------------
    def thread(
        self,
        tid: int,
        *,
        context: Optional[bytes] = None,
        stack: Optional[Range] = None,
        teb: int = 0,
        suspend_count: int = 0,
        priority_class: int = 0x20,
        priority: int = 0,
        name: Optional[str] = None,
    ) -> "SynthDump":
        """A MINIDUMP_THREAD. `stack` is a Range (from `memory()`, so the MemoryList holds it
        too, as writers do, or a bare `Range(...)` for a stack only the thread record has).
        `name` goes to the ThreadNames stream."""
        self._threads.append(_Thread(tid, context, stack, teb, suspend_count, priority_class, priority, name))
        self._named_thread = self._named_thread or name is not None
        return self

    def module(
        self,
        path: str,
        base: int,
        size: int,
        *,
        timestamp: int = 0x5EADBEEF,
        checksum: int = 0,
        version: Optional[Tuple[int, int, int, int]] = None,
        product_version: Optional[Tuple[int, int, int, int]] = None,
        pdb: Optional[Tuple[str, bytes, int]] = None,
        cv_record: Optional[bytes] = None,
    ) -> "SynthDump":
        """A MINIDUMP_MODULE. `version` fills VS_FIXEDFILEINFO (product version defaults to
        it); `pdb` = (path, 16-byte GUID, age) writes an RSDS CodeView record, `cv_record`
        any other bytes."""
        cv = rsds(*pdb) if pdb is not None else cv_record
        pv = product_version if product_version is not None else version
        self._modules.append(_Module(path, base, size, timestamp, checksum, version, pv, cv))
        return self

    def unloaded_module(self, path: str, base: int, size: int, *, timestamp: int = 0, checksum: int = 0) -> "SynthDump":
        self._unloaded.append((path, base, size, checksum, timestamp))
        return self

    def exception(
        self,
        tid: int,
        code: int,
        address: int,
        *,
        params: Sequence[int] = (),
        flags: int = 0,
        context: Optional[bytes] = None,
        number_parameters: Optional[int] = None,
        nested_record: int = 0,
    ) -> "SynthDump":
        """The Exception stream. `number_parameters` overrides the count (up to 15 are stored)."""
        if len(params) > 15:
            raise ValueError("EXCEPTION_RECORD holds at most 15 parameters")
        n = len(params) if number_parameters is None else number_parameters
        self._exception = _Exception(tid, code, address, flags, tuple(params), n, context, nested_record)
        return self

    def function_table(
        self, base: int, entries: Sequence[Tuple[int, int, int]], *, native: bytes = bytes(48)
    ) -> "SynthDump":
        """A FunctionTable descriptor: RUNTIME_FUNCTIONs (begin, end, unwind RVAs from `base`),
        after the native DYNAMIC_FUNCTION_TABLE bytes (`native`)."""
        lo = base + min((b for b, _e, _u in entries), default=0)
        hi = base + max((e for _b, e, _u in entries), default=0)
        self._function_tables.append((lo, hi, base, list(entries), native))
        return self

    def raw_stream(self, stype: int, payload: bytes) -> "SynthDump":
        """Any stream as given: an unknown type (Wine's 0xfff0), a duplicate, garbage."""
        self._raw.append((stype, bytes(payload)))
        return self

    # -- layout ------------------------------------------------------------------------
    def build(self) -> SynthFile:
        bodies: List[Tuple[int, bytes, int]] = []  # (type, body, align); placed after referenced blobs
        w = _Writer()
        where: Dict[str, int] = {}
        count = self._stream_count()
        w.put(bytes(32))
        dir_rva = w.put(bytes(12 * count))

        # Referenced blobs first: memory, contexts, strings, CodeView records.
        mem_at: Dict[int, int] = {}  # id(Range) -> file offset

        def place_range(r: Range) -> int:
            if id(r) not in mem_at:
                mem_at[id(r)] = w.put(r.data, 16)
            return mem_at[id(r)]

        for r in self._memory:
            place_range(r)

        # SystemInfo (with Wine's marker straight after its 56 bytes) and its CSD string.
        sysinfo_at = None
        if self._system is not None:
            csd_rva = w.put(minidump_string(self._system["csd"]))
            sysinfo_at = w.put(self._system_info_body(csd_rva) + self._wine_marker(), 8)
            where["SystemInfo"] = sysinfo_at

        thread_recs = []
        names = []
        in_memory64 = {id(r) for r in self._memory64}
        late_stacks: List[Tuple[int, Range]] = []  # (thread index, range): Memory64 bytes come last
        for k, t in enumerate(self._threads):
            ctx = (len(t.context), w.put(t.context, 16)) if t.context is not None else (0, 0)
            if t.context is not None:
                where[f"thread {t.tid} context"] = ctx[1]
            st = (0, 0, 0)
            if t.stack is not None and id(t.stack) in in_memory64:
                st = (t.stack.address, len(t.stack.data), 0)
                late_stacks.append((k, t.stack))
            elif t.stack is not None:
                st = (t.stack.address, len(t.stack.data), place_range(t.stack))
            thread_recs.append(
                struct.pack("<IIIIQQIIII", t.tid, t.suspend_count, t.priority_class, t.priority, t.teb, *st, *ctx)
            )
            if t.name is not None:
                names.append(struct.pack("<IQ", t.tid, w.put(minidump_string(t.name))))

        module_recs = []
        for i, m in enumerate(self._modules):
            name_rva = w.put(minidump_string(m.path))
            where[f"module {i} name"] = name_rva
            cv = (len(m.cv), w.put(m.cv)) if m.cv is not None else (0, 0)
            vi = fixed_file_info(m.version, m.product_version or m.version) if m.version else bytes(52)
            module_recs.append(
                struct.pack("<QIIII", m.base, m.size, m.checksum, m.timestamp, name_rva)
                + vi
                + struct.pack("<II", *cv)
                + bytes(8 + 16)  # MiscRecord, Reserved0, Reserved1
            )

        unloaded_recs = []
        for path, base, size, checksum, stamp in self._unloaded:
            unloaded_recs.append(struct.pack("<QIIII", base, size, checksum, stamp, w.put(minidump_string(path))))

        exc_ctx = (0, 0)
        if self._exception is not None and self._exception.context is not None:
            exc_ctx = (len(self._exception.context), w.put(self._exception.context, 16))
            where["exception context"] = exc_ctx[1]

        # Stream bodies.
        if self._system is not None:
            bodies.append((SYSTEM_INFO, b"", 0))  # already placed (the marker must follow it)
        if self._misc is not None:
            bodies.append((MISC_INFO, self._misc_info_body(), 4))
        if self._threads:
            bodies.append((THREAD_LIST, struct.pack("<I", len(thread_recs)) + b"".join(thread_recs), 4))
        if names:
            bodies.append((THREAD_NAMES, struct.pack("<I", len(names)) + b"".join(names), 4))
        if self._modules:
            bodies.append((MODULE_LIST, struct.pack("<I", len(module_recs)) + b"".join(module_recs), 4))
        if self._unloaded:
            bodies.append(
                (UNLOADED_MODULE_LIST, struct.pack("<III", 12, 24, len(unloaded_recs)) + b"".join(unloaded_recs), 4)
            )
        if self._memory:
            descs = [struct.pack("<QII", r.address, len(r.data), mem_at[id(r)]) for r in self._memory]
            bodies.append((MEMORY_LIST, struct.pack("<I", len(descs)) + b"".join(descs), 4))
        if self._memory_info:
            recs = [
                struct.pack("<QQIIQIIII", b, ab, ap, 0, s, st, p, t, 0) for b, ab, ap, s, st, p, t in self._memory_info
            ]
            bodies.append((MEMORY_INFO_LIST, struct.pack("<IIQ", 16, 48, len(recs)) + b"".join(recs), 8))
        if self._exception is not None:
            e = self._exception
            params = list(e.params) + [0] * (15 - len(e.params))
            # ThreadId, alignment; EXCEPTION_RECORD64 (code, flags, record, address, count,
            # alignment, 15 parameters); the context's location
            record = (e.code, e.flags, e.nested_record, e.address, e.number_parameters, 0, *params)
            body = struct.pack("<IIIIQQII15QII", e.tid, 0, *record, *exc_ctx)
            bodies.append((EXCEPTION, body, 8))
        if self._function_tables:
            bodies.append((FUNCTION_TABLE, self._function_table_body(), 8))
        for stype, payload in self._raw:
            bodies.append((stype, payload, 4))

        directory: List[Tuple[int, int, int]] = []
        for stype, body, align in bodies:
            if stype == SYSTEM_INFO:
                assert sysinfo_at is not None
                directory.append((stype, 56, sysinfo_at))
                continue
            directory.append((stype, len(body), w.put(body, align)))
        if self._memory64:
            # Header and descriptors, then every range's bytes back to back: BaseRva + sums.
            head_at = len(w.data) + (-len(w.data) % 8)
            desc_len = 16 + 16 * len(self._memory64)
            base_rva = head_at + desc_len
            body = struct.pack("<QQ", len(self._memory64), base_rva) + b"".join(
                struct.pack("<QQ", r.address, len(r.data)) for r in self._memory64
            )
            at = w.put(body, 8)
            assert at == head_at
            directory.append((MEMORY64_LIST, len(body), at))
            for r in self._memory64:
                mem_at[id(r)] = w.put(r.data, 1)
            threads_at = next(rva for t, _s, rva in directory if t == THREAD_LIST) if late_stacks else 0
            for k, r in late_stacks:  # MINIDUMP_THREAD.Stack.Memory.Rva, at +36 in the record
                struct.pack_into("<I", w.data, threads_at + 4 + 48 * k + 36, mem_at[id(r)])
        assert len(directory) == count
        for i, (stype, size, rva) in enumerate(directory):
            struct.pack_into("<III", w.data, dir_rva + 12 * i, stype, size, rva)
        version = VERSION | (self.version_high << 16)
        struct.pack_into("<IIIIIIQ", w.data, 0, SIGNATURE, version, count, dir_rva, 0, self.timestamp, self.flags)
        for r in self._memory + self._memory64:  # the first range listed at each address
            where.setdefault(f"memory {r.address:#x}", mem_at[id(r)])
        return SynthFile(w.data, dir_rva, directory, where)

    def write(self, path: Union[str, Path]) -> str:
        return self.build().write(path)

    def _stream_count(self) -> int:
        present = [
            self._system is not None,
            self._misc is not None,
            bool(self._threads),
            self._named_thread,
            bool(self._modules),
            bool(self._unloaded),
            bool(self._memory),
            bool(self._memory_info),
            self._exception is not None,
            bool(self._function_tables),
            bool(self._memory64),
        ]
        return sum(present) + len(self._raw)

    def _system_info_body(self, csd_rva: int) -> bytes:
        s = self._system
        assert s is not None
        major, minor, build = s["os_version"]
        head = struct.pack(
            "<HHHBBIIIIIHH",
            self.arch,
            s["level"],
            s["revision"],
            s["processors"],
            s["product_type"],
            major,
            minor,
            build,
            s["platform_id"],
            csd_rva,
            0x100,  # SuiteMask: VER_SUITE_SINGLEUSERTS
            0,
        )
        if s["vendor"] is not None:
            vendor = s["vendor"].encode("ascii")[:12].ljust(12, b"\0")
            cpu = vendor + struct.pack("<III", *s["cpuid"])
        else:
            cpu = struct.pack("<QQ", *s["processor_features"]) + bytes(8)
        return head + cpu

    def _wine_marker(self) -> bytes:
        s = self._system
        if s is None or s["wine"] is None:
            return b""
        parts = [p.encode() + b"\0" for p in s["wine"]]
        offs, at = [], 16  # offsets count from the word after "WINE"
        for p in parts:
            offs.append(at)
            at += len(p)
        return b"WINE" + struct.pack("<4I", len(parts), *offs) + b"".join(parts)

    def _misc_info_body(self) -> bytes:
        m = self._misc
        assert m is not None
        flags = 0
        size = 24
        out = bytearray(1364)
        if m["pid"] is not None:
            flags |= 0x1
            struct.pack_into("<I", out, 8, m["pid"])
        if m["times"] is not None:
            flags |= 0x2
            struct.pack_into("<III", out, 12, *m["times"])
        if m["mhz"] is not None:
            flags |= 0x4
            size = 44
            struct.pack_into("<II", out, 24, *m["mhz"])
        if m["build_string"] is not None:
            flags |= 0x100
            size = 832
            raw = m["build_string"].encode("utf-16-le")[:518]
            out[232 : 232 + len(raw)] = raw
        if m["xstate_features"] is not None:
            size = 1364
            struct.pack_into("<IIQ", out, 832, 528, 0x340, m["xstate_features"])
        if m["size"] is not None:
            size = m["size"]
            out += bytes(max(0, size - len(out)))
        struct.pack_into("<II", out, 0, size, flags)
        return bytes(out[:size])

    def _function_table_body(self) -> bytes:
        tables = self._function_tables
        native = len(tables[0][4])
        out = bytearray(struct.pack("<6I", 24, 32, native, 12, len(tables), 0))
        for lo, hi, base, entries, nat in tables:
            out += struct.pack("<QQQII", lo, hi, base, len(entries), 0)
            out += nat
            for b, e, u in entries:
                out += struct.pack("<III", b, e, u)
        return bytes(out)


def memory_hungry_dump(path: Path, ranges: int) -> None:
    """A valid dump whose reading takes ~250 bytes of memory per memory range: a million
    one-byte ranges (32 MB of file, ~250 MB to analyse), as a full dump of a huge sparse
    process or a hostile list has them."""
    d = SynthDump()
    stack = d.memory(0x10000, bytes(0x1000))
    context = x64_context(rip=0x140001000, rsp=0x10F00)
    d.thread(7, context=context, stack=stack, name="main")
    d.exception(7, 0xC0000005, 0x140001000, params=(0, 0), context=context)
    for i in range(ranges):
        d.memory(0x1_0000_0000 + i * 0x2000, b"\x01")
    d.build().write(path)
