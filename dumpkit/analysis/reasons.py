"""Why a process ended itself, in the words its runtime printed, recovered from the dump.

The text went to a stderr the user may no longer have (a Jupyter kernel, a service, an IDE
run). What is left of it in the dump:

- a Fatal Python error's function and message are string literals in python3X.dll's
  read-only data, handed to `_Py_FatalErrorFunc(func, msg)` (3.9+) or `Py_FatalError(msg)`
  (3.8); a function keeps its arguments in non-volatile registers across the calls it makes,
  so the registers the unwinder restores for those frames (and the words the prologues
  pushed) point at them;
- an assert()'s expression and file are literals the C runtime's `_assert`/`_wassert` was
  given, found the same way;
- TensorFlow's and absl's `Check failed: ...`, Intel OpenMP's `OMP: Error #15: ...`, CUDA
  status names: text in a buffer on the dying thread's stack or in the memory its stack
  points to (a full-memory dump has it; `dumpkit capture` adds that memory to its dumps);
- the C++ exception std::terminate was called for: its EXCEPTION_RECORD (0xE06D7363) is
  still on the stack while the frame handler runs, and its ThrowInfo names the type.

Every read is bounded (STACK_BYTES of stack, MAX_POINTED words followed, MAX_STRING bytes a
string); nothing claimed without saying where it was read."""

from __future__ import annotations

import re
import struct
from functools import lru_cache
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from dumpkit.analysis.cxx import MAGICS, thrown_types
from dumpkit.analysis.ending import PYTHON_FATAL, ending, short_name
from dumpkit.analysis.model import (
    CollisionKind,
    CrashInfo,
    Ending,
    EndingReason,
    EndingRoute,
    ReasonKind,
    RuntimeCollision,
)
from dumpkit.analysis.pyentry import is_interpreter
from dumpkit.records import replace
from dumpkit.target import Module, Registers, Target, Thread
from dumpkit.unwind.codemap import CodeMap
from dumpkit.unwind.frames import Frame

Read = Callable[[int, int], bytes]  # what memory (or an image) holds at an address, maybe fewer bytes
FrameRegisters = Sequence[Tuple[int, int, Dict[str, int]]]  # (ip, sp, registers) per frame, from the top

STACK_BYTES = 64 << 10  # from the stack pointer up: the dying frames, their buffers and objects
MAX_POINTED = 8192  # stack words followed to the memory they point to
POINTED_BYTES = 512  # read at each
MAX_STRING = 1024  # a C string's bytes at most
MAX_TEXT = 500  # characters of a reason kept
STACK_SCANNED_FOR_ARGUMENTS = 16 << 10  # stack words read as arguments of the way-out frames
CXX_EXCEPTION = 0xE06D7363

# the fatal-error functions that are given the name of the function that failed
_TAKE_FUNCTION = frozenset(
    {"py_fatalerrorfunc", "py_fatalerrorformat", "py_exitstatusexception", "py_fatalerror_tstatenull"}
)
_IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]{2,80}$"
# what fatal_error() prints around the message (3.8-3.13), never the message itself
_FATAL_ERROR_WORDS = frozenset(
    {
        "Fatal Python error",
        "<message not set>",
        "Python runtime state",
        "initialized",
        "finalizing",
        "core initialized",
        "preinitialized",
        "unknown",
        "Current thread 0x",
        "Thread 0x",
        "Stack (most recent call first):",
        "Extension modules",
        "(total",
        "<no Python frame>",
        "Python memory allocator called without holding the GIL",
    }
)

