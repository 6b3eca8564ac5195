"""Which thread holds the GIL, read from the interpreter's state in a dump.

The GIL's own fields decide: `locked` (1 taken, 0 free, -1 not created) and `last_holder`,
the PyThreadState that took it last, which is the holder while it is taken. That is how
CPython itself names the holder (3.13's ceval_gil.c: `if locked: holder = last_holder`).
A second witness is read where the version has one (gil_layouts.py says which): 3.8-3.11's
`_PyRuntime.gilstate.tstate_current`, the thread state of the thread running Python; each
thread state's `_status.active` (3.12) or `_status.holds_gil` (3.13). They agree except in
the few instructions between taking the GIL and making the thread state current (and the
reverse), or when the memory is not what the layout says: a disagreement is a problem on
the record, never resolved by guessing.

Everything read is dump data: a handful of fixed-size reads, the interpreter list walked
with a cap and loop detection; memory the dump lacks (a MiniDumpNormal dump holds neither
_PyRuntime nor the heap) makes `held` None and a problem that says which dump has it."""

from __future__ import annotations

import struct
from typing import Dict, List, Optional, Sequence, Tuple

from dumpkit.cpython.debug_offsets import FIELDS_BY_VERSION, DebugOffsetsError, parse_fields, record_size
from dumpkit.cpython.gil_layouts import GIL_LAYOUTS, GilLayout, GilOffsetsError, gil_layout_from_debug_offsets
from dumpkit.cpython.layouts import Layout
from dumpkit.cpython.model import HEAP_ADVICE, RUNTIME_ADVICE, GilRecord, GilSource, GilWitness, PythonThread
from dumpkit.target import MemoryNotInDump, Target

MAX_INTERPRETERS = 64
MAX_WAITERS = 1 << 16  # more threads than a process has: the count is not one
UNKNOWN = "which thread holds the GIL is not known"


class _Missing(Exception):
    """Memory the reading needed is not in the dump: the message says which, in one line."""


def _read(target: Target, address: int, size: int, what: str, advice: str) -> bytes:
    try:
        return target.read(address, size)
    except MemoryNotInDump:
        raise _Missing(f"{what} at {address:#x} is not in the dump; {advice}") from None


def gil_unknown(reason: str) -> GilRecord:
    """The record when the reader could not get as far as the GIL (`reason`, one line)."""
    return GilRecord(held=None, problems=(f"{UNKNOWN}: {reason}",))


def gil_layout(target: Target, version: Tuple[int, int], runtime: int) -> GilLayout:
    """The GIL's layout for `version`; 3.13's and 3.14's from the _Py_DebugOffsets at `runtime`.
    Raises _Missing, or ValueError (GilOffsetsError, DebugOffsetsError) with one line."""
    found = GIL_LAYOUTS.get(version)
    if found is not None:
        return found
    if version not in FIELDS_BY_VERSION:
        raise GilOffsetsError(f"where CPython {version[0]}.{version[1]} keeps its GIL is not known to dumpkit")
    raw = _read(target, runtime, record_size(version), "_Py_DebugOffsets (_PyRuntime)", RUNTIME_ADVICE)
    return gil_layout_from_debug_offsets(parse_fields(raw, version), version)


def _main_interpreter_gil(target: Target, runtime: int, layout: Layout, gil: GilLayout) -> Tuple[int, int, List[str]]:
    """(the main interpreter's index in the runtime's list, the GIL it uses, problems) for
    3.12+: the main interpreter is the first made, so the last of the list (new ones are put
    at its head). A subinterpreter with a GIL of its own is said, not read."""
    head = _read(target, runtime + layout.runtime_interpreters_head, 8, "_PyRuntime", RUNTIME_ADVICE)
    interp = struct.unpack("<Q", head)[0]
    gils: List[int] = []  # each interpreter's ceval.gil, in list order
    seen = set()
    problems: List[str] = []
    while interp and len(gils) < MAX_INTERPRETERS:
        if interp in seen:
            problems.append(f"the interpreter list loops back to {interp:#x}")
            break
        seen.add(interp)
        nxt = _read(target, interp + layout.interp_next, 8, "interpreter state", HEAP_ADVICE)
        pointer = _read(target, interp + gil.gil, 8, "interpreter state's ceval.gil", HEAP_ADVICE)
        gils.append(struct.unpack("<Q", pointer)[0])
        interp = struct.unpack("<Q", nxt)[0]
    if interp and len(gils) >= MAX_INTERPRETERS:
        problems.append(
            f"more than {MAX_INTERPRETERS} interpreters; the GIL of the last one read is taken as the main's"
        )
    if not gils:
        raise _Missing("the runtime lists no interpreter")
    own = sum(1 for g in gils[:-1] if g != gils[-1])
    if own:
        problems.append(f"{own} subinterpreter(s) use a GIL of their own; only the main interpreter's is read")
    return len(gils) - 1, gils[-1], problems


