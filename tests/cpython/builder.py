"""Synthetic process memory holding a CPython runtime, for the reader's tests: the
structures of tests/cpython/headers.py filled in with ctypes, line tables from
tests/cpython/compilers.py, in the shared Target stand-in (tests/support/fakes/target.py), which raises MemoryNotInDump outside what
was written (so a test can leave any object out of the "dump")."""

from __future__ import annotations

import struct
from ctypes import addressof, sizeof, string_at
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from dumpkit.target import Module
from tests.cpython import headers as H
from tests.support.fakes.target import Memory as SharedMemory
from tests.support.fakes.target import MemoryTarget
from tests.cpython.compilers import Segment, line_at, linetable_310, lnotab_38, locations_311

DLL_BASE = 0x1_8000_0000
HEAP_BASE = 0x2_0000_0000


@dataclass
class Func:
    name: str
    filename: str
    first_line: int
    segments: Sequence[Segment]  # the code, as (code units, location) runs

    @property
    def units(self) -> int:
        return sum(u for u, _ in self.segments)


@dataclass
class Call:
    func: Func
    unit: int  # the instruction the frame is at (index in code units)
    shim_below: bool = False  # 3.12+: a C entry frame (owner FRAME_OWNED_BY_CSTACK) under this one
    # 3.14: the owner of that frame (3, the eval loop's entry frame, or 4, a C stack frame)
    shim_owner: int = 3

    @property
    def line(self) -> Optional[int]:
        return line_at(self.func.segments, self.unit)


class Memory(SharedMemory):
    """The shared block store with a bump allocator for the runtime's objects."""

    def __init__(self) -> None:
        super().__init__()
        self.next = HEAP_BASE

    def alloc(self, size: int, align: int = 16) -> int:
        at = (self.next + align - 1) // align * align
        self.next = at + size + 16  # a gap: reads past an object's end are not in the dump
        self.put(at, bytes(size))
        return at

    def put_struct(self, address: int, obj) -> None:
        self.put(address, string_at(addressof(obj), sizeof(obj)))


