"""An exception record (code + ExceptionInformation[]) in words: the code's meaning, the
fail-fast subcode, what an access violation touched, and a one-sentence headline."""

from __future__ import annotations

from typing import List, Optional, Sequence

from dumpkit.analysis.codes.lookup import lookup_fastfail, lookup_status
from dumpkit.analysis.codes.model import (
    CPP_EH_MAGIC,
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
)
from dumpkit.analysis.pointers import fill_pattern, is_canonical

__all__ = ["crash_summary", "decode_exception", "describe_access_violation", "is_canonical", "is_guard_page_hit"]

_ACCESS_KINDS = {0: "read", 1: "write", 8: "execute"}


def _verb(kind: str) -> str:
    return {"read": "read from", "write": "write to", "execute": "execute at"}.get(kind, "access to")


def describe_access_violation(parameters: Sequence[int]) -> AccessViolation:
    """Decode ExceptionInformation[] of an access violation (also used for in-page errors,
    stack overflows and guard-page hits, which share the layout): [0] 0 = read, 1 = write,
    8 = execute (DEP); [1] the address; [2] (in-page error only) the NTSTATUS of the I/O."""
    params = [p & MASK64 for p in parameters]
    kind = _ACCESS_KINDS.get(params[0], "unknown") if params else "unknown"
    address = params[1] if len(params) > 1 else None
    io_status = params[2] & MASK32 if len(params) > 2 else None
    if address is None:
        return AccessViolation(
            kind,
            None,
            False,
            False,
            f"A {kind} access fault; the dump does not record the address.",
            io_status=io_status,
        )

    null_page = address < 0x10000
    non_canonical = not is_canonical(address)
    gp = address == MASK64
    # all ones is Windows' general-protection marker, not a fill; a 32-bit run of one
    # byte can be a real address (in a 32-bit process): only table values and full
    # 64-bit runs are named here
    pattern = None if gp else fill_pattern(address, min_run=8)
    where = f"{_verb(kind).capitalize()} {address:#x}"
    if gp:
        sentence = (
            f"{where}: Windows reports the address as all ones when the CPU raised "
            "a general-protection fault instead of a page fault, which on x64 "
            "usually means a non-canonical pointer; the real address is in the "
            "faulting instruction's operands, and the read/write flag is not "
            "reliable then."
        )
    elif null_page:
        if address == 0:
            sentence = f"{where}: a NULL pointer dereference."
        else:
            sentence = (
                f"{where}, inside the first 64 KiB that Windows never maps: a NULL "
                f"pointer plus an offset (a field at offset {address:#x} of a NULL "
                "object, or a small integer used as a pointer)."
            )
        if kind == "execute":
            sentence += " Calling through a NULL function pointer ends here."
    elif non_canonical:
        sentence = (
            f"{where}, a non-canonical x64 address (bits 47-63 are not all equal), "
            "so no memory can ever be there: the pointer itself is garbage "
            "(freed or uninitialised memory, or an overwritten value)."
        )
    elif io_status is not None:
        sentence = (
            f"{where}: the page is mapped, but its contents could not be brought in "
            "from the file or page file behind it."
        )
    elif kind == "execute":
        sentence = (
            f"{where}: the CPU jumped to memory that is not executable (DEP) or not "
            "mapped: a corrupted function pointer or return address, or a call into "
            "a DLL that has been unloaded."
        )
    else:
        sentence = (
            f"{where}: nothing readable/writable is mapped there (freed or unmapped "
            "memory, a dangling pointer, or a write to read-only memory)."
        )
    if pattern:
        sentence += f" The value is {pattern}."
    if io_status is not None:
        status_info = lookup_status(io_status)
        sentence += f" The paging I/O failed with 0x{io_status:08X}" + (
            f" ({status_info.name})." if status_info.known else "."
        )
    return AccessViolation(
        kind,
        address,
        null_page,
        non_canonical,
        sentence,
        general_protection=gp,
        io_status=io_status,
        fill_pattern=pattern,
    )


