"""Who holds what a thread waits on, where memory records it, and the cycles of waits.

- A critical section (EnterCriticalSection) records its owner: RTL_CRITICAL_SECTION's
  OwningThread is the owning thread's id. Its address is the argument of the system's
  enter/wait functions, kept in a register the unwinder restores (Walker.frame_registers)
  or in their frames; a candidate is a critical section when its DebugInfo points to a
  debug record pointing back to it (or is -1, Windows 8's "no debug info", where the
  other fields must fit).
- A threading lock waited on is the `_thread.lock` or `_thread.RLock` object the acquire
  method was called on, found the same way and recognised by its type's name. An RLock
  records its owner's thread id; a Lock records no owner, but a `with lock:` block keeps
  the lock's bound `__exit__` on its frame's value stack until the block ends (CPython
  3.8-3.13 push it before calling `__enter__`), so a thread whose frames hold it (and
  that does not wait for that lock itself) is in the block: it holds the lock.
- A cycle of waits (A waits for what B holds, B for what A holds...) is a deadlock.

Everything read here needs the memory of the objects: a full-memory dump, or the pages
dumpkit capture adds (what the stacks point to). Without them the owner stays unknown and
the report says so. Bounded: LOOK frames of registers, FRAME_SCAN bytes per Python frame,
MAX_THREADS threads."""

from __future__ import annotations

import struct
from typing import Callable, Collection, Dict, List, Optional, Sequence, Set, Tuple

from dumpkit.analysis.model import Confidence, Deadlock, PythonReport, ThreadWait, WaitKind
from dumpkit.analysis.waits import WORDS
from dumpkit.target import Handle
from dumpkit.records import record, replace

GENERIC_LOCK_WAIT = WORDS[WaitKind.PYTHON_LOCK]

Read = Callable[[int, int], bytes]
FrameRegisters = Sequence[Tuple[int, int, Dict[str, int]]]

LOOK = 12  # frames whose registers and stack words are looked at for the object waited on
FRAME_SCAN = 2048  # bytes of a Python frame scanned for a `with` block's bound __exit__
MAX_THREADS = 256
MAX_TYPE_NAME = 64
NO_DEBUG_INFO = 0xFFFFFFFFFFFFFFFF

LOCK_TYPES = {"_thread.lock": "Lock", "_thread.RLock": "RLock"}
# PyCFunctionObject (a bound built-in method: the lock's __exit__) and PyMethodObject:
# PyObject_HEAD, then m_ml / im_func, then m_self / im_self at +24 (3.8-3.13, x64)
BOUND_SELF = 24
BOUND_TYPES = frozenset({"builtin_function_or_method", "method"})


@record
class Held:
    """What a thread waits on and who holds it: `kind` ("critical section", "Lock",
    "RLock"), the object's address, its owner's thread id (None: not recorded or not in the
    dump), and how that is known."""

    kind: str
    address: int
    owner: Optional[int]
    evidence: str


def _u64(read: Read, address: int) -> Optional[int]:
    raw = read(address, 8)
    return struct.unpack("<Q", raw)[0] if len(raw) == 8 else None


def _c_string(read: Read, address: int) -> Optional[str]:
    raw = read(address, MAX_TYPE_NAME)
    end = raw.find(b"\0")
    return raw[:end].decode("latin-1") if end > 0 else None


def type_name(read: Read, obj: int) -> Optional[str]:
    """The tp_name of a Python object's type (ob_type at +8, tp_name at +24), when readable."""
    tp = _u64(read, obj + 8)
    name = _u64(read, tp + 24) if tp else None
    return _c_string(read, name) if name else None


def _candidates(
    registers: FrameRegisters,
    upto: int,
    read: Read,
    stacks: Sequence[Tuple[int, int]],
    wanted: Callable[[int], bool] = lambda v: 0x10000 <= v <= 0x7FFFFFFFFFFF,
) -> List[int]:
    """Values that may be the object waited on, from the innermost frame outwards: the
    registers restored for each frame up to `upto`, then the words of those frames; only
    those `wanted` (by default: pointers). Stack addresses are left out (a frame's own
    locals are not what another thread holds)."""
    out: List[int] = []
    seen: Set[int] = set()

    def add(value: int) -> None:
        if value not in seen and wanted(value):
            seen.add(value)
            if not any(lo <= value < hi for lo, hi in stacks):
                out.append(value)

    for _ip, _sp, regs in registers[: upto + 1]:
        for value in regs.values():
            add(value)
    if registers:
        lo, hi = registers[0][1], registers[min(upto + 1, len(registers) - 1)][1]
        data = read(lo, max(0, min(hi - lo, 0x4000)))
        for k in range(0, len(data) - 7, 8):
            add(struct.unpack_from("<Q", data, k)[0])
    return out


