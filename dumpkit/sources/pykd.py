"""Target over the current WinDbg session, through pykd 0.3.

This is the only module in dumpkit that imports `pykd`, and it does so lazily (when a
`PykdTarget` is built), so everything else imports and runs without it. The session can be
a dump or a live process: reads go to the debugger either way.

pykd 0.3 API used here (names from pykd's pymod.cpp; behaviour as seen with the real pykd
0.3.4.15 and its dbgeng under Wine, tests/windbg_real):
- memory: `loadBytes(addr, n)` returns a list of ints and raises `MemoryException` unless
  dbgeng calls the whole range one valid region (kdlib's isVaRegionValid); a dump's
  touching memory ranges count as one region, ranges with a gap between them do not.
  `loadQWords(addr, n)` likewise.
- threads: `getProcessThreads()` lists TEB addresses; `getCurrentThread()` returns the
  current TEB, `setCurrentThread(teb)` takes one; `getThreadSystemID()` is the OS thread id
  of the current thread; `reg("rip")` takes lowercase dbgeng register names.
- modules: `getModulesList()` returns `module` objects (`name()` is dbgeng's short name,
  `image()` the image path the dump recorded, `begin()`, `size()`, `timestamp()`,
  `checksum()`, `getFixedFileInfo()` the VS_FIXEDFILEINFO, zeroed or raising when there is
  none).
- exception: `getLastException()` -> `exceptionInfo` (`exceptionCode`, `exceptionFlags`,
  `exceptionRecord`, `exceptionAddress`, `parameters`) and `getLastEvent().thread` (the
  debugger's id of the event thread, turned into an OS id by `getThreadSystemID(id)`).
- `findSymbol(addr)` never raises: `mod!sym+1a` (or `-1a`), `mod+1a3f` or bare hex.
- `dbgCommand(cmd)` returns the command's normal output only (None when there was none):
  pykd captures DEBUG_OUTPUT_NORMAL, so what a command prints as an error is not returned.
  A command the engine rejects outright (a syntax error, `~~[0x999]s` for a thread that
  does not exist) raises DbgException ("IDebugControl::ExecuteWide failed, HRESULT
  0x80040205"); one that runs and fails (`.ecxr` without an exception context, `!cpuid`
  on a user-mode dump) returns None. So success is read from the output a command
  prints when it works.

What pykd has no call for comes from standard WinDbg commands: the exception *context*
(`.ecxr`, see `_exception_context`), thread names and suspend counts (`~`), the memory map
(`!address`), processor count and service pack (`vertarget`), CPU vendor/family/model/
stepping (`!cpuid` on a live target; on a dump the SystemInfo stream's level and revision
from `.dumpdebug`), the dump file name (`||`), which modules already have a PDB loaded
(`lm`, which unlike `module.symfile()` loads nothing: see `_module_has_pdb`), which module
images dbgeng maps from files (`lmv`) and what memory the dump itself holds
(`.dumpdebug`, see `_hide_mapped_images`). Stack bounds come from the TEB's NT_TIB
(StackBase at +8, StackLimit at +0x10); a minidump often lacks the TEB, and then the stack
is the dump's memory range holding SP and the readable memory above it, which is what the
dump captured.
"""

from __future__ import annotations

import os
import re
import struct
from bisect import bisect_right
from typing import Dict, Iterator, List, Optional, Tuple

from dumpkit.spans import gaps, join
from dumpkit.problems import Problems
from dumpkit.sources.memory_counters import COUNTER_STREAMS, DUMPDEBUG_STREAM, from_dumpdebug
from dumpkit.target import (
    GPR_NAMES,
    PROCESSOR_ARCHITECTURE_AMD64,
    PROCESSOR_ARCHITECTURE_INTEL,
    BundleManifest,
    DumpInfo,
    DumpFile,
    ExceptionInfo,
    Handle,
    ImageStore,
    MemoryNotInDump,
    MemoryRegion,
    Module,
    ModuleMap,
    ProcessInfo,
    ProcessMemory,
    Registers,
    SystemInfo,
    SystemMemory,
    Thread,
    UnloadedModule,
)

CHUNK = 0x10000  # bytes per loadBytes call: pykd returns a Python list of ints
MAX_SEARCH_LOADS = 4096  # loadBytes calls one read may spend finding where ranges end
MAX_STACK_PROBE = 256 << 20
KUSER_SHARED_DATA = 0x7FFE0000  # without a TEB: how far above SP to look for the stack's end
VS_FIXEDFILEINFO_SIGNATURE = 0xFEEF04BD

# dbgeng register names read for every thread; stored under dumpkit's names.
_X64_REGS = tuple(GPR_NAMES) + ("rip", "efl", "cs", "ds", "es", "fs", "gs", "ss", "mxcsr")
_X86_REGS = ("eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi", "eip", "efl", "cs", "ds", "es", "fs", "gs", "ss")
_RENAME = {"efl": "eflags"}

