"""A stand-in for pykd 0.3 inside WinDbg, with a minidump opened, for tests on any OS.

It emulates the debugger, not dumpkit: everything it answers comes from the raw minidump
reader (`dumpkit.sources.minidump.open_dump`: thread contexts, memory, the module list,
the exception stream, SystemInfo) and nothing from dumpkit's analysis. Only the pykd
functions dumpkit's pykd source and windbg_scripts/tfstack.py call are here, with pykd
0.3's names, signatures, return types and errors (pykd/pymod.cpp and friends):

- `loadBytes(offset, count, phyAddr=False)` -> list of ints; `MemoryException` unless
  the whole range is one valid region for dbgeng (kdlib's `isVaRegionValid`): the dump's
  memory ranges, touching ones joined (the real engine reads across them in one call),
  plus the images it maps from files (below). `loadQWords` likewise.
- image mapping, as dbgeng does on a dump: a module whose image file it finds (at the path
  the dump recorded, or by name + TimeDateStamp + SizeOfImage in a `.exepath` folder
  after `.reload`) is mapped into the address space, so `loadBytes` at its base returns
  the file's header though the dump does not hold it; `lmv` then says "Mapped memory
  image file". Where the dump holds bytes of such a module, those are returned.
- `getProcessThreads()` -> TEB addresses; `getCurrentThread()` -> the current TEB;
  `setCurrentThread(teb)`; `getThreadSystemID(id=-1)` (debugger thread id -> OS id).
- `reg(name)` takes lowercase dbgeng names (`rip`, `rsp`, `efl`...).
- `getModulesList()` / `module(name_or_offset)`: `name()` is dbgeng's short name (file
  name without extension), `image()` the path, `begin()`, `size()`,
  `timestamp()`, `checksum()`, `getFixedFileInfo()` (the dump's VS_FIXEDFILEINFO as
  dbgeng hands it back: for a module without a version resource the writer stored a
  zeroed block, Signature 0, and that is what comes back).
- `getLastEvent()` (`type`, `process`, `thread` = debugger thread id), `getLastException()`
  (`exceptionCode`, `exceptionFlags`, `exceptionRecord`, `exceptionAddress`, `parameters`;
  raises when the last event is not an exception).
- `getStack()` -> `stackFrame`s (`stackOffset` = Child-SP): the debugger's own unwind,
  which the stand-in does not have; tests set it (`_set_stack_for_tests`).
- `findSymbol(offset, showDisplacement=True)` never raises: like WinDbg without PDBs it
  knows no symbol, so it returns `mod+1a3f`, or bare hex outside every module.
- `dbgCommand(command, suppressOutput=True)` -> the command's normal output as str, or
  None when there is none. As in pykd (kdlib's output reader keeps DEBUG_OUTPUT_NORMAL
  only), what a command prints as an error is not returned: a failing `.ecxr`, or
  `!cpuid` on a user-mode dump, gives None; the error text is kept for tests
  (`_errors_for_tests`). A command the engine cannot run at all (unknown, a syntax
  error) raises DbgException with ExecuteWide's HRESULT, as real pykd does.
  Emulated: `.ecxr`, `.cxr`, `~`, `||`, `vertarget`, `!cpuid`, `!address`, `lm` (every
  module `(deferred)`, as in WinDbg before anything asked for symbols, unless a test
  marked its PDB loaded with `_load_pdb_for_tests`), `lmv`, `.dumpdebug` (header,
  SystemInfo, the stream list and the memory ranges), `.exepath`, `.reload`.
- on a dump without an exception record, dbgeng makes up a break-instruction event
  (0x80000003 at address 0, thread 0): `getLastEvent()` / `getLastException()` say so.

Each behaviour above that differs from pykd's documentation was seen with the real pykd
0.3.4.15 and dbgeng under Wine (tests/windbg_real): joined touching ranges, image
mapping, raising on rejected commands, `!cpuid` and `.cxr` printing nothing on a dump,
the made-up break-in event.
- `dprintln(str, dml=False)` takes a str only; the output is collected.
- also `isDumpAnalyzing`, `isKernelDebugging`, `is64bitSystem`, `getCPUMode` (`CPUType`),
  `getSystemVersion` (`systemVersion`), `getProcessSystemID`, `getSymbolPath`.

As in WinDbg on a dump, the session starts on the exception thread showing the thread
list's context; `.ecxr` switches the register context to the exception record's and
`.cxr` (or a thread switch) goes back.

Install it with `monkeypatch.setitem(sys.modules, "pykd", fake)` after
`fake._open_dump_for_tests(path)`.
"""

