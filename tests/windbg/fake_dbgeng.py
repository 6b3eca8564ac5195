"""A stand-in for Microsoft's debugger engine seen through COM, for tests on any OS: real
COM-shaped objects in memory (an object whose first word points to a table of function
pointers, `this` passed first), built with ctypes callbacks, answering the IDebugClient,
IDebugControl4, IDebugDataSpaces, IDebugSymbols2, IDebugSystemObjects and IDebugRegisters
methods dumpkit/sources/dbgeng.py calls, at the vtable slots dbgeng.h gives them.

It emulates the engine from the pykd stand-in (tests/support/fakes/pykd.py), which
emulates WinDbg from the raw minidump reader: so `DbgengTarget` over this engine and
`PykdTarget` over that pykd see one debugger session, and must give one report. What
only the engine has is emulated here: reads that return as many bytes as the engine has
from the address (the pykd stand-in's all-or-nothing reads, narrowed to the longest
readable prefix), output callbacks registered per client (a command's output goes to the
client whose IDebugControl ran it), `ControlledOutputWide` (collected, text and DML
apart), `GetInterrupt` (a test arms it), a command that fails once (as the engine fails
the command a Ctrl-Break lands in), and reference counts (every object a session
made must be released by the time it closes).

On Windows the methods are stdcall, on x86-64 Linux cdecl: dbgeng.py calls with
WINFUNCTYPE where it exists, CFUNCTYPE otherwise, and so does this stand-in.
"""

from __future__ import annotations

import ctypes
import struct
from ctypes import POINTER, c_char_p, c_long, c_uint32, c_uint64, c_void_p, c_wchar_p
from typing import Callable, Dict, List, Optional, Tuple

from dumpkit.sources import dbgeng
from tests.support.fakes import pykd as fake_pykd

_FUNCTYPE = getattr(ctypes, "WINFUNCTYPE", ctypes.CFUNCTYPE)
E_FAIL = -0x7FFFBFFB  # 0x80004005
E_NOTIMPL = -0x7FFFBFFF
E_INVALIDARG = -0x7FF8FFA9
_U32P = POINTER(c_uint32)
_U64P = POINTER(c_uint64)


class _Object(ctypes.Structure):
    _fields_ = [("vtable", c_void_p)]


def _stub(this) -> int:
    return E_NOTIMPL


_STUB = _FUNCTYPE(c_long, c_void_p)(_stub)