# kernel objects a thread can wait on (WaitForSingleObject's documented kinds)
WAITABLE = frozenset(
    {"Event", "Semaphore", "Mutant", "Thread", "Process", "Timer", "IRTimer", "Job", "File", "IoCompletion"}
)


def waited_handle(
    wait: ThreadWait, registers: FrameRegisters, read: Read, handles: Sequence[Handle]
) -> Optional[Handle]:
    """The handle a WaitForSingleObject/WaitForMultipleObjects waits on, where the dump has
    handle data: the first value in the wait's registers and frames that is one of the
    process's handles to a waitable object. A handle is a small multiple of 4, so a count
    or a flag can look like one: said as found in the wait's frames, not as proven."""
    table = {h.value: h for h in handles if h.type_name in WAITABLE}
    if not table:
        return None
    upto = min((wait.caller_frame or 0) + 1, LOOK)
    for value in _candidates(registers, upto, read, (), lambda v: v in table):
        return table[value]
    return None


def critical_section(read: Read, address: int, tids: Collection[int] = ()) -> Optional[int]:
    """The owner's thread id of the RTL_CRITICAL_SECTION at `address` (0: free), or None
    when it is not one. LockCount, RecursionCount and OwningThread (+8, +12, +16) must be in
    range, and DebugInfo (+0) must be -1 or an RTL_CRITICAL_SECTION_DEBUG of type 0 whose
    CriticalSection (+8) leads back here: a LIST_ENTRY's Blink also leads back, but its
    Flink-as-LockCount is a pointer, out of range. A dump without the DebugInfo's memory
    (a MiniDumpNormal keeps the DLL's data, not the heap) leaves the owner to vouch: it
    must be one of `tids`."""
    raw = read(address, 40)
    if len(raw) < 40:
        return None
    debug, lock_count, recursion, owner = struct.unpack_from("<QiiQ", raw)
    if not (-(1 << 24) < lock_count < 1 << 24 and 0 <= recursion < 1 << 16 and owner < 1 << 32):
        return None
    if debug != NO_DEBUG_INFO:
        head = read(debug, 16)
        if len(head) < 16:
            return owner if owner and owner in tids and recursion > 0 else None
        if struct.unpack_from("<H", head)[0] != 0 or struct.unpack_from("<Q", head, 8)[0] != address:
            return None
    return owner


def lock_object(read: Read, address: int) -> Optional[Tuple[str, Optional[int]]]:
    """("Lock" or "RLock", the RLock's owner thread id) when `address` is a threading lock
    object. An RLock's owner follows its lock pointer, at +24: an unsigned long (4 bytes on
    Windows) before 3.13, an 8-byte thread id from 3.13 on; a Windows thread id fits in 32
    bits, so the low 4 bytes are the owner either way (0: not held)."""
    kind = LOCK_TYPES.get(type_name(read, address) or "")
    if kind is None:
        return None
    if kind == "Lock":
        return kind, None
    raw = read(address + 24, 4)
    owner = struct.unpack("<I", raw)[0] if len(raw) == 4 else 0
    return kind, owner or None