from __future__ import annotations

import os
from bisect import bisect_right as _bisect_right
from typing import Dict, List, Optional, Tuple

from dumpkit.sources.minidump import MinidumpTarget, open_dump
from dumpkit.target import MemoryNotInDump

__version__ = "0.3.4.15 (dumpkit test stand-in)"
version = __version__


class DbgException(Exception):
    pass


class MemoryException(DbgException):
    pass


class CPUType:
    I386 = "I386"
    AMD64 = "AMD64"


class eventType:
    Breakpoint = "Breakpoint"
    Exception = "Exception"


class _State:
    def __init__(self, target: MinidumpTarget, path: str):
        self.target = target
        self.path = path
        self.current = 0
        self.ecxr = False
        self.output: List[Tuple[str, bool]] = []
        self.commands: List[str] = []
        self.errors: List[str] = []  # the debugger's error output, which dbgCommand drops
        self.pdbs: Dict[int, str] = {}  # module base -> PDB path dbgeng has loaded
        self.ranges = target.memory_ranges()  # sorted, overlaps removed; touching ones kept apart
        joined: List[Tuple[int, int]] = []
        for a, b in self.ranges:  # dbgeng reads across touching ranges as one region
            if joined and a <= joined[-1][1]:
                joined[-1] = (joined[-1][0], max(b, joined[-1][1]))
            else:
                joined.append((a, b))
        self.range_starts = [a for a, _ in joined]
        self.range_ends = [b for _, b in joined]
        self.exepath: List[str] = []
        self.stacks: Dict[Tuple[int, bool], List[int]] = {}  # (tid, .ecxr) -> dbgeng's Child-SPs
        self.mapped: Dict[int, "_MappedImage"] = {}  # module base -> the file dbgeng maps
        self._map_images()
        ex = target.exception
        if ex is not None:
            for i, t in enumerate(target.threads):
                if t.tid == ex.thread_id:
                    self.current = i  # WinDbg starts on the event thread

    def _map_images(self) -> None:
        """Which images dbgeng maps: the file at the recorded path, else one in an
        `.exepath` folder with the module's name, TimeDateStamp and SizeOfImage."""
        self.mapped = {}
        for m in self.target.modules:
            name = m.path.replace("/", "\\").rsplit("\\", 1)[-1]
            candidates = [_host_path(m.path)] + [os.path.join(_host_path(d), name) for d in self.exepath]
            for path in candidates:
                image = _MappedImage.open(path) if path else None
                if image is not None and image.matches(m.timestamp, m.size):
                    self.mapped[m.base] = image
                    break

    def mapped_at(self, address: int) -> Optional[Tuple[int, "_MappedImage"]]:
        for base, image in self.mapped.items():
            if base <= address < base + image.size_of_image:
                return base, image
        return None


def _host_path(windows_path: str) -> str:
    """Where a path the dump recorded is on this machine, as Wine sees it (Z: is /)."""
    p = windows_path.replace("\\", "/")
    if len(p) > 2 and p[1] == ":" and p[0] in "zZ":
        return p[2:]
    return p if p.startswith("/") else ""


class _MappedImage:
    """A PE file laid out as the loader maps it: headers, then each section at its RVA."""

    def __init__(self, path: str, data: bytes):
        self.path = path
        self.data = data
        pe = int.from_bytes(data[0x3C:0x40], "little")
        nsec = int.from_bytes(data[pe + 6 : pe + 8], "little")
        opt = pe + 24
        opt_size = int.from_bytes(data[pe + 20 : pe + 22], "little")
        self.timestamp = int.from_bytes(data[pe + 8 : pe + 12], "little")
        self.size_of_image = int.from_bytes(data[opt + 56 : opt + 60], "little")
        self.size_of_headers = int.from_bytes(data[opt + 60 : opt + 64], "little")
        self.sections = []
        for i in range(nsec):
            h = opt + opt_size + 40 * i
            vsize, va, rsize, raw = (int.from_bytes(data[h + o : h + o + 4], "little") for o in (8, 12, 16, 20))
            self.sections.append((va, max(vsize, rsize), raw, rsize))

    @classmethod
    def open(cls, path: str) -> Optional["_MappedImage"]:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            return None
        if data[:2] != b"MZ" or len(data) < 0x40:
            return None
        try:
            return cls(path, data)
        except (IndexError, ValueError):
            return None

    def matches(self, timestamp: int, size: int) -> bool:
        return self.timestamp == timestamp and self.size_of_image == size

    def byte(self, rva: int) -> int:
        if rva < self.size_of_headers:
            return self.data[rva] if rva < len(self.data) else 0
        for va, vsize, raw, rsize in self.sections:
            if va <= rva < va + vsize:
                off = rva - va
                return self.data[raw + off] if off < rsize and raw + off < len(self.data) else 0
        return 0


