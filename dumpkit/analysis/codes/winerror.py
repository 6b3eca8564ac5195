"""Win32 errors (GetLastError values) and HRESULTs, named from winerror.h (winerror.tsv).

An HRESULT is a 32-bit result: bit 31 failure, bits 16-26 the facility, bits 0-15 the
code. FACILITY_WIN32 (7) wraps a Win32 error (HRESULT_FROM_WIN32: 5 -> 0x80070005), and
the N bit (28) marks an NTSTATUS carried as an HRESULT (HRESULT_FROM_NT). A number is read
as an HRESULT only when no NTSTATUS has its value: exception and exit codes come first.
"""

from __future__ import annotations

from typing import Optional

from dumpkit.analysis.advice import Step
from dumpkit.analysis.codes.model import MASK32, CodeInfo
from dumpkit.analysis.codes.notes import WIN32_NOTES
from dumpkit.analysis.codes.table import code_table, error_table

FACILITY_WIN32 = 7
FACILITY_NT_BIT = 0x10000000
_WIN32_PREFIX = 0x80070000  # failure + FACILITY_WIN32


def hresult_from_win32(error: int) -> int:
    return error & MASK32 if error <= 0 else (error & 0xFFFF) | _WIN32_PREFIX


def win32_of(hresult: int) -> Optional[int]:
    """The Win32 error a FACILITY_WIN32 failure HRESULT wraps, else None."""
    return hresult & 0xFFFF if hresult & 0xFFFF0000 == _WIN32_PREFIX else None


def win32_name(error: int) -> Optional[str]:
    return error_table().win32_names.get(error)


def reads_as_hresult(code: int) -> bool:
    """A failure value no NTSTATUS names, that winerror.h names or that wraps a Win32 error."""
    code &= MASK32
    if not code & 0x80000000 or code in code_table().status_names:
        return False
    return code in error_table().hresult_names or win32_of(code) is not None


def _win32_words(error: int) -> str:
    name = win32_name(error)
    return f"Win32 error {error}" + (f" {name}" if name else " (not named in winerror.h)")


def describe_hresult(code: int) -> CodeInfo:
    """An HRESULT: its name (or HRESULT_FROM_WIN32(ERROR_...)), facility and what it wraps."""
    code &= MASK32
    name = error_table().hresult_names.get(code)
    wrapped = win32_of(code)
    facility = (code >> 16) & 0x7FF
    if wrapped is not None:
        inner = win32_name(wrapped)
        name = name or (f"HRESULT_FROM_WIN32({inner})" if inner else None)
        detail = f"facility Win32 ({FACILITY_WIN32}): it wraps {_win32_words(wrapped)}"
    elif code & FACILITY_NT_BIT and (code & ~FACILITY_NT_BIT) in code_table().status_names:
        nt = code & ~FACILITY_NT_BIT
        detail = f"the N bit is set: it wraps NTSTATUS 0x{nt:08X} {code_table().status_names[nt]}"
    else:
        detail = f"facility {facility}, code 0x{code & 0xFFFF:04X}"
    summary = (
        f"an HRESULT (the {'failure' if code & 0x80000000 else 'success'} result of a COM or Windows API call"
        f"{', ' + name if name else ''}), not an exception or crash code; {detail}"
    )
    return CodeInfo(
        code,
        name or f"0x{code:08X}",
        summary,
        (
            "A Windows or COM API returned it to the program, which then reported it (an "
            "error message, a raised Python OSError/COMError, or its own exit code)",
        ),
        (
            Step(
                "hresult.search",
                "Search for the name together with the API or library that returned it; the "
                "program's log or traceback names the call",
            ),
        ),
        known=name is not None,
    )


def describe_win32(error: int) -> CodeInfo:
    """A Win32 error: its name and its HRESULT spelling, and what the notes say of the
    ones Python users meet as a DLL that would not load."""
    name = win32_name(error)
    noted = WIN32_NOTES.get(error)
    if noted is not None:
        as_hresult = f"a Win32 error; as an HRESULT it is 0x{hresult_from_win32(error):08X}"
        return CodeInfo(error, noted.name, f"{noted.summary} ({as_hresult})", noted.causes, noted.steps)
    return CodeInfo(
        error,
        name or f"Win32 error {error}",
        f"a Win32 error code (what GetLastError() returns{', ' + name if name else ''}), not an exception "
        f"or crash code; as an HRESULT it is 0x{hresult_from_win32(error):08X}",
        (
            "A Windows API call failed and the program reported the error (Python raises it "
            "as OSError with winerror set; some launchers pass it on as their exit code)",
        ),
        (Step("win32.search", "Search for the name together with the API or file the program was using"),),
        known=name is not None,
    )
