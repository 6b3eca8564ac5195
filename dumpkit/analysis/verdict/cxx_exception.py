"""0xE06D7363: an MSVC C++ exception nobody caught."""

from __future__ import annotations

from typing import List, Optional, Sequence

from dumpkit.analysis.advice import Step
from dumpkit.analysis.model import Confidence, VerdictKind
from dumpkit.analysis.verdict.case import Case, Decision, conclude

# Where the throw machinery lives: the thrower is the first frame outside these.
_THROW_MODULES = ("kernelbase.dll", "vcruntime140.dll", "ntdll.dll")


def decide(case: Case, evidence: List[str], steps: List[Step]) -> Decision:
    crash = case.crash
    assert crash is not None
    raiser = next(
        (
            f.function_name
            for f in case.frames
            if (f.module or "").lower() not in _THROW_MODULES and "CxxThrowException" not in f.function_name
        ),
        None,
    )
    module = crash.cxx_throw_info.split("+", 1)[0] if crash.cxx_throw_info else None
    if crash.cxx_types:
        what = crash.cxx_types[0]
    elif module is not None:
        what = f"of a type {module} defines"
    else:
        what = "of a type the dump does not show"
    headline = f"Unhandled C++ exception {what}" + (f" thrown from {raiser}" if raiser else case.at)
    if crash.cxx_types:
        evidence.append("catchable as: " + ", ".join(crash.cxx_types))
    elif module is not None:
        evidence.append(
            f"the thrown type's ThrowInfo lies at {crash.cxx_throw_info} (exception parameter 2), in neither "
            f"the dump's memory nor an image of {module} found here: the type's name is in that image's data"
        )
    steps = _cxx_steps(crash.cxx_types, raiser) + steps
    if not crash.cxx_types and module is not None:
        steps.insert(0, NAME_THE_TYPE.given(module=module))
    confidence = Confidence.HIGH if crash.cxx_types else Confidence.MEDIUM
    return conclude(VerdictKind.CXX_EXCEPTION, headline, confidence, evidence, steps, crash.thread_id)


WHERE_TO_CATCH = Step(
    "cxx_exception.where_to_catch",
    "Find why {thrower} throws {what} and where it should have been caught: a C++ exception "
    'must not leave a function called from C or Python (a callback, a thread entry, an extern "C" or '
    "CPython entry point); catch it there and turn it into an error (pybind11 translates the std:: types "
    "into Python exceptions).",
)
ALLOCATION_FAILED = Step(
    "cxx_exception.allocation_failed",
    "std::bad_alloc means an allocation failed: check the process's commit size and the size "
    "that was asked for (a negative or huge size computed from bad input is common).",
)
NAME_THE_TYPE = Step(
    "cxx_exception.name_the_type",
    "Give dumpkit {module}'s image (--image-path a folder holding the build the process loaded, or "
    "--symbol-path with Microsoft's symbol server for Microsoft's runtime DLLs) to name the thrown type: "
    "its ThrowInfo and type descriptor are in that image.",
)
BREAK_ON_THE_THROW = Step(
    "cxx_exception.break_on_the_throw",
    "To stop at the throw itself, run it under WinDbg with `sxe eh` (break on every C++ exception).",
)


def _cxx_steps(types: Sequence[str], raiser: Optional[str]) -> List[Step]:
    """Next steps for an unhandled C++ exception: where it should have been caught, and
    how to stop at the throw."""
    steps = [WHERE_TO_CATCH.given(thrower=raiser or "the code", what=types[0] if types else "the exception")]
    if "std::bad_alloc" in types:
        steps.append(ALLOCATION_FAILED)
    steps.append(BREAK_ON_THE_THROW)
    return steps
