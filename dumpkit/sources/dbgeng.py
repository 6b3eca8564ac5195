"""Target over the debugger engine's own COM interfaces (dbgeng), through ctypes.

`!tfstack` from windbg_scripts/tfstack.dll runs in whatever CPython 3.8+ the user has:
the DLL starts that Python inside the debugger and hands it, for each command, the
engine's `IDebugClient` (the client the engine passes to every extension command). This
module reads the debugger's session through that client: IDebugControl (commands,
output, events, the stack trace, interrupts), IDebugDataSpaces (memory),
IDebugSymbols (modules, names, paths), IDebugSystemObjects (threads, the process) and
IDebugRegisters. No pykd, no comtypes: every call is a vtable slot called by index.

`PykdTarget` (dumpkit/sources/pykd.py) already knows how to turn a debugger session into
a Target: which commands to ask (`.ecxr`, `lmv`, `.dumpdebug`, `!address`...), how to
read their output and where the engine and a dump file disagree. Its reads are pykd
0.3's calls (`loadBytes`, `reg`, `setCurrentThread`, `dbgCommand`...). `EngineSession`
answers exactly those calls from the engine's interfaces, with pykd's results and errors
(see each method), and `DbgengTarget` is a PykdTarget over an EngineSession. So the two
routes share every rule and give the same report; what differs is below the calls:
- memory: IDebugDataSpaces::ReadVirtual reports how many bytes it read, so a read that
  crosses the end of what the engine has stops there (and resumes where the engine can
  read again: it joins touching dump ranges only sometimes) instead of binary-searching
  the edge with whole-range reads as pykd's all-or-nothing `loadBytes` forces;
- Ctrl-Break: `EngineSession.interrupted` says whether the user asked to stop
  (IDebugControl::GetInterrupt, or a command the engine failed for it), which `!tfstack`
  asks from a watch thread (dumpkit.commands.tfstack.BreakWatch), as pykd's own watch
  thread does before raising SystemExit in its script.

A session lives for one command: the interfaces it queried and the client it made for
capturing command output are released by `close()`, and the engine's own client is not
(it is the engine's, lent for the call).

Interface method numbers are vtable slots in declaration order (IUnknown's three first),
as Microsoft's dbgeng.h declares them; only the methods used here are named.
"""

from __future__ import annotations

import ctypes
import struct
import sys
import uuid
from ctypes import POINTER, byref, c_char_p, c_long, c_ubyte, c_uint32, c_uint64, c_void_p, c_wchar_p
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from dumpkit.problems import Problems
from dumpkit.sources.pykd import CHUNK, PykdTarget
from dumpkit.target import MemoryNotInDump

# Windows' COM methods are stdcall, which on x64 is the one calling convention; CFUNCTYPE
# stands in where there is no WINFUNCTYPE (tests of this module on Linux, against a
# stand-in engine built with the same prototypes).
_FUNCTYPE = getattr(ctypes, "WINFUNCTYPE", ctypes.CFUNCTYPE)

S_OK = 0
S_FALSE = 1
E_NOINTERFACE = -0x7FFFBFFE  # 0x80004002

# DEBUG_OUTCTL_* / DEBUG_OUTPUT_* / DEBUG_EXECUTE_* (dbgeng.h)
OUTCTL_THIS_CLIENT = 0x0
OUTCTL_NOT_LOGGED = 0x8
OUTCTL_AMBIENT_DML = 0xFFFFFFFE
OUTCTL_AMBIENT_TEXT = 0xFFFFFFFF
OUTPUT_NORMAL = 0x1
OUTPUT_ERROR = 0x2
OUTPUT_WARNING = 0x4
EXECUTE_NOT_LOGGED = 0x4
EXECUTE_NO_REPEAT = 0x2
DEBUG_ANY_ID = 0xFFFFFFFF
CLASS_KERNEL = 1
DUMP_SMALL = 1024  # debuggee qualifiers from here on are dump files
EVENT_EXCEPTION = 0x2
MODNAME_IMAGE = 0
MODNAME_MODULE = 1
MACHINE_I386 = 0x014C
MACHINE_AMD64 = 0x8664
MACHINE_ARM64 = 0xAA64
STACK_FRAMES = 1024  # what pykd's getStack() gives at most; `.frame` links use these
OUTPUT_PIECE = 4000  # characters per output call (the engine formats into a fixed buffer)