_state: Optional[_State] = None


# ----------------------------------------------------------------------------- test hooks
def _open_dump_for_tests(path: str) -> None:
    """Fake-only: open `path` as if `windbg -z path` had been run."""
    global _state
    if _state is not None:
        _state.target.close()
    _state = _State(open_dump(str(path)), os.path.abspath(str(path)))


def _close_for_tests() -> None:
    global _state
    if _state is not None:
        _state.target.close()
    _state = None


def _output_for_tests(dml: Optional[bool] = None) -> str:
    """Everything printed with dprintln (only DML or only plain when asked)."""
    return "".join(text for text, is_dml in _s().output if dml is None or is_dml == dml)


def _commands_for_tests() -> List[str]:
    return list(_s().commands)


def _load_pdb_for_tests(short_name: str, pdb_path: str) -> None:
    """Fake-only: as after `ld short_name`: `lm` reports the module's PDB as loaded."""
    base = next(m.base for m in _s().target.modules if _short_name(m.name).lower() == short_name.lower())
    _s().pdbs[base] = pdb_path


def _errors_for_tests() -> List[str]:
    """What commands printed to the error output (shown in WinDbg, not returned)."""
    return list(_s().errors)


def _s() -> _State:
    if _state is None:
        raise DbgException("no debug session (call _open_dump_for_tests first)")
    return _state


def _check_int(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what}: expected int, got {type(value).__name__}")
    return value


# ----------------------------------------------------------------------------- session
def isDumpAnalyzing() -> bool:
    _s()
    return True


def isKernelDebugging() -> bool:
    _s()
    return False


def is64bitSystem() -> bool:
    sysinfo = _s().target.system
    return sysinfo is None or sysinfo.processor_architecture in (9, 12)


def getCPUMode():
    return CPUType.AMD64 if is64bitSystem() else CPUType.I386


class systemVersion:
    def __init__(self, major: int, minor: int, build: int, build_string: str, sp: int):
        self.win32Major = major
        self.win32Minor = minor
        self.buildNumber = build
        self.buildString = build_string
        self.servicePack = sp

    def __str__(self) -> str:
        return f"Major Version: {self.win32Major}\nMinor Version: {self.win32Minor}\nDescription: {self.buildString}\n"


def getSystemVersion() -> systemVersion:
    t = _s().target
    s = t.system
    if s is None:
        raise DbgException("system version unavailable")
    sp = 0
    if s.csd_version.startswith("Service Pack "):
        try:
            sp = int(s.csd_version.split()[-1])
        except ValueError:
            sp = 0
    return systemVersion(s.os_major, s.os_minor, s.os_build, t.build_string or "", sp)


def getProcessSystemID(id: int = -1) -> int:
    p = _s().target.process
    if p is None or p.pid is None:
        raise DbgException("process id unavailable")
    return p.pid


def getSymbolPath() -> str:
    _s()
    return ""  # like a WinDbg with no .sympath set


# ----------------------------------------------------------------------------- memory
def loadBytes(offset: int, count: int, phyAddr: bool = False) -> List[int]:
    _check_int(offset, "offset")
    _check_int(count, "count")
    if phyAddr:
        raise DbgException("physical memory is not available in a user-mode dump")
    if count == 0:
        return []
    if offset < 0 or count < 0 or offset + count > 1 << 64:
        raise MemoryException(f"Memory exception at 0x{offset & ((1 << 64) - 1):x} type:Virtual")
    s = _s()
    out: List[int] = []
    pos, end = offset, offset + count
    while pos < end:  # dump memory first, the mapped image file where the dump has none
        i = _bisect_right(s.range_starts, pos) - 1
        if i >= 0 and pos < s.range_ends[i]:
            n = min(end, s.range_ends[i]) - pos
            try:
                out += list(s.target.read(pos, n))
            except MemoryNotInDump:
                raise MemoryException(f"Memory exception at 0x{offset:x} type:Virtual") from None
            pos += n
            continue
        mapped = s.mapped_at(pos)
        if mapped is None:  # not one valid region: isVaRegionValid fails
            raise MemoryException(f"Memory exception at 0x{offset:x} type:Virtual")
        base, image = mapped
        stop = min(end, base + image.size_of_image)
        if i + 1 < len(s.range_starts):
            stop = min(stop, s.range_starts[i + 1])
        out += [image.byte(a - base) for a in range(pos, stop)]
        pos = stop
    return out