def _thread_id(target: Target, tstate: int, layout: Layout, problems: List[str]) -> Optional[int]:
    """The OS thread id of a holder the reader did not list: read from its thread state,
    and said, since CPython hands the GIL only to the thread states it lists."""
    problems.append(f"the GIL's thread state {tstate:#x} is not among the interpreter's thread states")
    try:
        raw = _read(target, tstate + layout.tstate_thread_id, 4, "thread state", HEAP_ADVICE)
    except _Missing as e:
        problems.append(str(e))
        return None
    return struct.unpack("<I", raw)[0]


def _status_witness(
    target: Target, gil: GilLayout, threads: Sequence[PythonThread], interpreter: Optional[int], problems: List[str]
) -> GilWitness:
    """3.12+: the thread state whose own `_status` bit says it has the GIL (0: none)."""
    assert gil.tstate_status is not None and gil.status_bit is not None
    field = f"PyThreadState._status.{gil.status_field}"
    flagged: List[PythonThread] = []
    for t in threads:
        if interpreter is not None and t.interpreter != interpreter:
            continue  # another interpreter's thread: a GIL of its own, if any
        try:
            raw = _read(target, t.thread_state + gil.tstate_status, 4, "thread state", HEAP_ADVICE)
        except _Missing as e:
            problems.append(str(e))
            return GilWitness(GilSource.THREAD_STATUS, field, None)
        if struct.unpack("<I", raw)[0] >> gil.status_bit & 1:
            flagged.append(t)
    if len(flagged) > 1:
        tids = ", ".join(str(t.thread_id) for t in flagged)
        problems.append(f"{field} is set on several thread states (threads {tids})")
    if not flagged:
        return GilWitness(GilSource.THREAD_STATUS, field, 0)
    return GilWitness(GilSource.THREAD_STATUS, field, flagged[0].thread_state, flagged[0].thread_id)


def _agreement(
    held: Optional[bool], holder: Optional[int], second: GilWitness, by_tid: Dict[int, int]
) -> Optional[str]:
    """What is wrong when the second witness does not say what the GIL says, else None."""
    if held is None or second.thread_state is None:
        return None
    if held and second.thread_state == holder:
        return None
    if not held and second.thread_state == 0:
        return None

    def who(tstate: Optional[int]) -> str:
        tid = by_tid.get(tstate) if tstate else None
        return f"thread {tid}" if tid is not None else f"thread state {tstate:#x}"

    if held and second.thread_state == 0:
        return (
            f"{second.field} names no thread although the GIL is taken by {who(holder)}: the dump caught that "
            "thread between taking the GIL and becoming current, or between the reverse"
        )
    if held:
        return f"{second.field} names {who(second.thread_state)}, the GIL's last_holder {who(holder)}: they disagree"
    return f"{second.field} names {who(second.thread_state)} although the GIL is free"


def _locate(
    target: Target, runtime: int, layout: Layout, gil: GilLayout, problems: List[str]
) -> Tuple[int, str, Optional[int]]:
    """(the GIL's address, how it was reached, the index of its interpreter in the runtime's
    list where each interpreter has one)."""
    if gil.in_runtime:
        return runtime + gil.gil, "_PyRuntime.ceval.gil", None
    index, address, found = _main_interpreter_gil(target, runtime, layout, gil)
    problems.extend(found)
    return address, "the main interpreter's ceval.gil", index