def _guid(text: str) -> bytes:
    return uuid.UUID(text).bytes_le


IID_IUnknown = _guid("00000000-0000-0000-c000-000000000046")
IID_IDebugClient = _guid("27fe5639-8407-4f47-8364-ee118fb08ac8")
IID_IDebugControl4 = _guid("94e60ce9-9b41-4b19-9fc0-6d9eb35272b3")
IID_IDebugDataSpaces = _guid("88f7dfab-3ea7-4c3a-aefb-c4e8106173aa")
IID_IDebugSymbols2 = _guid("3a707211-afdd-4495-ad4f-56fecdf8163f")
IID_IDebugSystemObjects = _guid("6b86fe2c-2c4f-4f0c-9da2-174311acc327")
IID_IDebugRegisters = _guid("ce289126-9e84-45a7-937e-67bb18691493")
IID_IDebugOutputCallbacks = _guid("4bf58045-d654-4c40-b0af-683090f356dc")

_U32P = POINTER(c_uint32)
_U64P = POINTER(c_uint64)

# (slot, argument types after `this`) per method used. IDebugControl4 starts with
# IDebugControl's slots, so its object answers IDebugControl's calls too.
_CLIENT = {
    "QueryInterface": (0, (c_char_p, POINTER(c_void_p))),
    "Release": (2, ()),
    "CreateClient": (30, (POINTER(c_void_p),)),
    "SetOutputCallbacks": (34, (c_void_p,)),
    "SetOutputMask": (36, (c_uint32,)),
    "FlushCallbacks": (47, ()),
}
_CONTROL = {
    "GetInterrupt": (3, ()),
    "GetStackTrace": (31, (c_uint64, c_uint64, c_uint64, c_void_p, c_uint32, _U32P)),
    "GetDebuggeeType": (34, (_U32P, _U32P)),
    "GetActualProcessorType": (35, (_U32P,)),
    "GetNumberProcessors": (39, (_U32P,)),
    "GetSystemVersion": (40, (_U32P, _U32P, _U32P, c_char_p, c_uint32, _U32P, _U32P, c_char_p, c_uint32, _U32P)),
    "GetEffectiveProcessorType": (47, (_U32P,)),
    "Execute": (66, (c_uint32, c_char_p, c_uint32)),
    "GetLastEventInformation": (94, (_U32P, _U32P, _U32P, c_void_p, c_uint32, _U32P, c_char_p, c_uint32, _U32P)),
    "ControlledOutputWide": (122, (c_uint32, c_uint32, c_wchar_p, c_wchar_p)),  # format "%ws", the text
    "GetSystemVersionValues": (160, (_U32P, _U32P, _U32P, _U32P, _U32P)),
}
_DATA = {"ReadVirtual": (3, (c_uint64, c_void_p, c_uint32, _U32P))}
_SYMBOLS = {
    "GetNameByOffset": (7, (c_uint64, c_char_p, c_uint32, _U32P, _U64P)),
    "GetNumberModules": (12, (_U32P, _U32P)),
    "GetModuleByIndex": (13, (c_uint32, _U64P)),
    "GetModuleParameters": (17, (c_uint32, _U64P, c_uint32, c_void_p)),
    "GetSymbolPath": (40, (c_char_p, c_uint32, _U32P)),
    "GetModuleVersionInformation": (52, (c_uint32, c_uint64, c_char_p, c_void_p, c_uint32, _U32P)),
    "GetModuleNameString": (53, (c_uint32, c_uint32, c_uint64, c_char_p, c_uint32, _U32P)),
}
_SYSTEM = {
    "GetCurrentThreadId": (5, (_U32P,)),
    "SetCurrentThreadId": (6, (c_uint32,)),
    "GetNumberThreads": (9, (_U32P,)),
    "GetThreadIdsByIndex": (11, (c_uint32, c_uint32, _U32P, _U32P)),
    "GetCurrentThreadDataOffset": (13, (_U64P,)),
    "GetThreadIdByDataOffset": (14, (c_uint64, _U32P)),
    "GetCurrentThreadSystemId": (17, (_U32P,)),
    "GetCurrentProcessSystemId": (27, (_U32P,)),
}
_REGISTERS = {"GetIndexByName": (5, (c_char_p, _U32P)), "GetValue": (6, (c_uint32, c_void_p))}


