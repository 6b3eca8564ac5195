"""Python stacks from a crashed process's memory: _PyRuntime -> interpreters -> thread
states -> frames, each frame named from its code object (co_name, co_filename, the line
from the line table and the instruction the frame is at).

Everything read is dump data: every list is walked with a cap and loop detection, nothing
recurses, and a part that cannot be read becomes a one-line problem on what holds it (a
frame, a thread, the state), never an exception. Code objects and the lines computed from
them are cached by address, since a deep recursion repeats the same few functions."""

from __future__ import annotations

import struct
from collections import deque
from typing import Callable, Deque, Dict, Iterable, List, Optional, Set, Tuple

from dumpkit.cpython.debug_offsets import DebugOffsetsError, layout_from_record, record_size
from dumpkit.cpython.gil import gil_unknown, read_gil
from dumpkit.cpython.interpreter import Interpreter, find_interpreter
from dumpkit.cpython.verified import layout_trust
from dumpkit.cpython.layouts import LAYOUTS, PY_OBJECT_TYPE, Layout
from dumpkit.cpython.linetable import line_from_linetable, line_from_lnotab, line_from_locations
from dumpkit.cpython.model import HEAP_ADVICE, RUNTIME_ADVICE, PythonFrame, PythonState, PythonThread, Status
from dumpkit.target import MemoryNotInDump, Target
from dumpkit.records import record, replace

ExportAddress = Callable[[str], Optional[int]]  # export name -> its address in the process

MAX_INTERPRETERS = 64
MAX_THREADS = 1024
KEEP_FRAMES = 100_000  # per thread: the innermost frames kept (a recursion repeats them)
TAIL = 1_000  # the outermost frames kept, for the entry path below a deep recursion
MAX_LINKS = 2_000_000  # frames followed per thread at most (about 10^5 per second)
MAX_STRING_BYTES = 1024
MAX_LINE_TABLE = 1 << 20
PAGE = 4096
MAX_CACHED_PAGES = 8192  # 32 MiB of the target's memory at most
_U64 = struct.Struct("<Q").unpack_from
_I32 = struct.Struct("<i").unpack_from


@record
class _Code:
    name: Optional[str]
    filename: Optional[str]
    first_line: Optional[int]
    table: Optional[bytes]
    problem: Optional[str]


class _Missing(Exception):
    """Memory the walk needed is not in the dump; the message says which, in one line."""