def waited_on(
    wait: ThreadWait,
    registers: FrameRegisters,
    read: Read,
    stacks: Sequence[Tuple[int, int]],
    tids: Collection[int] = (),
) -> Optional[Held]:
    """What `wait`'s thread waits on, from its frames' registers: a critical section or a
    threading lock, with its owner where recorded. `tids`: the process's threads; a
    critical section whose DebugInfo the dump lacks counts only when its owner is one."""
    upto = min((wait.caller_frame or 0) + 3, LOOK)
    # A thread never waits for what it owns itself (both kinds are re-entrant for their
    # owner) nor for a free one: such candidates are locks its frames hold or held, kept
    # only as the answer of last resort (the object, owner unknown).
    fallback: Optional[Held] = None
    if wait.kind is WaitKind.CRITICAL_SECTION:
        for value in _candidates(registers, upto, read, stacks):
            owner = critical_section(read, value, tids)
            if owner is None:
                continue
            if owner and owner != wait.tid:
                return Held("critical section", value, owner, f"CRITICAL_SECTION at {value:#x}, OwningThread {owner}")
            if fallback is None and not owner:
                fallback = Held("critical section", value, None, f"CRITICAL_SECTION at {value:#x}, OwningThread 0")
        return fallback
    if wait.kind is WaitKind.PYTHON_LOCK:
        for value in _candidates(registers, upto, read, stacks):
            found = lock_object(read, value)
            if found is None:
                continue
            kind, owner = found
            if owner == wait.tid:
                continue
            if owner:
                said = f"its owner is recorded: thread {owner}"
            else:
                said = "a Lock records no owner" if kind == "Lock" else "it records no owner now"
            return Held(kind, value, owner, f"threading.{kind} at {value:#x}; {said}")
    return None


def with_holders(lock: int, python: Optional[PythonReport], read: Read, exclude: int) -> List[Tuple[int, int]]:
    """(thread id, Python frame index) of the frames whose `with` block holds `lock`: the
    lock's bound __exit__ is on the frame's value stack. `exclude`: the thread waiting for
    the lock (its innermost frame holds the same bound method while __enter__ waits)."""
    out: List[Tuple[int, int]] = []
    if python is None:
        return out
    for t in python.threads[:MAX_THREADS]:
        if t.thread_id == exclude:
            continue
        for index, frame in enumerate(t.frame_addresses[:64]):
            if _frame_holds(read, frame, lock):
                out.append((t.thread_id, index))
                break
    return out


def _frame_holds(read: Read, frame: int, lock: int) -> bool:
    data = read(frame, FRAME_SCAN)
    usable = len(data) & ~7
    for k in range(0, usable, 8):
        value = struct.unpack_from("<Q", data, k)[0]
        if value < 0x10000 or value > 0x7FFFFFFFFFFF or value == lock:
            continue
        if _u64(read, value + BOUND_SELF) == lock and (type_name(read, value) or "") in BOUND_TYPES:
            return True
    return False


def cycles(edges: Dict[int, int]) -> List[List[int]]:
    """Every cycle of waits (thread -> the thread holding what it waits on), each once, as
    thread ids from its smallest, in the order of those. Each thread has one edge out, so
    one walk from each thread not yet seen finds any cycle it leads into: every thread is
    visited once, however long the chains."""
    walk_of: Dict[int, int] = {}  # thread -> the walk that reached it first
    found: List[List[int]] = []
    for start in sorted(edges):
        if start in walk_of:
            continue
        path: List[int] = []
        at: Optional[int] = start
        while at is not None and at not in walk_of:
            walk_of[at] = start
            path.append(at)
            at = edges.get(at)
        if at is not None and walk_of[at] == start:  # this walk came back on itself
            loop = path[path.index(at) :]
            first = loop.index(min(loop))
            found.append(loop[first:] + loop[:first])
    return sorted(found, key=min)


WAITS_READ = 64  # threads whose registers are stepped for the object they wait on