class DEBUG_VALUE(ctypes.Structure):
    _fields_ = [("raw", c_ubyte * 24), ("TailOfRawBytes", c_uint32), ("Type", c_uint32)]


class DEBUG_STACK_FRAME(ctypes.Structure):
    _fields_ = [
        ("InstructionOffset", c_uint64),
        ("ReturnOffset", c_uint64),
        ("FrameOffset", c_uint64),
        ("StackOffset", c_uint64),
        ("FuncTableEntry", c_uint64),
        ("Params", c_uint64 * 4),
        ("Reserved", c_uint64 * 6),
        ("Virtual", c_uint32),
        ("FrameNumber", c_uint32),
    ]


class DEBUG_MODULE_PARAMETERS(ctypes.Structure):
    _fields_ = [
        ("Base", c_uint64),
        ("Size", c_uint32),
        ("TimeDateStamp", c_uint32),
        ("Checksum", c_uint32),
        ("Flags", c_uint32),
        ("SymbolType", c_uint32),
        ("ImageNameSize", c_uint32),
        ("ModuleNameSize", c_uint32),
        ("LoadedImageNameSize", c_uint32),
        ("SymbolFileNameSize", c_uint32),
        ("MappedImageNameSize", c_uint32),
        ("Reserved", c_uint64 * 2),
    ]


class LAST_EVENT_EXCEPTION(ctypes.Structure):
    """DEBUG_LAST_EVENT_INFO_EXCEPTION: an EXCEPTION_RECORD64 and FirstChance."""

    _fields_ = [
        ("ExceptionCode", c_uint32),
        ("ExceptionFlags", c_uint32),
        ("ExceptionRecord", c_uint64),
        ("ExceptionAddress", c_uint64),
        ("NumberParameters", c_uint32),
        ("_alignment", c_uint32),
        ("ExceptionInformation", c_uint64 * 15),
        ("FirstChance", c_uint32),
    ]


_VALUE_BYTES = {1: 1, 2: 2, 3: 4, 4: 8}  # DEBUG_VALUE_INT8..INT64


class DbgException(Exception):
    """What the engine refused (pykd's DbgException: a failed HRESULT, or nothing there)."""


class MemoryException(DbgException):
    """Bytes the engine does not have (pykd's MemoryException)."""


def _text(raw: bytes) -> str:
    """The engine's ANSI text (the active code page), as str."""
    raw = raw.split(b"\0", 1)[0]
    try:
        return raw.decode("mbcs")
    except LookupError:  # not Windows (tests)
        return raw.decode("latin-1")


class Interface:
    """One COM interface pointer: methods called by vtable slot, prototypes made once."""

    def __init__(self, address: int, methods: Dict[str, Tuple[int, tuple]], owned: bool = True):
        if not address:
            raise DbgException("null interface pointer")
        self.address = address
        self._methods = methods
        self._owned = owned
        self._vtable = ctypes.cast(c_void_p(address), POINTER(POINTER(c_void_p))).contents
        self._bound: Dict[str, Callable[..., int]] = {}

    def call(self, name: str, *args) -> int:
        """The method's HRESULT (S_OK, S_FALSE, or negative: failed)."""
        fn = self._bound.get(name)
        if fn is None:
            slot, argtypes = self._methods[name]
            proto = _FUNCTYPE(c_long, c_void_p, *argtypes)
            fn = self._bound[name] = proto(self._vtable[slot])
        return int(fn(self.address, *args))

    def check(self, name: str, *args) -> int:
        hr = self.call(name, *args)
        if hr < 0:
            raise DbgException(f"{name} failed, HRESULT 0x{hr & 0xFFFFFFFF:08x}")
        return hr

    def query(self, iid: bytes, methods: Dict[str, Tuple[int, tuple]]) -> "Interface":
        out = c_void_p()
        qi = _FUNCTYPE(c_long, c_void_p, c_char_p, POINTER(c_void_p))(self._vtable[0])
        hr = int(qi(self.address, iid, byref(out)))
        if hr < 0 or not out.value:
            raise DbgException(f"QueryInterface failed, HRESULT 0x{hr & 0xFFFFFFFF:08x}")
        return Interface(out.value, methods)

    def release(self) -> None:
        if self._owned and self.address:
            _FUNCTYPE(ctypes.c_ulong, c_void_p)(self._vtable[2])(self.address)
        self.address = 0


