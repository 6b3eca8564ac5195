"""What the reader returns: plain frozen data a Report can carry and JSON can show."""

from __future__ import annotations

from typing import Optional, Tuple
from dumpkit.cpython.status import Status
from dumpkit.records import record
from dumpkit.words import Word


# Which dumps hold what the reader needs, for messages that say what to do. _PyRuntime sits
# in python3X.dll's data section (image memory); thread states, frames and code objects on
# the heap (private memory). A MiniDumpNormal dump holds neither, only thread stacks.
FULL_DUMP = "a full-memory dump has it: MiniDumpWithFullMemory (procdump -ma, or WER LocalDumps with DumpType=2)"
RUNTIME_ADVICE = FULL_DUMP + "; MiniDumpWithDataSegs also holds module data sections"
HEAP_ADVICE = FULL_DUMP + "; MiniDumpWithPrivateReadWriteMemory also holds the heap"


@record
class PythonFrame:
    """One Python function activation. `line` is the line being executed (None when the
    line table has none for the instruction or could not be read); `problem` is one line
    saying what could not be read, None when nothing was missing."""

    function: Optional[str]
    filename: Optional[str]
    line: Optional[int]
    first_line: Optional[int]
    code_address: int
    problem: Optional[str] = None

    @property
    def location(self) -> str:
        """'filename:line in function', with '?' for what is unknown."""
        where = self.filename or "?"
        line = "?" if self.line is None else str(self.line)
        return f"{where}:{line} in {self.function or '?'}"


@record
class PythonThread:
    """The Python stack of one OS thread, innermost frame first.

    A very deep stack keeps its innermost frames and its outermost ones (the entry path):
    `omitted` frames were walked but not kept between frames[omitted_at - 1] and
    frames[omitted_at]. `truncated`: the walk stopped at its cap, outermost frames unknown."""

    thread_id: int  # the OS thread id (matches dumpkit.target.Thread.tid)
    frames: Tuple[PythonFrame, ...]
    truncated: bool = False
    problems: Tuple[str, ...] = ()  # the chain's own problems (loop, unreadable link)
    thread_state: int = 0  # address of the PyThreadState
    interpreter: int = 0  # index of its interpreter in the runtime's list (0 = main)
    omitted: int = 0
    omitted_at: Optional[int] = None
    # the innermost frames' own addresses, innermost first (their locals and value stacks
    # are read there: analysis/holders.py finds the locks a `with` block holds)
    frame_addresses: Tuple[int, ...] = ()

    @property
    def depth(self) -> int:
        """Python frames on the thread (at least this many when truncated)."""
        return len(self.frames) + self.omitted


class GilSource(Word):
    """What a `GilWitness` read (a str-valued `Word`: JSON carries its value)."""

    GIL = "gil"  # the GIL's own `locked` and `last_holder` (struct _gil_runtime_state)
    TSTATE_CURRENT = "tstate_current"  # _PyRuntime.gilstate.tstate_current (3.8-3.11)
    THREAD_STATUS = "thread_status"  # each thread state's own flag: _status.active (3.12), .holds_gil (3.13)


@record
class GilWitness:
    """One reading of who holds the GIL. `thread_state`: the PyThreadState it names as the
    holder (0: none), None when it could not be read; `thread_id` that thread's OS id."""

    source: GilSource
    field: str  # what was read, as CPython names it: "_PyRuntime.gilstate.tstate_current"
    thread_state: Optional[int]
    thread_id: Optional[int] = None


@record
class GilRecord:
    """Which thread holds the GIL, read from the interpreter's state (dumpkit.cpython.gil).

    `held`: the GIL is taken (its `locked` is 1), False when it is free, None when that is
    not known (memory missing, or not holding together: `problems` says). The holder is the
    GIL's `last_holder` while it is taken; `last_holder_*` name that thread state whatever
    `locked` says (after a release, the thread that released it). `witnesses` are the
    readings it is decided from; where they disagree, `problems` says so."""

    held: Optional[bool]
    holder_thread_id: Optional[int] = None  # the OS thread id (as dumpkit.target.Thread.tid)
    holder_thread_state: Optional[int] = None  # the holder's PyThreadState
    last_holder_thread_id: Optional[int] = None
    last_holder_thread_state: Optional[int] = None
    switches: Optional[int] = None  # switch_number: how many times the GIL changed hands
    # threads inside take_gil's wait on the GIL's condition variable as the dump was written
    # (its emulated condition variable counts them, 3.8-3.12; None for 3.13's native one)
    waiters: Optional[int] = None
    address: Optional[int] = None  # the struct _gil_runtime_state
    layout: Optional[str] = None  # where its offsets came from
    witnesses: Tuple[GilWitness, ...] = ()
    problems: Tuple[str, ...] = ()


@record
class PythonState:
    """Everything the reader found about the Python side of a process."""

    status: Status
    message: str  # one line: what was read, or what is missing and which dump would have it
    dll: Optional[str] = None  # "python38.dll"
    version: Optional[str] = None  # "3.8.1" when the version resource says so, else "3.8"
    layout: Optional[str] = None  # where the structure offsets came from
    layout_verified: bool = False  # False: "layout not verified on a real dump"
    layout_note: Optional[str] = None  # which build it was verified on, and why it is trusted here
    threads: Tuple[PythonThread, ...] = ()
    problems: Tuple[str, ...] = ()
    gil: Optional[GilRecord] = None  # who holds the GIL; None where the reader did not get that far

    def thread(self, thread_id: int) -> Optional[PythonThread]:
        return next((t for t in self.threads if t.thread_id == thread_id), None)
