"""Every other exception: invalid parameter (0xC000000D), fatal app exit, and the rest."""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from dumpkit.analysis.advice import Step, system_images
from dumpkit.analysis.codes.model import STATUS_BREAKPOINT
from dumpkit.analysis.model import Confidence, CrashInfo, VerdictKind
from dumpkit.analysis.raiser import Raiser, find_raiser, is_runtime_frame
from dumpkit.analysis.verdict.case import (
    FATAL_APP_EXIT,
    INVALID_PARAMETER,
    Case,
    Decision,
    ReadCode,
    conclude,
    instruction,
)
from dumpkit.unwind.frames import Frame

# The C runtime's invalid-parameter path: above the CRT function that got the bad argument.
_INVALID_PARAMETER_PATH = frozenset(
    {
        "invalid_parameter",
        "invalid_parameter_noinfo",
        "invalid_parameter_noinfo_noreturn",
        "invoke_watson",
        "call_reportfault",
        "crt_fast_fail",
        "fastfail",
    }
)


def decide(case: Case, evidence: List[str], steps: List[Step]) -> Decision:
    crash = case.crash
    assert crash is not None
    at = case.at
    if crash.code == 0:
        return _made_up_record(case, evidence)
    # where, before what the code means: "0x4000001F STATUS_WX86_BREAKPOINT in m.dll!f: ..."
    code_text, sep, meaning = crash.headline.partition(": ")
    headline = f"{code_text}{at}{sep}{meaning}" if sep else f"{crash.headline}{at}"
    if crash.code == INVALID_PARAMETER:
        steps, built = _invalid_parameter(case, evidence)
        if built and case.frame0:
            headline = (
                f"Invalid parameter (0xC000000D), recorded in software by frame 0, {case.frame0}: typically "
                "a crash reporter's handler for a C runtime function given a bad argument"
            )
    elif crash.code == FATAL_APP_EXIT and crash.raised_by:
        steps.append(CHECK_THE_CALLER.given(function=crash.raised_by))
    elif crash.code == STATUS_BREAKPOINT:
        steps[:0] = _nameless_stop(case)
    if not steps:
        steps = [START_AT_FRAME_0.given(at=at)]
    return conclude(VerdictKind.EXCEPTION, headline, Confidence.MEDIUM, evidence, steps, crash.thread_id)


# The system DLLs whose exit functions a debugger stops at (analysis/ending.py's EXIT_STOPS)
_EXIT_DLLS = frozenset({"ntdll.dll", "kernel32.dll", "kernelbase.dll"})


def _nameless_stop(case: Case) -> List[Step]:
    """A breakpoint exactly at frame 0 in a system DLL whose image is not here: most often a
    debugger's own stop, at an exit (procdump -t, bp ntdll!RtlExitUserProcess), which
    ending.exit_stop reads once the function has its name."""
    crash, top = case.crash, case.frames[0] if case.frames else None
    if crash is None or top is None or top.named or top.ip != crash.address:
        return []
    dll = top.module or ""
    if dll.lower() not in _EXIT_DLLS:
        return []
    return [NAME_THE_STOP.given(dll=dll, how=system_images(bool(case.environment.wine)))]


# The next steps of the other exceptions.
NAME_THE_STOP = Step(
    "breakpoint.name_the_stop",
    "Frame 0 is in {dll}, whose image is not here: a breakpoint there is most often a debugger's own stop, at "
    "the process's exit (procdump -t, a breakpoint on ntdll!RtlExitUserProcess or NtTerminateProcess) or as "
    "it attached. Give dumpkit {dll}'s image to name the function and, at an exit, the exit code: {how}.",
)
CHECK_THE_CALLER = Step(
    "fatal_app_exit.check_the_caller", "The call that aborted is in {function}; check what it was checking."
)
START_AT_FRAME_0 = Step(
    "exception.start_at_frame_0",
    "Start at frame 0{at}: read the code around the faulting instruction and what its caller passed in.",
)
WHAT_EACH_WAS_DOING = Step(
    "no_exception.what_each_was_doing",
    "Read the threads' stacks for what each was doing when the dump was written{where}; if a crash was "
    "expected, the program's own log or crash reporter may hold the real exception code.",
)
CHECK_THE_ARGUMENT = Step(
    "invalid_parameter.check_the_argument",
    "Check what {caller} passed to {crt}: a NULL pointer, a closed or invalid file "
    "descriptor, a buffer size too small, a bad format string.",
)
FIND_THE_CRT_CALL = Step(
    "invalid_parameter.find_the_crt_call",
    "Find the C runtime call that rejected its argument: {why}; open the dump in WinDbg or Visual Studio "
    "with the modules' PDBs (`kp`) and look for the CRT function below the invalid-parameter handler and "
    "the code that called it.",
)
DEBUG_C_RUNTIME = Step(
    "invalid_parameter.debug_c_runtime",
    "Run it under a debugger with the debug C runtime (/MDd, ucrtbased.dll): its invalid-parameter "
    "handler receives the failed expression, function, file and line (the release CRT passes "
    "NULLs); or install a handler with _set_invalid_parameter_handler that logs them.",
)


