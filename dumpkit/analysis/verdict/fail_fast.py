"""0xC0000409: the __fastfail subcode, what it means, and who raised it."""

from __future__ import annotations

from typing import Dict, List

from dumpkit.analysis import codes
from dumpkit.analysis.advice import Step
from dumpkit.analysis.model import Confidence, VerdictKind
from dumpkit.analysis.raiser import find_raiser
from dumpkit.analysis.verdict.case import Case, Decision, conclude
from dumpkit.unwind.frames import Trust

# What an unnamed frame 0 of a fail-fast may be: the runtime's own code for the subcode.
_MACHINERY_FOR = {2: "__report_gsfailure", 5: "_invalid_parameter / _invoke_watson", 7: "abort()"}
_SCANNED = (Trust.SCAN, Trust.SCAN_VALIDATED)

# The next steps of a fail-fast, by subcode and by whether frame 0 has a name.
_PDB = "Open the dump in WinDbg or Visual Studio with {module}'s PDB (`kn`) to name {frame} and its callers"
NAME_THE_SMASHED_FUNCTION = Step(
    "fastfail.name_the_smashed_function",
    _PDB + ": the first frame below __report_gsfailure is the function whose local buffer overflowed.",
)
NAME_THE_FAILED_CHECK = Step(
    "fastfail.name_the_failed_check", _PDB + ": the first one outside abort() made the failed check."
)
NAME_THE_RAISER = Step("fastfail.name_the_raiser", _PDB + ".")
WRITES_PAST_AN_ARRAY = Step(
    "fastfail.writes_past_an_array", "Look for writes past a local array in {function} (its /GS cookie was smashed)."
)
CATCH_THE_WRITE = Step(
    "fastfail.catch_the_write", "Rebuild with AddressSanitizer (/fsanitize=address) to catch the write itself."
)
TENSORFLOW_STDERR = Step(
    "fastfail.tensorflow_stderr",
    "Read the process's stderr just before the crash: TensorFlow/absl print the failed CHECK or "
    "LOG(FATAL) message there.",
)
READ_STDERR = Step(
    "fastfail.read_stderr",
    "Read the process's stderr just before the crash: a failed CHECK, assert or std::terminate "
    "usually prints its reason there.",
)
CHECK_ITS_INPUTS = Step(
    "fastfail.check_its_inputs", "The call that aborted is in {function}; check its inputs{inputs}."
)
SEE_WHAT_IT_CHECKS = Step(
    "fastfail.see_what_it_checks", "The fail-fast was raised in {function}; see what it checks before failing."
)
EXPLAIN_THE_SUBCODE = Step(
    "fastfail.explain_the_subcode",
    "`dumpkit explain 0xC0000409/{subcode}` lists what else commonly raises this subcode.",
)


def decide(case: Case, evidence: List[str], steps: List[Step]) -> Decision:
    """Without symbols frame 0 may be the C runtime's abort() / __report_gsfailure linked
    into the module: then say so, name the frame below it as the other candidate, and
    claim no smashed function."""
    crash = case.crash
    assert crash is not None
    frames = case.frames
    name = crash.fastfail_name or "unknown subcode"
    sub = crash.fastfail_code
    ff = codes.lookup_fastfail(sub) if sub is not None else None
    r = find_raiser(frames) if frames else None
    raiser = crash.raised_by or (r.name if r else case.frame0 or "an unknown function")
    # only an unnamed frame with no runtime frame above it can be the static CRT's own code
    unnamed = r is not None and not r.named and r.index == frames[0].index
    if sub == 7:
        what = "abort() was called (a failed CHECK / LOG(FATAL) / std::terminate in native code)"
    elif sub == 2:
        what = "a /GS stack cookie was found overwritten: a real stack buffer overrun"
    elif sub == 5:
        what = "the C runtime's invalid-parameter handler fired"
    else:
        what = ff.summary if ff else "the process ended itself with __fastfail"
    evidence.append(f"parameter[0] = {sub}: {name}")
    symbols: Dict[str, str] = {}  # the fields of a step that asks for the PDB to name frame 0
    if unnamed:
        assert r is not None
        machinery = _MACHINERY_FOR.get(sub, "fail-fast code (abort() / __report_gsfailure)")  # type: ignore[arg-type]
        # a caller found only by scanning may be a stale word on the stack: the evidence
        # names it with how it was found, the headline does not vouch for it
        caller = f", called from {r.caller}" if r.caller and r.caller_trust not in _SCANNED else ""
        headline = (
            f"Fail-fast {name} ({sub}): {what}, raised inside {r.name}{caller}; no symbols: "
            f"{r.name} may be the C runtime's {machinery} itself"
        )
        evidence.append(
            f"frame {r.index} ({r.name}) has no name, so the runtime's {machinery} cannot be told "
            "apart from the code that called it"
            + (
                f"; the next frame outside the system modules is {r.caller} (found by {r.caller_trust})"
                if r.caller
                else ""
            )
        )
        symbols = {"module": r.name.split("+", 1)[0], "frame": r.name}
    else:
        headline = f"Fail-fast {name} ({sub}): {what}, raised by {raiser}"
        evidence.append(f"first frame outside the fail-fast machinery: {raiser}")
    if sub == 2:
        if unnamed:
            evidence.append(
                "the function whose /GS cookie was smashed is the caller of __report_gsfailure; "
                "without symbols it cannot be told which frame that is"
            )
            steps = [NAME_THE_SMASHED_FUNCTION.given(**symbols)]
        else:
            evidence.append(f"the function whose cookie check failed: {raiser}")
            steps = [WRITES_PAST_AN_ARRAY.given(function=raiser)]
        steps.append(CATCH_THE_WRITE)
    elif sub == 7:
        tensorflow = bool(case.environment.tensorflow)
        steps = [TENSORFLOW_STDERR if tensorflow else READ_STDERR]
        inputs = " (shapes, dtypes, device placement)" if tensorflow else ""
        steps.append(
            NAME_THE_FAILED_CHECK.given(**symbols)
            if unnamed
            else CHECK_ITS_INPUTS.given(function=raiser, inputs=inputs)
        )
    else:
        steps = [NAME_THE_RAISER.given(**symbols) if unnamed else SEE_WHAT_IT_CHECKS.given(function=raiser)]
    if sub is not None:
        steps.append(EXPLAIN_THE_SUBCODE.given(subcode=str(sub)))
    confidence = Confidence.HIGH if frames and not unnamed else Confidence.MEDIUM
    # subcode 7 is abort(): the same verdict as an abort() that ends with exit code 3 (verdict/ended.py)
    kind = VerdictKind.ABORT if sub == 7 else VerdictKind.FASTFAIL
    return conclude(kind, headline, confidence, evidence, steps, crash.thread_id)