# The patterns below are compiled at the first ending whose reason is looked for
# (_text_patterns, _run_patterns; re's cache for the others), not at import: compiling them
# cost ~1.5 ms of every start-up, and most crashes are no ending.
# Text patterns, most specific first: (kind, pattern); `text` is the whole match.
_PATTERNS: Tuple[Tuple[ReasonKind, str], ...] = (
    (ReasonKind.FATAL_PYTHON_ERROR, r"Fatal Python error: (?P<message>\S.{3,})"),
    (ReasonKind.CHECK_FAILED, r"Check failed: \S.{2,}"),
    (ReasonKind.OPENMP, r"OMP: Error #\d+: \S.{3,}"),
    (ReasonKind.ASSERTION, r"Assertion failed[!:]? ?\S.{3,}"),
    (ReasonKind.LOG_FATAL, r"(?:\bF\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ |\d\d:\d\d:\d\d\.\d+: F )\S+:\d+\] \S.{2,}"),
    (ReasonKind.RUNTIME_TEXT, r"terminate called (?:after throwing an instance of|without an active).{3,}"),
    (ReasonKind.MKL, r"Intel MKL ERROR: \S.{3,}"),
    # cuDNN 9's front DLL, when a sub-library it loads on demand is missing
    (ReasonKind.CUDA, r"Could not locate cudnn\w*\.dll\. Please make sure it is in your library path!"),
    (
        ReasonKind.CUDA,
        r"\b(?:CUDA_ERROR_[A-Z_]{3,}|CUDNN_STATUS_[A-Z_]{3,}|CUBLAS_STATUS_[A-Z_]{3,}|cudaError[A-Za-z]{3,}).{0,200}",
    ),
)
# Text that is only printed beside a known message, which itself may be gone from memory:
# Intel OpenMP prints the DuplicateLibrary hint only after Error #15.
_HINTS: Tuple[Tuple[ReasonKind, str, str], ...] = (
    (
        ReasonKind.OPENMP,
        r"OMP: Hint This means that multiple copies of the OpenMP runtime have been linked",
        "OMP: Error #15: Initializing libiomp5md.dll, but found libiomp5md.dll already initialized.",
    ),
)
_ASCII_RUN = rb"[\x20-\x7e\t]{8,}"
_WIDE_RUN = rb"(?:[\x20-\x7e\t]\x00){8,}"

# What the common Fatal Python errors mean, by a piece of their message or function.
_FATAL_MEANINGS: Tuple[Tuple[str, str], ...] = (
    (
        "GIL",
        "a Python C-API function was called by a thread that does not hold the GIL: an extension calling "
        "the C API after releasing the GIL (inside Py_BEGIN_ALLOW_THREADS) or from a thread of its own without "
        "PyGILState_Ensure, or a C-API function called through ctypes.CDLL/WinDLL, which release the GIL "
        "(call it through ctypes.pythonapi or ctypes.PyDLL)",
    ),
    ("no current thread", "(same as above: the C API was called without the GIL)"),
    ("NULL tstate", "(same as above: the C API was called without the GIL)"),
    (
        "Cannot recover from",  # "... stack overflow" (3.8-3.11), "... Python stack overflow" (3.12+)
        "a RecursionError was being handled and the code recursed again while handling it (an except clause "
        "that calls the recursing function, or catches every exception): the interpreter gave up",
    ),
    (
        "Unrecoverable stack overflow",
        "a RecursionError was being handled and the code recursed again while handling it: the interpreter gave up",
    ),
    (
        "filesystem encoding",
        "the interpreter could not import its standard library at start-up (the `encodings` package): "
        "PYTHONHOME or PYTHONPATH point elsewhere, a ._pth file names a missing zip, or the installation "
        "is broken",
    ),
    ("file system codec", "the interpreter could not import its standard library at start-up (see PYTHONHOME)"),
    ("encodings", "the interpreter could not import its standard library at start-up (see PYTHONHOME)"),
    (
        "deallocating None",
        "an extension released a reference to None it did not own (a missing Py_INCREF / Py_RETURN_NONE)",
    ),
    ("negative ref", "an extension released a reference it did not own (a reference count went below zero)"),
    ("already tracked", "an extension tracked an object in the garbage collector twice"),
    ("could not acquire lock", "a daemon thread still held a standard stream's lock while the interpreter shut down"),
)
_OTHER_PYTHON = (
    "the fatal error was raised by {module}, not by the process's interpreter {interpreter}: an extension built "
    "for another Python loaded its own interpreter DLL, which was never initialised"
)