def loadQWords(offset: int, count: int, phyAddr: bool = False) -> List[int]:
    raw = bytes(loadBytes(offset, 8 * _check_int(count, "count"), phyAddr))
    return [int.from_bytes(raw[i : i + 8], "little") for i in range(0, len(raw), 8)]


# ----------------------------------------------------------------------------- threads
def getProcessThreads() -> List[int]:
    return [t.teb for t in _s().target.threads]


def getCurrentThread() -> int:
    s = _s()
    return s.target.threads[s.current].teb


def setCurrentThread(offset: int) -> None:
    s = _s()
    _check_int(offset, "offset")
    for i, t in enumerate(s.target.threads):
        if t.teb == offset:
            s.current = i
            s.ecxr = False  # a thread switch shows that thread's own context
            return
    raise DbgException(f"no thread with TEB 0x{offset:x}")


def getThreadSystemID(id: int = -1) -> int:
    s = _s()
    index = s.current if id == -1 else id
    if not 0 <= index < len(s.target.threads):
        raise DbgException(f"no thread with debugger id {id}")
    return s.target.threads[index].tid


_REG_ALIASES = {"efl": "eflags"}


def reg(name: str) -> int:
    s = _s()
    if not isinstance(name, str):
        raise TypeError("reg() takes a register name")
    if name != name.lower():
        raise DbgException(f"invalid register name '{name}'")
    thread = s.target.threads[s.current]
    ctx = thread.context
    ex = s.target.exception
    if s.ecxr and ex is not None and ex.context is not None:
        ctx = ex.context
    if ctx is None:
        raise DbgException("register context unavailable")
    value = ctx.values.get(_REG_ALIASES.get(name, name))
    if value is None:
        raise DbgException(f"invalid register name '{name}'")
    return value


class stackFrame:
    def __init__(self, ip: int, sp: int, ret: int = 0, fp: int = 0):
        self.instructionOffset = self.ip = ip
        self.stackOffset = self.sp = sp  # the frame's Child-SP, as `k` shows it
        self.returnOffset = self.ret = ret
        self.frameOffset = self.fp = fp


def getStack(inline: bool = False) -> List[stackFrame]:
    """The debugger's own stack trace of the current thread (from the exception context
    after `.ecxr`). The stand-in has no unwinder of its own (dbgeng's differs from
    dumpkit's, which it must not borrow): a test gives the trace dbgeng would, with
    `_set_stack_for_tests`; without one, no trace."""
    s = _s()
    key = (s.target.threads[s.current].tid, s.ecxr)
    sps = s.stacks.get(key)
    if sps is None:
        raise DbgException("stack trace unavailable (the stand-in has none for this thread)")
    return [stackFrame(0, sp) for sp in sps[:1024]]  # pykd returns at most 1,024 frames


def _set_stack_for_tests(tid: int, child_sps: List[int], exception_context: bool = False) -> None:
    """Fake-only: the Child-SPs of dbgeng's stack trace of thread `tid`, frame 0 first."""
    _s().stacks[(tid, exception_context)] = list(child_sps)


# ----------------------------------------------------------------------------- events
class debugEvent:
    def __init__(self, type_, process: int, thread: int):
        self.type = type_
        self.process = process
        self.thread = thread


class exceptionInfo:
    def __init__(self, code: int, flags: int, record: int, address: int, params, first: bool):
        self.firstChance = first
        self.exceptionCode = code
        self.exceptionFlags = flags
        self.exceptionRecord = record
        self.exceptionAddress = address
        self._params = list(params)

    @property
    def parameters(self) -> List[int]:
        return list(self._params)

    def __str__(self) -> str:
        lines = [
            f"FirstChance= {self.firstChance}",
            f"ExceptionCode= 0x{self.exceptionCode:x}",
            f"ExceptionFlags= 0x{self.exceptionFlags:x}",
            f"ExceptionRecord= 0x{self.exceptionRecord:x}",
            f"ExceptionAddress= 0x{self.exceptionAddress:x}",
        ]
        lines += [f"Param[{i}]= 0x{p:x}" for i, p in enumerate(self._params)]
        return "\n".join(lines) + "\n"