@dataclass
class Process:
    """A CPython `version` ((3, minor)) process with threads running the given calls."""

    version: Tuple[int, int]
    file_version: Optional[str] = None
    memory: Memory = field(default_factory=Memory)
    exports: Dict[str, int] = field(default_factory=dict)
    codes: Dict[int, int] = field(default_factory=dict)  # id(Func) -> code object address
    strings: Dict[str, int] = field(default_factory=dict)
    threads: List[Tuple[int, List[Call]]] = field(default_factory=list)
    addresses: Dict[str, int] = field(default_factory=dict)  # what tests may damage
    frame_addresses: Dict[int, List[int]] = field(default_factory=dict)  # tid -> frames, innermost first

    def __post_init__(self) -> None:
        for i, name in enumerate(("PyCode_Type", "PyUnicode_Type", "PyBytes_Type", "PyFrame_Type")):
            self.exports[name] = DLL_BASE + 0x1000 + 0x400 * i
        self.exports["_PyRuntime"] = DLL_BASE + 0x10000

    @property
    def minor(self) -> int:
        return self.version[1]

    def export(self, name: str) -> Optional[int]:
        return self.exports.get(name)

    # --- objects ---------------------------------------------------------------------
    def str_object(self, text: str) -> int:
        if text in self.strings:
            return self.strings[text]
        widest = max((ord(c) for c in text), default=0)
        kind = 1 if widest < 256 else 2 if widest < 65536 else 4
        ascii_ = widest < 128
        legacy = self.minor <= 11
        ascii_t, compact_t = (H.ASCII_38, H.COMPACT_38) if legacy else (H.ASCII_312, H.COMPACT_312)
        head = ascii_t()
        head.ob_refcnt = 1
        head.ob_type = self.exports["PyUnicode_Type"]
        head.length = len(text)
        head.hash = -1
        # interned:2 kind:3 compact:1 ascii:1 ready:1 (ready only up to 3.11)
        head.state = (kind << 2) | (1 << 5) | (int(ascii_) << 6) | (int(legacy) << 7)
        codec = {1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}[kind]
        data = text.encode(codec) + bytes(kind)
        if ascii_:
            raw = string_at(addressof(head), sizeof(head)) + data
        else:
            full = compact_t()
            full._base = head
            raw = string_at(addressof(full), sizeof(full)) + data
        at = self.memory.alloc(len(raw))
        self.memory.put(at, raw)
        self.strings[text] = at
        return at

    def bytes_object(self, data: bytes) -> int:
        head = H.BYTES()
        head.ob_refcnt = 1
        head.ob_type = self.exports["PyBytes_Type"]
        head.ob_size = len(data)
        head.ob_shash = -1
        raw = string_at(addressof(head), H.BYTES.ob_sval.offset) + data + b"\0"
        at = self.memory.alloc(len(raw))
        self.memory.put(at, raw)
        return at

    def code_object(self, func: Func) -> int:
        if id(func) in self.codes:
            return self.codes[id(func)]
        if self.minor <= 9:
            table = lnotab_38(func.segments, func.first_line)
        elif self.minor == 10:
            table = linetable_310(func.segments, func.first_line)
        else:
            table = locations_311(func.segments, func.first_line)
        cls = {8: H.CODE_38, 9: H.CODE_38, 10: H.CODE_310, 11: H.CODE_311, 12: H.CODE_312}.get(self.minor, H.CODE_313)
        code = cls()
        code.ob_refcnt = 1
        code.ob_type = self.exports["PyCode_Type"]
        code.co_firstlineno = func.first_line
        code.co_name = self.str_object(func.name)
        code.co_filename = self.str_object(func.filename)
        table_at = self.bytes_object(table)
        if self.minor <= 9:
            code.co_lnotab = table_at
        else:
            code.co_linetable = table_at
        raw = string_at(addressof(code), sizeof(code))
        if self.minor >= 11:  # the instructions live inside the code object
            raw = raw[: cls.co_code_adaptive.offset] + bytes(2 * func.units)
        at = self.memory.alloc(len(raw))
        self.memory.put(at, raw)
        self.codes[id(func)] = at
        return at

    def instruction(self, code: int, unit: int) -> int:
        cls = {11: H.CODE_311, 12: H.CODE_312}.get(self.minor, H.CODE_313)
        return code + cls.co_code_adaptive.offset + 2 * unit

    def frame_class(self):
        return {11: H.IFRAME_311, 12: H.IFRAME_312, 13: H.IFRAME_313}.get(self.minor, H.IFRAME_314)

    def executable(self, code: int) -> int:
        """f_executable: 3.14's is a _PyStackRef, here a deferred reference (its tag bit set)."""
        return code | H.STACKREF_DEFERRED_314 if self.minor >= 14 else code

    def shim_frame(self, previous: int, owner: int = 3) -> int:
        shim = Func("<shim>", "<shim>", 0, [(2, None)])
        frame = self.frame_class()()
        code = self.code_object(shim)
        if self.minor == 12:
            frame.f_code = code
            frame.prev_instr = self.instruction(code, 0)
        else:
            frame.f_executable = self.executable(code)
            frame.instr_ptr = self.instruction(code, 0)
        frame.previous = previous
        frame.owner = owner  # FRAME_OWNED_BY_CSTACK (3.12-3.13); 3.14's INTERPRETER or CSTACK
        at = self.memory.alloc(sizeof(frame))
        self.memory.put_struct(at, frame)
        return at

    def frames(self, calls: List[Call]) -> int:
        """Writes the chain (outermost first) and returns the innermost frame's address;
        `last_frames` lists the frames written, innermost first."""
        back = 0
        self.last_frames: List[int] = []
        for call in reversed(calls):
            if call.shim_below:
                back = self.shim_frame(back, call.shim_owner if self.minor >= 14 else 3)
            code = self.code_object(call.func)
            if self.minor <= 10:
                frame = (H.FRAME_38 if self.minor <= 9 else H.FRAME_310)()
                frame.ob_refcnt = 1
                frame.ob_type = self.exports["PyFrame_Type"]
                frame.f_back = back
                frame.f_code = code
                frame.f_lasti = call.unit * 2 if self.minor <= 9 and call.unit >= 0 else call.unit
                frame.f_lineno = -7  # stale unless tracing: the reader must not use it
            else:
                frame = self.frame_class()()
                frame.previous = back
                if self.minor <= 12:
                    frame.f_code = code
                    frame.prev_instr = self.instruction(code, call.unit)
                else:
                    frame.f_executable = self.executable(code)
                    frame.instr_ptr = self.instruction(code, call.unit)
            at = self.memory.alloc(sizeof(frame))
            self.memory.put_struct(at, frame)
            back = at
            self.last_frames.insert(0, at)
        return back

    # --- the runtime -------------------------------------------------------------------
    def add_thread(self, tid: int, calls_innermost_first: List[Call]) -> None:
        self.threads.append((tid, list(calls_innermost_first)))

    def tstate(self, tid: int, calls: List[Call], interp: int, next_: int) -> int:
        innermost = self.frames(list(calls)) if calls else 0
        self.frame_addresses[tid] = list(self.last_frames) if calls else []
        cls = {8: H.TSTATE_38, 9: H.TSTATE_38, 10: H.TSTATE_310, 11: H.TSTATE_311, 12: H.TSTATE_312}.get(
            self.minor, H.TSTATE_313
        )
        ts = cls()
        ts.next = next_
        ts.interp = interp
        ts.thread_id = tid
        if self.minor in (11, 12):
            cframe = (H.CFRAME_311 if self.minor == 11 else H.CFRAME_312)()
            cframe.current_frame = innermost
            cf_at = self.memory.alloc(sizeof(cframe))
            self.memory.put_struct(cf_at, cframe)
            ts.cframe = cf_at
        elif self.minor >= 13:
            ts.current_frame = innermost
        else:
            ts.frame = innermost
        at = self.memory.alloc(sizeof(ts))
        self.memory.put_struct(at, ts)
        return at

    def build(self) -> MemoryTarget:
        interp_cls = {8: H.INTERP_38, 9: H.INTERP_39, 10: H.INTERP_39, 11: H.INTERP_311, 12: H.INTERP_312}.get(
            self.minor, H.INTERP_313
        )
        interp_at = self.memory.alloc(sizeof(interp_cls))
        head = 0
        for tid, calls in reversed(self.threads):  # newest first, as CPython links them
            head = self.tstate(tid, calls, interp_at, head)
            self.addresses[f"tstate {tid}"] = head
        interp = interp_cls()
        if self.minor <= 10:
            interp.tstate_head = head
        else:
            interp.threads.head = head
        self.memory.put_struct(interp_at, interp)
        self.addresses["interp"] = interp_at
        runtime = self.exports["_PyRuntime"]
        if self.minor >= 13:
            self.memory.put(runtime, self.debug_offsets_runtime(interp_at))
        else:
            rt = {8: H.RUNTIME_38, 9: H.RUNTIME_39, 10: H.RUNTIME_39}.get(self.minor, H.RUNTIME_311)()
            rt.initialized = 1
            rt.interpreters.head = interp_at
            rt.interpreters.main = interp_at
            self.memory.put_struct(runtime, rt)
        for name in ("PyCode_Type", "PyUnicode_Type", "PyBytes_Type", "PyFrame_Type"):
            self.memory.put(self.exports[name], bytes(0x100))
        version = self.file_version or f"3.{self.minor}.2150.1013"
        dll = Module(
            f"python3{self.minor}.dll",
            f"C:\\Python3{self.minor}\\python3{self.minor}.dll",
            DLL_BASE,
            0x60_0000,
            file_version=version,
        )
        exe = Module("python.exe", f"C:\\Python3{self.minor}\\python.exe", 0x1_4000_0000, 0x2_0000)
        return MemoryTarget(self.memory, [exe, Module("python3.dll", "C:\\python3.dll", 0x1_7000_0000, 0x1_0000), dll])

    def debug_offsets_runtime(self, interp_at: int) -> bytes:
        """A 3.13 or 3.14 _PyRuntime: the _Py_DebugOffsets record, then interpreters.head.
        3.14's structures other than the frame are 3.13's stand-ins: the record says where
        their fields are, which is all the reader may assume."""
        groups = H.DEBUG_OFFSETS_314 if self.minor >= 14 else H.DEBUG_OFFSETS_313
        iframe = self.frame_class()
        record_len = 24 + 8 * sum(len(names) for _, names in groups)
        head_offset = record_len + 40
        sizes = {
            "runtime_state": head_offset + 64,
            "interpreter_state": sizeof(H.INTERP_313) + 4096,
            "thread_state": sizeof(H.TSTATE_313) + 512,
            "interpreter_frame": sizeof(iframe),
            "code_object": sizeof(H.CODE_313),
        }
        known = {
            "runtime_state.interpreters_head": head_offset,
            "runtime_state.finalizing": head_offset - 16,
            "interpreter_state.next": H.INTERP_313.next.offset,
            "interpreter_state.id": H.INTERP_313.id.offset,
            "interpreter_state.threads_head": H.INTERP_313.threads.offset + 8,
            "interpreter_state.threads_main": H.INTERP_313.threads.offset + 16,
            "interpreter_state.tlbc_generation": 0,  # free-threaded builds only
            # the GIL the interpreter points to (ceval.gil, inside the ceval stand-in) and its
            # own one, past the stand-in: tests/cpython/test_gil_synthetic.py fills them in
            "interpreter_state.ceval_gil": 16,
            "interpreter_state.gil_runtime_state": sizeof(H.INTERP_313) + 64,
            "interpreter_state.gil_runtime_state_locked": sizeof(H.INTERP_313) + 64 + 16,
            "interpreter_state.gil_runtime_state_holder": sizeof(H.INTERP_313) + 64 + 8,
            "thread_state.status": H.TSTATE_313._status.offset,
            "thread_state.prev": H.TSTATE_313.prev.offset,
            "thread_state.next": H.TSTATE_313.next.offset,
            "thread_state.interp": H.TSTATE_313.interp.offset,
            "thread_state.current_frame": H.TSTATE_313.current_frame.offset,
            "thread_state.thread_id": H.TSTATE_313.thread_id.offset,
            "thread_state.native_thread_id": H.TSTATE_313.native_thread_id.offset,
            "thread_state.datastack_chunk": H.TSTATE_313.datastack_chunk.offset,
            "interpreter_frame.previous": iframe.previous.offset,
            "interpreter_frame.executable": iframe.f_executable.offset,
            "interpreter_frame.instr_ptr": iframe.instr_ptr.offset,
            "interpreter_frame.localsplus": iframe.localsplus.offset,
            "interpreter_frame.owner": iframe.owner.offset,
            "code_object.filename": H.CODE_313.co_filename.offset,
            "code_object.name": H.CODE_313.co_name.offset,
            "code_object.qualname": H.CODE_313.co_qualname.offset,
            "code_object.linetable": H.CODE_313.co_linetable.offset,
            "code_object.firstlineno": H.CODE_313.co_firstlineno.offset,
            "code_object.argcount": H.CODE_313.co_argcount.offset,
            "code_object.localsplusnames": H.CODE_313.co_localsplusnames.offset,
            "code_object.localspluskinds": H.CODE_313.co_localspluskinds.offset,
            "code_object.co_code_adaptive": H.CODE_313.co_code_adaptive.offset,
            "pyobject.size": 16,
            "pyobject.ob_type": 8,
            "bytes_object.size": sizeof(H.BYTES),
            "bytes_object.ob_size": H.BYTES.ob_size.offset,
            "bytes_object.ob_sval": H.BYTES.ob_sval.offset,
            "unicode_object.size": sizeof(H.COMPACT_312) + 8,
            "unicode_object.state": H.ASCII_312.state.offset,
            "unicode_object.length": H.ASCII_312.length.offset,
            "unicode_object.asciiobject_size": sizeof(H.ASCII_312),
        }
        values = []
        for group, names in groups:
            for name in names:
                key = f"{group}.{name}"
                if name == "size" and group in sizes:
                    values.append(sizes[group])
                else:
                    values.append(known.get(key, 8))  # fields the reader does not use
        hexversion = 0x030E00F0 if self.minor >= 14 else 0x030D02F0
        record = b"xdebugpy" + struct.pack("<QQ", hexversion, 0) + struct.pack(f"<{len(values)}Q", *values)
        assert len(record) == record_len
        out = bytearray(sizes["runtime_state"])
        out[:record_len] = record
        struct.pack_into("<Q", out, head_offset, interp_at)
        return bytes(out)