# ----------------------------------------------------------------------------- output capture
_QI = _FUNCTYPE(c_long, c_void_p, c_void_p, POINTER(c_void_p))
_REF = _FUNCTYPE(ctypes.c_ulong, c_void_p)
_OUTPUT = _FUNCTYPE(c_long, c_void_p, c_uint32, c_char_p)


class _CallbacksObject(ctypes.Structure):
    _fields_ = [("vtable", c_void_p)]


class OutputCapture:
    """An IDebugOutputCallbacks made in Python: what a command prints to the client it is
    registered on is collected, normal output apart from errors and warnings."""

    def __init__(self) -> None:
        self.normal: List[str] = []
        self.errors: List[str] = []
        self._fns = (_QI(self._query), _REF(self._ref), _REF(self._ref), _OUTPUT(self._output))
        self._vtable = (c_void_p * 4)(*(ctypes.cast(f, c_void_p).value for f in self._fns))
        self._object = _CallbacksObject(ctypes.addressof(self._vtable))

    @property
    def address(self) -> int:
        return ctypes.addressof(self._object)

    def _query(self, this, iid, out) -> int:
        wanted = ctypes.string_at(iid, 16)
        if wanted in (IID_IUnknown, IID_IDebugOutputCallbacks):
            out[0] = this
            return S_OK
        out[0] = None
        return E_NOINTERFACE

    def _ref(self, this) -> int:
        return 1  # lives as long as this Python object; the session unregisters it first

    def _output(self, this, mask, text) -> int:
        try:
            if text:
                (self.normal if mask & OUTPUT_NORMAL else self.errors).append(_text(text))
        except BaseException:  # noqa: B036 - nothing may cross back into the engine (nor a Ctrl-Break)
            pass
        return S_OK

    def take(self) -> Tuple[str, str]:
        out, err = "".join(self.normal), "".join(self.errors)
        self.normal, self.errors = [], []
        return out, err


# ----------------------------------------------------------------------------- pykd's shapes
class CPUType:
    I386 = MACHINE_I386
    AMD64 = MACHINE_AMD64


class _Version:
    def __init__(self, major: int, minor: int, build: int, build_string: str):
        self.win32Major, self.win32Minor, self.buildNumber, self.buildString = major, minor, build, build_string


class _Event:
    def __init__(self, kind: int, thread: int):
        self.type, self.thread = kind, thread


class _ExceptionInfo:
    def __init__(self, record: LAST_EVENT_EXCEPTION):
        self.exceptionCode = record.ExceptionCode
        self.exceptionFlags = record.ExceptionFlags
        self.exceptionRecord = record.ExceptionRecord
        self.exceptionAddress = record.ExceptionAddress
        self.firstChance = bool(record.FirstChance)
        n = min(record.NumberParameters, 15)
        self.parameters = [record.ExceptionInformation[i] for i in range(n)]


class _Frame:
    def __init__(self, frame: DEBUG_STACK_FRAME):
        self.instructionOffset = frame.InstructionOffset
        self.returnOffset = frame.ReturnOffset
        self.frameOffset = frame.FrameOffset
        self.stackOffset = frame.StackOffset


class _FixedFileInfo:
    def __init__(self, raw: bytes):
        fields = struct.unpack_from("<13I", raw.ljust(52, b"\0"))
        self.Signature = fields[0]
        self.FileVersionMS, self.FileVersionLS = fields[2], fields[3]
        self.ProductVersionMS, self.ProductVersionLS = fields[4], fields[5]


class _Module:
    """pykd's `module` for one loaded module, from its DEBUG_MODULE_PARAMETERS."""

    def __init__(self, session: "EngineSession", params: DEBUG_MODULE_PARAMETERS):
        self._session = session
        self._params = params

    def begin(self) -> int:
        return self._params.Base

    def size(self) -> int:
        return self._params.Size

    def timestamp(self) -> int:
        return self._params.TimeDateStamp

    def checksum(self) -> int:
        return self._params.Checksum

    def name(self) -> str:
        return self._session.module_name(MODNAME_MODULE, self._params.Base)

    def image(self) -> str:
        return self._session.module_name(MODNAME_IMAGE, self._params.Base)

    def getFixedFileInfo(self) -> _FixedFileInfo:
        return _FixedFileInfo(self._session.module_version_block(self._params.Base))


