"""Stack frames as the walker produces them, how each was found (`Trust`) and how a walk
ended (`StopReason`): enums with descriptions, carried as data and rendered as the
words reports have always used."""

from __future__ import annotations

from typing import Callable, Dict, FrozenSet, Iterable, List, Optional, Protocol, Sequence, TypeVar, runtime_checkable
from dumpkit.records import record
from dumpkit.words import Word


class _Described:
    """`description`: what a member means, in a sentence."""

    @property
    def description(self) -> str:
        return DESCRIPTIONS[self]


class Trust(_Described, Word):
    """How a frame was found, weakest first: the definition order is the order of trust.
    A str-valued `Word`: a member compares, hashes and serialises as its value ("scan",
    "unwind_info", ...)."""

    SCAN = "scan"
    SCAN_VALIDATED = "scan_validated"
    FRAME_POINTER = "frame_pointer"
    PROLOGUE = "prologue"
    UNWIND_INFO = "unwind_info"
    CONTEXT = "context"


# Found by scanning the stack for a word that can be a return address.
SCANNED = (Trust.SCAN, Trust.SCAN_VALIDATED)


class Support(_Described, Word):
    """What speaks for a frame found by scanning, beyond a word that points into code
    (`unwind/confirm.py`). A str-valued `Word`."""

    CALL_TARGET = "call_target"
    RECURSION = "recursion"
    NONE = "none"


# The trust levels' names, weakest first.
TRUST_LEVELS = tuple(t.value for t in Trust)


class StopReason(_Described, Word):
    """Why a walk ended, a str-valued `Word`. `text()` is the wording reports show (the
    frame limit says its value); `description` says what it means."""

    END_OF_STACK = "end of stack"
    RETURN_ADDRESS_ZERO = "end of stack (return address 0)"
    THREAD_START = "end of stack (the thread's start routine)"
    NO_CALLER = "no caller found (end of stack or unrecoverable)"
    SP_NOT_INCREASING = "stack pointer did not increase"
    FRAME_LIMIT = "frame limit reached"
    NO_CONTEXT = "no register context"

    def text(self, frame_limit: Optional[int] = None) -> str:
        if self is StopReason.FRAME_LIMIT and frame_limit is not None:
            return f"frame limit ({frame_limit}) reached"
        return self.value

    @property
    def reached_the_end(self) -> bool:
        """The walk got to the stack's outermost frame (rather than giving up or being cut)."""
        return self in (StopReason.END_OF_STACK, StopReason.RETURN_ADDRESS_ZERO, StopReason.THREAD_START)


DESCRIPTIONS: Dict[_Described, str] = {
    Trust.SCAN: "stack scanning: a word on the stack that points into code (the code before it was not available)",
    Trust.SCAN_VALIDATED: "stack scanning: a word on the stack right after a CALL instruction",
    Trust.FRAME_POINTER: "the saved frame-pointer chain",
    Trust.PROLOGUE: "the function's code read up to its RET (it has no unwind data)",
    Trust.UNWIND_INFO: "the module's unwind data (.pdata/.xdata or a registered function table)",
    Trust.CONTEXT: "the thread's register context",
    Support.CALL_TARGET: "the direct CALL before its return address reaches the function of the frame below it",
    Support.RECURSION: "it recurs with the same frame size and caller: part of a recursion",
    Support.NONE: "nothing beyond a stack word that points into code (a stale word in a frame's locals looks the same)",
    StopReason.END_OF_STACK: "the caller's stack pointer is past the top of the thread's stack",
    StopReason.RETURN_ADDRESS_ZERO: "the outermost frame returns to address 0, where thread start routines end",
    StopReason.THREAD_START: (
        "the frame where other threads' walks end, as far below the stack's top: the thread's start routine;"
        " the scanned words above it are not callers"
    ),
    StopReason.NO_CALLER: "no unwind data, frame pointer or scanned word gave a caller",
    StopReason.SP_NOT_INCREASING: "the caller's stack pointer was not above the callee's (a loop or damaged data)",
    StopReason.FRAME_LIMIT: "the walk stopped at its frame limit (--max-frames); the stack goes on",
    StopReason.NO_CONTEXT: "the thread has no register context to start from",
}


_HEX = frozenset("0123456789abcdefABCDEF")


def without_offset(symbol: str) -> str:
    """`module!name` from `module!name+0x1a` (or `-0x1a`, a fragment below its function's
    entry). Only a trailing hex offset is cut: a demangled C++ name can hold `+` itself
    (`operator+=`)."""
    for sign in "+-":
        head, sep, tail = symbol.rpartition(sign)
        if sep and tail[:2] == "0x" and len(tail) > 2 and _HEX.issuperset(tail[2:]):
            return head
    return symbol


