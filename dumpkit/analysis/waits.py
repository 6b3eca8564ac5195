"""What each thread waits on, from its stack: the wait the top frames are in (the GIL, a
threading lock, a critical section, a handle, a sleep, a read, a CUDA synchronisation) and
the first frame below that machinery, which is the code that waits. The same in a
minidump as in a full dump: only frame names are read (the system's and the C runtime's
from their images, CPython's from its exports). What is waited on and who holds it, where
memory records it, is analysis/holders.py's.

Outermost wins: WaitForSingleObjectEx calls NtWaitForSingleObject (NtWaitForMultipleObjects
under Wine); PyThread_acquire_lock_timed calls WaitForSingleObjectEx; the thread waits
for the lock, and on a handle only as the lock's way of waiting."""

from __future__ import annotations

import re
from typing import Dict, Optional, Sequence, Tuple

from dumpkit.analysis.model import PythonReport, ThreadReport, ThreadWait, WaitKind
from dumpkit.analysis.pyentry import is_interpreter, user_python
from dumpkit.records import replace
from dumpkit.words import joined
from dumpkit.unwind.frames import SCANNED, Frame, StackWalk

LOOK = 24  # the wait machinery is never deeper than this

# function (lower case, leading underscores dropped) -> what waiting in it is
_WAITS: Dict[str, WaitKind] = {
    # the kernel's waits, as ntdll's stubs name them
    "ntwaitforsingleobject": WaitKind.HANDLE,
    "zwwaitforsingleobject": WaitKind.HANDLE,
    "ntwaitformultipleobjects": WaitKind.HANDLES,
    "zwwaitformultipleobjects": WaitKind.HANDLES,
    "ntdelayexecution": WaitKind.SLEEP,
    "zwdelayexecution": WaitKind.SLEEP,
    "ntremoveiocompletion": WaitKind.IO,
    "ntremoveiocompletionex": WaitKind.IO,
    "ntreadfile": WaitKind.IO,
    "zwreadfile": WaitKind.IO,
    "ntdeviceiocontrolfile": WaitKind.IO,
    "ntwaitforalertbythreadid": WaitKind.CONDITION_VARIABLE,
    "ntwaitforkeyedevent": WaitKind.CONDITION_VARIABLE,
    # the system's waits on objects in memory
    "rtlpwaitoncriticalsection": WaitKind.CRITICAL_SECTION,
    "rtlpwaitforcriticalsection": WaitKind.CRITICAL_SECTION,
    "rtlentercriticalsection": WaitKind.CRITICAL_SECTION,
    "entercriticalsection": WaitKind.CRITICAL_SECTION,
    "rtlacquiresrwlockexclusive": WaitKind.SRW_LOCK,
    "rtlacquiresrwlockshared": WaitKind.SRW_LOCK,
    "acquiresrwlockexclusive": WaitKind.SRW_LOCK,
    "acquiresrwlockshared": WaitKind.SRW_LOCK,
    "rtlsleepconditionvariablesrw": WaitKind.CONDITION_VARIABLE,
    "rtlsleepconditionvariablecs": WaitKind.CONDITION_VARIABLE,
    "sleepconditionvariablesrw": WaitKind.CONDITION_VARIABLE,
    "sleepconditionvariablecs": WaitKind.CONDITION_VARIABLE,
    "rtlwaitonaddress": WaitKind.CONDITION_VARIABLE,
    "waitonaddress": WaitKind.CONDITION_VARIABLE,
    # kernel32 / kernelbase
    "waitforsingleobject": WaitKind.HANDLE,
    "waitforsingleobjectex": WaitKind.HANDLE,
    "waitformultipleobjects": WaitKind.HANDLES,
    "waitformultipleobjectsex": WaitKind.HANDLES,
    "msgwaitformultipleobjects": WaitKind.HANDLES,
    "msgwaitformultipleobjectsex": WaitKind.HANDLES,
    "signalobjectandwait": WaitKind.HANDLE,
    "sleep": WaitKind.SLEEP,
    "sleepex": WaitKind.SLEEP,
    "readfile": WaitKind.IO,
    "getqueuedcompletionstatus": WaitKind.IO,
    "getqueuedcompletionstatusex": WaitKind.IO,
    "connectnamedpipe": WaitKind.IO,
    # Winsock
    "recv": WaitKind.SOCKET,
    "recvfrom": WaitKind.SOCKET,
    "wsarecv": WaitKind.SOCKET,
    "wsarecvfrom": WaitKind.SOCKET,
    "select": WaitKind.SOCKET,
    "accept": WaitKind.SOCKET,
    "wsapoll": WaitKind.SOCKET,
    "connect": WaitKind.SOCKET,
    # CUDA's driver and runtime
    "cuctxsynchronize": WaitKind.CUDA,
    "custreamsynchronize": WaitKind.CUDA,
    "cueventsynchronize": WaitKind.CUDA,
    "cudadevicesynchronize": WaitKind.CUDA,
    "cudastreamsynchronize": WaitKind.CUDA,
    "cudaeventsynchronize": WaitKind.CUDA,
    # CPython's own waits, by its exports: a threading lock (Lock, RLock and what is built on
    # them: Condition, Event, Queue, Thread.join), and the GIL taken back after it was released
    "pythread_acquire_lock_timed": WaitKind.PYTHON_LOCK,
    "pythread_acquire_lock_timed_with_retries": WaitKind.PYTHON_LOCK,
    # 3.13's locks and events park the thread: PyMutex, Thread.join's PyEvent
    "pyparkinglot_park": WaitKind.PYTHON_LOCK,
    "pysemaphore_wait": WaitKind.PYTHON_LOCK,
    "pyevent_waittimed": WaitKind.PYTHON_LOCK,
    "pythread_acquire_lock": WaitKind.PYTHON_LOCK,
    "pymutex_locktimed": WaitKind.PYTHON_LOCK,
    "pymutex_lock": WaitKind.PYTHON_LOCK,
    "pyeval_restorethread": WaitKind.GIL,
    "pyeval_acquirethread": WaitKind.GIL,
    "pyeval_acquirelock": WaitKind.GIL,
    "pygilstate_ensure": WaitKind.GIL,
    "take_gil": WaitKind.GIL,
}
# how much a kind says, for outermost-wins: a CPython wait explains the system wait inside it
_RANK = {
    WaitKind.GIL: 3,
    WaitKind.PYTHON_LOCK: 3,
    WaitKind.CUDA: 3,
    WaitKind.CRITICAL_SECTION: 2,
    WaitKind.SRW_LOCK: 2,
    WaitKind.CONDITION_VARIABLE: 1,
    WaitKind.SOCKET: 2,
    WaitKind.IO: 1,
    WaitKind.SLEEP: 1,
    WaitKind.HANDLES: 1,
    WaitKind.HANDLE: 1,
}
WORDS = {
    WaitKind.GIL: "waits for the GIL",
    WaitKind.PYTHON_LOCK: "waits to acquire a threading lock (a Lock or RLock, or a Condition, Event, Queue or "
    "Thread.join built on one)",
    WaitKind.CRITICAL_SECTION: "waits to enter a critical section",
    WaitKind.SRW_LOCK: "waits for an SRW lock",
    WaitKind.CONDITION_VARIABLE: "waits on a condition variable",
    WaitKind.HANDLE: "waits on a handle (WaitForSingleObject)",
    WaitKind.HANDLES: "waits on handles (WaitForMultipleObjects)",
    WaitKind.SLEEP: "sleeps",
    WaitKind.IO: "waits for a read or an I/O completion",
    WaitKind.SOCKET: "waits on a socket",
    WaitKind.CUDA: "waits for the GPU (a CUDA synchronisation)",
    WaitKind.RUNNING: "is running (not in a wait)",
    WaitKind.UNKNOWN: "is in code whose frames have no names",
}
# CPython waits that release the GIL for their wait (Py_BEGIN_ALLOW_THREADS around it)
RELEASES_GIL = frozenset({WaitKind.PYTHON_LOCK, WaitKind.GIL})


