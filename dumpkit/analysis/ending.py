"""How a process ended itself: the exit a dump was stopped at, the route to it, and who
took it.

A process that is not killed by an exception can still end itself abnormally: abort()
(which on Windows fail-fasts with 0xC0000409 subcode 7, and under Wine, or with the
fail-fast turned off, ends with exit code 3 through raise(SIGABRT) and _exit), raise() of
a signal whose default action ends the process, _exit(), TerminateProcess on itself, the
C runtime's normal exit(). A debugger stopped at ntdll's exit path (dumpkit capture, cdb's
`bp ntdll!RtlExitUserProcess`) writes a dump whose exception is its breakpoint there and
whose first argument is the exit code. The frames above the program's own code say how it
got there; this module names them, once, for every verdict and format.

Pure: frames (with the names the walk gave them) and the crash record in, an `Ending` out."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from dumpkit.analysis.codes.model import STATUS_BREAKPOINT, STATUS_STACK_BUFFER_OVERRUN
from dumpkit.analysis.model import CrashInfo, Ending, EndingRoute
from dumpkit.analysis.pyentry import is_interpreter
from dumpkit.analysis.raiser import RUNTIME_MODULES
from dumpkit.records import replace
from dumpkit.unwind.frames import Frame, Trust

LOOK = 24  # the ending machinery is never deeper than this

# Where a debugger stops an exit, and which argument holds the exit code:
# RtlExitUserProcess(code), ExitProcess(code), NtTerminateProcess(handle, code), TerminateProcess(handle, code).
EXIT_STOPS: Dict[str, int] = {
    "rtlexituserprocess": 0,
    "exitprocess": 0,
    "ntterminateprocess": 1,
    "zwterminateprocess": 1,
    "terminateprocess": 1,
}
_ARGUMENTS = ("rcx", "rdx")
CURRENT_PROCESS = 0xFFFFFFFFFFFFFFFF  # GetCurrentProcess()'s pseudo-handle
FASTFAIL_FATAL_APP_EXIT = 7  # abort()'s __fastfail subcode

# absl's, glog's and TensorFlow's (tsl) fatal logging: a CHECK or LOG(FATAL) ends in the
# LogMessageFatal destructor, which prints the message and calls abort()
_FATAL_LOG = ("LogMessageFatal", "LogMessage::Fail", "log_internal::LogMessage::Die", "LogMessage::SendToLog")
FATAL_LOG = "CHECK / LOG(FATAL)"


# The functions of the way out, by the name a frame shows (lower case, no leading
# underscores, ucrtbase's `_o_` aliases folded), and what each is in words. Outermost wins:
# abort() calls raise() which calls _exit(); the program called abort().
_SYSTEM_EXIT = {
    "rtlexituserprocess": "RtlExitUserProcess",
    "ntterminateprocess": "NtTerminateProcess",
    "zwterminateprocess": "NtTerminateProcess",
    "ldrshutdownprocess": "LdrShutdownProcess",
    "exitprocess": "ExitProcess",
    "terminateprocess": "TerminateProcess",
    "fatalexit": "FatalExit",
    "fatalappexita": "FatalAppExit",
    "fatalappexitw": "FatalAppExit",
}
_CRT_EXIT = {
    "exit": "exit()",
    "cexit": "exit()",
    "common_exit": "exit()",
    "exit_or_terminate_process": "exit()",
    "quick_exit": "quick_exit()",
    "exit_": "_exit()",
    "raise": "raise()",
    "abort": "abort()",
    "terminate": "std::terminate()",
    "std_terminate": "std::terminate()",
    "assert": "assert()",
    "wassert": "assert()",
    "invoke_watson": "_invoke_watson()",
    "call_reportfault": "abort()",
    "crt_fast_fail": "abort()",
    "fastfail": "__fastfail",
}
# The exception dispatch between a C++ throw and the std::terminate its frame handler
# called: part of the way out, said as the throw
_DISPATCH = {
    "cxxthrowexception": "a C++ throw",
    "raiseexception": None,
    "rtlraiseexception": None,
    "kiuserexceptiondispatcher": None,
    "rtldispatchexception": None,
    "dispatch_exception": None,
    "call_stack_handlers": None,
    "rtlpexecutehandlerforexception": None,
    "cxx_frame_handler": None,
    "cxxframehandler": None,
    "cxxframehandler3": None,
    "cxxframehandler4": None,
    "internalcxxframehandler": None,
    "c_specific_handler": None,
}
# CPython's fatal-error path (exported, so named without a PDB; fatal_error itself is static)
PYTHON_FATAL = {
    "py_fatalerror": "Py_FatalError",
    "py_fatalerrorfunc": "_Py_FatalErrorFunc",
    "py_fatalerrorformat": "_Py_FatalErrorFormat",
    "py_exitstatusexception": "Py_ExitStatusException",
    "py_fatalerror_tstatenull": "_Py_FatalError_TstateNULL",
    "py_fatalrefcounterrorfunc": "_Py_FatalRefcountErrorFunc",
    "py_fatalinitstatus": "_Py_FatalInitError",
    "py_fatalinitserror": "_Py_FatalInitError",
    "fatal_error": "fatal_error",
    "fatal_error_exit": "fatal_error_exit",
}
# how the route is said, outermost function first
_ROUTE_OF = {
    "abort()": EndingRoute.ABORT,
    "__fastfail": EndingRoute.ABORT,
    "_invoke_watson()": EndingRoute.ABORT,
    "raise()": EndingRoute.SIGNAL,
    "_exit()": EndingRoute.QUICK_EXIT,
    "quick_exit()": EndingRoute.QUICK_EXIT,
    "exit()": EndingRoute.EXIT,
    "std::terminate()": EndingRoute.TERMINATE,
    "assert()": EndingRoute.ASSERT,
    "TerminateProcess": EndingRoute.TERMINATE_PROCESS,
    "NtTerminateProcess": EndingRoute.TERMINATE_PROCESS,
    "ExitProcess": EndingRoute.EXIT_PROCESS,
    "RtlExitUserProcess": EndingRoute.EXIT_PROCESS,
    "FatalExit": EndingRoute.EXIT_PROCESS,
    "FatalAppExit": EndingRoute.ABORT,
    FATAL_LOG: EndingRoute.ABORT,
}


def short_name(f: Frame) -> Optional[str]:
    """The function's name as the tables above key it, None for an unnamed frame: lower
    case, leading underscores dropped, but `_exit`/`_Exit` (no clean-up) kept apart from
    `exit()` as "exit_"."""
    name = f.function_name
    if "!" not in name:
        return None
    name = name.split("!", 1)[1]
    if name.startswith("_o_") and (f.module or "").lower().startswith("ucrtbase"):
        name = name[3:]  # ucrtbase's _o_abort, _o__exit: the same functions as abort, _exit
    short = name.lower().lstrip("_")
    if short == "exit" and name.startswith("_"):
        return "exit_"
    return short


def _word(f: Frame) -> Tuple[Optional[str], bool]:
    """What an ending frame is in words (None: not part of the way out), and whether it is
    CPython's fatal-error path."""
    short = short_name(f)
    if short is None:
        return None, False
    if any(key in f.function_name for key in _FATAL_LOG):
        return FATAL_LOG, False
    if short in PYTHON_FATAL and is_interpreter(f.module):
        return PYTHON_FATAL[short], True
    if short in _SYSTEM_EXIT:
        return _SYSTEM_EXIT[short], False
    if short in _CRT_EXIT:
        return _CRT_EXIT[short], False
    if short in _DISPATCH:
        return _DISPATCH[short] or "", False
    return None, False


