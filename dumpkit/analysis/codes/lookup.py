"""Name and meaning of an NTSTATUS / exception code or of a fail-fast subcode.

The hand-written notes (notes.py) answer first; a code they do not cover is named from the
table generated from the SDK headers (table.py, read at the first such lookup); a code no
header defines gets a summary derived from its severity, customer and facility bits.
"""

from __future__ import annotations

from typing import Dict, Sequence, Tuple

from dumpkit.analysis.advice import Step
from dumpkit.analysis.codes.model import MASK32, MASK64, CodeInfo, FastFailInfo
from dumpkit.analysis.codes.notes import BEFORE_A_DUMP, FAST_FAIL_ROWS, STATUS_ROWS
from dumpkit.analysis.codes.table import code_table

__all__ = [
    "FAST_FAIL",
    "FAST_FAIL_BY_NAME",
    "STATUS_CODES",
    "fastfail_name",
    "lookup_fastfail",
    "lookup_status",
    "steps_given_a_dump",
]

# The codes with notes, by value and (fail-fast) by name.
STATUS_CODES: Dict[int, CodeInfo] = {info.code: info for info in STATUS_ROWS}
FAST_FAIL: Dict[int, FastFailInfo] = {
    n: FastFailInfo(n, "FAST_FAIL_" + short, summary, raiser) for n, short, summary, raiser in FAST_FAIL_ROWS
}
FAST_FAIL_BY_NAME: Dict[str, int] = {info.name: n for n, info in FAST_FAIL.items()}


# --------------------------------------------------------------------------------------
# Fail-fast subcodes
# --------------------------------------------------------------------------------------


def lookup_fastfail(subcode: int) -> FastFailInfo:
    """The meaning of a `__fastfail` subcode. Subcodes no header defines come back named
    FAST_FAIL_0x<hex> with `known=False`."""
    subcode &= MASK64
    info = FAST_FAIL.get(subcode)
    if info is not None:
        return info
    name = code_table().fast_fail_names.get(subcode)
    if name is not None:
        return FastFailInfo(
            subcode, name, "a fail-fast subcode defined in the Windows SDK headers; dumpkit has no notes on it"
        )
    return FastFailInfo(
        subcode,
        f"FAST_FAIL_0x{subcode:X}",
        "a fail-fast subcode not defined in the Windows SDK headers dumpkit knows "
        "(a newer Windows, or a program passing its own value to __fastfail)",
        None,
        known=False,
    )


def fastfail_name(subcode: int) -> str:
    return lookup_fastfail(subcode).name


# --------------------------------------------------------------------------------------
# NTSTATUS / exception codes
# --------------------------------------------------------------------------------------


def steps_given_a_dump(steps: Sequence[Step]) -> Tuple[Step, ...]:
    """The table's next steps that still make sense in a verdict built from a dump: the
    ones about capturing a dump or running `dumpkit analyze` are dropped (the reader has
    done both; `dumpkit explain` keeps them)."""
    return tuple(s for s in steps if s.id not in BEFORE_A_DUMP)


_FACILITIES: Dict[int, str] = {
    0x0: "none",
    0x1: "debugger",
    0x2: "RPC runtime",
    0x3: "RPC stubs",
    0x4: "I/O error",
    0x7: "Win32 (wraps a Win32 error code)",
    0x8: "certificates",
    0x9: "SSPI",
    0xA: "terminal server",
}
_SEVERITIES = ("success", "informational", "warning", "error")