def _event_thread_index() -> Optional[int]:
    s = _s()
    ex = s.target.exception
    if ex is None:
        return None
    for i, t in enumerate(s.target.threads):
        if t.tid == ex.thread_id:
            return i
    return None


def getLastEvent() -> debugEvent:
    i = _event_thread_index()
    # A dump without an exception record: dbgeng makes up a break-in on thread 0.
    return debugEvent(eventType.Exception, 0, 0 if i is None else i)


def getLastException() -> exceptionInfo:
    ex = _s().target.exception
    if ex is None:  # dbgeng's made-up break instruction (code 0x80000003, address 0)
        return exceptionInfo(0x80000003, 0, 0, 0, [], first=False)
    # The dump's record; `nested` only says whether ExceptionRecord was non-null.
    return exceptionInfo(ex.code, ex.flags, 1 if ex.nested else 0, ex.address, ex.parameters, first=not ex.flags & 1)


# ----------------------------------------------------------------------------- modules
class FixedFileInfo:
    """VS_FIXEDFILEINFO's fields under pykd's names; all zero without versions."""

    def __init__(self, file_version: Optional[str], product_version: Optional[str]):
        fv = [int(x) for x in file_version.split(".")] if file_version else [0, 0, 0, 0]
        pv = [int(x) for x in (product_version or file_version).split(".")] if file_version else fv
        self.Signature = 0xFEEF04BD if file_version else 0
        self.StrucVersion = 0x10000 if file_version else 0
        self.FileVersionMS = fv[0] << 16 | fv[1]
        self.FileVersionLS = fv[2] << 16 | fv[3]
        self.ProductVersionMS = pv[0] << 16 | pv[1]
        self.ProductVersionLS = pv[2] << 16 | pv[3]


class module:
    def __init__(self, name_or_offset):
        mods = _s().target.modules
        found = None
        if isinstance(name_or_offset, int) and not isinstance(name_or_offset, bool):
            found = next((m for m in mods if m.contains(name_or_offset)), None)
        elif isinstance(name_or_offset, str):
            want = name_or_offset.lower()
            found = next((m for m in mods if _short_name(m.name).lower() == want), None)
        if found is None:
            raise DbgException(f"module not found: {name_or_offset!r}")
        self._m = found

    def name(self) -> str:
        return _short_name(self._m.name)

    def begin(self) -> int:
        return self._m.base

    def size(self) -> int:
        return self._m.size

    def image(self) -> str:
        return self._m.path

    def timestamp(self) -> int:
        return self._m.timestamp

    def checksum(self) -> int:
        return self._m.checksum

    def getFixedFileInfo(self) -> FixedFileInfo:
        # The sample dumps' writers zero the block of a module without version resource
        # (the raw reader reports those as file_version None); it comes back as stored.
        return FixedFileInfo(self._m.file_version, self._m.product_version)

    def __int__(self) -> int:
        return self._m.base

    def __str__(self) -> str:
        return (
            f"Module: {self.name()}\nStart: {self.begin():x} Size: {self.size():x}\nImage: {self.image()}\nSymbols: \n"
        )


def _short_name(file_name: str) -> str:
    base = file_name.rsplit(".", 1)[0] if "." in file_name else file_name
    return base


def getModulesList() -> List[module]:
    # dbgeng's order, not sorted: the dump's module list order (load order, exe first).
    return [module(m.base) for m in _s().target.modules]


def findSymbol(offset: int, showDisplacement: bool = True) -> str:
    for m in _s().target.modules:
        if m.contains(offset):
            short = _short_name(m.name)
            return f"{short}+{offset - m.base:x}" if showDisplacement else short
    return f"{offset:x}"


# ----------------------------------------------------------------------------- output
def dprintln(str, dml: bool = False) -> None:
    if not isinstance(str, type("")):
        raise TypeError("dprintln() takes a string")
    _s().output.append((str + "\n", bool(dml)))


# ----------------------------------------------------------------------------- commands
def dbgCommand(command: str, suppressOutput: bool = True) -> Optional[str]:
    s = _s()
    if not isinstance(command, str):
        raise TypeError("dbgCommand() takes a string")
    s.commands.append(command)
    cmd = command.strip()
    handler = _COMMANDS.get(cmd.split(" ", 1)[0] if cmd else "")
    if handler is None:  # the engine rejects it: pykd raises
        _error(s, f"       ^ Syntax error in '{command}'\n")
        raise DbgException("Call IDebugControl::ExecuteWide failed\nHRESULT 0x80040205")
    out = handler(s, cmd)
    return out or None