class FakeEngine:
    """One debugger session (the pykd stand-in's open dump) and the COM objects over it."""

    def __init__(self) -> None:
        self.output: List[Tuple[str, bool]] = []  # (text, is DML) from ControlledOutputWide
        self.interrupt_after: Optional[int] = None  # GetInterrupt answers S_OK at this call
        self.interrupt_calls = 0
        self.fail_once: set = set()  # commands whose next Execute fails (a Ctrl-Break the engine takes)
        self.refs: Dict[int, int] = {}  # object address -> references held by callers
        self._keep: List[object] = []
        self._callbacks: Dict[int, int] = {}  # client address -> its IDebugOutputCallbacks
        self._register_names: List[str] = []
        self._owner: Dict[int, int] = {}  # interface address -> the client it was asked of
        self.client = self._make_client()
        self.refs[self.client] = 1  # the engine's own reference, lent to the extension

    # -- COM plumbing -------------------------------------------------------------------
    def _make(self, methods: Dict[int, Tuple[Callable, tuple]], owner: Optional[int] = None) -> int:
        size = max(methods) + 1
        table = (c_void_p * size)()
        fns = []
        for slot in range(size):
            if slot in methods:
                fn, argtypes = methods[slot]
                proto = _FUNCTYPE(c_long, c_void_p, *argtypes)
                cfn = proto(fn)
                fns.append(cfn)
                table[slot] = ctypes.cast(cfn, c_void_p).value
            else:
                table[slot] = ctypes.cast(_STUB, c_void_p).value
        obj = _Object(ctypes.addressof(table))
        self._keep += [table, fns, obj]
        address = ctypes.addressof(obj)
        self.refs[address] = 0
        self._owner[address] = owner if owner is not None else address
        return address

    def _unknown(self) -> Dict[int, Tuple[Callable, tuple]]:
        def query(this, iid, out) -> int:
            wanted = ctypes.string_at(iid, 16)
            maker = self._interfaces.get(wanted)
            if maker is None:
                out[0] = None
                return dbgeng.E_NOINTERFACE
            address = maker(self._owner[this])
            self.refs[address] += 1
            out[0] = address
            return 0

        def add_ref(this) -> int:
            self.refs[this] += 1
            return self.refs[this]

        def release(this) -> int:
            self.refs[this] -= 1
            return self.refs[this]

        return {0: (query, (c_void_p, POINTER(c_void_p))), 1: (add_ref, ()), 2: (release, ())}

    @property
    def _interfaces(self) -> Dict[bytes, Callable[[int], int]]:
        return {
            dbgeng.IID_IDebugClient: lambda owner: owner,
            dbgeng.IID_IDebugControl4: self._make_control,
            dbgeng.IID_IDebugDataSpaces: self._make_data,
            dbgeng.IID_IDebugSymbols2: self._make_symbols,
            dbgeng.IID_IDebugSystemObjects: self._make_system,
            dbgeng.IID_IDebugRegisters: self._make_registers,
        }

    def leaked(self) -> List[int]:
        """Objects made for callers that still hold references (the engine's client aside)."""
        return [a for a, n in self.refs.items() if n > 0 and a != self.client]

    # -- IDebugClient -------------------------------------------------------------------
    def _make_client(self) -> int:
        methods = self._unknown()

        def create_client(this, out) -> int:
            made = self._make_client()
            self.refs[made] += 1
            out[0] = made
            return 0

        def set_callbacks(this, callbacks) -> int:
            self._callbacks[this] = callbacks or 0
            return 0

        methods.update(
            {
                30: (create_client, (POINTER(c_void_p),)),
                34: (set_callbacks, (c_void_p,)),
                36: (lambda this, mask: 0, (c_uint32,)),
                47: (lambda this: 0, ()),
            }
        )
        return self._make(methods)

    # -- IDebugControl4 -----------------------------------------------------------------
    def _make_control(self, client: int) -> int:
        m = self._unknown()

        def get_interrupt(this) -> int:
            self.interrupt_calls += 1
            armed = self.interrupt_after is not None and self.interrupt_calls >= self.interrupt_after
            return 0 if armed else 1

        def stack_trace(this, fo, so, io, frames, size, filled) -> int:
            try:
                got = fake_pykd.getStack()
            except fake_pykd.DbgException:
                return E_FAIL
            out = ctypes.cast(frames, POINTER(dbgeng.DEBUG_STACK_FRAME))
            n = min(len(got), size)
            for i in range(n):
                out[i].StackOffset = got[i].stackOffset
                out[i].InstructionOffset = got[i].instructionOffset
                out[i].FrameNumber = i
            filled[0] = n
            return 0

        def debuggee_type(this, cls, qualifier) -> int:
            cls[0], qualifier[0] = 2, dbgeng.DUMP_SMALL + 2  # user mode, a full user dump
            return 0

        def machine(this, out) -> int:
            out[0] = dbgeng.MACHINE_AMD64 if fake_pykd.is64bitSystem() else dbgeng.MACHINE_I386
            return 0

        def version(this, platform, major, minor, sp, sp_size, sp_used, sp_number, build, build_size, build_used):
            v = fake_pykd.getSystemVersion()
            platform[0], major[0], minor[0], sp_number[0] = 2, 0xF, v.buildNumber, 0
            _put(sp, sp_size, sp_used, b"")
            _put(build, build_size, build_used, v.buildString.encode("latin-1"))
            return 0

        def version_values(this, platform, major, minor, kd_major, kd_minor) -> int:
            v = fake_pykd.getSystemVersion()
            platform[0], major[0], minor[0], kd_major[0], kd_minor[0] = (
                2,
                v.win32Major,
                v.win32Minor,
                0xF,
                v.buildNumber,
            )
            return 0

        def execute(this, control, command, flags) -> int:
            text = command.decode("latin-1")
            if text in self.fail_once:
                self.fail_once.discard(text)
                return E_FAIL
            try:
                out = fake_pykd.dbgCommand(text)
            except fake_pykd.DbgException:
                return E_FAIL
            except BaseException:  # noqa: B036 - a Ctrl-Break landing in the engine's code is the engine's
                return E_FAIL
            callbacks = self._callbacks.get(client)
            if out and callbacks:
                obj = ctypes.cast(c_void_p(callbacks), POINTER(POINTER(c_void_p))).contents
                output = _FUNCTYPE(c_long, c_void_p, c_uint32, c_char_p)(obj[3])
                output(callbacks, dbgeng.OUTPUT_NORMAL, out.encode("latin-1", "replace"))
            return 0

        def last_event(this, kind, process, thread, extra, size, used, desc, desc_size, desc_used) -> int:
            ev = fake_pykd.getLastEvent()
            ex = fake_pykd.getLastException()
            kind[0], process[0], thread[0] = dbgeng.EVENT_EXCEPTION, 0, ev.thread
            record = dbgeng.LAST_EVENT_EXCEPTION()
            record.ExceptionCode = ex.exceptionCode
            record.ExceptionFlags = ex.exceptionFlags
            record.ExceptionRecord = ex.exceptionRecord
            record.ExceptionAddress = ex.exceptionAddress
            params = ex.parameters
            record.NumberParameters = len(params)
            for i, p in enumerate(params[:15]):
                record.ExceptionInformation[i] = p
            record.FirstChance = int(ex.firstChance)
            ctypes.memmove(extra, ctypes.byref(record), min(size, ctypes.sizeof(record)))
            used[0] = ctypes.sizeof(record)
            return 0

        def output(this, control, mask, fmt, text) -> int:
            if fmt != "%ws":
                return E_INVALIDARG
            self.output.append((text, control == dbgeng.OUTCTL_AMBIENT_DML))
            return 0

        m.update(
            {
                3: (get_interrupt, ()),
                31: (stack_trace, (c_uint64, c_uint64, c_uint64, c_void_p, c_uint32, _U32P)),
                34: (debuggee_type, (_U32P, _U32P)),
                35: (machine, (_U32P,)),
                40: (version, (_U32P, _U32P, _U32P, c_void_p, c_uint32, _U32P, _U32P, c_void_p, c_uint32, _U32P)),
                47: (machine, (_U32P,)),
                66: (execute, (c_uint32, c_char_p, c_uint32)),
                94: (last_event, (_U32P, _U32P, _U32P, c_void_p, c_uint32, _U32P, c_void_p, c_uint32, _U32P)),
                122: (output, (c_uint32, c_uint32, c_wchar_p, c_wchar_p)),
                160: (version_values, (_U32P, _U32P, _U32P, _U32P, _U32P)),
            }
        )
        return self._make(m, owner=client)

    # -- IDebugDataSpaces ---------------------------------------------------------------
    def _make_data(self, client: int) -> int:
        m = self._unknown()

        def read(this, address, buffer, size, got) -> int:
            data = _longest_read(address, size)
            if not data:
                got[0] = 0
                return E_FAIL
            ctypes.memmove(buffer, data, len(data))
            got[0] = len(data)
            return 0

        m[3] = (read, (c_uint64, c_void_p, c_uint32, _U32P))
        return self._make(m, owner=client)

    # -- IDebugSymbols2 -----------------------------------------------------------------
    def _make_symbols(self, client: int) -> int:
        m = self._unknown()

        def modules() -> list:
            return fake_pykd.getModulesList()

        def by_base(base: int):
            return next((mod for mod in modules() if mod.begin() == base), None)

        def name_by_offset(this, address, buf, size, used, displacement) -> int:
            text = fake_pykd.findSymbol(address)
            if "!" not in text:
                return E_FAIL
            name, _, disp = text.partition("+")
            _put(buf, size, used, name.encode("latin-1"))
            displacement[0] = int(disp, 16) if disp else 0
            return 0

        def number(this, loaded, unloaded) -> int:
            loaded[0], unloaded[0] = len(modules()), 0
            return 0

        def parameters(this, count, bases, start, params) -> int:
            out = ctypes.cast(params, POINTER(dbgeng.DEBUG_MODULE_PARAMETERS))
            mods = modules()
            for i in range(count):
                mod = mods[start + i]
                out[i].Base, out[i].Size = mod.begin(), mod.size()
                out[i].TimeDateStamp, out[i].Checksum = mod.timestamp(), mod.checksum()
            return 0

        def symbol_path(this, buf, size, used) -> int:
            _put(buf, size, used, fake_pykd.getSymbolPath().encode("latin-1"))
            return 0

        def version_info(this, index, base, item, buf, size, used) -> int:
            mod = by_base(base)
            if mod is None or ctypes.string_at(item) != b"\\":
                return E_FAIL
            info = mod.getFixedFileInfo()
            raw = struct.pack(
                "<13I",
                info.Signature,
                info.StrucVersion,
                info.FileVersionMS,
                info.FileVersionLS,
                info.ProductVersionMS,
                info.ProductVersionLS,
                *([0] * 7),
            )
            ctypes.memmove(buf, raw, min(size, len(raw)))
            used[0] = len(raw)
            return 0

        def name_string(this, which, index, base, buf, size, used) -> int:
            mod = by_base(base)
            if mod is None:
                return E_FAIL
            text = mod.image() if which == dbgeng.MODNAME_IMAGE else mod.name()
            _put(buf, size, used, text.encode("latin-1"))
            return 0

        m.update(
            {
                7: (name_by_offset, (c_uint64, c_void_p, c_uint32, _U32P, _U64P)),
                12: (number, (_U32P, _U32P)),
                17: (parameters, (c_uint32, _U64P, c_uint32, c_void_p)),
                40: (symbol_path, (c_void_p, c_uint32, _U32P)),
                52: (version_info, (c_uint32, c_uint64, c_void_p, c_void_p, c_uint32, _U32P)),
                53: (name_string, (c_uint32, c_uint32, c_uint64, c_void_p, c_uint32, _U32P)),
            }
        )
        return self._make(m, owner=client)

    # -- IDebugSystemObjects ------------------------------------------------------------
    def _make_system(self, client: int) -> int:
        m = self._unknown()

        def tebs() -> List[int]:
            return fake_pykd.getProcessThreads()

        def current(this, out) -> int:
            out[0] = tebs().index(fake_pykd.getCurrentThread())
            return 0

        def set_current(this, engine_id) -> int:
            all_tebs = tebs()
            if not 0 <= engine_id < len(all_tebs):
                return E_INVALIDARG
            fake_pykd.setCurrentThread(all_tebs[engine_id])
            return 0

        def number(this, out) -> int:
            out[0] = len(tebs())
            return 0

        def ids(this, start, count, engine_ids, system_ids) -> int:
            for i in range(count):
                engine_ids[i] = start + i
                system_ids[i] = fake_pykd.getThreadSystemID(start + i)
            return 0

        def teb(this, out) -> int:
            out[0] = fake_pykd.getCurrentThread()
            return 0

        def by_teb(this, address, out) -> int:
            all_tebs = tebs()
            if address not in all_tebs:
                return E_INVALIDARG
            out[0] = all_tebs.index(address)
            return 0

        def system_id(this, out) -> int:
            out[0] = fake_pykd.getThreadSystemID()
            return 0

        def process_id(this, out) -> int:
            out[0] = fake_pykd.getProcessSystemID()
            return 0

        m.update(
            {
                5: (current, (_U32P,)),
                6: (set_current, (c_uint32,)),
                9: (number, (_U32P,)),
                11: (ids, (c_uint32, c_uint32, _U32P, _U32P)),
                13: (teb, (_U64P,)),
                14: (by_teb, (c_uint64, _U32P)),
                17: (system_id, (_U32P,)),
                27: (process_id, (_U32P,)),
            }
        )
        return self._make(m, owner=client)

    # -- IDebugRegisters ----------------------------------------------------------------
    def _make_registers(self, client: int) -> int:
        m = self._unknown()
        names = self._register_names

        def index(this, name, out) -> int:
            text = name.decode("ascii")
            if text not in names:
                names.append(text)
            out[0] = names.index(text)
            return 0

        def value(this, i, out) -> int:
            try:
                got = fake_pykd.reg(names[i])
            except fake_pykd.DbgException:
                return E_FAIL
            v = ctypes.cast(out, POINTER(dbgeng.DEBUG_VALUE))[0]
            ctypes.memmove(v.raw, struct.pack("<Q", got & (1 << 64) - 1), 8)
            v.Type = 4  # DEBUG_VALUE_INT64
            return 0

        m.update({5: (index, (c_char_p, _U32P)), 6: (value, (c_uint32, c_void_p))})
        return self._make(m, owner=client)

    def text(self, dml: Optional[bool] = None) -> str:
        return "".join(t for t, is_dml in self.output if dml is None or is_dml == dml)


def _put(buf, size: int, used, data: bytes) -> None:
    """A string into a caller's buffer as dbgeng returns one: NUL-terminated, the size
    needed (with the NUL) in `used`."""
    used[0] = len(data) + 1
    if buf and size:
        n = min(len(data), size - 1)
        ctypes.memmove(buf, data[:n] + b"\0", n + 1)


def _longest_read(address: int, size: int) -> bytes:
    """As many bytes from `address` as the session has, in one go: the pykd stand-in's
    all-or-nothing read, narrowed to the longest prefix it gives."""
    try:
        return bytes(fake_pykd.loadBytes(address, size))
    except fake_pykd.MemoryException:
        pass
    lo, hi, best = 0, size, b""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            best = bytes(fake_pykd.loadBytes(address, mid))
            lo = mid
        except fake_pykd.MemoryException:
            hi = mid
    return best
