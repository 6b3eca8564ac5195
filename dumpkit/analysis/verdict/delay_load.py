"""0xC06D007E / 0xC06D007F: a delay-loaded DLL, or a function in it, was not there at the
first call (analysis/delayload.py reads which from the helper's DelayLoadInfo)."""

from __future__ import annotations

from typing import List, Optional

from dumpkit.analysis.advice import Step
from dumpkit.analysis.codes.model import DELAYLOAD_PROC_NOT_FOUND
from dumpkit.analysis.codes.winerror import win32_name
from dumpkit.analysis.model import Confidence, DelayLoadFailure, VerdictKind
from dumpkit.analysis.verdict import other
from dumpkit.analysis.verdict.case import Case, Decision, conclude

ERROR_MOD_NOT_FOUND, ERROR_BAD_EXE_FORMAT = 126, 193


def decide(case: Case, evidence: List[str], steps: List[Step]) -> Decision:
    crash = case.crash
    assert crash is not None
    failure = crash.delay_load
    if failure is None:  # a record decoded without the target (never from crash_record)
        return other.decide(case, evidence, steps)
    importer = failure.importer or "a module"
    called = _called(failure)
    evidence.extend(_evidence(failure, crash.thread_id))
    if failure.dll is None:
        what = "function" if crash.code == DELAYLOAD_PROC_NOT_FOUND else "DLL"
        by = f" in {failure.caller}" if failure.caller else case.at
        headline = f"A delay-loaded {what} of {importer} could not be loaded{by} ({crash.code_name})"
        own = [NAME_THE_DLL.given(module=importer)] if failure.importer else []
        return conclude(VerdictKind.DELAY_LOAD, headline, Confidence.MEDIUM, evidence, own + steps, crash.thread_id)
    dll = failure.dll
    who = failure.caller or importer
    if crash.code == DELAYLOAD_PROC_NOT_FOUND:
        loaded = f" (loaded from {failure.loaded})" if failure.loaded else ""
        headline = (
            f"{dll}{loaded} has no {'function ' + called if called else 'such function'}, which {who} called "
            f"through {importer}'s delay-load: not the {dll} {importer} was built against"
        )
        own = [OTHER_VERSION.given(dll=dll, module=importer, loaded=failure.loaded or dll)]
    else:
        when = f"when {who} first called {called}" if called else f"at {who}'s first call into it"
        headline = f"{dll}, delay-loaded by {importer}, could not be loaded{_why_not_loaded(failure.last_error)} {when}"
        own = [MAKE_IT_FINDABLE.given(dll=dll, module=importer)]
        if failure.last_error == ERROR_BAD_EXE_FORMAT:
            own = [A_64_BIT_BUILD.given(dll=dll)]
        elif failure.last_error == ERROR_MOD_NOT_FOUND or failure.last_error is None:
            own.append(ITS_DEPENDENCIES.given(dll=dll))
    return conclude(VerdictKind.DELAY_LOAD, headline, Confidence.HIGH, evidence, own + steps, crash.thread_id)


def _called(failure: DelayLoadFailure) -> Optional[str]:
    if failure.function:
        return failure.function
    return f"ordinal {failure.ordinal}" if failure.ordinal is not None else None


def _why_not_loaded(error: Optional[int]) -> str:
    """ " (error 126, ERROR_MOD_NOT_FOUND: ...)" in a headline's words."""
    if error is None:
        return ""
    if error == ERROR_MOD_NOT_FOUND:
        return " (error 126: it, or a DLL it needs, was not found)"
    if error == ERROR_BAD_EXE_FORMAT:
        return " (error 193: not a valid DLL for this process, often a 32-bit build)"
    name = win32_name(error)
    return f" (error {error}{', ' + name if name else ''})"


def _evidence(failure: DelayLoadFailure, thread_id: int) -> List[str]:
    lines: List[str] = []
    if failure.info_address is not None:
        said = [f"DLL {failure.dll!r}" if failure.dll else None, _quoted_call(failure)]
        if failure.last_error is not None:
            name = win32_name(failure.last_error)
            said.append(f"last error {failure.last_error}" + (f" ({name})" if name else ""))
        told = ", ".join(s for s in said if s)
        lines.append(
            f"exception parameter 0 = {failure.info_address:#x}: the delay-load helper's DelayLoadInfo, on thread "
            f"{thread_id}'s stack" + (f": {told}" if told else "")
        )
    if failure.importer:
        lines.append(f"the delay-import table is {failure.importer}'s")
    if failure.caller and failure.slot_address is not None:
        lines.append(
            f"frame {failure.caller_frame}, {failure.caller}, called through the import slot at "
            f"{failure.slot_address:#x} (the frames above it are the delay-load helper)"
        )
    if failure.loaded:
        version = f", version {failure.loaded_version}" if failure.loaded_version else ""
        lines.append(f"{failure.dll or 'the DLL'} was loaded from {failure.loaded}{version}")
    if failure.similar:
        lines.append("loaded under a similar name: " + ", ".join(failure.similar))
    lines.extend(failure.unread)
    return lines


def _quoted_call(failure: DelayLoadFailure) -> Optional[str]:
    return f"function {failure.function!r}" if failure.function else _called(failure)


MAKE_IT_FINDABLE = Step(
    "delay_load.make_it_findable",
    "Install what provides {dll} (the version {module} was built for) where LoadLibrary looks when "
    "{module} first calls into it: python.exe's folder, the system folders, the current folder or a "
    "folder on PATH. Folders given to os.add_dll_directory count for extension modules' import-time "
    "dependencies and ctypes, not for a delay load, unless the process called SetDefaultDllDirectories; "
    "loading {dll} first by its full path (ctypes.WinDLL) also works.",
)
ITS_DEPENDENCIES = Step(
    "delay_load.its_dependencies",
    "If {dll} is there, a DLL it needs is not (the same error 126): list its imports "
    "(`dumpbin /dependents`, or the Dependencies tool) and check each is findable.",
)
A_64_BIT_BUILD = Step(
    "delay_load.a_64_bit_build",
    "The {dll} found is not a 64-bit DLL (or is damaged): replace it with the 64-bit build of the "
    "version expected, and check which folder on PATH supplied it.",
)
OTHER_VERSION = Step(
    "delay_load.other_version",
    "Put the {dll} that {module} was built against first where LoadLibrary looks, or remove the "
    "older one ({loaded}) from PATH; check which package installed each (a CUDA toolkit, a driver, "
    "another wheel's bundled copy).",
)
NAME_THE_DLL = Step(
    "delay_load.name_the_dll",
    "Give dumpkit {module}'s image (--image-path a folder holding the build the process loaded) to "
    "name the DLL and the function: their names are in its delay-import table.",
)