def _derived_info(code: int) -> CodeInfo:
    severity = _SEVERITIES[code >> 30]
    customer = bool(code & 0x20000000)
    n_bit = bool(code & 0x10000000)
    facility = (code >> 16) & 0xFFF
    low = code & 0xFFFF
    if code < 0x100:  # an exit code, not a status: its bits mean nothing
        parts = ["an ordinary exit code: values this small are what a program passed to exit(), not crash codes"]
    else:
        parts = [f"unrecognised {severity} status"]
    if customer:
        parts.append("customer-defined (not a Windows code: raised by a program or runtime with RaiseException)")
    fac_name = _FACILITIES.get(facility)
    if code < 0x100:
        pass
    elif facility == 0x7 and not customer:
        parts.append(f"facility Win32: Win32 error {low}")
    elif fac_name and facility:
        parts.append(f"facility 0x{facility:X} ({fac_name}), code 0x{low:04X}")
    else:
        parts.append(f"facility 0x{facility:X}, code 0x{low:04X}")
    if n_bit:
        parts.append("reserved N bit set: possibly an HRESULT stored in an NTSTATUS")
    causes: Tuple[str, ...] = ()
    if code < 0x100:
        plain = {
            1: "exit code 1: Python ends with 1 after an unhandled Python exception (the traceback is on stderr)",
            2: "exit code 2: a command-line usage error (argparse, or python could not open the script)",
        }
        causes = (
            EXIT_3_CAUSES
            if code == 3
            else (plain[code],)
            if code in plain
            else (f"exit code {code}: passed to sys.exit() / exit() by the program",)
        )
    steps = EXIT_3_STEPS if code == 3 else (_SEARCH,)
    return CodeInfo(code, f"0x{code:08X}", "; ".join(parts), causes, steps, known=False)


_SEARCH = Step("derived.search", "Search the program's own documentation or source for this value")
# Exit code 3 is the C runtime's code for an abnormal end, and in numerical Python on
# Windows most often Intel OpenMP's: no crash, no dump unless a debugger stops the exit.
EXIT_3_CAUSES = (
    "Intel OpenMP's 'OMP: Error #15: Initializing libiomp5md.dll, but found libiomp5md.dll already "
    "initialized.': two packages each bring their own copy of the OpenMP runtime (an MKL build of NumPy or "
    "SciPy beside PyTorch, ctranslate2, intel-openmp...), and the second copy to start ends the process "
    "through raise(SIGABRT) and _exit(3)",
    "abort() where it does not fail-fast: with a SIGABRT handler installed (python -X faulthandler), "
    "raise(SIGABRT) with the default action, and every abort() under Wine; a Fatal Python error "
    "('Fatal Python error: ...' on stderr) then ends with 3 too",
    "An explicit exit(3), sys.exit(3) or os._exit(3)",
)
EXIT_3_STEPS = (
    Step(
        "exit3.read_stderr",
        "Read the last lines of stderr: 'OMP: Error #15' names the duplicate OpenMP runtime (load one copy; "
        "KMP_DUPLICATE_LIB_OK=TRUE only silences the check and may give wrong results or crash), 'Fatal "
        "Python error' or 'Check failed' say what gave up",
    ),
    Step(
        "exit3.capture",
        "No dump is written for an exit: run it as `dumpkit capture -- python script.py` (Windows), which "
        "stops an exit with code 3 at ntdll!RtlExitUserProcess and writes one; `dumpkit analyze` then names "
        "what ended it, the reason it printed, and the runtime DLLs loaded twice",
    ),
)


def _header_only_info(code: int, name: str) -> CodeInfo:
    """A code Windows names (its SDK headers, or the ntstatus package where they lack it)
    but the notes do not describe."""
    severity = _SEVERITIES[code >> 30]
    article = "an" if severity[0] in "aeiou" else "a"
    return CodeInfo(
        code,
        name,
        f"{article} {severity} status Windows defines (facility 0x{(code >> 16) & 0xFFF:X}, "
        f"code 0x{code & 0xFFFF:04X}); dumpkit has no notes on what causes it",
        (),
        (Step("named.search", "Search for the name together with the program or library that ended with it"),),
    )


def lookup_status(code: int) -> CodeInfo:
    """Name and meaning of an NTSTATUS / exception code (any int; taken modulo 2**32 so
    negative exit codes work). Codes the SDK headers name but dumpkit has no notes on keep
    their name with a generic summary; codes no header names get the name 0x%08X and a
    summary derived from the severity, customer and facility bits, with `known=False`.
    Success-severity values stay derived even when a header names them: as exit codes
    they are what a program passed to exit() (1 is not STATUS_WAIT_1, 258 not
    STATUS_TIMEOUT)."""
    code &= MASK32
    info = STATUS_CODES.get(code)
    if info is not None:
        return info
    name = code_table().status_names.get(code) if code >= 0x40000000 else None
    return _header_only_info(code, name) if name is not None else _derived_info(code)
