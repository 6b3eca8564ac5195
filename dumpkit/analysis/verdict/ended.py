"""A process that ended itself: a Fatal Python error, abort() (with the reason its runtime
printed, when the dump holds it), or another exit a debugger stopped (analysis/ending.py).

One verdict whichever way the ending reached the dump: on Windows abort() fail-fasts
(0xC0000409, subcode 7) and a debugger sees an exception; under Wine, or for raise(SIGABRT),
_exit(3) and Intel OpenMP's fatal errors, the process calls ntdll's exit path and only a
debugger stopped there (dumpkit capture, `bp ntdll!RtlExitUserProcess`) writes a dump. The
headline names what ended it and why; how Windows carried it out is evidence."""

from __future__ import annotations

from typing import List, Optional

from dumpkit.analysis.advice import Step
from dumpkit.analysis.ending import LOOK
from dumpkit.analysis.model import Confidence, Ending, EndingRoute, VerdictKind
from dumpkit.analysis.moduleroles import is_ctypes_machinery
from dumpkit.analysis.pyentry import is_interpreter
from dumpkit.analysis.verdict.case import Case, Decision, conclude
from dumpkit.unwind.frames import SCANNED, Trust

# The next steps, by what ended the process.
FIX_THE_GIL = Step(
    "ended.fix_the_gil",
    "Find the C-API call made without the GIL: the frames below the fatal-error path name it ({caller}); "
    "a function called through ctypes.CDLL runs without the GIL, so a Python C-API function must go through "
    "ctypes.pythonapi or ctypes.PyDLL, and an extension's own thread needs PyGILState_Ensure first.",
)
READ_THE_FATAL_ERROR = Step(
    "ended.read_the_fatal_error",
    "The interpreter gave up in {caller}: its message says which invariant broke; the Python stack of the "
    "thread (in this report when the dump holds it, else rerun with faulthandler) says which Python line led there.",
)
FIND_THE_MESSAGE = Step(
    "ended.find_the_message",
    "The message was printed to stderr just before the end: find that output (a Jupyter kernel's log, a "
    "service's stderr), or give dumpkit {module}'s image so it can read the message's string.",
)
STOP_THE_RECURSION = Step(
    "ended.stop_the_recursion",
    "Do not recurse again while handling RecursionError: let it propagate, or catch it above the recursion.",
)
FIX_THE_INSTALLATION = Step(
    "ended.fix_the_installation",
    "Check PYTHONHOME and PYTHONPATH (unset them), the ._pth file beside python.exe, and that the "
    "installation's Lib folder or python3X.zip is complete.",
)
ONE_OPENMP = Step(
    "ended.one_openmp",
    "Load one OpenMP runtime: install the packages from one source (all conda, or all pip wheels), or import "
    "the one whose runtime the others can share first; KMP_DUPLICATE_LIB_OK=TRUE only silences the check and "
    "may give wrong results or crash.",
)
READ_THE_CHECK = Step(
    "ended.read_the_check",
    "{caller} checked a condition that was false: its message says which; check the inputs that reached it "
    "(shapes, dtypes, device placement for a TensorFlow op).",
)
READ_THE_ASSERTION = Step(
    "ended.read_the_assertion",
    "An assert() in {caller} failed: the expression says what it expected; check what was passed to it.",
)
CATCH_THE_EXCEPTION = Step(
    "ended.catch_the_exception",
    "A C++ exception thrown in {caller} reached a function that may not throw (noexcept, a destructor, a "
    "thread's entry) or no handler at all: catch it in the frames below the throw, or let it reach a catch.",
)
FIND_WHO_ENDED = Step(
    "ended.find_who_ended",
    "The process ended itself in {caller}: read the code there for the condition that makes it {call}; "
    "its stderr just before the end usually says why.",
)
NORMAL_EXIT = Step(
    "ended.normal_exit",
    "Nothing crashed: the program returned or called exit({code}) itself (sys.exit({code}) in Python). "
    "Look at its output for why it chose that code; `dumpkit capture --on-exit abnormal` (the default) "
    "dumps only exits that are not.",
)
CONFIRM_THE_CALLER = Step(
    "ended.confirm_the_caller",
    "Give dumpkit the images of {modules} (--image-path, or --fetch-images where they are published) so "
    "the walk can go through them and confirm who called {call}; the program's stderr just before the end "
    "usually says why it ended.",
)
NAME_THE_EXIT = Step(
    "ended.name_the_exit",
    "Give dumpkit the images of ntdll.dll, kernel32.dll and the C runtime (--image-path, or Microsoft's "
    "symbol server with --symbol-path srv*https://msdl.microsoft.com/download/symbols) to name the way out.",
)