def read_gil(
    target: Target, runtime: int, version: Tuple[int, int], layout: Layout, threads: Sequence[PythonThread]
) -> GilRecord:
    """Who holds the GIL of the process's main interpreter. `runtime`: _PyRuntime's address;
    `layout`: the reader's (for the interpreter list and thread ids); `threads`: the thread
    states the reader found. Never raises on dump data."""
    try:
        gil = gil_layout(target, version, runtime)
    except (_Missing, GilOffsetsError, DebugOffsetsError) as e:
        return gil_unknown(str(e))
    by_state = {t.thread_state: t.thread_id for t in threads}
    problems: List[str] = []
    try:
        address, where, interpreter = _locate(target, runtime, layout, gil, problems)
        if not address:
            raise _Missing(f"{where} is NULL: the interpreter has not made its GIL")
        advice = RUNTIME_ADVICE if gil.in_runtime else HEAP_ADVICE
        raw = _read(target, address, gil.gil_size, f"the GIL ({where})", advice)
    except _Missing as e:
        return GilRecord(held=None, layout=gil.source, problems=(f"{UNKNOWN}: {e}", *problems))
    (locked,) = struct.unpack_from("<i", raw, gil.locked)
    (last,) = struct.unpack_from("<Q", raw, gil.last_holder)
    (switches,) = struct.unpack_from("<I", raw, gil.switch_number)
    waiters = None if gil.cond_waiting is None else struct.unpack_from("<i", raw, gil.cond_waiting)[0]
    if waiters is not None and not 0 <= waiters <= MAX_WAITERS:
        problems.append(f"the GIL's condition variable counts {waiters} waiters: its memory does not hold together")
        waiters = None
    held: Optional[bool] = None
    if locked == 1 and not last:
        problems.append("the GIL is taken but its last_holder is NULL: its memory does not hold together")
    elif locked in (0, 1):
        held = locked == 1
    elif locked == -1:
        problems.append("the GIL is not created (locked = -1): the interpreter is not initialised, or finalised")
    else:
        problems.append(f"the GIL's locked is {locked}, neither 0 nor 1: its memory does not hold together")
    # A free GIL's last holder may be a thread that has ended since: its thread state is
    # freed, so it is named only when the reader listed it.
    last_tid = by_state.get(last) if last else None
    if held and last not in by_state:
        last_tid = _thread_id(target, last, layout, problems)
    says = None if held is None else last if held else 0
    witnesses = [GilWitness(GilSource.GIL, f"{where}.locked, .last_holder", says, last_tid if held else None)]
    second = _second_witness(target, runtime, gil, threads, interpreter, by_state, problems)
    if second is not None:
        witnesses.append(second)
        disagreement = _agreement(held, last, second, by_state)
        if disagreement:
            problems.append(disagreement)
    return GilRecord(
        held=held,
        holder_thread_id=last_tid if held else None,
        holder_thread_state=last if held else None,
        last_holder_thread_id=last_tid,
        last_holder_thread_state=last or None,
        switches=switches,
        waiters=waiters,
        address=address,
        layout=gil.source,
        witnesses=tuple(witnesses),
        problems=tuple(problems),
    )


def _second_witness(
    target: Target,
    runtime: int,
    gil: GilLayout,
    threads: Sequence[PythonThread],
    interpreter: Optional[int],
    by_state: Dict[int, int],
    problems: List[str],
) -> Optional[GilWitness]:
    """tstate_current (3.8-3.11) or the thread states' own flag (3.12+)."""
    if gil.tstate_current is not None:
        try:
            raw = _read(target, runtime + gil.tstate_current, 8, "_PyRuntime", RUNTIME_ADVICE)
        except _Missing as e:
            problems.append(str(e))
            return GilWitness(GilSource.TSTATE_CURRENT, "_PyRuntime.gilstate.tstate_current", None)
        (current,) = struct.unpack("<Q", raw)
        tid = by_state.get(current) if current else None
        return GilWitness(GilSource.TSTATE_CURRENT, "_PyRuntime.gilstate.tstate_current", current, tid)
    if gil.tstate_status is not None:
        return _status_witness(target, gil, threads, interpreter, problems)
    return None
