"""A dump with no exception: a snapshot of a running (often stuck) process. Who waits for
whom (analysis/waits.py, analysis/holders.py): a deadlock first, then the GIL held while
other threads wait for it, else what the threads wait on, counted.

The GIL's holder: read from the interpreter's state when the dump holds it (a full-memory
dump); else, in a minidump, the threads waiting for it are seen, and the one Python thread
that neither waits for it nor waits with it released is its probable holder."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple

from dumpkit.analysis.advice import Step, system_images
from dumpkit.analysis.holders import joins, who
from dumpkit.analysis.model import Confidence, ThreadWait, VerdictKind, WaitKind
from dumpkit.analysis.verdict.case import Case, Decision, conclude
from dumpkit.analysis.moduleroles import is_ctypes_machinery
from dumpkit.analysis.pyentry import is_interpreter
from dumpkit.analysis.waits import RELEASES_GIL, nameless_dlls
from dumpkit.words import joined, plural

if TYPE_CHECKING:
    from dumpkit.analysis.model import CrashSignature
    from dumpkit.cpython.model import GilRecord

ONE_ORDER = Step(
    "hang.one_order",
    "Take the locks in one order everywhere (or hold one at a time): each thread of the cycle holds one "
    "and waits for the next; a timeout on acquire() turns the hang into an error you can see.",
)
RELEASE_THE_GIL = Step(
    "hang.release_the_gil",
    "The GIL is held across a blocking native call: call it through ctypes.CDLL (which releases the GIL), "
    "or release it in the extension (Py_BEGIN_ALLOW_THREADS) around the blocking call.",
)
READ_THE_WAITS = Step(
    "no_exception.read_the_waits",
    "Look at what each thread waits on (below) and who feeds or releases it: a queue nobody puts to, an "
    "event nobody sets, a thread that never ends.",
)
IF_BLOCKED_RELEASE_THE_GIL = Step(
    "hang.if_blocked_release_the_gil",
    "If the GIL's holder is blocked in a native call (the images above would show it), release the GIL around "
    "the call: call it through ctypes.CDLL (which releases the GIL), or Py_BEGIN_ALLOW_THREADS in the extension.",
)
NAME_THE_WAITS = Step(
    "hang.name_the_waits",
    "Give dumpkit the images of {dlls} to name what {threads} in: {how}.",
    (("dlls", "the system's DLLs"), ("threads", "the threads wait"), ("how", "--fetch-images")),
)
NOT_OWNED = Step(
    "hang.owner_unknown",
    "Where the owner of a lock is not known, a full-memory dump (procdump -ma, Task Manager's Create dump "
    "file, dumpkit capture --attach PID --now --full) shows the `with` blocks and the GIL's holder.",
)


def decide(case: Case) -> Decision:
    """The verdict of a dump without an exception record."""
    waits = list(case.waits)
    if case.deadlocks:
        d = case.deadlocks[0]
        headline = f"Deadlock: {d.text}"
        evidence = [f"{who(w)} {w.what}; " + "; ".join(w.evidence) for w in waits if w.tid in d.threads]
        evidence.insert(0, "the dump has no Exception stream: a snapshot of the running process")
        return conclude(VerdictKind.DEADLOCK, headline, d.confidence, evidence, [ONE_ORDER], None)
    gil = case.python.gil if case.python is not None else None
    held = gil_holder(waits, gil.holder_thread_id if gil is not None and gil.held else None, gil_free(gil))
    if held is not None:
        holder, waiting, confidence, how = held
        doing = ""
        if holder.kind not in (WaitKind.RUNNING, WaitKind.UNKNOWN):
            through = " in a native call through ctypes" if _through_ctypes(holder) else ""
            doing = f" while it {holder.what.replace('waits', 'waits', 1)}{through}"
        headline = (
            f"{who(holder).capitalize()}{_at(holder)} holds the GIL{doing}; {plural(len(waiting), 'thread')} "
            f"wait{'s' if len(waiting) == 1 else ''} for the GIL"
        )
        evidence = [
            "the dump has no Exception stream: a snapshot of the running process",
            f"{who(holder)} holds the GIL: {how}",
        ]
        evidence += [f"{who(w)}{_at(w)} {w.what}" for w in waiting]
        return conclude(VerdictKind.GIL_HELD, headline, confidence, evidence, [RELEASE_THE_GIL], None)
    by_count = _counted_holder(waits, gil)
    if by_count is not None and gil is not None and gil.waiters:
        return _held_while_nameless(by_count, gil.waiters, waits, bool(case.environment.wine))
    headline = "No exception in this dump: it was written on request (a hang, a live snapshot), not by a crash"
    evidence = ["the dump has no Exception stream"]
    if waits:
        counted = Counter(_KIND_WORDS[w.kind] if not w.unnamed_in else _NAMELESS for w in waits)
        said = ", ".join(f"{n} {'thread' if n == 1 else 'threads'} {words}" for words, n in counted.most_common())
        telling = _most_telling(waits)
        if telling is not None:
            headline = (
                f"No exception in this dump (a snapshot of the running process): {who(telling)}{_at(telling)} "
                f"{telling.what} ({said})"
            )
        else:
            headline += f"; {said}"
        evidence += [
            f"{who(w)}{_at(w)} {w.what}" + (f" ({'; '.join(w.evidence)})" if w.evidence else "") for w in waits
        ]
    by = {w.tid: w for w in waits}
    for w in waits:
        if w.owner is not None and w.owner in by and joins(w):
            evidence.append(f"{who(w)}{_at(w)} {w.what}")
        elif w.owner is not None and w.owner in by:
            article = {"critical section": "a critical section", "Lock": "a Lock", "RLock": "an RLock"}
            evidence.append(
                f"{who(w)} waits for {article.get(w.held or '', 'what')} held by {who(by[w.owner])}{_at(by[w.owner])}"
            )
    unowned = any(w.kind in (WaitKind.PYTHON_LOCK, WaitKind.CRITICAL_SECTION) and w.owner is None for w in waits)
    steps = _name_the_waits(waits, bool(case.environment.wine)) + [READ_THE_WAITS] + ([NOT_OWNED] if unowned else [])
    return conclude(VerdictKind.NO_EXCEPTION, headline, Confidence.HIGH, evidence, steps, None)


def _name_the_waits(waits: Sequence[ThreadWait], wine: bool) -> List[Step]:
    """The images that would name the waits of threads stopped in nameless system code
    (waits.thread_wait's `unnamed_in`), first: without them no wait can be read."""
    nameless = [w for w in waits if w.unnamed_in]
    if not nameless:
        return []
    return [
        NAME_THE_WAITS.given(
            dlls=joined(nameless_dlls(nameless)),
            threads=plural(len(nameless), "thread") + (" waits" if len(nameless) == 1 else " wait"),
            how=system_images(wine),
        )
    ]


def _counted_holder(waits: Sequence[ThreadWait], gil: Optional["GilRecord"]) -> Optional[ThreadWait]:
    """The GIL's holder where no thread's wait could be named (they stopped in system DLLs
    whose images are not here) but the interpreter's state names the holder and counts
    threads waiting for the GIL (its condition variable's waiters, 3.8-3.12)."""
    if gil is None or not gil.held or gil.holder_thread_id is None or not gil.waiters or gil.problems:
        return None
    if not any(w.unnamed_in for w in waits) or any(w.kind is WaitKind.GIL for w in waits):
        return None
    return next((w for w in waits if w.tid == gil.holder_thread_id), None)


def _held_while_nameless(holder: ThreadWait, waiters: int, waits: Sequence[ThreadWait], wine: bool) -> Decision:
    """The GIL held while others wait for it, from the interpreter's state alone: what the
    holder does is not named, so whether it is stuck is not known (a busy thread holds the
    GIL as often); the images that would tell come first."""
    doing = f" while it is in {joined(holder.unnamed_in)}" if holder.unnamed_in else ""
    verb = "waits" if waiters == 1 else "wait"
    headline = (
        f"{who(holder).capitalize()}{_at(holder)} holds the GIL{doing}; {plural(waiters, 'thread')} {verb} for the GIL"
    )
    evidence = [
        "the dump has no Exception stream: a snapshot of the running process",
        f"{who(holder)} holds the GIL: the interpreter's state records it (the GIL's last_holder)",
        f"{plural(waiters, 'thread')} {verb} for the GIL: the GIL's condition variable counts them; which ones, and "
        "whether the holder itself waits, is not named (the frames they stopped in have no names)",
    ]
    steps = _name_the_waits(waits, wine) + [IF_BLOCKED_RELEASE_THE_GIL]
    return conclude(VerdictKind.GIL_HELD, headline, Confidence.MEDIUM, evidence, steps, None)


def _at(w: ThreadWait) -> str:
    line = w.python_line or w.caller
    return f" at {line}" if line else ""


_KIND_WORDS = {
    WaitKind.GIL: "waiting for the GIL",
    WaitKind.PYTHON_LOCK: "waiting on threading locks",
    WaitKind.CRITICAL_SECTION: "waiting to enter critical sections",
    WaitKind.SRW_LOCK: "waiting for SRW locks",
    WaitKind.CONDITION_VARIABLE: "waiting on condition variables",
    WaitKind.HANDLE: "waiting on a handle",
    WaitKind.HANDLES: "waiting on handles",
    WaitKind.SLEEP: "sleeping",
    WaitKind.IO: "waiting for I/O",
    WaitKind.SOCKET: "waiting on sockets",
    WaitKind.CUDA: "waiting for the GPU",
    WaitKind.RUNNING: "running",
    WaitKind.UNKNOWN: "in unnamed code",
}
_NAMELESS = "stopped in system DLLs whose images are not here"  # an UNKNOWN wait with unnamed_in


def gil_free(gil: Optional["GilRecord"]) -> bool:
    """The interpreter's state says the GIL is free (its `locked` is 0, nothing disagrees)."""
    return gil is not None and gil.held is False and not gil.problems


def gil_holder(
    waits: Sequence[ThreadWait], read_holder: Optional[int] = None, read_free: bool = False
) -> Optional[Tuple[ThreadWait, List[ThreadWait], Confidence, str]]:
    """(holder, the threads waiting for the GIL, confidence, how it is known), when threads
    wait for the GIL. `read_holder`: the holder's thread id as the interpreter's state
    records it (cpython/gil.py: where the dump holds it); `read_free`: that state says
    nobody holds it (the waiters are about to take it), so no holder is inferred. Else the
    one thread running Python code (it has a Python line) that neither waits for the GIL nor
    waits with it released."""
    waiting = [w for w in waits if w.kind is WaitKind.GIL]
    if not waiting or read_free:
        return None
    if read_holder is not None:
        holder = next((w for w in waits if w.tid == read_holder), None)
        if holder is not None:
            return holder, waiting, Confidence.HIGH, "the interpreter's state records it (the GIL's last_holder)"
    candidates = [w for w in waits if w.python_line and w.kind not in RELEASES_GIL and not _interpreters_own(w)]
    if len(candidates) == 1:
        how = (
            "it is the one thread in Python code that neither waits for the GIL nor released it for its wait "
            "(read from the stacks; the dump holds no interpreter state to confirm it)"
        )
        return candidates[0], waiting, Confidence.MEDIUM, how
    return None


def _through_ctypes(w: ThreadWait) -> bool:
    module = (w.caller or "").split("!", 1)[0].split("+", 1)[0]
    return is_ctypes_machinery(module)


def _interpreters_own(w: ThreadWait) -> bool:
    """A wait the interpreter's own C code made (time.sleep, a socket or file read, select):
    CPython releases the GIL around each. One made through ctypes or an extension may keep
    it (ctypes.PyDLL, an extension that does not release it)."""
    module = (w.caller or "").split("!", 1)[0].split("+", 1)[0]
    return w.kind is not WaitKind.RUNNING and is_interpreter(module)


# The waits that most often are why a process looks stuck, first: a thread blocked on
# another thread's work, then on a lock, then on the system
_TELLING = (
    WaitKind.PYTHON_LOCK,
    WaitKind.CRITICAL_SECTION,
    WaitKind.SRW_LOCK,
    WaitKind.CONDITION_VARIABLE,
    WaitKind.CUDA,
    WaitKind.HANDLE,
    WaitKind.HANDLES,
    WaitKind.SOCKET,
    WaitKind.IO,
)


def _most_telling(waits: Sequence[ThreadWait]) -> Optional[ThreadWait]:
    """The wait a reader starts at: in user code (it has a Python line) and not a join of
    another thread (that only follows the other's wait), by _TELLING's order."""
    user = [w for w in waits if w.python_line and not joins(w)]
    for kind in _TELLING:
        for w in user:
            if w.kind is kind:
                return w
    return None


def snapshot_signature(case: Case) -> Optional["CrashSignature"]:
    """The signature of a snapshot (signature rule 9), from what its verdict rests on; None
    when nothing waits (nothing to group by)."""
    from dumpkit.analysis.signature import hang_signature

    waits = list(case.waits)
    by = {w.tid: w for w in waits}
    if case.deadlocks:
        d = case.deadlocks[0]
        return hang_signature("DEADLOCK", [by[t].python_line or by[t].caller or "" for t in d.threads if t in by])
    gil = case.python.gil if case.python is not None else None
    held = gil_holder(waits, gil.holder_thread_id if gil is not None and gil.held else None, gil_free(gil))
    if held is not None:
        holder = held[0]
        return hang_signature("GIL_HELD", [holder.python_line or holder.caller or ""])
    counted = _counted_holder(waits, gil)
    if counted is not None:
        return hang_signature("GIL_HELD", [counted.python_line or counted.caller or ""])
    telling = _most_telling(waits)
    if telling is not None:
        return hang_signature("HANG", [telling.python_line or telling.caller or ""])
    # no wait named (the system DLLs' images not here): where the threads' Python code was
    lines = {w.python_line for w in waits if w.unnamed_in and w.python_line and not joins(w)}
    if lines:
        return hang_signature("SNAPSHOT", sorted(lines))
    return None