def ending_reason(
    ending: Ending,
    frames: Sequence[Frame],
    registers: FrameRegisters,
    read_memory: Read,
    read_image: Read,
    module_at: Callable[[int], Optional[Module]],
    stack_end: int,
    interpreter: Optional[str] = None,
) -> Optional[EndingReason]:
    """The text that says why the process ended, best first: a Fatal Python error's own
    arguments, an assertion's, a runtime's message in memory, the C++ exception in flight.
    `registers`: the top frames' registers (Walker.frame_registers); `read_memory` the
    dump's, `read_image` a module image's bytes at an address (else the dump's);
    `interpreter`: the process's python3X.dll, when it has one."""
    if not frames:
        return None
    top = frames[0].sp
    strings = _Strings(read_memory, read_image, module_at)
    if ending.route is EndingRoute.FATAL_PYTHON_ERROR:
        found = _python_fatal(ending, frames, registers, strings, interpreter)
        if found is not None:
            return found
    if ending.route is EndingRoute.ASSERT:
        found = _assertion(frames, registers, strings)
        if found is not None:
            return found
    stack = read_memory(top, max(0, min(STACK_BYTES, stack_end - top)))
    found = _in_memory(stack, top, read_memory, module_at)
    if found is not None:
        return found
    if ending.route in (EndingRoute.TERMINATE, EndingRoute.ABORT):
        return _cxx_in_flight(stack, top, read_image, strings)
    return None


# ----------------------------------------------------------------------------- strings
class _Strings:
    """C strings at addresses: from a module's image when the address is in one (its
    read-only data), else from the dump's memory. Printable text only."""

    def __init__(self, read_memory: Read, read_image: Read, module_at: Callable[[int], Optional[Module]]):
        self.read_memory = read_memory
        self.read_image = read_image
        self.module_at = module_at
        self._seen: Dict[int, Optional[str]] = {}

    def at(self, address: int) -> Optional[str]:
        if address < 0x10000 or address > 0x7FFFFFFFFFFF:
            return None
        if address not in self._seen:
            self._seen[address] = self._read(address)
        return self._seen[address]

    def _read(self, address: int) -> Optional[str]:
        module = self.module_at(address)
        raw = (self.read_image if module is not None else self.read_memory)(address, MAX_STRING)
        if len(raw) >= 4 and raw[1] == 0 and raw[3] == 0 and raw[0] and raw[2]:  # UTF-16 (_wassert)
            text = raw.decode("utf-16-le", "replace").split("\0", 1)[0]
            wide = True
        else:
            end = raw.find(b"\0")
            if end < 0:
                return None
            text = raw[:end].decode("latin-1")
            wide = False
        if len(text) < 3 or not all(" " <= c <= "~" or c in "\t\n" for c in text):
            return None
        if not wide and len(text) >= MAX_STRING - 1:
            return None
        return text.strip()

    def where(self, address: int) -> str:
        module = self.module_at(address)
        if module is None:
            return f"memory at {address:#x}"
        return f"{module.name}+{address - module.base:#x} (the module's image)"


def _candidates(
    frames: Sequence[Frame], registers: FrameRegisters, upto: int, read_memory: Read
) -> Iterator[Tuple[int, str, Optional[int]]]:
    """Words that may be the arguments of the way-out frames 0..`upto`, most telling first,
    each with where it was found and, for a stack word, its address: the registers restored
    for frame `upto` (its own arguments, kept across its calls), then those of the frames
    above it, then the stack words from frame 0 to the end of `upto`'s caller's frame (what
    the prologues pushed and spilled, and structures passed by reference)."""
    order = [upto] + list(range(upto - 1, -1, -1))
    for i in order:
        if i < len(registers):
            for name, value in sorted(registers[i][2].items()):
                yield value, f"{name} of frame {i} ({frames[i].function_name})" if i < len(frames) else name, None
    lo = frames[0].sp
    # to the end of the caller's frame: a structure passed by reference lives there
    hi = frames[upto + 2].sp if upto + 2 < len(frames) else lo + STACK_SCANNED_FOR_ARGUMENTS
    hi = min(hi, lo + STACK_SCANNED_FOR_ARGUMENTS)
    data = read_memory(lo, max(0, hi - lo))
    for k in range(0, len(data) - 7, 8):
        yield struct.unpack_from("<Q", data, k)[0], f"the stack at {lo + k:#x}", lo + k