_CALLS = {
    EndingRoute.ABORT: "abort()",
    EndingRoute.TERMINATE: "std::terminate()",
    EndingRoute.ASSERT: "assert()",
    EndingRoute.SIGNAL: "raise()",
    EndingRoute.QUICK_EXIT: "_exit()",
    EndingRoute.EXIT: "exit()",
    EndingRoute.EXIT_PROCESS: "ExitProcess()",
    EndingRoute.TERMINATE_PROCESS: "TerminateProcess() on itself",
}


def how_it_ended(end: Ending, case: Case) -> str:
    """How Windows carried the ending out, for the headline: "with exit code 3" or "with a
    fail-fast (0xC0000409, subcode 7)"."""
    if end.exit_code is not None:
        code = end.exit_code
        return f"with exit code {code}" if code < 0x10000 else f"with exit code {code:#010x}"
    crash = case.crash
    sub = crash.fastfail_code if crash is not None else None
    return f"with a fail-fast (0xC0000409, subcode {sub})"


def decide(case: Case, evidence: List[str], steps: List[Step]) -> Decision:
    end = case.ending
    crash = case.crash
    assert end is not None and crash is not None
    reason = end.reason
    confirmed = end.caller is not None and not end.caller_scanned
    caller = _caller_words(case, end)
    # a ctypes call straight into the way out (TerminateProcess through ctypes.windll): the
    # caller is libffi's, and how Python got there is said after the headline
    called_by = f" called by {caller}" if not _ctypes_frame(case, end.caller_frame) else ""
    if end.stop_evidence:
        evidence.append(f"stopped at {end.stopped_at}: {end.stop_evidence}")
    if end.exit_code is not None:
        evidence.append(f"exit code {end.exit_code} ({end.exit_code:#x}), the first argument of {end.stopped_at}")
    if end.calls:
        evidence.append("the way out, outermost first: " + " -> ".join(end.calls))
    if end.caller is not None:
        evidence.append(f"called by frame {end.caller_frame}, {end.caller}" + _trust_note(case, end.caller_frame))
    if reason is not None:
        evidence.append(f"where the reason comes from: {reason.source}")
    route = end.route
    confidence = Confidence.HIGH
    if route is EndingRoute.FATAL_PYTHON_ERROR:
        kind = VerdictKind.FATAL_PYTHON_ERROR
        if reason is not None:
            headline = reason.text.rstrip(".")
        else:
            headline = f"Fatal Python error in {end.fatal_module} (its message could not be read from the dump)"
            confidence = Confidence.MEDIUM
        steps = _python_steps(end, caller)
        evidence.append(f"the process then ended {how_it_ended(end, case)}")
    elif route is EndingRoute.TERMINATE and "a C++ throw" in end.calls:
        # the runtime called std::terminate while the exception left a function that may not throw
        kind = VerdictKind.ABORT
        what = reason.text.rstrip(".") if reason is not None else "a C++ exception nothing caught"
        headline = (
            f"The process ended itself {how_it_ended(end, case)}, from std::terminate(): {what}, thrown in {caller}"
        )
        steps = _abort_steps(end, caller, _CALLS[route]) if confirmed else _confirm_steps(case, _CALLS[route])
    elif route in (EndingRoute.ABORT, EndingRoute.TERMINATE, EndingRoute.ASSERT, EndingRoute.SIGNAL):
        kind = VerdictKind.ABORT
        call = _CALLS[route]
        headline = f"The process ended itself {how_it_ended(end, case)}, from {call}{called_by}"
        if reason is not None:
            headline += f": {reason.text.rstrip('.')}"
        steps = _abort_steps(end, caller, call) if confirmed else _confirm_steps(case, call)
    elif route is EndingRoute.EXIT:
        kind = VerdictKind.PROCESS_EXIT
        code = end.exit_code if end.exit_code is not None else 0
        headline = (
            f"No crash: the program exited {how_it_ended(end, case)} through the C runtime's exit(), called by {caller}"
        )
        steps = [NORMAL_EXIT.given(code=str(code))]
    elif route is EndingRoute.UNKNOWN:
        kind = VerdictKind.PROCESS_EXIT
        by = f", called by {caller}" if end.caller else ""
        likely = (
            " (exit code 3 is what abort(), raise(SIGABRT) and runtimes' fatal errors end with)"
            if end.exit_code == 3
            else ""
        )
        headline = (
            f"The process ended itself {how_it_ended(end, case)} at {end.stopped_at}{by}{likely}; the system's and "
            "the C runtime's frames have no names, so which way out it took is not known"
        )
        steps = [NAME_THE_EXIT]
        confidence = Confidence.MEDIUM
    else:
        kind = VerdictKind.PROCESS_EXIT
        call = _CALLS[route]
        headline = f"The process ended itself {how_it_ended(end, case)}, from {call}{called_by}"
        if reason is not None:
            headline += f": {reason.text.rstrip('.')}"
        steps = [FIND_WHO_ENDED.given(caller=caller, call=call)] if confirmed else _confirm_steps(case, call)
    if not confirmed or _scanned(case, end.caller_frame):
        confidence = Confidence.MEDIUM
    return conclude(kind, headline, confidence, evidence, steps, crash.thread_id)