class _Reader:
    def __init__(self, target: Target, layout: Layout, types: Dict[str, Optional[int]], keep: int, max_links: int):
        self.target = target
        self.layout = layout
        self.types = types
        self.keep = keep
        self.max_links = max_links
        self.codes: Dict[int, _Code] = {}
        self.frames: Dict[Tuple[int, int], PythonFrame] = {}
        self.strings: Dict[int, Tuple[Optional[str], Optional[str]]] = {}
        self.pages: Dict[int, bytes] = {}

    # --- memory ------------------------------------------------------------------------
    def read(self, address: int, size: int, what: str) -> bytes:
        # Whole pages are fetched once and kept: the frames of a recursion sit next to each
        # other, and a live debugger (pykd) pays per call, not per byte.
        page = address & ~(PAGE - 1)
        end = address - page + size
        if end <= PAGE:
            data = self.pages.get(page)
            if data is None:
                if len(self.pages) >= MAX_CACHED_PAGES:
                    self.pages.clear()
                data = self.target.read_available(page, PAGE)
                self.pages[page] = data
            if end <= len(data):
                return data[address - page : end]
        try:
            return self.target.read(address, size)
        except MemoryNotInDump:
            raise _Missing(f"{what} at {address:#x} is not in the dump") from None

    def pointer(self, address: int, what: str) -> int:
        return struct.unpack("<Q", self.read(address, 8, what))[0]

    def type_problem(self, raw: bytes, kind: str, what: str, address: int) -> Optional[str]:
        expected = self.types.get(kind)
        if expected is None:
            return None
        (found,) = _U64(raw, PY_OBJECT_TYPE)
        if found != expected:
            return f"{what} at {address:#x} is not a {kind} object (type {found:#x})"
        return None

    # --- objects -------------------------------------------------------------------------
    def string(self, address: int, what: str) -> Tuple[Optional[str], Optional[str]]:
        """(text, problem) of a compact str object, at most MAX_STRING_BYTES of it."""
        cached = self.strings.get(address)
        if cached is not None:
            return cached
        result = self._string(address, what)
        self.strings[address] = result
        return result

    def _string(self, address: int, what: str) -> Tuple[Optional[str], Optional[str]]:
        lay = self.layout
        if address == 0:
            return None, f"{what} is NULL"
        try:
            head = self.read(address, lay.unicode_ascii_size, what)
        except _Missing as e:
            return None, str(e)
        problem = self.type_problem(head, "str", what, address)
        if problem:
            return None, problem
        (length,) = struct.unpack_from("<q", head, lay.unicode_length)
        (state,) = struct.unpack_from("<I", head, lay.unicode_state)
        # state bit-fields (MSVC allocates from bit 0): interned:2 kind:3 compact:1 ascii:1
        kind, compact, ascii_ = (state >> 2) & 7, (state >> 5) & 1, (state >> 6) & 1
        if not compact or kind not in (1, 2, 4) or length < 0:
            return None, f"{what} at {address:#x} is not a compact str (state {state:#x})"
        data = address + (lay.unicode_ascii_size if ascii_ else lay.unicode_compact_size)
        want = min(length * kind, MAX_STRING_BYTES // kind * kind)
        try:
            raw = self.read(data, want, what)
        except _Missing as e:
            return None, str(e)
        codec = {1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}[kind]
        text = raw.decode(codec, errors="replace")
        return (text + "...", None) if want < length * kind else (text, None)

    def line_table(self, address: int) -> Tuple[Optional[bytes], Optional[str]]:
        lay = self.layout
        what = "line table"
        if address == 0:
            return None, "line table is NULL"
        try:
            head = self.read(address, lay.bytes_sval, what)
            problem = self.type_problem(head, "bytes", what, address)
            if problem:
                return None, problem
            (size,) = struct.unpack_from("<q", head, lay.bytes_size)
            if size < 0:
                return None, f"line table at {address:#x} has a negative size"
            return self.read(address + lay.bytes_sval, min(size, MAX_LINE_TABLE), what), None
        except _Missing as e:
            return None, str(e)

    def code(self, address: int) -> _Code:
        cached = self.codes.get(address)
        if cached is None:
            cached = self._code(address)
            self.codes[address] = cached
        return cached

    def _code(self, address: int) -> _Code:
        lay = self.layout
        try:
            raw = self.read(address, lay.code_size, "code object")
        except _Missing as e:
            return _Code(None, None, None, None, str(e))
        problem = self.type_problem(raw, "code", "code object", address)
        if problem:
            return _Code(None, None, None, None, problem)
        first_line = struct.unpack_from("<i", raw, lay.code_firstlineno)[0]
        name, p1 = self.string(struct.unpack_from("<Q", raw, lay.code_name)[0], "co_name")
        filename, p2 = self.string(struct.unpack_from("<Q", raw, lay.code_filename)[0], "co_filename")
        table, p3 = self.line_table(struct.unpack_from("<Q", raw, lay.code_line_table)[0])
        problem = "; ".join(p for p in (p1, p2, p3) if p) or None
        return _Code(name, filename, first_line, table, problem)

    def frame(self, code_address: int, offset: Optional[int]) -> PythonFrame:
        """The PythonFrame for `offset` (bytes into the bytecode) of a code object; shared
        by every activation at the same place."""
        key = (code_address, -1 if offset is None else offset)
        cached = self.frames.get(key)
        if cached is not None:
            return cached
        code = self.code(code_address)
        line: Optional[int] = None
        problem = code.problem
        if offset is None:
            problem = problem or "the frame's instruction pointer lies outside its code"
        elif code.table is not None and code.first_line is not None:
            if self.layout.line_table == "lnotab":
                line = line_from_lnotab(code.table, code.first_line, offset)
            elif self.layout.line_table == "linetable":
                line = line_from_linetable(code.table, code.first_line, offset)
            else:
                line = line_from_locations(code.table, code.first_line, offset)
        made = PythonFrame(code.name, code.filename, line, code.first_line, code_address, problem)
        self.frames[key] = made
        return made

    # --- chains ----------------------------------------------------------------------------
    def first_frame(self, tstate_raw: bytes, tstate: int) -> int:
        lay = self.layout
        (pointer,) = struct.unpack_from("<Q", tstate_raw, lay.tstate_frame)
        if lay.cframe_current_frame is None or pointer == 0:
            return pointer
        # 3.11-3.12: the thread state points at a _PyCFrame (on the C stack or inside the
        # thread state), which points at the current frame
        return self.pointer(pointer + lay.cframe_current_frame, "_PyCFrame")

    def walk_frames(self, first: int) -> "_Chain":
        """Follows the frame chain from the innermost frame. The first `keep` frames and the
        last TAIL are kept; the links between are followed (to count them and to reach the
        entry path) without keeping their frames, up to `max_links` in all."""
        lay = self.layout
        head: List[PythonFrame] = []
        addresses: List[int] = []  # the head frames' own addresses (what their locals hold is read there)
        tail: Deque[Tuple[int, Optional[int]]] = deque(maxlen=TAIL)
        problems: List[str] = []
        seen: Set[int] = set()
        checkpoint, power, steps = 0, 1, 0  # Brent's loop detection once frames are not kept
        walked = 0
        address = first
        frame_object = lay.frames == "frame_object"
        while address:
            if steps >= self.max_links:
                problems.append(f"the frame chain is longer than {self.max_links} links; the rest was not followed")
                return _Chain(head, self._frames(tail), walked, True, problems)
            steps += 1
            if len(head) < self.keep:
                if address in seen:
                    problems.append(f"the frame chain loops back to {address:#x} after {walked} frames")
                    break
                seen.add(address)
            elif address == checkpoint:
                problems.append(f"the frame chain loops back to {address:#x} after {walked} frames")
                break
            if steps >= power:
                checkpoint, power = address, power * 2
            try:
                raw = self.read(address, lay.frame_size, "frame")
            except _Missing as e:
                self._append(head, tail, None, None, str(e))
                problems.append(f"chain cut: {e}")
                walked += 1
                break
            (back,) = _U64(raw, lay.frame_back)
            (code,) = _U64(raw, lay.frame_code)
            code &= ~lay.code_tag_mask
            if frame_object:
                problem = self.type_problem(raw, "frame", "frame", address)
                if problem:
                    self._append(head, tail, code, None, problem)
                    problems.append(f"chain cut: {problem}")
                    walked += 1
                    break
                (lasti,) = _I32(raw, lay.frame_instr)
                offset: Optional[int] = lasti * 2 if lay.line_table == "linetable" else lasti
            else:
                if (
                    lay.owner_cstack is not None
                    and lay.frame_owner is not None
                    and raw[lay.frame_owner] >= lay.owner_cstack
                ):
                    address = back  # a C entry shim or the eval loop's entry frame, not Python code
                    continue
                (instr,) = _U64(raw, lay.frame_instr)
                base = code + (lay.code_adaptive or 0)
                # a frame not yet started points one code unit before its code: offset -2,
                # which the line table maps to the first line, as CPython does
                offset = instr - base if base - 2 <= instr < base + (1 << 28) else None
            if len(head) < self.keep:
                addresses.append(address)
            self._append(head, tail, code, offset, None)
            walked += 1
            address = back
        return _Chain(head, self._frames(tail), walked, False, problems, tuple(addresses))

    def _append(self, head, tail, code: Optional[int], offset: Optional[int], problem: Optional[str]) -> None:
        if problem is not None:
            frame = PythonFrame(None, None, None, None, code or 0, problem)
            if len(head) < self.keep:
                head.append(frame)
            else:
                tail.append(frame)
        elif len(head) < self.keep:
            head.append(self.frame(code or 0, offset))
        else:
            tail.append((code or 0, offset))

    def _frames(self, tail) -> List[PythonFrame]:
        return [t if isinstance(t, PythonFrame) else self.frame(*t) for t in tail]


@record
class _Chain:
    head: List[PythonFrame]  # innermost frames, in order
    tail: List[PythonFrame]  # outermost frames (only when the chain was longer than `keep`)
    walked: int  # frames followed in all
    truncated: bool  # the link cap stopped the walk: the outermost frames are unknown
    problems: List[str]
    head_addresses: Tuple[int, ...] = ()  # the addresses of the head's frames (that were read)


def _layout_for(target: Target, interp: Interpreter, runtime: int) -> Tuple[Optional[Layout], Optional[PythonState]]:
    dll = interp.module.name
    base = PythonState(Status.UNSUPPORTED, "", dll=dll, version=interp.version_text)
    if interp.free_threaded or interp.debug:
        kind = "free-threaded" if interp.free_threaded else "debug"
        return None, replace(base, message=f"{dll} is a {kind} build; its structure layout is not known to dumpkit")
    if interp.version in LAYOUTS:
        return LAYOUTS[interp.version], None
    if interp.version < (3, 8):
        return None, replace(base, message=f"CPython {interp.version_text} is older than 3.8")
    try:
        raw = target.read(runtime, record_size(interp.version))
    except MemoryNotInDump:
        msg = f"_PyRuntime of {dll} (its data section, at {runtime:#x}) is not in the dump; {RUNTIME_ADVICE}"
        return None, replace(base, status=Status.MEMORY_MISSING, message=msg)
    try:
        return layout_from_record(raw, interp.version), None
    except DebugOffsetsError as e:
        return None, replace(base, message=f"{dll}: {e}")


def export_lookup(base: int, exports: Iterable[Tuple[int, str]]) -> ExportAddress:
    """An `export_address` from a module's base and its export table as (RVA, name) pairs
    (what dumpkit's PE reader lists)."""
    table = {name: rva for rva, name in exports}
    return lambda name: base + table[name] if name in table else None


def read_python_state(
    target: Target,
    export_address: Optional[ExportAddress],
    interpreter: Optional[Interpreter] = None,
    keep_frames: int = KEEP_FRAMES,
    max_links: int = MAX_LINKS,
    max_threads: int = MAX_THREADS,
) -> PythonState:
    """The Python stacks of every thread that has a Python thread state.

    `export_address(name)` gives the address, in the process, of an export of the
    interpreter DLL (`find_interpreter(target.modules).module`), or None; without it the
    runtime cannot be found. Never raises on dump data."""
    interp = interpreter or find_interpreter(target.modules)
    if interp is None:
        return PythonState(Status.NO_PYTHON, "no python3X.dll among the loaded modules")
    dll = interp.module.name
    if export_address is None:
        msg = f"{dll}'s image was not found, so its export _PyRuntime cannot be located (give its folder as an image path)"
        return PythonState(Status.NO_RUNTIME, msg, dll=dll, version=interp.version_text)
    runtime = export_address("_PyRuntime")
    if runtime is None:
        msg = f"{dll} does not export _PyRuntime: the interpreter's state cannot be located"
        return PythonState(Status.NO_RUNTIME, msg, dll=dll, version=interp.version_text)
    layout, failed = _layout_for(target, interp, runtime)
    if failed is not None and failed.status is Status.MEMORY_MISSING:
        return replace(failed, gil=gil_unknown(failed.message))
    if failed is not None or layout is None:
        return failed or PythonState(Status.UNSUPPORTED, f"no layout for {dll}", dll=dll)
    types: Dict[str, Optional[int]] = {}
    for kind, name in (("code", "PyCode_Type"), ("str", "PyUnicode_Type"), ("bytes", "PyBytes_Type")):
        types[kind] = export_address(name)
    if layout.frames == "frame_object":
        types["frame"] = export_address("PyFrame_Type")
    reader = _Reader(target, layout, types, keep_frames, max(max_links, keep_frames))
    verified, note = layout_trust(interp.version, interp.micro)
    common = PythonState(
        Status.READ,
        "",
        dll=dll,
        version=interp.version_text,
        layout=layout.source,
        layout_verified=verified,
        layout_note=note,
    )
    try:
        head = reader.pointer(runtime + layout.runtime_interpreters_head, f"_PyRuntime of {dll} (its data section)")
    except _Missing as e:
        msg = f"{e}; {RUNTIME_ADVICE}"
        return replace(common, status=Status.MEMORY_MISSING, message=msg, gil=gil_unknown(msg))
    state = _walk_runtime(reader, head, max_threads, common)
    return replace(state, gil=read_gil(target, runtime, interp.version, layout, state.threads))


def _walk_runtime(reader: _Reader, head: int, max_threads: int, common: PythonState) -> PythonState:
    layout = reader.layout
    threads: List[PythonThread] = []
    problems: List[str] = []
    missing: List[str] = []
    seen_interps: Set[int] = set()
    seen_tstates: Set[int] = set()
    interp, index = head, 0
    while interp and index < MAX_INTERPRETERS:
        if interp in seen_interps:
            problems.append(f"the interpreter list loops back to {interp:#x}")
            break
        seen_interps.add(interp)
        try:
            tstate = reader.pointer(interp + layout.interp_threads_head, "interpreter state")
            next_interp = reader.pointer(interp + layout.interp_next, "interpreter state")
        except _Missing as e:
            missing.append(str(e))
            break
        while tstate and len(threads) < max_threads:
            if tstate in seen_tstates:
                problems.append(f"the thread-state list loops back to {tstate:#x}")
                break
            seen_tstates.add(tstate)
            size = max(layout.tstate_frame, layout.tstate_next, layout.tstate_thread_id) + 8
            try:
                raw = reader.read(tstate, size, "thread state")
            except _Missing as e:
                missing.append(str(e))
                break
            (tid,) = struct.unpack_from("<I", raw, layout.tstate_thread_id)
            try:
                chain = reader.walk_frames(reader.first_frame(raw, tstate))
            except _Missing as e:
                chain = _Chain([], [], 0, False, [str(e)])
            omitted = chain.walked - len(chain.head) - len(chain.tail)
            threads.append(
                PythonThread(
                    tid,
                    tuple(chain.head + chain.tail),
                    chain.truncated,
                    tuple(chain.problems),
                    tstate,
                    index,
                    omitted=omitted,
                    omitted_at=len(chain.head) if omitted else None,
                    frame_addresses=chain.head_addresses,
                )
            )
            (tstate,) = struct.unpack_from("<Q", raw, layout.tstate_next)
        if len(threads) >= max_threads and tstate:
            problems.append(f"more than {max_threads} thread states; the rest are not read")
            break
        interp, index = next_interp, index + 1
    if interp and index >= MAX_INTERPRETERS:
        problems.append(f"more than {MAX_INTERPRETERS} interpreters; the rest are not read")
    if not threads and missing:
        msg = f"{missing[0]} (heap); {HEAP_ADVICE}"
        return replace(common, status=Status.MEMORY_MISSING, message=msg, problems=tuple(problems))
    problems.extend(missing)
    if not threads:
        return replace(common, status=Status.NO_THREADS, message="no Python thread state in the dump's interpreter")
    n_frames = sum(t.depth for t in threads)
    running = sum(1 for t in threads if t.frames)
    msg = f"Python {common.version}: {running} of {len(threads)} thread states running Python, {n_frames} frames"
    return replace(common, message=msg, threads=tuple(threads), problems=tuple(problems))