def _error(s: _State, text: str) -> str:
    """Print `text` to the error output: the user sees it, dbgCommand does not return it."""
    s.errors.append(text)
    return ""


_ECXR_ROWS_X64 = (
    ("rax", "rbx", "rcx"),
    ("rdx", "rsi", "rdi"),
    ("rip", "rsp", "rbp"),
    ("r8", "r9", "r10"),
    ("r11", "r12", "r13"),
    ("r14", "r15"),
)
_ECXR_ROWS_X86 = (("eax", "ebx", "ecx", "edx", "esi", "edi"), ("eip", "esp", "ebp"))


def _cmd_ecxr(s: _State, _cmd: str) -> str:
    ex = s.target.exception
    if ex is None or ex.context is None:
        return _error(
            s, "Minidump doesn't have an exception context\nUnable to get exception context, HRESULT 0x80004002\n"
        )
    s.ecxr = True
    v = ex.context.values
    rows, width = (_ECXR_ROWS_X64, 16) if "rip" in v else (_ECXR_ROWS_X86, 8)
    return "".join(" ".join(f"{r:>3}={v.get(r, 0):0{width}x}" for r in row) + "\n" for row in rows)


def _cmd_cxr(s: _State, _cmd: str) -> str:
    was, s.ecxr = s.ecxr, False
    return "Resetting default scope\n" if was else ""  # the real engine: nothing to reset, nothing said


def _cmd_threads(s: _State, _cmd: str) -> str:
    pid = s.target.process.pid if s.target.process and s.target.process.pid else 0
    event = _event_thread_index()
    lines = []
    for i, t in enumerate(s.target.threads):
        mark = "." if i == s.current else "#" if i == event else " "
        teb = f"{t.teb >> 32:08x}`{t.teb & 0xFFFFFFFF:08x}"
        name = f' "{t.name}"' if t.name else ""
        lines.append(f"{mark}{i:3d}  Id: {pid:x}.{t.tid:x} Suspend: {t.suspend_count} Teb: {teb} Unfrozen{name}")
    return "\n".join(lines) + "\n"


def _cmd_systems(s: _State, _cmd: str) -> str:
    return f".  0 User mini dump: {s.path}\n"


_OS_NAMES = {(6, 1): "7", (6, 2): "8", (6, 3): "8.1", (10, 0): "10"}


def _cmd_vertarget(s: _State, _cmd: str) -> str:
    si = s.target.system
    if si is None:
        return _error(s, "System version unavailable\n")
    os_name = _OS_NAMES.get((si.os_major, si.os_minor), f"{si.os_major}.{si.os_minor}")
    sp = f" ({si.csd_version})" if si.csd_version else ""
    mp = "MP" if si.number_of_processors > 1 else "UP"
    arch = "x64" if si.processor_architecture == 9 else si.arch_name
    product = {1: "WinNt", 2: "LanManNt", 3: "Server"}.get(si.product_type, "WinNt")
    lines = [
        f"Windows {os_name} Version {si.os_build}{sp} {mp} ({si.number_of_processors} procs) Free {arch}",
        f"Product: {product}, suite: SingleUserTS",
    ]
    if s.target.build_string:
        lines.append(f"Edition build lab: {s.target.build_string}")
    lines += [
        "Machine Name:",
        "Debug session time: not available",
        "System Uptime: not available",
        "Process Uptime: not available",
    ]
    return "\n".join(lines) + "\n"


def _cmd_cpuid(s: _State, _cmd: str) -> str:
    si = s.target.system
    if isDumpAnalyzing():  # a user-mode dump: the real engine prints nothing
        return _error(s, "!cpuid is not available for this target\n")
    if si is None or si.processor_architecture not in (0, 9):
        return _error(s, "CPUID is not available for this processor\n")
    if si.cpuid_version:
        fms = (si.cpu_family, si.cpu_model, si.cpu_stepping)
    else:  # what WinDbg shows from ProcessorLevel / ProcessorRevision
        fms = (si.processor_level, si.processor_revision >> 8, si.processor_revision & 0xFF)
    p = s.target.process
    mhz = p.processor_current_mhz if p is not None and p.processor_current_mhz else ""
    vendor = si.cpu_vendor or ""
    # A user-mode minidump only describes the active processor.
    return f"CP  F/M/S  Manufacturer     MHz\n 0  {fms[0]},{fms[1]},{fms[2]}  {vendor:<16} {mhz}\n"