# ----------------------------------------------------------------------------- Python
def _python_fatal(
    ending: Ending, frames: Sequence[Frame], registers: FrameRegisters, strings: _Strings, interpreter: Optional[str]
) -> Optional[EndingReason]:
    """Py_FatalError's function and message, read from the arguments of the outermost
    fatal-error frame (3.9+: `_Py_FatalErrorFunc(func, msg)`; 3.8: `Py_FatalError(msg)`,
    whose message names the function itself)."""
    fatal = [f.index for f in frames[:32] if short_name(f) in PYTHON_FATAL and is_interpreter(f.module)]
    if not fatal:
        return None
    upto = fatal[-1]
    # Py_FatalError(msg) has no function of its own (3.8's messages name it themselves)
    takes_function = any(short_name(frames[i]) in _TAKE_FUNCTION for i in fatal)
    function: Optional[Tuple[str, str, int]] = None
    message: Optional[Tuple[str, str, int]] = None
    message_slots: List[int] = []  # stack words that point to the message
    stack_words: Dict[int, int] = {}
    for value, found_in, slot in _candidates(frames, registers, upto, strings.read_memory):
        if slot is not None:
            stack_words[slot] = value
        text = strings.at(value)
        if text is None or any(text.startswith(w) for w in _FATAL_ERROR_WORDS):
            continue
        if re.match(_IDENTIFIER, text):
            # a function name only from the registers: the stack holds stale names too
            if function is None and takes_function and slot is None:
                function = (text, found_in, value)
        elif len(text) >= 8 and (message is None or value == message[2]):
            message = message or (text, found_in, value)
            if slot is not None:
                message_slots.append(slot)
    if message is None:
        return None
    if function is None and takes_function:
        # a PyStatus passed by reference (Py_ExitStatusException): its func field is the
        # word just before err_msg
        for slot in message_slots:
            word = stack_words.get(slot - 8)
            text = strings.at(word) if word is not None else None
            if (
                word is not None
                and text is not None
                and re.match(_IDENTIFIER, text)
                and not text.startswith(tuple(_FATAL_ERROR_WORDS))
            ):
                function = (text, f"the stack at {slot - 8:#x}, just before the message", word)
                break
    msg, msg_where, address = message
    func = function[0] if function is not None else None
    if func is not None and msg.startswith(func + ":"):
        func = None  # 3.8: the message names its function itself
    text = f"Fatal Python error: {func}: {msg}" if func else f"Fatal Python error: {msg}"
    source = f"the message is at {strings.where(address)}, pointed to by {msg_where}"
    if function is not None and func is not None:
        source += f"; the function name at {strings.where(function[2])}, pointed to by {function[1]}"
    return EndingReason(
        ReasonKind.FATAL_PYTHON_ERROR,
        _cut(text),
        source,
        function=func,
        message=_cut(msg),
        meaning=_fatal_meaning(f"{func or ''} {msg}", ending.fatal_module, interpreter),
        address=address,
    )


def _fatal_meaning(text: str, module: Optional[str], interpreter: Optional[str]) -> Optional[str]:
    if module and interpreter and module.lower() != interpreter.lower():
        return _OTHER_PYTHON.format(module=module, interpreter=interpreter)
    for key, meaning in _FATAL_MEANINGS:
        if key.lower() in text.lower():
            if meaning.startswith("(same as above"):
                return _FATAL_MEANINGS[0][1]
            return meaning
    return None


# ----------------------------------------------------------------------------- assert()
def _assertion(frames: Sequence[Frame], registers: FrameRegisters, strings: _Strings) -> Optional[EndingReason]:
    """An assert()'s expression and file: the arguments of the C runtime's _assert/_wassert."""
    at = next((f.index for f in frames[:32] if short_name(f) in ("assert", "wassert")), None)
    if at is None:
        return None
    expression: Optional[Tuple[str, str]] = None
    file: Optional[str] = None
    for value, found_in, _slot in _candidates(frames, registers, at, strings.read_memory):
        text = strings.at(value)
        if text is None or text.startswith("Assertion failed"):
            continue
        if file is None and re.search(r"[\\/]|\.(c|cc|cpp|cxx|h|hpp)$", text):
            file = text
        elif expression is None:
            expression = (text, found_in)
        if expression is not None and file is not None:
            break
    if expression is None:
        return None
    text = f"Assertion failed: {expression[0]}" + (f", file {file}" if file else "")
    return EndingReason(
        ReasonKind.ASSERTION,
        _cut(text),
        f"the arguments of {frames[at].function_name}, pointed to by {expression[1]}",
        message=_cut(expression[0]),
    )


# ----------------------------------------------------------------------------- text in memory
@lru_cache(maxsize=None)
def _run_patterns() -> Tuple["re.Pattern[bytes]", "re.Pattern[bytes]"]:
    return re.compile(_ASCII_RUN), re.compile(_WIDE_RUN)