_CLONE = re.compile(r"\.(?:part|constprop|isra|cold|lto_priv)(?:\.\d+)*$")  # GCC's clones (Wine's DLLs)


def _short(f: Frame) -> Optional[str]:
    name = f.function_name
    if "!" not in name:
        return None
    return _CLONE.sub("", name.split("!", 1)[1]).lower().lstrip("_")


def thread_wait(tid: int, frames: Sequence[Frame], python_line: Optional[str] = None) -> ThreadWait:
    """What the thread with `frames` (its walk, top first) waits on, and who waits: the
    first frame below the wait machinery. `python_line`: its innermost Python frame of the
    user's code, when the dump holds the Python stack.

    A thread whose top frames are nameless frames of the system's DLLs (their images are
    not here, as on a machine other than the one that wrote the dump) is not said to be
    running: a thread stopped in ntdll.dll is most often in a wait, and which one is not
    known. Those DLLs are kept (`unnamed_in`) for the step that names them. Nothing is
    read below them: without their unwind data the walk went on by scanning, and a stale
    return address of an earlier lock or GIL call looks the same as a live one."""
    best, last, hidden = _machinery(frames)
    if best is None:
        named = any(f.named for f in frames[:3])
        caller = frames[0].function_name if frames else None
        if hidden:
            return ThreadWait(tid, WaitKind.UNKNOWN, _nameless(hidden), 0, caller, python_line, unnamed_in=hidden)
        kind = WaitKind.RUNNING if named else WaitKind.UNKNOWN
        return ThreadWait(tid, kind, WORDS[kind], 0 if frames else None, caller, python_line)
    kind, at = best
    below = last + 1 if last + 1 < len(frames) else None
    caller = frames[below].function_name if below is not None else None
    if kind in (WaitKind.HANDLE, WaitKind.CONDITION_VARIABLE) and _gil_by_eval_loop(frames, last):
        kind = WaitKind.GIL  # the eval loop taking back the GIL: take_gil is static, so no name
    return ThreadWait(tid, kind, WORDS[kind], below, caller, python_line, wait_frame=at)