def exit_stop(
    crash: Optional[CrashInfo], frames: Sequence[Frame], comment: Optional[str]
) -> Optional[Tuple[str, int, str]]:
    """Where the dump's writer stopped an exit, the exit code it was given, and how that is
    known: (function, exit code, evidence), or None when the dump was not written at an exit.
    The exception is a breakpoint at an exit function's entry (frame 0 named so), or the
    writer's comment says it stopped there (dumpkit capture's dumps say so themselves)."""
    if crash is None or crash.code != STATUS_BREAKPOINT or not frames:
        return None
    regs = dict(crash.registers)
    top = frames[0]
    short = short_name(top)
    how = None
    if short in EXIT_STOPS and top.ip == crash.address:
        how = f"the exception is a breakpoint at the entry of {top.function_name}, where a debugger stops an exit"
    elif comment:
        for key, name in _SYSTEM_EXIT.items():
            if key in EXIT_STOPS and name in comment:
                short, how = key, f"the dump's writer says so in its comment: {_first_line(comment)}"
                break
    if how is None or short is None:
        return None
    arg = EXIT_STOPS[short]
    if arg == 1 and regs.get("rcx", 0) & CURRENT_PROCESS not in (CURRENT_PROCESS, 0):
        return None  # another process's handle: this process did not end itself here
    code = regs.get(_ARGUMENTS[arg])
    if code is None:
        return None
    return _SYSTEM_EXIT[short], code & 0xFFFFFFFF, how