# `!address` protection / state / type words -> the Win32 constants MemoryRegion holds.
_PROTECT = {
    "PAGE_NOACCESS": 0x01,
    "PAGE_READONLY": 0x02,
    "PAGE_READWRITE": 0x04,
    "PAGE_WRITECOPY": 0x08,
    "PAGE_EXECUTE": 0x10,
    "PAGE_EXECUTE_READ": 0x20,
    "PAGE_EXECUTE_READWRITE": 0x40,
    "PAGE_EXECUTE_WRITECOPY": 0x80,
    "PAGE_GUARD": 0x100,
    "PAGE_NOCACHE": 0x200,
    "PAGE_WRITECOMBINE": 0x400,
}
_STATE = {"MEM_COMMIT": 0x1000, "MEM_RESERVE": 0x2000, "MEM_FREE": 0x10000}
_TYPE = {"MEM_PRIVATE": 0x20000, "MEM_MAPPED": 0x40000, "MEM_IMAGE": 0x1000000}

_HEX_ADDR = r"[0-9a-fA-F]+(?:`[0-9a-fA-F]+)?"
_ADDRESS_LINE = re.compile(rf"^\s*(\+)?\s*({_HEX_ADDR})\s+({_HEX_ADDR})\s+({_HEX_ADDR})\s+(.*)$")
_THREAD_LINE = re.compile(
    r"^[\s.#]*\d+\s+Id:\s*[0-9a-fA-F]+\.([0-9a-fA-F]+)\s+Suspend:\s*(-?\d+)"
    r"(?:.*?\"(.*)\")?\s*$"
)
# `lm`: start, end, module name, then flags and the symbol state in parentheses.
_LM_LINE = re.compile(rf"^\s*({_HEX_ADDR})\s+{_HEX_ADDR}\s+\S+\s+[^(]*\(([^()]*(?:symbols|deferred))\)")
_CPUID_LINE = re.compile(r"^\s*(\d+)\s+(\d+),(\d+),(\d+)\s+(\S+)?")
# findSymbol's `mod!name`, `mod!name+1a` or `mod!name-1a` (kdlib picks the nearest symbol,
# which may start after the address). The name is the shortest prefix that leaves a
# whole `[+-]hex` suffix, so `operator-` and `operator+` names stay whole.
_SYMBOL = re.compile(r"^([^!]+)!(.+?)(?:([+-])([0-9a-fA-F]+))?$")
_ECXR_FAILED = (
    "unable to get exception context",
    "doesn't have an exception context",
    "no exception context",
    "not a valid exception context",
)
# `.ecxr` prints the register set it switched to; without it nothing was switched.
_ECXR_REGISTERS = re.compile(r"\b[re]ip=[0-9a-fA-F]")
# `lmv`: a module's `start end name ...` line, then indented `Key: value` lines.
_LMV_MODULE = re.compile(rf"^\s*({_HEX_ADDR})\s+{_HEX_ADDR}\s+\S")
_LMV_MAPPED = re.compile(r"^\s+Mapped memory image file:\s*(\S.*?)\s*$")
# `.dumpdebug`: streams start `Stream N: type NAME (T), ...`; the memory list streams
# (MemoryListStream, Memory64ListStream) list `range#  RVA  Address  Size` rows, and the
# SystemInfo stream `Name  value` rows.
_DD_RANGE = re.compile(rf"^\s*\d+\s+[0-9a-fA-F]+\s+({_HEX_ADDR})\s+({_HEX_ADDR})\s*$")
_DD_FIELD = re.compile(r"^\s+(ProcessorLevel|ProcessorRevision)\s+([0-9a-fA-F]+)\b")


def _hex(text: str) -> int:
    return int(text.replace("`", ""), 16)


def _encode_cpuid_version(family: int, model: int, stepping: int) -> int:
    """CPUID leaf 1 EAX for a family/model/stepping triple (what `!cpuid` prints), so
    SystemInfo.cpu_family/cpu_model/cpu_stepping give the same triple back."""
    if family >= 0xF:
        base_family, ext_family = 0xF, family - 0xF
    else:
        base_family, ext_family = family, 0
    if base_family in (6, 0xF):
        base_model, ext_model = model & 0xF, (model >> 4) & 0xF
    else:
        base_model, ext_model = model & 0xF, 0
    return (ext_family & 0xFF) << 20 | ext_model << 16 | base_family << 8 | base_model << 4 | (stepping & 0xF)


