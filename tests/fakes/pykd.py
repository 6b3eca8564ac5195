"""A stand-in for pykd 0.3 inside WinDbg, with a minidump opened, for tests on any OS.

It emulates the debugger, not dumpkit: everything it answers comes from the raw minidump
reader (`dumpkit.sources.minidump.open_dump`: thread contexts, memory, the module list,
the exception stream, SystemInfo) and nothing from dumpkit's analysis. Only the pykd
functions dumpkit's pykd source and windbg_scripts/tfstack.py call are here, with pykd
0.3's names, signatures, return types and errors (pykd/pymod.cpp and friends):

- `loadBytes(offset, count, phyAddr=False)` -> list of ints; `MemoryException` unless
  the whole range lies in one of the dump's memory ranges. kdlib checks
  `isVaRegionValid` (dbgeng's GetValidRegionVirtual must return exactly the range)
  before reading; whether dbgeng joins a dump's adjacent ranges into one valid region is
  not known, so the stand-in takes the strict reading: a read that crosses from one
  range into the next fails even when they touch. `loadQWords` likewise.
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
- `findSymbol(offset, showDisplacement=True)` never raises: like WinDbg without PDBs it
  knows no symbol, so it returns `mod+1a3f`, or bare hex outside every module.
- `dbgCommand(command, suppressOutput=True)` -> the command's normal output as str, or
  None when there is none. As in pykd (kdlib's output reader keeps DEBUG_OUTPUT_NORMAL
  only), what a command prints as an error is not returned: a failing `.ecxr` or an
  unknown command gives None; the error text is kept for tests (`_errors_for_tests`).
  Emulated: `.ecxr`, `.cxr`, `~`, `||`, `vertarget`, `!cpuid`, `!address`, `lm` (every
  module `(deferred)`, as in WinDbg before anything asked for symbols, unless a test
  marked its PDB loaded with `_load_pdb_for_tests`).
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
        ranges = target.memory_ranges()  # sorted, overlaps removed; touching ones kept apart
        self.range_starts = [a for a, _ in ranges]
        self.range_ends = [b for _, b in ranges]
        ex = target.exception
        if ex is not None:
            for i, t in enumerate(target.threads):
                if t.tid == ex.thread_id:
                    self.current = i  # WinDbg starts on the event thread


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
    i = _bisect_right(s.range_starts, offset) - 1
    if i < 0 or offset + count > s.range_ends[i]:  # not one valid region: isVaRegionValid fails
        raise MemoryException(f"Memory exception at 0x{offset:x} type:Virtual")
    try:
        return list(s.target.read(offset, count))
    except MemoryNotInDump:
        raise MemoryException(f"Memory exception at 0x{offset:x} type:Virtual") from None


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
    s = _s()
    i = _event_thread_index()
    if s.target.exception is None or i is None:
        return debugEvent(eventType.Breakpoint, 0, 0)
    return debugEvent(eventType.Exception, 0, i)


def getLastException() -> exceptionInfo:
    ex = _s().target.exception
    if ex is None:
        raise DbgException("last event is not an exception")
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
    if handler is None:
        return _error(s, f"       ^ Syntax error in '{command}'\n")
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
    s.ecxr = False
    return "Resetting default scope\n"


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


_COMMANDS = {
    ".ecxr": _cmd_ecxr,
    ".cxr": _cmd_cxr,
    "~": _cmd_threads,
    "||": _cmd_systems,
    "vertarget": _cmd_vertarget,
    "!cpuid": _cmd_cpuid,
    "!address": _cmd_address,
    "lm": _cmd_lm,
}
