"""What a Windows exception code or process exit code means, in plain words.

Pure functions and tables, no I/O beyond reading the package's own data file. Used by
`dumpkit explain <code>` (no dump needed) and by the crash-decoding step of
`dumpkit analyze` (exception code + parameters from the dump).

    model.py     the data classes and the codes dumpkit refers to by name
    notes.py     the hand-written prose: summaries, causes, next steps, likely raisers
    table.py     names and values generated from the SDK headers (ntstatus.tsv, read lazily)
    lookup.py    code / subcode -> CodeInfo / FastFailInfo
    decode.py    an exception record -> DecodedException (access violations, fail-fast)
    parse.py     what a user typed -> ParsedCode

The facts that most often go wrong in write-ups, and that this package gets right:

* 0xC00000FD STATUS_STACK_OVERFLOW is a thread running out of stack. It is not a buffer
  overrun.
* 0xC0000409 STATUS_STACK_BUFFER_OVERRUN kept its old name, but since Windows 8 it is the
  exit code of every `__fastfail`. The first exception parameter (the subcode) says what
  happened: 7 is abort(), 2 is a real /GS stack-cookie failure, 5 is the C runtime's
  invalid-parameter handler, and so on (see FAST_FAIL).
* A process exit code printed by Python is the same 32-bit value in another spelling:
  -1073741571 == 3221225725 == 0xC00000FD.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dumpkit.analysis.codes.decode import (
    crash_summary,
    decode_exception,
    describe_access_violation,
    is_canonical,
    is_guard_page_hit,
)
from dumpkit.analysis.codes.lookup import (
    FAST_FAIL,
    FAST_FAIL_BY_NAME,
    STATUS_CODES,
    fastfail_name,
    lookup_fastfail,
    lookup_status,
    steps_given_a_dump,
)
from dumpkit.analysis.codes.model import (
    CPP_EH_MAGIC,
    FAST_FAIL_INVALID_FAST_FAIL_CODE,
    MASK32,
    MASK64,
    STATUS_ACCESS_VIOLATION,
    STATUS_CPP_EH_EXCEPTION,
    STATUS_GUARD_PAGE_VIOLATION,
    STATUS_IN_PAGE_ERROR,
    STATUS_STACK_BUFFER_OVERRUN,
    STATUS_STACK_OVERFLOW,
    AccessViolation,
    CodeInfo,
    DecodedException,
    FastFailInfo,
    ParsedCode,
    to_signed32,
)

if TYPE_CHECKING:
    from dumpkit.analysis.codes.parse import parse_code


def __getattr__(name: str) -> Any:
    """parse_code on first use: reading what a user typed is `explain`'s, not an analysis's,
    and its patterns and difflib cost every `analyze` ~4 ms of start-up (issue #34)."""
    if name == "parse_code":
        from dumpkit.analysis.codes.parse import parse_code

        return parse_code
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "MASK32",
    "MASK64",
    "STATUS_GUARD_PAGE_VIOLATION",
    "STATUS_ACCESS_VIOLATION",
    "STATUS_IN_PAGE_ERROR",
    "STATUS_STACK_OVERFLOW",
    "STATUS_STACK_BUFFER_OVERRUN",
    "STATUS_CPP_EH_EXCEPTION",
    "CPP_EH_MAGIC",
    "FAST_FAIL_INVALID_FAST_FAIL_CODE",
    "CodeInfo",
    "FastFailInfo",
    "AccessViolation",
    "DecodedException",
    "ParsedCode",
    "to_signed32",
    "FAST_FAIL",
    "FAST_FAIL_BY_NAME",
    "STATUS_CODES",
    "fastfail_name",
    "lookup_fastfail",
    "lookup_status",
    "steps_given_a_dump",
    "crash_summary",
    "decode_exception",
    "describe_access_violation",
    "is_canonical",
    "is_guard_page_hit",
    "parse_code",
]