class PykdTarget:
    """The debugger's current process as a `dumpkit.target.Target`.

    Built once per `!tfstack`: the constructor switches threads (and, for the exception
    thread, to the `.ecxr` context) to read registers, and restores the thread the user
    was on before returning."""

    def __init__(self, pykd_module=None, problems: Optional[Problems] = None):
        """`problems`: the run's collector, which what reading meets is added to, now and at
        every later (lazy) read (a new one when none is given)."""
        if pykd_module is None:
            import pykd

            pykd_module = pykd
        self._pykd = pykd_module
        self._MemoryException = getattr(pykd_module, "MemoryException", Exception)
        self._DbgException = getattr(pykd_module, "DbgException", Exception)
        self.soft_errors = problems if problems is not None else Problems()
        self.system: Optional[SystemInfo] = None
        self.process: Optional[ProcessInfo] = None
        self.threads: List[Thread] = []
        self.modules: List[Module] = []
        self.unloaded_modules: List[UnloadedModule] = []
        self.exception: Optional[ExceptionInfo] = None
        self.memory_regions: List[MemoryRegion] = []
        self.build_string: Optional[str] = None
        self.comment: Optional[str] = None  # a dump's comment streams are not reachable through pykd
        self.handles: Tuple[Handle, ...] = ()  # nor its handle data
        # the memory counters, from `.dumpdebug` in a dump session (a live process: not read)
        self.process_memory: Optional[ProcessMemory] = None
        self.system_memory: Optional[SystemMemory] = None
        self.image_store: Optional[ImageStore] = None  # the debugger finds images itself
        self.bundle: Optional[BundleManifest] = None
        self.xstate_enabled_features: Optional[int] = None
        self.is_dump = True
        self._pdb_bases: Optional[frozenset] = None  # from `lm`, on first use
        # What the dump file itself holds, from `.dumpdebug` (dump sessions only): its
        # memory ranges, sorted, and SystemInfo fields dbgeng has no call for.
        self._dump_ranges: List[Tuple[int, int]] = []
        self._dump_fields: Dict[str, int] = {}
        self._dump_streams: frozenset = frozenset()
        # Modules whose image dbgeng maps from a file (base -> that file, per `lmv`), and
        # the spans of them the dump does not hold, which reads must not see.
        self.mapped_image_files: Dict[int, str] = {}
        self._hidden: List[Tuple[int, int]] = []
        # The debugger's executable image path (`.exepath`), where it finds images too.
        self.exe_path: List[str] = []
        # What came from the debugger rather than the dump file, for `!tfstack` to say.
        self.exception_context_from: Optional[str] = None
        self.named_by_debugger: set = set()  # modules whose frames the debugger's PDB named
        self.dump = self._dump_info()
        self.system = self._system_info()
        self.process = self._process_info()
        self.modules = self._modules()
        self._module_map = ModuleMap(self.modules)
        self._hide_mapped_images()
        self.memory_regions = self._memory_regions()
        self._read_threads_and_exception()

    # -- Target API ---------------------------------------------------------------------
    @property
    def memory_range_count(self) -> Optional[int]:
        return None  # dbgeng does not say how the dump's memory lists were cut

    @property
    def dump_file(self) -> Optional[DumpFile]:
        return None  # dbgeng reads the file; its bytes are not this session's to copy

    def read(self, address: int, size: int) -> bytes:
        if size <= 0:
            return b""
        if address < 0 or address + size > 1 << 64:
            raise MemoryNotInDump(address, size)
        got = b"".join(self._readable_pieces(address, size))
        if len(got) != size:
            raise MemoryNotInDump(address, size)
        return got

    def read_available(self, address: int, size: int) -> bytes:
        """The longest readable prefix of [address, address + size)."""
        if size <= 0 or address < 0:
            return b""
        size = min(size, (1 << 64) - address)
        return b"".join(self._readable_pieces(address, size))

    def module_at(self, address: int) -> Optional[Module]:
        return self._module_map.find(address)

    def symbol_at(self, address: int) -> Optional[str]:
        """The debugger's name for `address` when it has real symbols (a PDB) for the
        module, in dumpkit's `module.dll!name+0x1a` form. A bare `mod+1a3f` or an address
        means no symbol; names dbgeng guesses from the export table are left to dumpkit,
        which checks them against the function's .pdata bounds."""
        module = self.module_at(address)
        if module is None or not self._module_has_pdb(module):
            return None
        try:
            text = self._pykd.findSymbol(address)
        except self._DbgException:
            return None
        m = _SYMBOL.match(str(text).strip())
        if m is None:
            return None
        name, sign, disp = m.group(2), m.group(3), int(m.group(4) or "0", 16)
        if sign == "-" and disp:
            return None  # the nearest symbol starts after the address: not its function
        out = f"{module.name}!{name}"
        if disp:
            out += f"+{disp:#x}"
        self.named_by_debugger.add(module.name)
        return out

    def function_table_entries(self) -> List[Tuple[int, int, int, int]]:
        return []  # pykd exposes no dynamic function tables

    # -- memory -------------------------------------------------------------------------
    def _load(self, address: int, size: int) -> bytes:
        if self._hidden and self._touches_hidden(address, address + size):
            raise MemoryNotInDump(address, size)
        try:
            return bytes(self._pykd.loadBytes(address, size))
        except self._MemoryException:
            raise MemoryNotInDump(address, size) from None
        except (OverflowError, ValueError):
            raise MemoryNotInDump(address, size) from None

    def _readable_pieces(self, address: int, size: int) -> Iterator[bytes]:
        """The bytes of [address, address + size) in order, up to the first unreadable one.

        kdlib's loadBytes reads a range only when dbgeng calls all of it one valid region,
        while a dump's memory list is many ranges, often touching (Wine writes thousands
        of a few bytes each); whether dbgeng joins touching ranges is not known. So a
        chunk that fails is not the end: the readable length from `pos` is found by
        binary search (if k bytes load, so do fewer) and reading resumes after it. One
        call per chunk inside a range, about log2(CHUNK) more per boundary crossed; the
        searching is capped per read (MAX_SEARCH_LOADS), beyond which the rest counts as
        unreadable and says so."""
        pos, end = address, address + size
        budget = [MAX_SEARCH_LOADS]
        while pos < end:
            n = min(CHUNK - (pos % CHUNK), end - pos)
            try:
                piece = self._load(pos, n)
            except MemoryNotInDump:
                piece = self._longest_load(pos, n, budget)
            if not piece:
                return
            yield piece
            pos += len(piece)

    def _longest_load(self, pos: int, n: int, budget: List[int]) -> bytes:
        """The most bytes from `pos` (fewer than `n`, which failed) one loadBytes gives."""
        best = self._search_load(pos, 1, budget)
        if best is None:
            return b""
        lo, hi = 1, n  # lo bytes load (best), hi bytes do not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            got = self._search_load(pos, mid, budget)
            if got is None:
                hi = mid
            else:
                lo, best = mid, got
        return best

    def _search_load(self, pos: int, n: int, budget: List[int]) -> Optional[bytes]:
        if budget[0] <= 0:
            if budget[0] == 0:
                budget[0] = -1
                self.soft_errors.add(
                    f"memory near {pos:#x}: more than {MAX_SEARCH_LOADS} debugger reads "
                    "spent finding where readable ranges end; the rest of that read "
                    "is treated as unreadable"
                )
            return None
        budget[0] -= 1
        try:
            return self._load(pos, n)
        except MemoryNotInDump:
            return None

    def _hide_mapped_images(self) -> None:
        """On a dump, dbgeng serves the bytes of a module whose image file it can find
        (at the recorded path, on `.exepath` or the symbol path) from that file, so the
        whole image looks captured: `lmv` says "Mapped memory image file". Read as memory,
        such an image has no COFF symbol table (frames would be named `func_16b0`, not
        `run_scenario`) and its data sections hold the file's initial values, not the
        process's. So, as the file reader does, only what the dump holds is memory: the
        rest of a mapped module reads as missing, and dumpkit takes the image from the
        file (recorded path, `.exepath` folders, symbol path), as `dumpkit analyze` does."""
        if not self.is_dump:
            return
        self.exe_path = _exe_path(self._command(".exepath"))
        self.mapped_image_files = _mapped_images(self._command("lmv"))
        if not self.mapped_image_files:
            return
        if not self._dump_ranges:
            self.soft_errors.add(
                "the debugger maps module images from files, but `.dumpdebug` listed none of the "
                "dump's memory ranges: those images are read as if the dump held them"
            )
            return
        held = join(self._dump_ranges)
        for base in sorted(self.mapped_image_files):
            module = self._module_map.find(base)
            if module is not None:
                self._hidden.extend(gaps(module.base, module.end, held))

    @property
    def dump_ranges(self) -> Tuple[Tuple[int, int], ...]:
        """The memory ranges (start, end) the dump file holds, as `.dumpdebug` listed them;
        empty for a live target. A read that fails inside one was refused by the debugger
        (a Ctrl-Break lands as a failed read), not missing from the dump."""
        return tuple(self._dump_ranges)

    def debugger_facts(self) -> List[str]:
        """One line per fact the report took from the debugger instead of the dump file."""
        out = []
        if self.exception_context_from:
            out.append(
                f"exception context: the debugger's `{self.exception_context_from}` (the exception record's, "
                "not where the thread list left the thread)"
            )
        if self.named_by_debugger:
            out.append("names from the PDBs the debugger has loaded: " + ", ".join(sorted(self.named_by_debugger)))
        if self.mapped_image_files:
            n = len(self.mapped_image_files)
            if self._dump_ranges:
                how = "only the bytes the dump holds are read as memory, images come from files as in `dumpkit analyze`"
            else:
                how = "read as memory: `.dumpdebug` listed no memory ranges to tell the dump's bytes from the files'"
            out.append(f"images: the debugger maps {n} module image(s) from files (`lmv`); {how}")
        if self.exe_path:
            out.append("image search: the debugger's `.exepath` " + ";".join(self.exe_path))
        return out

    def debugger_stack(self, tid: int, exception_context: bool = False) -> Optional[List[int]]:
        """The Child-SP of each frame of the debugger's own stack trace of thread `tid`, in
        its frame numbering (what `.frame N` selects), from the exception context when
        asked (as a `~~[tid]s; .ecxr; .frame N` link sees it). pykd's getStack() gives at
        most 1,024 frames. None when the debugger gives no stack. Leaves the user's thread
        and register context as they were."""
        p = self._pykd
        teb = next((t.teb for t in self.threads if t.tid == tid), None)
        if teb is None:
            return None
        original = self._call("getCurrentThread", p.getCurrentThread)
        switched = False
        try:
            if self._call(f"switch to thread {tid}", p.setCurrentThread, teb, default=False) is False:
                return None
            if exception_context:
                out = self._command_or_none(".ecxr")
                switched = True
                if not out or not _ECXR_REGISTERS.search(out):
                    return None
            try:
                return [int(f.stackOffset) for f in p.getStack()]
            except self._DbgException:
                return None
        finally:
            if switched:
                self._command(".cxr")
            if original is not None:
                self._call("restore the current thread", p.setCurrentThread, int(original))

    def _touches_hidden(self, start: int, end: int) -> bool:
        i = max(bisect_right(self._hidden, (start, 1 << 64)) - 1, 0)
        while i < len(self._hidden) and self._hidden[i][0] < end:
            if self._hidden[i][1] > start:
                return True
            i += 1
        return False

    def _readable_end(self, address: int, limit: int) -> int:
        """First unreadable address at or above `address` (at most `limit`)."""
        pos = address
        for piece in self._readable_pieces(address, limit - address):
            pos += len(piece)
        return pos

    # -- debugger commands --------------------------------------------------------------
    def _command(self, command: str) -> str:
        """The command's output ("" when it printed nothing or raised)."""
        return self._command_or_none(command) or ""

    def _command_or_none(self, command: str) -> Optional[str]:
        """The command's output ("" when it printed nothing); None when it raised."""
        try:
            out = self._pykd.dbgCommand(command)
        except self._DbgException as e:
            text = str(e).strip()
            self.soft_errors.add(
                f"debugger command `{command}` failed: {text.splitlines()[0] if text else type(e).__name__}"
            )
            return None
        return out or ""

    def _call(self, what: str, fn, *args, default=None):
        try:
            return fn(*args)
        except self._DbgException as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            self.soft_errors.add(f"{what}: {first}")
            return default

    # -- session, system, process -------------------------------------------------------
    def _dump_info(self) -> DumpInfo:
        p = self._pykd
        try:
            self.is_dump = bool(p.isDumpAnalyzing())
        except self._DbgException:
            self.is_dump = True
        try:
            if p.isKernelDebugging():
                self.soft_errors.add(
                    "kernel debugging session: dumpkit reads user-mode processes; results may be meaningless"
                )
        except self._DbgException:
            pass
        path = ""
        for line in self._command("||").splitlines():
            if ":" in line and ("dump" in line.lower() or "live" in line.lower()):
                path = line.split(":", 1)[1].strip()
                if line.lstrip().startswith("."):
                    break
        if not self.is_dump:
            path = f"live process ({path or 'debugger session'})"
        if self.is_dump:
            said = _parse_dumpdebug(self._command(".dumpdebug"))
            self._dump_ranges, self._dump_fields, self._dump_streams, counters = said
            self.process_memory, self.system_memory = from_dumpdebug(counters)
        size = 0
        if self.is_dump and path and os.path.isfile(path):
            try:
                size = os.path.getsize(path)
            except OSError:
                size = 0
        return DumpInfo(path=path or "debugger session", file_size=size)

    def _system_info(self) -> Optional[SystemInfo]:
        p = self._pykd
        is64 = self._call("is64bitSystem", p.is64bitSystem, default=True)
        try:
            mode = p.getCPUMode()
            cpu_type = getattr(p, "CPUType", None)
            if cpu_type is not None and mode == getattr(cpu_type, "I386", object()) and is64:
                self.soft_errors.add(
                    "the debugger's effective machine is x86 (WoW64 process?); use `.effmach amd64` for the 64-bit view"
                )
        except self._DbgException:
            pass
        major = minor = build = 0
        ver = self._call("getSystemVersion", p.getSystemVersion)
        if ver is not None:
            major = int(getattr(ver, "win32Major", 0) or 0)
            minor = int(getattr(ver, "win32Minor", 0) or 0)
            build = int(getattr(ver, "buildNumber", 0) or 0)
            self.build_string = str(getattr(ver, "buildString", "") or "") or None
        nproc = product = 0
        csd = ""
        for line in self._command("vertarget").splitlines():
            m = re.search(r"\((\d+) procs?\)", line)
            if m:
                nproc = int(m.group(1))
                sp = re.search(r"\((Service Pack [^)]*)\)", line)
                if sp:
                    csd = sp.group(1)
            m = re.match(r"\s*Product:\s*(\w+)", line)
            if m:
                product = {"winnt": 1, "lanmannt": 2, "server": 3}.get(m.group(1).lower(), 0)
        level = revision = cpuid_version = 0
        vendor = None
        for line in self._command("!cpuid").splitlines():
            m = _CPUID_LINE.match(line)
            if m:
                family, model, stepping = int(m.group(2)), int(m.group(3)), int(m.group(4))
                level, revision = family, (model << 8) | stepping
                if m.group(5) and m.group(5).isalnum() and len(m.group(5)) == 12:
                    vendor = m.group(5)
                    cpuid_version = _encode_cpuid_version(family, model, stepping)
                break
        if not level and self._dump_fields.get("ProcessorLevel"):
            # `!cpuid` reports nothing on a user-mode dump; the SystemInfo stream has
            # what Windows keeps of it: family (level) and model << 8 | stepping.
            level = self._dump_fields["ProcessorLevel"]
            revision = self._dump_fields.get("ProcessorRevision", 0)
        features = self._processor_features()
        return SystemInfo(
            processor_architecture=PROCESSOR_ARCHITECTURE_AMD64 if is64 else PROCESSOR_ARCHITECTURE_INTEL,
            processor_level=level,
            processor_revision=revision,
            number_of_processors=nproc,
            product_type=product,
            os_major=major,
            os_minor=minor,
            os_build=build,
            platform_id=2,
            csd_version=csd,
            cpu_vendor=vendor,
            cpuid_version=cpuid_version,
            processor_features=features,
        )

    def _processor_features(self) -> Tuple[int, int]:
        """PF_* bits (what IsProcessorFeaturePresent answers) from KUSER_SHARED_DATA, mapped
        at 0x7FFE0000 in every process: ProcessorFeatures[64] (one byte per PF_ index) at
        +0x274, XState.EnabledFeatures at +0x3D8. Live sessions and full dumps have it; a
        minidump usually does not, and then nothing is claimed."""
        raw = self.read_available(KUSER_SHARED_DATA + 0x274, 64)
        mask = 0
        if len(raw) == 64:
            for i, b in enumerate(raw):
                if b:
                    mask |= 1 << i
        xstate = self.read_available(KUSER_SHARED_DATA + 0x3D8, 8)
        if len(xstate) == 8 and struct.unpack("<Q", xstate)[0]:
            self.xstate_enabled_features = struct.unpack("<Q", xstate)[0]
        return (mask, 0)

    def _process_info(self) -> Optional[ProcessInfo]:
        pid = self._call("getProcessSystemID", self._pykd.getProcessSystemID)
        return ProcessInfo(pid=int(pid) if pid is not None else None)

    # -- modules ------------------------------------------------------------------------
    def _modules(self) -> List[Module]:
        mods = self._call("getModulesList", self._pykd.getModulesList, default=[]) or []
        out: List[Module] = []
        for m in mods:
            try:
                base, size = int(m.begin()), int(m.size())
                short = str(m.name())
            except self._DbgException as e:
                self.soft_errors.add(f"module list entry unreadable: {e}")
                continue
            path = self._call(f"module {short} image name", m.image, default="") or ""
            path = str(path)
            name = path.replace("/", "\\").rsplit("\\", 1)[-1] if path else short
            stamp = self._call(f"module {short} timestamp", m.timestamp, default=0) or 0
            check = self._call(f"module {short} checksum", m.checksum, default=0) or 0
            fv, pv = self._module_versions(m)
            out.append(
                Module(
                    name=name,
                    path=path or name,
                    base=base,
                    size=size,
                    timestamp=int(stamp),
                    checksum=int(check),
                    file_version=fv,
                    product_version=pv,
                )
            )
        # dbgeng lists modules in its own order (load order on a live process): by base,
        # so the report does not depend on how the debugger met them.
        out.sort(key=lambda mod: mod.base)
        return out

    def _module_versions(self, m) -> Tuple[Optional[str], Optional[str]]:
        """(file version, product version) from the module's VS_FIXEDFILEINFO.

        On a dump dbgeng hands back the block the dump writer stored, and a writer that
        found no version resource stores zeros: only a block whose dwSignature is
        0xFEEF04BD holds versions (as the minidump source checks), anything else would
        read as "0.0.0.0". (`module.getVersion()` reads the same block: no fallback.)"""
        try:
            info = m.getFixedFileInfo()
        except self._DbgException:
            return None, None  # no version resource: normal for many modules
        if int(getattr(info, "Signature", 0) or 0) != VS_FIXEDFILEINFO_SIGNATURE:
            return None, None
        return (
            _version(info.FileVersionMS, info.FileVersionLS),
            _version(info.ProductVersionMS, info.ProductVersionLS),
        )

    def _module_has_pdb(self, module: Module) -> bool:
        """Whether dbgeng has already loaded a PDB for the module.

        Asked of `lm`, which reports each module's symbol state without loading any.
        pykd's own calls would load: `module.symfile()` and `findSymbol()` open a kdlib
        DIA session for the module, which searches the symbol path (symbol servers
        included, so it may download) and opens the PDB; for TensorFlow's multi-GB PDBs
        that is minutes per module. So only modules whose PDB the debugger already holds
        (`.reload /f mod.dll` or `ld mod` loads one) are asked for names; for the rest
        dumpkit names frames itself."""
        if self._pdb_bases is None:
            self._pdb_bases = frozenset(
                base for base, state in _loaded_symbols(self._command("lm")) if "pdb symbols" in state
            )
        return module.base in self._pdb_bases

    # -- memory map ---------------------------------------------------------------------
    def _memory_regions(self) -> List[MemoryRegion]:
        """`!address`'s table: one line per region, `+` where an allocation starts. On a
        minidump without a memory-info stream the debugger has no map: empty list."""
        regions: List[MemoryRegion] = []
        alloc_base = 0
        for line in self._command("!address").splitlines():
            m = _ADDRESS_LINE.match(line)
            if m is None:
                continue
            base, end, size = _hex(m.group(2)), _hex(m.group(3)), _hex(m.group(4))
            if end != base + size:
                continue
            words = m.group(5).replace("|", " ").split()
            state = next((_STATE[w] for w in words if w in _STATE), 0)
            mtype = next((_TYPE[w] for w in words if w in _TYPE), 0)
            protect = 0
            for w in words:
                protect |= _PROTECT.get(w, 0)
            if m.group(1) or state == 0x10000:
                alloc_base = base
            regions.append(
                MemoryRegion(
                    base=base,
                    allocation_base=0 if state == 0x10000 else alloc_base,
                    allocation_protect=0,
                    size=size,
                    state=state,
                    protect=protect,
                    type=mtype,
                )
            )
        regions.sort(key=lambda r: r.base)
        return regions

    # -- threads and the exception ------------------------------------------------------
    def _registers(self, what: str) -> Optional[Registers]:
        names = _X64_REGS if self.system is None or self.system.is_x64 else _X86_REGS
        values: Dict[str, int] = {}
        for name in names:
            try:
                values[_RENAME.get(name, name)] = int(self._pykd.reg(name))
            except self._DbgException:
                continue
        ip_name = "rip" if "rip" in names else "eip"
        if ip_name not in values:
            self.soft_errors.add(f"{what}: registers unreadable")
            return None
        return Registers(values)

    def _thread_details(self) -> Dict[int, Tuple[int, Optional[str]]]:
        """tid -> (suspend count, name) from `~`."""
        out: Dict[int, Tuple[int, Optional[str]]] = {}
        for line in self._command("~").splitlines():
            m = _THREAD_LINE.match(line)
            if m:
                out[int(m.group(1), 16)] = (int(m.group(2)), m.group(3) or None)
        return out

    def _stack_range(self, teb: int, sps: List[int]) -> Tuple[int, int]:
        """(lowest stack address dumpkit may read from, stack base)."""
        sps = [s for s in sps if s]
        try:
            base, limit = (int(x) for x in self._pykd.loadQWords(teb + 8, 2))
        except self._MemoryException:
            base = limit = 0
        except self._DbgException:
            base = limit = 0
        if base and limit < base and sps and any(limit - 0x100000 <= s < base for s in sps):
            low = min(s for s in sps if s < base)
            return min(max(low, limit), base), base
        if not sps:
            return 0, 0
        sp = min(sps)
        end = self._readable_end(sp, min(sp + MAX_STACK_PROBE, 1 << 64))
        # The dump's stack range may start a little below SP (what the writer captured).
        i = bisect_right(self._dump_ranges, (sp, 1 << 64)) - 1
        if i >= 0 and self._dump_ranges[i][0] <= sp < self._dump_ranges[i][1]:
            return self._dump_ranges[i][0], end
        return sp, end

    def _read_threads_and_exception(self) -> None:
        p = self._pykd
        original = self._call("getCurrentThread", p.getCurrentThread)
        tebs = self._call("getProcessThreads", p.getProcessThreads, default=[]) or []
        details = self._thread_details()
        raw: List[Tuple[int, int, Optional[Registers]]] = []
        try:
            for teb in tebs:
                teb = int(teb)
                if self._call(f"switch to thread at TEB {teb:#x}", p.setCurrentThread, teb, default=False) is False:
                    continue
                tid = self._call(f"thread at TEB {teb:#x}: OS id", p.getThreadSystemID)
                if tid is None:
                    continue
                raw.append((int(tid), teb, self._registers(f"thread {int(tid)}")))
            self.exception = self._exception(raw)
        finally:
            if original is not None:
                self._call("restore the current thread", p.setCurrentThread, int(original))
        ex = self.exception
        for tid, teb, ctx in raw:
            sps = [ctx.sp] if ctx is not None else []
            if ex is not None and ex.thread_id == tid and ex.context is not None:
                sps.append(ex.context.sp)
            lo, hi = self._stack_range(teb, sps)
            suspend, name = details.get(tid, (0, None))
            self.threads.append(
                Thread(
                    tid=tid,
                    context=ctx,
                    stack_start=lo,
                    stack_size=max(0, hi - lo),
                    teb=teb,
                    name=name,
                    suspend_count=suspend,
                )
            )

    def _exception(self, raw) -> Optional[ExceptionInfo]:
        p = self._pykd
        if self.is_dump and self._dump_streams and "ExceptionStream" not in self._dump_streams:
            # dbgeng then makes up a break-instruction event (0x80000003 at address 0);
            # the dump recorded no exception, as `dumpkit analyze` says.
            return None
        try:
            info = p.getLastException()
        except self._DbgException:
            return None  # the last event was not an exception (e.g. a manual break-in)
        tid = None
        try:
            ev = p.getLastEvent()
            tid = int(p.getThreadSystemID(ev.thread))
        except self._DbgException:
            pass
        except (AttributeError, TypeError, ValueError):
            pass
        if tid is None:
            tid = self._call("current thread OS id", p.getThreadSystemID)
            tid = int(tid) if tid is not None else 0
            self.soft_errors.add("exception thread unknown; assuming the current thread")
        teb = next((t for t_id, t, _ in raw if t_id == tid), None)
        context = self._exception_context(teb) if teb is not None else None
        params = tuple(int(x) for x in list(info.parameters)[:15])
        return ExceptionInfo(
            code=int(info.exceptionCode) & 0xFFFFFFFF,
            flags=int(info.exceptionFlags),
            address=int(info.exceptionAddress),
            parameters=params,
            thread_id=tid,
            context=context,
            nested=bool(int(getattr(info, "exceptionRecord", 0) or 0)),
        )

    def _exception_context(self, teb: int) -> Optional[Registers]:
        """The exception record's context, the one the crash happened in.

        On a dump WinDbg starts on the exception thread but shows the context the thread
        list recorded (where the dump writer found the thread); `.ecxr` switches the
        register context to the exception record's, `reg()` then reads that, and `.cxr`
        (no argument) resets to the thread's default context. On a live exception event
        `.ecxr` gives the same registers the thread already has.

        `.ecxr` has worked only if it printed the registers it switched to: its error
        ("Unable to get exception context") goes to the error output, which dbgCommand
        does not return, so a failure usually arrives as no output at all. Reading
        `reg()` then would pass the thread's own registers off as the exception's."""
        p = self._pykd
        if self._call("switch to the exception thread", p.setCurrentThread, teb, default=False) is False:
            return None
        out = self._command_or_none(".ecxr")
        try:
            if out is None or not _ECXR_REGISTERS.search(out) or any(s in out.lower() for s in _ECXR_FAILED):
                if not self.is_dump:
                    return None  # a live exception event: the thread's registers are the exception's
                if out is None:
                    said = "raised an error"
                elif out.strip():
                    said = f"printed {out.strip().splitlines()[0][:200]!r} instead of registers"
                else:
                    said = "printed no registers"
                self.soft_errors.add(
                    f"the debugger has no exception context (`.ecxr` {said}); "
                    "the exception thread's own context is used"
                )
                return None
            self.exception_context_from = ".ecxr"
            return self._registers("exception context")
        finally:
            self._command(".cxr")