_STATE_NAMES = {0x1000: "MEM_COMMIT", 0x2000: "MEM_RESERVE", 0x10000: "MEM_FREE"}
_TYPE_NAMES = {0x20000: "MEM_PRIVATE", 0x40000: "MEM_MAPPED", 0x1000000: "MEM_IMAGE"}
_PROTECT_NAMES = {
    0x01: "PAGE_NOACCESS",
    0x02: "PAGE_READONLY",
    0x04: "PAGE_READWRITE",
    0x08: "PAGE_WRITECOPY",
    0x10: "PAGE_EXECUTE",
    0x20: "PAGE_EXECUTE_READ",
    0x40: "PAGE_EXECUTE_READWRITE",
    0x80: "PAGE_EXECUTE_WRITECOPY",
}


def _tick(v: int) -> str:
    return f"{v >> 32:x}`{v & 0xFFFFFFFF:08x}"


def _cmd_address(s: _State, _cmd: str) -> str:
    regions = s.target.memory_regions
    if not regions:
        return _error(s, "Unable to read the memory map: the dump has no memory information.\n")
    lines = [
        "",
        "        BaseAddress      EndAddress+1        RegionSize     Type       State"
        "                 Protect             Usage",
        "-" * 118,
    ]
    last_alloc = None
    for r in regions:
        start = "+" if r.allocation_base != last_alloc or r.state == 0x10000 else " "
        last_alloc = r.allocation_base
        prot = _PROTECT_NAMES.get(r.protect & 0xFF, "")
        if r.protect & 0x100:
            prot += " | PAGE_GUARD"
        lines.append(
            f"{start} {_tick(r.base):>17} {_tick(r.end):>17} {_tick(r.size):>17} "
            f"{_TYPE_NAMES.get(r.type, ''):<11} {_STATE_NAMES.get(r.state, ''):<11} "
            f"{prot:<34} <unknown>"
        )
    return "\n".join(lines) + "\n"


def _cmd_lm(s: _State, _cmd: str) -> str:
    lines = ["start             end                 module name"]
    for m in s.target.modules:  # dbgeng's order
        pdb = s.pdbs.get(m.base)
        state = f"(pdb symbols)          {pdb}" if pdb else "(deferred)"
        lines.append(f"{_tick(m.base):>17} {_tick(m.end):>17}   {_short_name(m.name):<10} {state}")
    if s.target.unloaded_modules:
        lines += ["", "Unloaded modules:"]
        lines += [f"{_tick(u.base):>17} {_tick(u.base + u.size):>17}   {u.name}" for u in s.target.unloaded_modules]
    return "\n".join(lines) + "\n"


def _cmd_lmv(s: _State, _cmd: str) -> str:
    lines = ["start             end                 module name"]
    for m in s.target.modules:
        pdb = s.pdbs.get(m.base)
        lines.append(
            f"{_tick16(m.base)} {_tick16(m.end)}   {_short_name(m.name):<10} {'(pdb symbols)' if pdb else '(deferred)'}"
        )
        image = s.mapped.get(m.base)
        if image is not None:
            lines.append(f"    Mapped memory image file: {image.path}")
        lines += [
            f"    Image path: {m.path}",
            f"    Image name: {m.name}",
            f"    Timestamp:        ({m.timestamp:08X})",
        ]
        lines += [f"    CheckSum:         {m.checksum:08X}", f"    ImageSize:        {m.size:08X}"]
    return "\n".join(lines) + "\n"


def _cmd_dumpdebug(s: _State, _cmd: str) -> str:
    d = s.target.dump
    lines = ["----- User Mini Dump Analysis", "", "MINIDUMP_HEADER:", f"Version         {d.version & 0xFFFF:X} (0)"]
    lines += [f"NumberOfStreams {len(d.streams)}", "", "Streams:"]
    for e in d.streams:
        name = e.name if e.known else "???"
        lines.append(f"Stream {e.index}: type {name} ({e.type}), size {e.size:08X}, RVA {e.offset:08X}")
        si = s.target.system
        if e.name == "SystemInfoStream" and si is not None:
            lines.append(f"  ProcessorArchitecture   {si.processor_architecture:04X}")
            lines.append(f"  ProcessorLevel          {si.processor_level:04X}")
            lines.append(f"  ProcessorRevision       {si.processor_revision:04X}")
            lines.append(f"  NumberOfProcessors      {si.number_of_processors:02X}")
        if e.name == "SystemMemoryInfoStream" and s.target.system_memory is not None:
            lines += _system_memory_lines(s.target.system_memory)
        if e.name == "ProcessVmCountersStream" and s.target.process_memory is not None:
            lines += _vm_counter_lines(s.target.process_memory)
        if e.name in ("MemoryListStream", "Memory64ListStream"):
            lines += [f"  {len(s.ranges)} memory ranges", "  range#    RVA      Address             Size"]
            lines += [f"{i:8d} 00000000    {_tick16(a)}   {_tick16(b - a)}" for i, (a, b) in enumerate(s.ranges)]
    return "\n".join(lines) + "\n"