def crash_summary(decoded: DecodedException) -> str:
    """The code's meaning for one crash: the table's summary, except that a fail-fast
    whose subcode is a real /GS cookie failure (0, 2) is not told 'usually not a buffer
    overrun'."""
    ff = decoded.fastfail
    if decoded.code_info.code == STATUS_STACK_BUFFER_OVERRUN and ff is not None and ff.subcode in (0, 2):
        return (
            "the process ended itself with __fastfail; this subcode is a real /GS stack buffer "
            "overrun (a local buffer overflowed its stack cookie), not a stack overflow"
        )
    return decoded.code_info.summary


def is_guard_page_hit(code: int, parameters: Sequence[int] = ()) -> bool:
    """True for STATUS_GUARD_PAGE_VIOLATION: a PAGE_GUARD page was touched (normally the
    stack growing, recorded as a first-chance exception, not a crash by itself)."""
    return (code & MASK32) == STATUS_GUARD_PAGE_VIOLATION


def _plain_name(info: CodeInfo) -> str:
    if not info.known:
        return "exception"
    name = info.name
    for prefix in ("STATUS_", "EXCEPTION_"):
        if name.startswith(prefix):
            name = name[len(prefix) :]
    return name.replace("_", " ").lower()


def decode_exception(code: int, parameters: Sequence[int] = ()) -> DecodedException:
    """The exception record of a dump (code + ExceptionInformation[]) in words, with a
    one-sentence headline."""
    code &= MASK32
    params = [p & MASK64 for p in parameters]
    info = lookup_status(code)
    fastfail: Optional[FastFailInfo] = None
    access: Optional[AccessViolation] = None
    hexcode = f"0x{code:08X}"

    if code == STATUS_STACK_BUFFER_OVERRUN:
        if params:
            fastfail = lookup_fastfail(params[0])
            headline = f"{hexcode} fail-fast {fastfail.name} ({params[0]}): {fastfail.summary}"
        else:
            headline = (
                f"{hexcode} fail-fast with no subcode recorded: the process ended "
                "itself with __fastfail (or an old-style /GS failure report)"
            )
    elif code in (STATUS_ACCESS_VIOLATION, STATUS_IN_PAGE_ERROR):
        what = "access violation" if code == STATUS_ACCESS_VIOLATION else "in-page error"
        if len(params) >= 2:
            access = describe_access_violation(params)
            headline = f"{hexcode} {what}: {_verb(access.kind)} {access.address:#x}"
            extra: List[str] = []
            if access.general_protection:
                extra.append("general-protection fault, real address unknown")
            elif access.null_page:
                extra.append("NULL pointer" if access.address == 0 else "NULL page")
            elif access.non_canonical:
                extra.append("non-canonical address")
            if access.io_status is not None:
                extra.append(f"I/O status 0x{access.io_status:08X}")
            if extra:
                headline += f" ({', '.join(extra)})"
        else:
            headline = f"{hexcode} {what}: {info.summary}"
    elif code == STATUS_STACK_OVERFLOW:
        headline = f"{hexcode} stack overflow: the thread ran out of stack (not a buffer overrun)"
        if len(params) >= 2:
            access = describe_access_violation(params)
            headline += f"; it died touching {access.address:#x}"
    elif code == STATUS_GUARD_PAGE_VIOLATION:
        headline = f"{hexcode} guard page hit: {info.summary}"
        if len(params) >= 2:
            access = describe_access_violation(params)
    elif code == STATUS_CPP_EH_EXCEPTION:
        headline = f"{hexcode} C++ exception (MSVC throw)"
        if params and params[0] == CPP_EH_MAGIC:
            headline += f": object at {params[1]:#x}" if len(params) > 1 else ""
        headline += "; fatal only because nothing caught it"
    elif code == 0:
        # STATUS_SUCCESS is an exit code, never an exception: a record carrying it was made up
        # by whoever wrote the dump (a snapshot on request, a reporter's own record)
        headline = (
            f"{hexcode} (STATUS_SUCCESS) in the exception record: no exception raises code 0, so the dump's "
            "writer made this record up; nothing crashed with it"
        )
    else:
        headline = f"{hexcode} {_plain_name(info)}: {info.summary}" if info.known else f"{hexcode}: {info.summary}"
    return DecodedException(info, fastfail, access, headline)