def as_exit_record(crash: CrashInfo, end: Optional[Ending]) -> CrashInfo:
    """The crash record of a dump stopped at an exit, said as what it is: the breakpoint is
    the debugger's own, not an int 3 the program ran into."""
    if end is None or end.stopped_at is None:
        return crash
    code = f" with exit code {end.exit_code}" if end.exit_code is not None else ""
    summary = (
        f"the process was ending itself{code}: the dump's writer stopped it with a breakpoint at "
        f"{end.stopped_at} (as `bp ntdll!RtlExitUserProcess` does), not a crash of its own"
    )
    # no fault: the code at the breakpoint is the exit function's own, not worth showing
    return replace(
        crash,
        summary=summary,
        headline=f"0x80000003 exit breakpoint: {summary}",
        module=None,
        module_version=None,
        disassembly=None,
    )


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 200 else line[:197] + "..."


def ending(crash: Optional[CrashInfo], frames: Sequence[Frame], comment: Optional[str] = None) -> Optional[Ending]:
    """The way the process ended itself, when the dump shows one: stopped at an exit
    (`exit_stop`), or a fail-fast with abort()'s subcode 7. None for every other crash."""
    if crash is None:
        return None
    stop = exit_stop(crash, frames, comment)
    fastfail_abort = crash.code == STATUS_STACK_BUFFER_OVERRUN and crash.fastfail_code == FASTFAIL_FATAL_APP_EXIT
    if stop is None and not fastfail_abort:
        return None
    calls: List[str] = []
    python_fatal: Optional[str] = None
    fatal_module: Optional[str] = None
    last = -1  # the last frame of the way out
    unnamed_run = 0
    for f in frames[:LOOK]:
        word, is_fatal = _word(f)
        if word is not None:
            if word and word not in calls:
                calls.append(word)
            if is_fatal:
                python_fatal = word if python_fatal is None else python_fatal
                fatal_module = f.module
            last = f.index
            unnamed_run = 0
            continue
        # an unnamed frame may still be the way out: the system's and the C runtime's
        # (their images not at hand), or CPython's static fatal_error between abort() and
        # _Py_FatalErrorFunc (at most two in a row: below that is the interpreter's caller)
        if _unnamed_runtime(f):
            continue
        if not f.named:
            if is_interpreter(f.module):
                unnamed_run += 1
                if unnamed_run <= 2:
                    continue
        break
    # the first frame after the way out: past the unnamed system and runtime frames (the
    # way out, without their images), but an unnamed interpreter frame there is the
    # caller itself (os.abort's C function, below abort())
    caller_index = last + 1
    while caller_index < len(frames) and caller_index < LOOK and _unnamed_runtime(frames[caller_index]):
        caller_index += 1
    caller_at: Optional[int] = caller_index if caller_index < len(frames) else None
    caller = frames[caller_at].function_name if caller_at is not None else None
    scanned = caller_at is not None and frames[caller_at].trust == Trust.SCAN
    route = _route(calls, python_fatal, fastfail_abort)
    function, code, how = stop if stop is not None else (None, None, None)
    outermost = tuple(reversed(calls))
    return Ending(
        route=route,
        exit_code=code,
        stopped_at=function,
        stop_evidence=how,
        calls=outermost,
        caller=caller,
        caller_frame=caller_at,
        fatal_module=fatal_module,
        caller_scanned=scanned,
    )


def _unnamed_runtime(f: Frame) -> bool:
    """A frame of the system or the C runtime that no symbol names (its image not at hand)."""
    return not f.named and (f.module or "").lower() in RUNTIME_MODULES  # can still be the way out


def _route(calls: Sequence[str], python_fatal: Optional[str], fastfail_abort: bool) -> EndingRoute:
    """What the program (or a runtime acting for it) called to end, from the way-out
    functions found (innermost first): the outermost one says it."""
    if python_fatal is not None:
        return EndingRoute.FATAL_PYTHON_ERROR
    for word in reversed(calls):
        route = _ROUTE_OF.get(word)
        if route is not None:
            return route
    return EndingRoute.ABORT if fastfail_abort else EndingRoute.UNKNOWN