class EngineSession:
    """The debugger engine behind a client, answering the pykd 0.3 calls PykdTarget and
    `!tfstack` make (names and results as pykd's; errors as DbgException and
    MemoryException), plus what only the engine route has: partial reads
    (`readVirtual`), output to the debugger (`output`) and the user's Ctrl-Break
    (`interrupted`)."""

    DbgException = DbgException
    MemoryException = MemoryException
    CPUType = CPUType

    def __init__(self, client_address: int):
        self._client = Interface(client_address, _CLIENT, owned=False)  # the engine's, lent
        self._made: List[Interface] = []
        try:
            self._control = self._own(self._client.query(IID_IDebugControl4, _CONTROL))
            self._data = self._own(self._client.query(IID_IDebugDataSpaces, _DATA))
            self._symbols = self._own(self._client.query(IID_IDebugSymbols2, _SYMBOLS))
            self._system = self._own(self._client.query(IID_IDebugSystemObjects, _SYSTEM))
            self._registers = self._own(self._client.query(IID_IDebugRegisters, _REGISTERS))
        except DbgException:
            self.close()
            raise
        self._capture: Optional[OutputCapture] = None
        self._capture_client: Optional[Interface] = None
        self._capture_control: Optional[Interface] = None
        self._register_index: Dict[str, Optional[int]] = {}
        self._broken = False  # a command failed once and then worked: a Ctrl-Break taken by the engine
        self._read_buffer = ctypes.create_string_buffer(CHUNK)

    def _own(self, interface: Interface) -> Interface:
        self._made.append(interface)
        return interface

    def close(self) -> None:
        """Unregister the capture callbacks and release what this session queried/made."""
        if self._capture_client is not None:
            try:
                self._capture_client.call("SetOutputCallbacks", None)
            except Exception:
                pass
        for interface in reversed(self._made):
            try:
                interface.release()
            except Exception:
                pass
        self._made = []
        self._capture_client = self._capture_control = None

    def __enter__(self) -> "EngineSession":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- output and interrupts ----------------------------------------------------------
    def output(self, text: str, dml: bool = False) -> None:
        """`text` and a line end on the debugger's output, as DML or plain text, in the
        output control of the command being run (what `!tfstack` was typed into)."""
        control = OUTCTL_AMBIENT_DML if dml else OUTCTL_AMBIENT_TEXT
        for piece in _pieces(text + "\n"):
            self._control.call("ControlledOutputWide", control, OUTPUT_NORMAL, "%ws", piece)

    def dprintln(self, text: str, dml: bool = False) -> None:
        self.output(text, dml)

    def interrupted(self) -> bool:
        """Whether the user pressed Ctrl-Break (cdb) or Debug > Break (WinDbg) since the
        last call: GetInterrupt answers S_OK then, and clears the request; or the engine
        took the request by failing one of this session's commands (dbgCommand)."""
        if self._broken:
            self._broken = False
            return True
        return self._control.call("GetInterrupt") == S_OK

    # -- memory -------------------------------------------------------------------------
    def readVirtual(self, address: int, size: int) -> bytes:
        """Up to `size` bytes from `address`: as many as the engine read in one go (b""
        when it has none there). At most CHUNK bytes per call."""
        size = min(size, CHUNK)
        if size <= 0 or address < 0 or address + size > 1 << 64:
            return b""
        got = c_uint32(0)
        hr = self._data.call("ReadVirtual", address, self._read_buffer, size, byref(got))
        if hr < 0:
            return b""
        return self._read_buffer.raw[: min(got.value, size)]

    def loadBytes(self, address: int, size: int) -> bytes:
        """pykd's loadBytes: all `size` bytes or MemoryException."""
        out = []
        pos, end = address, address + size
        while pos < end:
            piece = self.readVirtual(pos, end - pos)
            if not piece:
                raise MemoryException(f"Memory exception at 0x{address & ((1 << 64) - 1):x} type:Virtual")
            out.append(piece)
            pos += len(piece)
        return b"".join(out)

    def loadQWords(self, address: int, count: int) -> List[int]:
        raw = self.loadBytes(address, 8 * count)
        return list(struct.unpack(f"<{count}Q", raw))

    # -- commands -----------------------------------------------------------------------
    def dbgCommand(self, command: str) -> Optional[str]:
        """The command's normal output (None when it printed none), as pykd's dbgCommand:
        what it prints as an error is not returned, and a command the engine rejects
        raises DbgException. Run on a client of this session's own, so the user sees
        none of it."""
        if self._capture_control is None:
            made = c_void_p()
            self._client.check("CreateClient", byref(made))
            client = self._own(Interface(made.value or 0, _CLIENT))
            self._capture = OutputCapture()
            client.check("SetOutputCallbacks", self._capture.address)
            client.call("SetOutputMask", OUTPUT_NORMAL | OUTPUT_ERROR | OUTPUT_WARNING)
            self._capture_client = client
            self._capture_control = self._own(client.query(IID_IDebugControl4, _CONTROL))
        encoded = command.encode("mbcs" if sys.platform == "win32" else "latin-1", "replace")
        hr, out, errors = self._execute(encoded)
        if hr < 0:
            # The engine answers a Ctrl-Break that lands while one of its commands runs by
            # failing that command, and takes the request with it (GetInterrupt no longer
            # reports it). The commands asked here only read, so one is run once more: a
            # command that works the second time was interrupted the first.
            again, retried, _ = self._execute(encoded)
            if again >= 0:
                self._broken = True
                return retried or None
        if hr < 0:
            said = " ".join(errors.split())[:200]
            raise DbgException(
                f"IDebugControl::Execute failed, HRESULT 0x{hr & 0xFFFFFFFF:08x}" + (f": {said}" if said else "")
            )
        return out or None

    def _execute(self, encoded: bytes) -> Tuple[int, str, str]:
        assert self._capture is not None and self._capture_client is not None and self._capture_control is not None
        self._capture.take()
        hr = self._capture_control.call(
            "Execute", OUTCTL_THIS_CLIENT | OUTCTL_NOT_LOGGED, encoded, EXECUTE_NOT_LOGGED | EXECUTE_NO_REPEAT
        )
        self._capture_client.call("FlushCallbacks")
        out, errors = self._capture.take()
        return hr, out, errors

    # -- session, system, process -------------------------------------------------------
    def _debuggee_type(self) -> Tuple[int, int]:
        cls, qualifier = c_uint32(), c_uint32()
        self._control.check("GetDebuggeeType", byref(cls), byref(qualifier))
        return cls.value, qualifier.value

    def isDumpAnalyzing(self) -> bool:
        return self._debuggee_type()[1] >= DUMP_SMALL

    def isKernelDebugging(self) -> bool:
        return self._debuggee_type()[0] == CLASS_KERNEL

    def is64bitSystem(self) -> bool:
        machine = c_uint32()
        self._control.check("GetActualProcessorType", byref(machine))
        return machine.value in (MACHINE_AMD64, MACHINE_ARM64)

    def getCPUMode(self) -> int:
        machine = c_uint32()
        self._control.check("GetEffectiveProcessorType", byref(machine))
        return machine.value

    def getSystemVersion(self) -> _Version:
        platform, major, minor, kd_major, kd_minor = (c_uint32() for _ in range(5))
        self._control.check(
            "GetSystemVersionValues", byref(platform), byref(major), byref(minor), byref(kd_major), byref(kd_minor)
        )
        # GetSystemVersion's Major/Minor are the kernel's (0xf for a free build, the build
        # number); only its build string is wanted from it
        sp_used, sp_number, build_used = c_uint32(), c_uint32(), c_uint32()
        sp_text, build_text = ctypes.create_string_buffer(512), ctypes.create_string_buffer(1024)
        kd = (c_uint32(), c_uint32(), c_uint32())
        self._control.check(
            "GetSystemVersion",
            byref(kd[0]),
            byref(kd[1]),
            byref(kd[2]),
            sp_text,
            512,
            byref(sp_used),
            byref(sp_number),
            build_text,
            1024,
            byref(build_used),
        )
        return _Version(major.value, minor.value, kd_minor.value, _text(build_text.raw))

    def getProcessSystemID(self) -> int:
        pid = c_uint32()
        self._system.check("GetCurrentProcessSystemId", byref(pid))
        return pid.value

    def getSymbolPath(self) -> str:
        return self._string(lambda buf, size, used: self._symbols.check("GetSymbolPath", buf, size, used))

    # -- threads ------------------------------------------------------------------------
    def _thread_ids(self) -> List[Tuple[int, int]]:
        """(engine id, OS id) of every thread of the current process."""
        n = c_uint32()
        self._system.check("GetNumberThreads", byref(n))
        count = min(n.value, 1 << 16)
        if count == 0:
            return []
        ids, sys_ids = (c_uint32 * count)(), (c_uint32 * count)()
        self._system.check("GetThreadIdsByIndex", 0, count, ids, sys_ids)
        return list(zip(ids, sys_ids))

    def _current_engine_thread(self) -> int:
        current = c_uint32()
        self._system.check("GetCurrentThreadId", byref(current))
        return current.value

    def getProcessThreads(self) -> List[int]:
        """TEB addresses of the process's threads (the current thread is put back)."""
        original = self._current_engine_thread()
        out = []
        try:
            for engine_id, _ in self._thread_ids():
                self._system.check("SetCurrentThreadId", engine_id)
                out.append(self.getCurrentThread())
        finally:
            self._system.call("SetCurrentThreadId", original)
        return out

    def getCurrentThread(self) -> int:
        teb = c_uint64()
        self._system.check("GetCurrentThreadDataOffset", byref(teb))
        return teb.value

    def setCurrentThread(self, teb: int) -> None:
        engine_id = c_uint32()
        self._system.check("GetThreadIdByDataOffset", teb, byref(engine_id))
        self._system.check("SetCurrentThreadId", engine_id.value)

    def getThreadSystemID(self, engine_id: int = -1) -> int:
        if engine_id == -1:
            tid = c_uint32()
            self._system.check("GetCurrentThreadSystemId", byref(tid))
            return tid.value
        for eid, tid_ in self._thread_ids():
            if eid == engine_id:
                return tid_
        raise DbgException(f"no thread with debugger id {engine_id}")

    def reg(self, name: str) -> int:
        """A register of the current thread in the current register context (the
        exception record's after `.ecxr`)."""
        index = self._register_index.get(name, -1)
        if index == -1:
            found = c_uint32()
            hr = self._registers.call("GetIndexByName", name.encode("ascii"), byref(found))
            index = self._register_index[name] = found.value if hr >= 0 else None
        if index is None:
            raise DbgException(f"invalid register name '{name}'")
        value = DEBUG_VALUE()
        self._registers.check("GetValue", index, byref(value))
        width = _VALUE_BYTES.get(value.Type)
        if width is None:
            raise DbgException(f"register {name}: not an integer (type {value.Type})")
        return int.from_bytes(bytes(value.raw[:width]), "little")

    def getStack(self) -> List[_Frame]:
        """The engine's own stack trace of the current thread and register context, at
        most STACK_FRAMES frames, as `k` numbers them."""
        frames = (DEBUG_STACK_FRAME * STACK_FRAMES)()
        filled = c_uint32()
        self._control.check("GetStackTrace", 0, 0, 0, frames, STACK_FRAMES, byref(filled))
        return [_Frame(frames[i]) for i in range(min(filled.value, STACK_FRAMES))]

    # -- events -------------------------------------------------------------------------
    def _last_event(self) -> Tuple[int, int, Optional[LAST_EVENT_EXCEPTION]]:
        kind, process, thread, used, desc_used = (c_uint32() for _ in range(5))
        extra = LAST_EVENT_EXCEPTION()
        self._control.check(
            "GetLastEventInformation",
            byref(kind),
            byref(process),
            byref(thread),
            byref(extra),
            ctypes.sizeof(extra),
            byref(used),
            None,
            0,
            byref(desc_used),
        )
        return kind.value, thread.value, extra if kind.value == EVENT_EXCEPTION else None

    def getLastEvent(self) -> _Event:
        kind, thread, _ = self._last_event()
        return _Event(kind, thread)

    def getLastException(self) -> _ExceptionInfo:
        _, _, record = self._last_event()
        if record is None:
            raise DbgException("the last event is not an exception")
        return _ExceptionInfo(record)

    # -- modules and symbols ------------------------------------------------------------
    def getModulesList(self) -> List[_Module]:
        loaded, unloaded = c_uint32(), c_uint32()
        self._symbols.check("GetNumberModules", byref(loaded), byref(unloaded))
        count = min(loaded.value, 1 << 16)
        if count == 0:
            return []
        params = (DEBUG_MODULE_PARAMETERS * count)()
        self._symbols.check("GetModuleParameters", count, None, 0, params)
        return [_Module(self, params[i]) for i in range(count) if params[i].Base]

    def module_name(self, which: int, base: int) -> str:
        return self._string(
            lambda buf, size, used: self._symbols.check(
                "GetModuleNameString", which, DEBUG_ANY_ID, base, buf, size, used
            )
        )

    def module_version_block(self, base: int) -> bytes:
        """The module's VS_FIXEDFILEINFO (52 bytes) as the engine has it."""
        buf = ctypes.create_string_buffer(52)
        used = c_uint32()
        self._symbols.check("GetModuleVersionInformation", DEBUG_ANY_ID, base, b"\\", buf, 52, byref(used))
        return buf.raw[: min(used.value, 52)]

    def findSymbol(self, address: int) -> str:
        """`module!name+1a` (hex displacement without 0x, as pykd prints it), else the
        address in hex."""
        buf = ctypes.create_string_buffer(4096)
        used, displacement = c_uint32(), c_uint64()
        hr = self._symbols.call("GetNameByOffset", address, buf, 4096, byref(used), byref(displacement))
        if hr < 0:
            return f"{address:x}"
        name = _text(buf.raw)
        return f"{name}+{displacement.value:x}" if displacement.value else name

    # -- helpers ------------------------------------------------------------------------
    def _string(self, call: Callable[[Any, int, Any], int]) -> str:
        """A string-returning method: sized once, read again into a buffer big enough."""
        size = 1024
        for _ in range(3):
            buf, used = ctypes.create_string_buffer(size), c_uint32()
            call(buf, size, byref(used))
            if used.value <= size:
                return _text(buf.raw)
            size = min(used.value + 1, 1 << 20)
        return _text(buf.raw)