def _loaded_symbols(lm_output: str) -> List[Tuple[int, str]]:
    """(module base, symbol state) per line of `lm`: `(deferred)`, `(pdb symbols)`,
    `(private pdb symbols)`, `(export symbols)`..., lowercased."""
    out = []
    for line in lm_output.splitlines():
        m = _LM_LINE.match(line)
        if m:
            out.append((_hex(m.group(1)), m.group(2).strip().lower()))
    return out


def _exe_path(output: str) -> List[str]:
    """The elements of the debugger's executable image path, from `.exepath`'s first line
    ("Executable image search path is: A;B"; empty when none is set)."""
    for line in output.splitlines():
        head, sep, rest = line.partition("search path is:")
        if sep and not head.strip().lower().startswith("expanded"):
            return [e.strip() for e in rest.split(";") if e.strip()]
    return []


def _mapped_images(lmv_output: str) -> Dict[int, str]:
    """module base -> the image file dbgeng maps into the dump's address space, per `lmv`."""
    out: Dict[int, str] = {}
    base: Optional[int] = None
    for line in lmv_output.splitlines():
        m = _LMV_MODULE.match(line)
        if m:
            base = _hex(m.group(1))
            continue
        m = _LMV_MAPPED.match(line)
        if m and base is not None:
            out[base] = m.group(1)
    return out


