"""The data of code lookups, and the codes the rest of dumpkit refers to by name. Plain
frozen data classes; nothing here reads a table."""

from __future__ import annotations

from typing import Optional, Tuple

from dumpkit.analysis.advice import Step
from dumpkit.records import record

MASK32 = 0xFFFFFFFF
MASK64 = 0xFFFFFFFFFFFFFFFF

# The codes the rest of dumpkit refers to by name (tests check them against ntstatus.tsv).
STATUS_GUARD_PAGE_VIOLATION = 0x80000001
STATUS_ACCESS_VIOLATION = 0xC0000005
STATUS_IN_PAGE_ERROR = 0xC0000006
STATUS_STACK_OVERFLOW = 0xC00000FD
STATUS_STACK_BUFFER_OVERRUN = 0xC0000409
STATUS_CPP_EH_EXCEPTION = 0xE06D7363
STATUS_ILLEGAL_INSTRUCTION = 0xC000001D
STATUS_HEAP_CORRUPTION = 0xC0000374
STATUS_INVALID_PARAMETER = 0xC000000D
STATUS_FATAL_APP_EXIT = 0x40000015
STATUS_BREAKPOINT = 0x80000003
STATUS_SINGLE_STEP = 0x80000004
STATUS_WX86_BREAKPOINT = 0x4000001F
# the delay-load helper's (delayimp.h's VcppException(ERROR_SEVERITY_ERROR, error)); names: tools/status_codes_extra.h
DELAYLOAD_MOD_NOT_FOUND = 0xC06D007E
DELAYLOAD_PROC_NOT_FOUND = 0xC06D007F
DELAYLOAD_INVALID_PARAMETER = 0xC06D0057
DELAY_LOAD_CODES = (DELAYLOAD_MOD_NOT_FOUND, DELAYLOAD_PROC_NOT_FOUND, DELAYLOAD_INVALID_PARAMETER)
DBG_CONTROL_C = 0x40010005
DBG_CONTROL_BREAK = 0x40010008
DBG_PRINTEXCEPTION_C = 0x40010006
DBG_PRINTEXCEPTION_WIDE_C = 0x4001000A
CPP_EH_MAGIC = 0x19930520  # first parameter of an MSVC C++ throw
FAST_FAIL_INVALID_FAST_FAIL_CODE = 0xFFFFFFFF


@record
class CodeInfo:
    """One NTSTATUS / exception code. `summary` is one line of plain language without a
    trailing full stop; `causes` are what commonly produces it in Python/TensorFlow
    processes on Windows; `steps` are what to do about it (`next_steps`: in words)."""

    code: int
    name: str
    summary: str
    causes: Tuple[str, ...] = ()
    steps: Tuple[Step, ...] = ()
    known: bool = True  # False when name/summary were derived from the bits alone

    @property
    def next_steps(self) -> Tuple[str, ...]:
        return tuple(s.text for s in self.steps)

    @property
    def hex(self) -> str:
        return f"0x{self.code:08X}"


@record
class FastFailInfo:
    """One `__fastfail` subcode (the first parameter of a 0xC0000409 exception)."""

    subcode: int
    name: str
    summary: str
    likely_raiser: Optional[str] = None
    known: bool = True


@record
class AccessViolation:
    """The parameters of an access violation (or of another memory fault that uses the same
    layout: in-page error, stack overflow, guard page) in words."""

    kind: str  # "read" | "write" | "execute" | "unknown"
    address: Optional[int]
    null_page: bool  # address below 0x10000, which Windows never maps
    non_canonical: bool  # x64: bits 47..63 not all equal; no page can ever be there
    sentence: str
    general_protection: bool = False  # address reported as all ones: a #GP, not a #PF
    io_status: Optional[int] = None  # in-page error only: the NTSTATUS of the failed I/O
    fill_pattern: Optional[str] = None  # what a recognisable garbage value usually is


@record
class DecodedException:
    code_info: CodeInfo
    fastfail: Optional[FastFailInfo]
    access: Optional[AccessViolation]
    headline: str


STATUS, HRESULT, WIN32 = "status", "hresult", "win32"  # how a ParsedCode's number is read


@record
class ParsedCode:
    """`kind`: STATUS (an NTSTATUS, exception or exit code), HRESULT (a COM / Windows API
    result, 0x8007000E) or WIN32 (a GetLastError value, ERROR_ACCESS_DENIED = 5)."""

    code: int  # 0..0xFFFFFFFF
    subcode: Optional[int] = None  # fail-fast subcode, only with 0xC0000409
    kind: str = STATUS

    @property
    def signed(self) -> int:
        return to_signed32(self.code)


def to_signed32(code: int) -> int:
    code &= MASK32
    return code - (1 << 32) if code & 0x80000000 else code