@record(frozen=False, init=False)
class Frame:
    """One frame of a walked stack.

    `ip` is the frame's instruction pointer (for frames above 0, the return address);
    `sp` the stack pointer inside the frame; `size` the distance to the caller's frame
    (WinDbg `kf`'s Memory column), None for the outermost frame; `source` the file and line
    of the code (of the call, above frame 0) when the module's PDB has line records. Not
    frozen: the walker sets `size` once it has found the caller, and a frozen dataclass
    would cost a million-frame walk a noticeable share of its time. (`__init__` is written
    out because a slotted dataclass cannot give a field a default on Python 3.8.)"""

    __slots__ = ("index", "ip", "sp", "module", "rva", "function_start", "symbol", "size", "trust", "source")

    index: int
    ip: int
    sp: int
    module: Optional[str]
    rva: Optional[int]
    function_start: Optional[int]  # RVA of the function's first instruction, when known
    symbol: Optional[str]  # "module!name" or "module!name+0x1a", best available
    size: Optional[int]
    trust: Trust
    source: Optional[str]  # "FILE:LINE" from the PDB's line records

    def __init__(
        self,
        index: int,
        ip: int,
        sp: int,
        module: Optional[str],
        rva: Optional[int],
        function_start: Optional[int],
        symbol: Optional[str],
        size: Optional[int],
        trust: Trust,
        source: Optional[str] = None,
    ):
        self.index = index
        self.ip = ip
        self.sp = sp
        self.module = module
        self.rva = rva
        self.function_start = function_start
        self.symbol = symbol
        self.size = size
        self.trust = trust
        self.source = source

    @property
    def function_key(self) -> str:
        """Identity of the function, for cycle detection and grouping: stable across
        repetitions even when the return address inside the function differs."""
        if self.module is not None and self.function_start is not None:
            return f"{self.module}!{self.function_start:#x}"
        if self.symbol:
            return without_offset(self.symbol)
        return f"{self.ip:#x}"

    @property
    def function_name(self) -> str:
        """Human name of the function without the offset."""
        if self.symbol:
            return without_offset(self.symbol)
        if self.module is not None and self.rva is not None:
            return f"{self.module}+{self.rva:#x}"
        return f"{self.ip:#x}"

    @property
    def named(self) -> bool:
        """A symbol, an export or a PDB names the function: not `module+0x...` and not the
        `func_XXXX` a bare unwind entry gets."""
        name = self.function_name
        return "!" in name and not name.split("!", 1)[1].startswith("func_")


K = TypeVar("K")


@runtime_checkable
class Tallied(Protocol):
    """Frames that count themselves without being expanded (unwind/bulk.py's Frames, whose
    runs stand for many repetitions): declared here, which bulk builds on."""

    def tally(self, fn: Callable[[Frame], K]) -> Dict[K, int]: ...


@record
class StackWalk:
    """One thread's walk: its frames, how the walk ended, and what went wrong on the way."""

    thread_id: int
    frames: Sequence[Frame]  # a list, or bulk.Frames when recursion runs were verified in bulk
    stop: StopReason
    problems: List[str]
    frame_limit: Optional[int] = None  # the limit the walk stopped at (stop is FRAME_LIMIT)
    # scanned frames after the last confirmed frame (`unwind/confirm.py`), numbered on
    # from the stack's: shown apart, never evidence
    possible: Sequence[Frame] = ()
    support: Optional[Dict[int, Support]] = None  # frame index -> what confirms it, for scanned frames
    # unwind-info addresses of JIT code whose unwind data the dump did not save, first met
    # during this walk (or the other threads' walks it was checked against): a property of
    # how the dump was written, not damage (`unsaved_unwind` gathers a run's)
    unsaved_jit_unwind: FrozenSet[int] = frozenset()

    @property
    def stop_reason(self) -> str:
        """How the walk ended, in the words reports use."""
        return self.stop.text(self.frame_limit)

    @property
    def trust_counts(self) -> Dict[Trust, int]:
        """Frames per trust level (the keys are `Trust` members, which are strings)."""
        # bulk.Frames: each run counted once, times its repetitions (a plain list is asked
        # first: isinstance against a Protocol costs microseconds, and this is asked per thread)
        if type(self.frames) is not list and isinstance(self.frames, Tallied):
            return dict(self.frames.tally(_trust))
        counts: Dict[Trust, int] = {}
        for f in self.frames:
            counts[f.trust] = counts.get(f.trust, 0) + 1
        return counts


def _trust(f: Frame) -> Trust:
    return f.trust


def unsaved_unwind(walks: Iterable[StackWalk]) -> FrozenSet[int]:
    """The JIT unwind data every one of `walks` found unsaved, each address once."""
    return frozenset().union(*(w.unsaved_jit_unwind for w in walks))