def _pieces(text: str) -> Iterator[str]:
    """`text` in pieces of at most OUTPUT_PIECE characters, cut after a line end where one
    is near, so DML tags stay whole."""
    pos = 0
    while pos < len(text):
        end = pos + OUTPUT_PIECE
        if end < len(text):
            cut = text.rfind("\n", pos, end)
            if cut > pos:
                end = cut + 1
        yield text[pos:end]
        pos = end


class DbgengTarget(PykdTarget):
    """The engine's current process (a dump or a live process) as a Target: PykdTarget's
    rules over an EngineSession (or the `!tfstack` progress wrapper around one), with
    reads that stop where the engine's bytes stop instead of searching for the edge."""

    def __init__(self, session: Any, problems: Optional[Problems] = None):
        super().__init__(session, problems)

    def _readable_pieces(self, address: int, size: int) -> Iterator[bytes]:
        pos, end = address, address + size
        while pos < end:
            n = min(CHUNK - (pos % CHUNK), end - pos)
            if self._hidden:
                n = self._visible_length(pos, n)
                if n == 0:
                    return
            piece = self._pykd.readVirtual(pos, n)
            if not piece:
                return
            yield piece
            pos += len(piece)

    def _visible_length(self, pos: int, n: int) -> int:
        """How many bytes from `pos` (at most n) lie before the next hidden span (spans of
        mapped images the dump does not hold: PykdTarget._hide_mapped_images)."""
        from bisect import bisect_right

        i = bisect_right(self._hidden, (pos, 1 << 64)) - 1  # the last span starting at or before pos
        if i >= 0 and pos < self._hidden[i][1]:
            return 0
        if i + 1 < len(self._hidden) and self._hidden[i + 1][0] < pos + n:
            return self._hidden[i + 1][0] - pos
        return n

    def _load(self, address: int, size: int) -> bytes:
        if self._hidden and self._touches_hidden(address, address + size):
            raise MemoryNotInDump(address, size)
        try:
            return bytes(self._pykd.loadBytes(address, size))
        except MemoryException:
            raise MemoryNotInDump(address, size) from None


def open_session(client_address: int, problems: Optional[Problems] = None) -> Tuple[EngineSession, DbgengTarget]:
    """The engine behind `client_address` (an IDebugClient*) and its current process as a
    Target; close the session when done."""
    session = EngineSession(client_address)
    try:
        return session, DbgengTarget(session, problems)
    except BaseException:
        session.close()
        raise