def with_owners(
    waits: Sequence[ThreadWait],
    registers_of: Callable[[int], FrameRegisters],
    read: Read,
    stacks: Sequence[Tuple[int, int]],
    python: Optional[PythonReport],
    handles: Sequence[Handle] = (),
) -> Tuple[ThreadWait, ...]:
    """`waits` with the object each critical-section and lock wait is on, and its owner
    where memory records it (or a `with` block shows it); a handle wait with its handle's
    kind where the dump has handle data (`handles`). `registers_of(tid)`: the thread's top
    frames with their registers (stepped only for such waits, at most WAITS_READ)."""
    out: List[ThreadWait] = []
    stepped = 0
    tids = {w.tid for w in waits}
    for w in waits:
        if w.kind in (WaitKind.HANDLE, WaitKind.HANDLES) and handles and stepped < WAITS_READ:
            stepped += 1
            out.append(_with_handle(w, waited_handle(w, registers_of(w.tid), read, handles)))
            continue
        if w.kind not in (WaitKind.CRITICAL_SECTION, WaitKind.PYTHON_LOCK) or stepped >= WAITS_READ:
            out.append(w)
            continue
        stepped += 1
        registers = registers_of(w.tid)
        held = waited_on(w, registers, read, stacks, tids)
        if held is None and joins(w):
            out.append(_joining(w, joined_by_handle(w, registers, read, tids), waits))
            continue
        if held is None:
            out.append(replace(w, evidence=w.evidence + ("the object it waits on is not in the dump",)))
            continue
        owner, evidence = held.owner, [held.evidence]
        owner_at: Optional[str] = None
        what = w.what
        if w.kind is WaitKind.PYTHON_LOCK and what == GENERIC_LOCK_WAIT:
            what = f"waits to acquire a threading.{held.kind}"
        if held.kind == "Lock" and not joins(w):
            found = with_holders(held.address, python, read, w.tid)
            if found:
                tid, index = found[0]
                owner = tid
                where = _frame_words(python, tid, index)
                owner_at = where
                evidence.append(
                    f"thread {tid} is inside a `with` block on it ({where}): its bound __exit__ is on that frame's stack"
                )
            else:
                evidence.append("no thread's frames show a `with` block on it: its owner is not known")
        elif joins(w):
            ended = joined_thread(read, held.address, python)
            if ended is not None:
                owner = ended
                name = _quoted_name(ended, waits)
                what = f"waits for thread {ended}{name} to end (Thread.join)"
                evidence.append(
                    f"thread {ended}'s own lock: its PyThreadState's on-delete weakref points to it, released when thread {ended} ends"
                )
            else:
                evidence.append("a thread's lock, released when that thread ends (which thread is not in the dump)")
        out.append(
            replace(
                w,
                what=what,
                obj=held.address,
                owner=owner,
                evidence=w.evidence + tuple(evidence),
                held=held.kind,
                owner_at=owner_at,
            )
        )
    return tuple(out)


TSTATE_SCAN = 0x300  # bytes of a PyThreadState searched for its on-delete weakref
WEAKREF_TYPES = frozenset({"weakref", "weakref.ReferenceType"})
WEAKREF_OBJECT = 16  # PyWeakReference.wr_object, after the object header


def joined_thread(read: Read, lock: int, python: Optional[PythonReport]) -> Optional[int]:
    """The thread whose end releases `lock`, a Thread's _tstate_lock (3.8-3.12): CPython
    keeps a weakref to it in that thread's PyThreadState (on_delete_data) and releases it
    when the thread state is deleted. Found by value, so no per-version offset is needed:
    the one thread state holding a weakref whose referent is `lock`."""
    if python is None:
        return None
    found: List[int] = []
    for t in python.threads[:MAX_THREADS]:
        if not t.thread_state:
            continue
        data = read(t.thread_state, TSTATE_SCAN)
        for k in range(0, len(data) & ~7, 8):
            value = struct.unpack_from("<Q", data, k)[0]
            if 0x10000 <= value <= 0x7FFFFFFFFFFF and _u64(read, value + WEAKREF_OBJECT) == lock:
                if (type_name(read, value) or "") in WEAKREF_TYPES:
                    found.append(t.thread_id)
                    break
    return found[0] if len(found) == 1 else None


def _with_handle(w: ThreadWait, handle: Optional[Handle]) -> ThreadWait:
    if handle is None:
        return replace(w, evidence=w.evidence + ("no handle of the dump's handle data is in the wait's frames",))
    kind = handle.type_name or "object"
    named = f" {handle.object_name!r}" if handle.object_name else ""
    article = "an" if kind[:1] in "AEIOU" else "a"
    how = "WaitForSingleObject" if w.kind is WaitKind.HANDLE else "WaitForMultipleObjects, among others"
    what = f"waits on {article} {kind}{named} (handle {handle.value:#x}, {how})"
    evidence = (
        f"handle {handle.value:#x} is {article} {kind}{named} (the dump's handle data), found in the wait's frames"
    )
    return replace(w, what=what, obj=handle.value, held=kind, evidence=w.evidence + (evidence,))


# 3.13's _thread._ThreadHandle (Modules/_threadmodule.c): two list nodes, then ident (+32),
# os_handle (+40), has_os_handle (+48), state (+52, 1-4), mutex (+56), and the PyEvent
# thread_is_exiting (+57) a join waits on
HANDLE_EVENT = 57
HANDLE_IDENT, HANDLE_HAS_OS, HANDLE_STATE = 32, 48, 52