def _python_steps(end: Ending, caller: str) -> List[Step]:
    reason = end.reason
    if reason is None:
        return [FIND_THE_MESSAGE.given(module=end.fatal_module or "python3X.dll")]
    text = reason.text
    meaning = reason.meaning or ""
    if "GIL" in meaning:
        return [FIX_THE_GIL.given(caller=caller)]
    if "RecursionError" in meaning:
        return [STOP_THE_RECURSION]
    if "standard library" in meaning:
        return [FIX_THE_INSTALLATION]
    return [READ_THE_FATAL_ERROR.given(caller=reason.function or caller or text)]


def _abort_steps(end: Ending, caller: str, call: str) -> List[Step]:
    reason = end.reason
    kind = reason.kind.value if reason is not None else None
    if reason is not None and kind == "openmp":
        return [ONE_OPENMP]
    if kind in ("check_failed", "log_fatal"):
        return [READ_THE_CHECK.given(caller=caller)]
    if kind == "assertion" or end.route is EndingRoute.ASSERT:
        return [READ_THE_ASSERTION.given(caller=caller)]
    if kind == "cxx_exception" or end.route is EndingRoute.TERMINATE:
        return [CATCH_THE_EXCEPTION.given(caller=caller)]
    return [FIND_WHO_ENDED.given(caller=caller, call=call)]


def _caller_words(case: Case, end: Ending) -> str:
    """The caller as the headline names it: its name when the walk confirmed it; a scanned
    word said to be unconfirmed; where the walk stopped when it never got past the way out."""
    if end.caller is not None and not end.caller_scanned:
        return end.caller + python_call(end.caller)
    if end.caller is not None:
        return f"{end.caller} (unconfirmed: a word found by stack scanning)"
    frames = case.frames
    stop = f" (it stops at {frames[-1].function_name})" if frames else ""
    return f"a frame the walk could not reach{stop}"


# C modules of the interpreter whose functions Python code calls through another module's
# name: on Windows `os` is `nt`'s functions, `signal` re-exports `_signal`'s
_CALLED_AS = {"nt": "os", "_signal": "signal"}


def python_call(caller: str) -> str:
    """' (os.abort() in Python)' for an interpreter function CPython's tables named
    `python312.dll!nt.abort`: the call the Python code made; '' for any other caller."""
    module, _, name = caller.partition("!")
    owner, dot, function = name.partition(".")
    if not is_interpreter(module) or not dot or owner not in _CALLED_AS or not function.isidentifier():
        return ""
    return f" ({_CALLED_AS[owner]}.{function}() in Python)"


def _confirm_steps(case: Case, call: str) -> List[Step]:
    """What confirms an unconfirmed caller: the images of the modules whose frames the walk
    could not go through (unnamed ones, near the top)."""
    modules: List[str] = []
    for f in case.frames[:LOOK]:
        unnamed = "!" not in f.function_name
        if unnamed and f.module and f.module not in modules:
            modules.append(f.module)
    names = ", ".join(modules[:3]) if modules else "the modules on the crashing thread"
    return [CONFIRM_THE_CALLER.given(modules=names, call=call)]


def _ctypes_frame(case: Case, index: Optional[int]) -> bool:
    frames = case.frames
    return index is not None and index < len(frames) and is_ctypes_machinery(frames[index].module)


def _scanned(case: Case, index: Optional[int]) -> bool:
    frames = case.frames
    return index is not None and index < len(frames) and frames[index].trust in SCANNED


def _trust_note(case: Case, index: Optional[int]) -> str:
    if not _scanned(case, index):
        return ""
    assert index is not None
    if case.frames[index].trust == Trust.SCAN:
        return " (found by stack scanning, unconfirmed: its module's code was not at hand to show a call before it)"
    return " (found by stack scanning, right after a call instruction)"