def _runs(data: bytes) -> Iterator[Tuple[int, str]]:
    """(offset, text) of the printable runs of `data`, ASCII and UTF-16."""
    ascii_run, wide_run = _run_patterns()
    for m in ascii_run.finditer(data):
        yield m.start(), m.group().decode("ascii")
    for m in wide_run.finditer(data):
        yield m.start(), m.group().decode("utf-16-le")


@lru_cache(maxsize=None)
def _text_patterns() -> Tuple[Tuple[int, ReasonKind, "re.Pattern[str]", Optional[str]], ...]:
    """_PATTERNS then _HINTS, compiled, in rank order: (rank, kind, pattern, the message a
    hint stands for; None for a pattern whose match is the text)."""
    compiled: List[Tuple[int, ReasonKind, "re.Pattern[str]", Optional[str]]] = [
        (rank, kind, re.compile(p), None) for rank, (kind, p) in enumerate(_PATTERNS)
    ]
    compiled += [(rank, kind, re.compile(p), message) for rank, (kind, p, message) in enumerate(_HINTS, len(_PATTERNS))]
    return tuple(compiled)


def _match(text: str) -> Optional[Tuple[int, ReasonKind, str]]:
    """(rank, kind, the reason's text) of the first pattern `text` holds; a hint stands for
    its message, ranked after every message found itself."""
    for rank, kind, pattern, message in _text_patterns():
        m = pattern.search(text)
        if m is not None:
            return rank, kind, m.group().strip() if message is None else message
    return None


def _in_memory(
    stack: bytes, top: int, read_memory: Read, module_at: Callable[[int], Optional[Module]]
) -> Optional[EndingReason]:
    """A runtime's last words on the dying thread's stack (a buffer it formatted) or in
    memory a stack word points to (a heap string; the dump must hold it), nearest the top
    of the stack first within the most specific pattern."""
    best: Optional[Tuple[int, int, ReasonKind, str, str, int]] = None  # rank, distance, kind, text, where, address
    for offset, run in _runs(stack):
        found = _match(run)
        if found is not None:
            rank, kind, text = found
            where = f"on the dying thread's stack at {top + offset:#x}"
            if rank >= len(_PATTERNS):
                where = f"its hint ({_first_words(run)}...) {where}"
            cand = (rank, offset, kind, text, where, top + offset)
            best = cand if best is None or cand[:2] < best[:2] else best
    seen = set()
    usable = len(stack) & ~7
    words = struct.unpack_from(f"<{usable // 8}Q", stack) if usable else ()
    for k, value in enumerate(words[:MAX_POINTED]):
        if value < 0x10000 or value > 0x7FFFFFFFFFFF or value in seen or top <= value < top + len(stack):
            continue
        seen.add(value)
        if module_at(value) is not None:
            continue
        data = read_memory(value, POINTED_BYTES)
        if not data:
            continue
        for offset, run in _runs(data):
            found = _match(run)
            if found is not None:
                rank, kind, text = found
                where = f"in memory at {value + offset:#x}, pointed to by the stack at {top + 8 * k:#x}"
                if rank >= len(_PATTERNS):
                    where = f"its hint ({_first_words(run)}...) {where}"
                cand = (rank, 8 * k, kind, text, where, value + offset)
                best = cand if best is None or cand[:2] < best[:2] else best
                break
    if best is None:
        return None
    _rank, _distance, kind, text, where, address = best
    message = None
    if kind is ReasonKind.FATAL_PYTHON_ERROR:
        message = text.split(": ", 1)[1] if ": " in text else None
    return EndingReason(kind, _cut(text), where, message=message, meaning=_meaning_of(kind, text), address=address)


def _meaning_of(kind: ReasonKind, text: str) -> Optional[str]:
    if kind is ReasonKind.OPENMP and "#15" in text:
        return (
            "two copies of Intel's OpenMP runtime (libiomp5md.dll) were loaded into one process, typically by two "
            "packages that each bundle it; the second refuses to start and ends the process with exit code 3"
        )
    if kind is ReasonKind.CHECK_FAILED:
        return "a CHECK in native code (absl / TensorFlow) found a condition false and aborted the process"
    if kind is ReasonKind.FATAL_PYTHON_ERROR:
        return _fatal_meaning(text, None, None)
    return None