def _dd_field(name: str, value: str, depth: int = 2) -> str:
    """A `.dumpdebug` counter line as dbgeng prints it: the name, a colon, the value right-aligned."""
    return f"{' ' * depth}{name:<{42 - depth}}:{value:>33}"


def _system_memory_lines(m) -> List[str]:
    """SystemMemoryInfoStream's block as the real engine prints it (tests/sources/dumpdebug):
    sizes in hex, counts of pages with thousands commas, the basic part and the performance part."""
    page = m.page_size
    perf = (m.available_memory, m.committed, m.commit_limit, m.peak_commitment)
    flags = 0xF if all(v is not None for v in perf) else 0xD  # MINIDUMP_SYSMEMINFO1_BASICPERF is 0x2
    lines = [_dd_field("Revision", "1"), _dd_field("Flags", f"{flags:#x}"), "  BasicInfo"]
    lines += [
        _dd_field("PageSize", f"{page:#x}", 4),
        _dd_field("NumberOfPhysicalPages", f"{m.physical_memory // page:,}", 4),
        _dd_field("MinimumUserModeAddress", f"{m.lowest_user_address:#x}", 4),
        _dd_field("MaximumUserModeAddress", f"{m.highest_user_address:#x}", 4),
        _dd_field("NumberOfProcessors", f"{m.processors:,}", 4),
    ]
    if flags & 0x2:
        lines.append("  BasicPerfInfo")
        names = ("AvailablePages", "CommittedPages", "CommitLimit", "PeakCommitment")
        lines += [_dd_field(n, f"{v // page:,}", 4) for n, v in zip(names, perf)]
    return lines


def _vm_counter_lines(m) -> List[str]:
    """ProcessVmCountersStream's block as the real engine prints it: no Flags line, byte
    counts in hex, the job's counters (0 where the job sets no limit)."""
    counters = [
        ("PeakWorkingSetSize", m.peak_working_set),
        ("WorkingSetSize", m.working_set),
        ("PagefileUsage", m.private_commit),
        ("PeakPagefileUsage", m.peak_private_commit),
        ("PeakVirtualSize", m.peak_virtual_size),
        ("VirtualSize", m.virtual_size),
        ("PrivateUsage", m.private_commit),
    ]
    lines = [_dd_field("Revision", "2"), "  Process Counters"]
    lines += [_dd_field(n, f"{v:#x}", 4) for n, v in counters if v is not None]
    job = [
        ("JobSharedCommitUsage", m.job_shared_commit),
        ("JobPrivateCommitUsage", m.job_private_commit),
        ("JobPeakPrivateCommitUsage", m.job_peak_private_commit),
        ("JobPrivateCommitLimit", m.job_private_commit_limit),
        ("JobTotalCommitLimit", m.job_total_commit_limit),
    ]
    lines.append("  Job Counters")
    lines += [_dd_field(n, f"{v or 0:,}", 4) for n, v in job]
    return lines


def _tick16(v: int) -> str:
    return f"{v >> 32:08x}`{v & 0xFFFFFFFF:08x}"


def _cmd_exepath(s: _State, cmd: str) -> str:
    arg = cmd[len(".exepath") :].strip()
    if arg:
        s.exepath = [e for e in arg.split(";") if e]
    text = ";".join(s.exepath)
    return f"Executable image search path is: {text}\nExpanded Executable image search path is: {text.lower()}\n"


def _cmd_reload(s: _State, _cmd: str) -> str:
    s._map_images()
    return "." * len(s.target.modules) + "\n"


_COMMANDS = {
    ".ecxr": _cmd_ecxr,
    ".cxr": _cmd_cxr,
    "~": _cmd_threads,
    "||": _cmd_systems,
    "vertarget": _cmd_vertarget,
    "!cpuid": _cmd_cpuid,
    "!address": _cmd_address,
    "lm": _cmd_lm,
    "lmv": _cmd_lmv,
    ".dumpdebug": _cmd_dumpdebug,
    ".exepath": _cmd_exepath,
    ".reload": _cmd_reload,
}