def _made_up_record(case: Case, evidence: List[str]) -> Decision:
    """An exception record with code 0: STATUS_SUCCESS is an exit code, which nothing
    raises, so whoever wrote the dump filled the record in itself (a snapshot taken on
    request, a reporter's own record). Not a crash: the stacks say what was going on."""
    assert case.crash is not None
    headline = (
        "No crash recorded: the exception record carries code 0 (STATUS_SUCCESS), which no exception raises, "
        "so the dump's writer made the record up (a snapshot on request, or a crash reporter's own record)"
    )
    where = f" (frame 0 of thread {case.crash.thread_id}: {case.frame0})" if case.frame0 else ""
    steps = [WHAT_EACH_WAS_DOING.given(where=where)]
    return conclude(VerdictKind.NO_EXCEPTION, headline, Confidence.MEDIUM, evidence, steps, case.crash.thread_id)


def _crt_call(frames: Sequence[Frame], raiser: Raiser) -> Optional[str]:
    """The C runtime function the raiser called (the runtime frame just above it that is
    not the invalid-parameter path itself), when the stack shows one."""
    if not raiser.outside_machinery:
        return None
    above = [f for f in frames[: raiser.index] if is_runtime_frame(f)]
    for f in reversed(above):  # nearest to the raiser first
        short = f.function_name.split("!", 1)[-1].lstrip("_")
        if short not in _INVALID_PARAMETER_PATH:
            return f.function_name
    return None


def _stores_the_code(
    read_code: Optional[ReadCode], crash: CrashInfo, frames: Sequence[Frame], bits: int
) -> Optional[str]:
    """Frame 0's instruction when it writes the exception code itself (`mov [mem], code`):
    the exception record was built by code, not raised by the CPU or the CRT."""
    if not frames:
        return None
    ins = instruction(read_code, frames[0].ip, bits)
    if not ins or not ins.startswith("mov") or "[" not in ins.split(",", 1)[0]:
        return None
    imm = ins.rsplit(",", 1)[-1].strip()
    try:
        value = int(imm, 0) & 0xFFFFFFFF
    except ValueError:
        return None
    return ins if value == crash.code else None


def _invalid_parameter(case: Case, evidence: List[str]) -> Tuple[List[Step], bool]:
    """0xC000000D: which C runtime call rejected its argument, and how to see the handler's
    arguments. Evidence lines are appended; returns the next steps, and whether frame 0
    built the exception record itself."""
    assert case.crash is not None
    frames = case.frames
    raiser = find_raiser(frames) if frames else None
    built = _stores_the_code(case.read_code, case.crash, frames, case.bits)
    if built is not None:
        evidence.append(
            f"frame 0 writes the code itself (`{built}`): the exception record was built in software, "
            "typically by a crash reporter's invalid-parameter handler (installed with "
            "_set_invalid_parameter_handler) that then wrote this dump"
        )
    steps: List[Step] = []
    crt = _crt_call(frames, raiser) if raiser is not None else None
    if crt is not None:
        assert raiser is not None
        evidence.append(f"the C runtime call that rejected its argument: {crt}, called from {raiser.name}")
        steps.append(CHECK_THE_ARGUMENT.given(caller=raiser.name, crt=crt))
    else:
        named = raiser is not None and raiser.named
        steps.append(FIND_THE_CRT_CALL.given(why="the stack does not show it" if named else "the frames have no names"))
    steps.append(DEBUG_C_RUNTIME)
    return steps, built is not None