def joined_by_handle(w: ThreadWait, registers: FrameRegisters, read: Read, tids: Collection[int]) -> Optional[int]:
    """The thread a 3.13 Thread.join waits for: the joining frames hold the address of the
    joined thread's _ThreadHandle event; the handle's ident is that thread's id. Taken only
    when the handle's other fields hold together and exactly one candidate names a thread."""
    upto = min((w.caller_frame or 0) + 3, LOOK)
    found: Set[int] = set()
    for value in _candidates(registers, upto, read, ()):
        raw = read(value - HANDLE_EVENT, HANDLE_EVENT + 1)
        if len(raw) < HANDLE_EVENT + 1:
            continue
        ident, has_os, state = (
            struct.unpack_from("<Q", raw, HANDLE_IDENT)[0],
            struct.unpack_from("<i", raw, HANDLE_HAS_OS)[0],
            struct.unpack_from("<i", raw, HANDLE_STATE)[0],
        )
        if ident in tids and ident != w.tid and has_os in (0, 1) and 1 <= state <= 4:
            found.add(ident)
    return found.pop() if len(found) == 1 else None


def _joining(w: ThreadWait, ended: Optional[int], waits: Sequence[ThreadWait]) -> ThreadWait:
    if ended is None:
        return replace(w, evidence=w.evidence + ("which thread it joins is not in the dump",))
    name = _quoted_name(ended, waits)
    return replace(
        w,
        what=f"waits for thread {ended}{name} to end (Thread.join)",
        owner=ended,
        evidence=w.evidence + (f"the joined thread's _ThreadHandle records its id, {ended}",),
    )


def _quoted_name(tid: int, waits: Sequence[ThreadWait]) -> str:
    """' "loader"' for thread `tid` where its name is known, else ''."""
    return next((f' "{x.name}"' for x in waits if x.tid == tid and x.name), "")


def joins(w: ThreadWait) -> bool:
    """A Thread.join: the lock waited on is the joined thread's own, released when it ends."""
    return bool(w.python_line and w.python_line.endswith(", calling threading.join"))


def _frame_words(python: Optional[PythonReport], tid: int, index: int) -> str:
    t = python.thread(tid) if python is not None else None
    if t is None:
        return f"Python frame {index}"
    f = next((f for f in t.frames if f.index == index), None)
    if f is None:
        return f"Python frame {index}"
    return f"{f.function or '?'} ({f.filename or '?'}:{f.line if f.line is not None else '?'})"


_ARTICLE = {"critical section": "a critical section", "Lock": "a Lock", "RLock": "an RLock"}


def who(w: ThreadWait) -> str:
    """'thread 276 "loader"', for sentences."""
    return f'thread {w.tid} "{w.name}"' if w.name else f"thread {w.tid}"


def where(w: ThreadWait) -> str:
    """Where the thread is: its Python line of the user's code, else the code that waits."""
    line = w.python_line or w.caller
    return f" at {line}" if line else ""


def deadlocks(waits: Sequence[ThreadWait]) -> Tuple[Deadlock, ...]:
    """The cycles of waits among `waits` (each thread -> the owner of what it waits on),
    each said in one sentence: 'thread A at x waits for an RLock held by thread B at y,
    which waits for a Lock thread A entered at z'."""
    by = {w.tid: w for w in waits}
    edges = {w.tid: w.owner for w in waits if w.owner is not None and w.owner != w.tid and w.owner in by}
    out: List[Deadlock] = []
    for c in cycles(edges):
        first = by[c[0]]
        parts = [f"{who(first)}{where(first)}"]
        for i, tid in enumerate(c):
            w = by[tid]
            owner = by[c[(i + 1) % len(c)]]
            lead = "waits" if i == 0 else "which waits"
            last = i == len(c) - 1
            if joins(w):
                parts.append(f"{lead} for {who(owner)}{'' if last else where(owner)} to end (Thread.join)")
                continue
            what = _ARTICLE.get(w.held or "", "what")
            if last:
                held = f" in a with block at {w.owner_at}" if w.owner_at else ""
                parts.append(f"{lead} for {what} that {who(owner)} holds{held}")
            else:
                held = f" (taken in a with block at {w.owner_at})" if w.owner_at else ""
                parts.append(f"{lead} for {what} held by {who(owner)}{where(owner)}{held}")
        text = parts[0] + " " + ", ".join(parts[1:])
        out.append(Deadlock(tuple(c), text, Confidence.HIGH))
    return tuple(out)