def _parse_dumpdebug(text: str) -> Tuple[List[Tuple[int, int]], Dict[str, int], frozenset, str]:
    """(the dump's memory ranges as sorted (start, end), SystemInfo fields, stream type
    names, the memory-counter streams' lines for memory_counters.from_dumpdebug) from
    `.dumpdebug`, in one pass: a full dump's lists a million ranges."""
    ranges: List[Tuple[int, int]] = []
    fields: Dict[str, int] = {}
    streams = set()
    counters: List[str] = []
    stream = ""
    for line in text.splitlines():
        m = DUMPDEBUG_STREAM.match(line)
        if m:
            stream = m.group(1)
            streams.add(stream)
            if stream in COUNTER_STREAMS:
                counters.append(line)
            continue
        if stream in COUNTER_STREAMS:
            counters.append(line)
        elif stream in ("MemoryListStream", "Memory64ListStream"):
            m = _DD_RANGE.match(line)
            if m:
                start, size = _hex(m.group(1)), _hex(m.group(2))
                if size and start + size <= 1 << 64:
                    ranges.append((start, start + size))
        elif stream == "SystemInfoStream":
            m = _DD_FIELD.match(line)
            if m:
                fields[m.group(1)] = int(m.group(2), 16)
    ranges.sort()
    return ranges, fields, frozenset(streams), "\n".join(counters)


def _version(ms: int, ls: int) -> str:
    ms, ls = int(ms), int(ls)
    return f"{ms >> 16}.{ms & 0xFFFF}.{ls >> 16}.{ls & 0xFFFF}"


def open_session(pykd_module=None, problems: Optional[Problems] = None) -> PykdTarget:
    """The current debugger session as a Target; `problems`: see PykdTarget."""
    return PykdTarget(pykd_module, problems)