def _machinery(frames: Sequence[Frame]) -> Tuple[Optional[Tuple[WaitKind, int]], int, Tuple[str, ...]]:
    """The outermost wait in the top frames, (kind, its frame) or None; the last frame of
    the wait machinery; and the system DLLs of the nameless frames met before any wait was
    named."""
    best: Optional[Tuple[WaitKind, int]] = None  # the kind said so far, and its frame
    last = -1  # the last frame of the wait machinery
    hidden: Dict[str, str] = {}  # system DLLs whose frames have no names, above any wait (lower case: as named)
    for f in frames[:LOOK]:
        short = _short(f)
        kind = _WAITS.get(short) if short is not None else None
        if kind is not None:
            if best is None or _RANK[kind] >= _RANK[best[0]]:
                best = (kind, f.index)
            last = f.index
            continue
        module = (f.module or "").lower()
        if not f.named and module in _SYSTEM:
            if best is None:
                if f.trust in SCANNED:
                    break  # a guess below the nameless top: it says nothing of the thread's wait
                hidden.setdefault(module, f.module or module)  # the wait may be in it, unnamed
            continue  # (below a wait: an unnamed system frame inside it, kernelbase's helpers)
        if best is None and f.index == 0:
            continue  # frame 0 may be a stub with no name of its own (a syscall's)
        if best is not None and is_interpreter(f.module) and not f.named and f.index <= last + 4:
            continue  # CPython's static helpers between its wait and its export
        break
    return best, last, tuple(hidden.values())


def nameless_dlls(waits: Sequence[ThreadWait]) -> Tuple[str, ...]:
    """The system DLLs (`unnamed_in`) whose images would name the waits, in order of first sight."""
    return tuple(dict.fromkeys(d for w in waits for d in w.unnamed_in))


def _nameless(dlls: Sequence[str]) -> str:
    images = "images are" if len(dlls) > 1 else "image is"
    return f"is in {joined(dlls)}, whose {images} not here: whether it waits, and on what, is not known"


_SYSTEM = frozenset({"ntdll.dll", "kernelbase.dll", "kernel32.dll", "ucrtbase.dll", "msvcrt.dll", "ws2_32.dll"})


def _gil_by_eval_loop(frames: Sequence[Frame], last: int) -> bool:
    """A handle or condition-variable wait reached from the eval loop through CPython's
    unnamed helpers only (no export such as a lock's between them): the eval loop's take_gil,
    when a PDB would name it. From 3.12 the eval breaker's _Py_HandlePending (exported) is
    what drops the GIL on request and takes it back."""
    for f in frames[last + 1 : last + 6]:
        if not is_interpreter(f.module):
            return False
        short = _short(f)
        if short in ("pyeval_evalframedefault", "py_handlepending"):
            return True
        if f.named:
            return False
    return False


def thread_waits(
    threads: Sequence[ThreadReport],
    walks: Dict[int, StackWalk],
    python: Optional[PythonReport],
    installation: Optional[str],
) -> Tuple[ThreadWait, ...]:
    """Every walked thread's wait, in the report's thread order, with its name (the dump's
    thread names) and its innermost Python line of the user's code (where the dump holds
    the Python stacks)."""
    out = []
    for t in threads:
        walk = walks.get(t.tid)
        if walk is None:
            continue
        pythread = python.thread(t.tid) if python is not None else None
        found = user_python(pythread, installation)
        wait = thread_wait(t.tid, walk.frames, found[1] if found is not None else None)
        if wait.kind is WaitKind.PYTHON_LOCK and wait.python_line:
            wait = replace(wait, what=_library_wait(wait.python_line) or wait.what)
        out.append(replace(wait, name=t.name) if t.name else wait)
    return tuple(out)


# What a lock wait is, by the library call the user's line made (pyentry.user_python's
# "calling X"): the lock is that library's way of waiting.
_LIBRARY_WAITS = {
    "queue.get": "waits on a queue.Queue for an item (get): nothing was put",
    "queue.put": "waits on a full queue.Queue (put): nothing takes from it",
    "queue.join": "waits until a queue.Queue's tasks are done (join)",
    "threading.join": "waits for another thread to end (Thread.join)",
    "threading.wait": "waits on a threading.Condition or Event (wait)",
    "threading.wait_for": "waits on a threading.Condition (wait_for)",
    "threading.acquire": "waits to acquire a threading lock (acquire)",
    "concurrent.futures._base.result": "waits for a future's result (Future.result)",
    "concurrent.futures._base.wait": "waits for futures (concurrent.futures.wait)",
    "concurrent.futures.thread.shutdown": "waits for an executor's threads to end (shutdown)",
}


def _library_wait(python_line: str) -> Optional[str]:
    _, sep, called = python_line.rpartition(", calling ")
    return _LIBRARY_WAITS.get(called.strip()) if sep else None