# ----------------------------------------------------------------------------- C++
def _cxx_in_flight(stack: bytes, top: int, read_image: Read, strings: _Strings) -> Optional[EndingReason]:
    """The MSVC C++ exception std::terminate was called for: its EXCEPTION_RECORD
    (code 0xE06D7363, 4 parameters, the first one the magic) is on the stack while the
    frame handler runs; the ThrowInfo it points to names the type."""
    code = struct.pack("<I", CXX_EXCEPTION)
    at = stack.find(code)
    checked = 0
    while at >= 0 and checked < 64:
        checked += 1
        if at % 8 == 0 and at + 0x98 <= len(stack):
            nparams = struct.unpack_from("<I", stack, at + 0x18)[0]
            params = struct.unpack_from("<4Q", stack, at + 0x20)
            if nparams in (3, 4) and params[0] in MAGICS:
                types = thrown_types(params, read_image)
                if types:
                    said = _object_text(params[1], strings)
                    text = f"uncaught C++ exception of type {types[0]}" + (f' ("{said}")' if said else "")
                    return EndingReason(
                        ReasonKind.CXX_EXCEPTION,
                        _cut(text),
                        f"its exception record on the dying thread's stack at {top + at:#x} (code 0xe06d7363), "
                        "whose ThrowInfo names the type",
                        message=types[0],
                        address=top + at,
                    )
        at = stack.find(code, at + 1)
    return None


def _object_text(address: int, strings: _Strings) -> Optional[str]:
    """A string the thrown object points to in its first words (std::runtime_error keeps
    its what() text at +8 after the vtable; a plain struct often starts with its message),
    when the dump holds the object."""
    head = strings.read_memory(address, 32) if address else b""
    for k in range(0, len(head) - 7, 8):
        text = strings.at(struct.unpack_from("<Q", head, k)[0])
        if text is not None and len(text) >= 4:
            return text
    return None


def _first_words(text: str, count: int = 12) -> str:
    return " ".join(text.split()[:count])


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."


def inferred_from_collisions(
    end: Optional[Ending], frames: Sequence[Frame], collisions: Sequence[RuntimeCollision]
) -> Optional[Ending]:
    """An ending whose reason the dump does not hold, said from the module list where only
    one reason fits: Intel OpenMP's runtime ended the process itself (the way out's caller
    is in libiomp5md.dll) while two copies of it are loaded, which is what its Error #15
    check stops. Marked as inferred in the text, so it is never taken for a read message."""
    if end is None or end.reason is not None or end.caller_frame is None or end.caller_frame >= len(frames):
        return end
    module = (frames[end.caller_frame].module or "").lower()
    for c in collisions:
        if c.kind is CollisionKind.OPENMP and module == "libiomp5md.dll":
            if not any(m.name.lower() == module for m in c.modules):
                continue
            copies = "; ".join(m.path for m in c.modules)
            reason = EndingReason(
                ReasonKind.OPENMP,
                "OMP: Error #15 (inferred)",
                f"inferred, not read: Intel OpenMP's runtime ended the process itself while two copies of it are loaded "
                f"({copies}), which is what its Error #15 check for a second copy stops",
                message="Initializing libiomp5md.dll, but found libiomp5md.dll already initialized.",
                meaning=_meaning_of(ReasonKind.OPENMP, "#15"),
            )
            return replace(end, reason=reason)
    return end


RegistersOf = Callable[[Thread, Optional[Registers], int], List[Tuple[int, int, Dict[str, int]]]]
REGISTER_FRAMES = 32  # the way out and its caller are never deeper


def read_ending(
    target: Target,
    code: CodeMap,
    crash: Optional[CrashInfo],
    thread: Optional[Thread],
    frames: Sequence[Frame],
    registers_of: RegistersOf,
    interpreter: Optional[str],
) -> Optional[Ending]:
    """How the crashing thread's process ended itself (analysis/ending.py), with the
    reason its runtime gave when the dump holds it. `registers_of` steps the top frames
    keeping their registers (Walker.frame_registers); it is only called for an ending."""
    found = ending(crash, frames, target.comment)
    if found is None or thread is None:
        return found
    ex = target.exception
    registers = registers_of(thread, ex.context if ex is not None else None, REGISTER_FRAMES)
    reason = ending_reason(
        found,
        frames[:REGISTER_FRAMES],
        registers,
        target.read_available,
        code.read_code,
        target.module_at,
        thread.stack_end,
        interpreter,
    )
    return replace(found, reason=reason) if reason is not None else found


__all__: List[str] = ["ending_reason", "inferred_from_collisions", "read_ending", "FrameRegisters"]
