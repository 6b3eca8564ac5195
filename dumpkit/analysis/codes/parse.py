"""Reading a code the way users paste it: signed or unsigned decimal, hex, names from the
SDK headers, FAST_FAIL_* names, and a fail-fast subcode after '/' or ':'."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Dict, Optional, Tuple

from dumpkit.analysis.codes.lookup import FAST_FAIL_BY_NAME
from dumpkit.analysis.codes.model import MASK32, STATUS_STACK_BUFFER_OVERRUN, ParsedCode
from dumpkit.analysis.codes.notes import INFORMAL_ALIASES, STATUS_ROWS
from dumpkit.analysis.codes.table import code_table

__all__ = ["parse_code"]


@lru_cache(maxsize=1)
def _name_to_code() -> Dict[str, int]:
    """Every name a code may be given by: the notes' names, every status name and
    EXCEPTION_* alias of the generated table, the informal aliases, and each of them
    without its STATUS_ prefix (where that short form is not a name of its own)."""
    names: Dict[str, int] = {}
    for info in STATUS_ROWS:
        names[info.name] = info.code
    for name, value in code_table().status_values.items():
        names.setdefault(name, value)
    for name, value in INFORMAL_ALIASES.items():
        names.setdefault(name, value)
    for name, value in list(names.items()):
        if name.startswith("STATUS_"):
            names.setdefault(name[len("STATUS_") :], value)
    return names


def _fast_fail_value(name: str) -> Optional[int]:
    value = FAST_FAIL_BY_NAME.get(name)
    if value is None and name.startswith("FAST_FAIL_"):
        value = code_table().fast_fail_values.get(name)
    return value


_HEX_RE = re.compile(r"0x[0-9a-f]+")
_BARE_HEX_RE = re.compile(r"[0-9a-f]+")
_DEC_RE = re.compile(r"[-+]?[0-9]+")
_SUBCODE_DEC_RE = re.compile(r"[0-9]+")
_UNKNOWN_FF_RE = re.compile(r"fast_fail_0x([0-9a-f]+)")
_PREFIX_RE = re.compile(r"^(?:process finished with\s+)?(?:exit\s+(?:code|status)\s*:?\s*)", re.IGNORECASE)
_TWIN_RE = re.compile(r"^(\S+)\s*\(\s*(\S+)\s*\)$")


def looks_like_number(token: str) -> bool:
    t = token.strip().lower()
    return bool(_HEX_RE.fullmatch(t) or _DEC_RE.fullmatch(t) or _BARE_HEX_RE.fullmatch(t))


class _Bad(Exception):
    pass


def _parse_number(token: str) -> int:
    t = token.strip().lower()
    if _HEX_RE.fullmatch(t):
        value = int(t, 16)
    elif _DEC_RE.fullmatch(t):
        digits = t.lstrip("+-")
        # An 8-digit run of decimal digits whose hex reading has severity bits set is how
        # WER and the event log print codes (e.g. "80000003", "40000015"): read it as hex.
        if len(digits) == 8 and t[0] not in "+-" and digits[0] in "456789" and int(digits, 16) >= 0x40000000:
            value = int(digits, 16)
        else:
            value = int(t, 10)
            if value < 0:
                if value < -(1 << 31):
                    raise _Bad("out of range for a 32-bit status code")
                return value & MASK32
    elif _BARE_HEX_RE.fullmatch(t):
        value = int(t, 16)
    else:
        raise _Bad("not an NTSTATUS code or name")
    if value > MASK32:
        raise _Bad("out of range for a 32-bit status code")
    return value


def _parse_code_token(token: str) -> Tuple[int, Optional[int]]:
    """A code given as a number or a name. A FAST_FAIL_* name yields 0xC0000409 plus its
    subcode."""
    t = token.strip()
    up = t.upper()
    if looks_like_number(t):  # no name does (a test keeps it so): the table stays unread
        return _parse_number(t), None
    subcode = _fast_fail_value(up)
    if subcode is not None:
        return STATUS_STACK_BUFFER_OVERRUN, subcode
    m = _UNKNOWN_FF_RE.fullmatch(t.lower())
    if m:
        return STATUS_STACK_BUFFER_OVERRUN, int(m.group(1), 16)
    names = _name_to_code()
    if up in names:
        return names[up], None
    return _parse_number(t), None


def _parse_subcode(token: str) -> int:
    t = token.strip()
    low = t.lower()
    if _HEX_RE.fullmatch(low) or _SUBCODE_DEC_RE.fullmatch(low):
        value = int(low, 16 if low.startswith("0x") else 10)
        if value > MASK32:
            raise _Bad("fail-fast subcode out of range")
        return value
    up = t.upper()
    for name in (up, "FAST_FAIL_" + up):
        found = _fast_fail_value(name)
        if found is not None:
            return found
    m = _UNKNOWN_FF_RE.fullmatch(low)
    if m:
        return int(m.group(1), 16)
    raise _Bad("not a fail-fast subcode")


def parse_code(text: str) -> ParsedCode:
    """Read a code the way users paste it.

    Accepted: signed or unsigned decimal (-1073741571, 3221225725; what Python's
    subprocess and most launchers print), hex with or without 0x in any case
    (0xC00000FD, C00000FD), "-1073741571 (0xC00000FD)" as IDEs print it, names
    (STATUS_STACK_OVERFLOW, stack_overflow, EXCEPTION_ACCESS_VIOLATION), FAST_FAIL_* names
    (-> 0xC0000409 + subcode), and a fail-fast subcode after '/' or ':'
    (0xC0000409/7, 0xC0000409:7, -1073740791/2, 0xC0000409/FATAL_APP_EXIT).
    An 8-digit all-decimal-digit string that reads as a hex code with severity bits set
    ("80000003") is taken as hex, the way WER prints codes.

    Raises ValueError with a one-line message for anything else.
    """
    if not isinstance(text, str):
        raise ValueError(f"not an NTSTATUS code or name: {text!r}")
    original = text
    try:
        t = _PREFIX_RE.sub("", text.strip()).strip().rstrip(".")
        if not t:
            raise _Bad("not an NTSTATUS code or name")
        subcode: Optional[int] = None
        code: Optional[int] = None
        twin = _TWIN_RE.match(t)
        if twin:
            first, _ = _parse_code_token(twin.group(1))
            second, _ = _parse_code_token(twin.group(2))
            if first != second:
                raise _Bad(f"the two spellings disagree (0x{first:08X} vs 0x{second:08X})")
            code = first
        else:
            parts = re.split(r"\s*[/:]\s*", t)
            if len(parts) > 2:
                raise _Bad("not an NTSTATUS code or name")
            code, subcode = _parse_code_token(parts[0])
            if len(parts) == 2:
                if subcode is not None:
                    raise _Bad("a FAST_FAIL name already includes its subcode")
                subcode = _parse_subcode(parts[1])
        if subcode is not None and code != STATUS_STACK_BUFFER_OVERRUN:
            raise _Bad("a subcode only applies to 0xC0000409 (fail-fast)")
        return ParsedCode(code, subcode)
    except _Bad as exc:
        raise ValueError(f"{exc}: {original!r}") from None
