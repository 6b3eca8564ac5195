"""Reading a code the way users paste it: signed or unsigned decimal, hex, names from the
SDK headers (NTSTATUS, Win32 errors, HRESULTs), FAST_FAIL_* names, a fail-fast subcode
after '/' or ':', plain words ("stack overflow", "abort"), and the lines Python prints for a
native crash (faulthandler's, ctypes' OSError); what it cannot read comes back as a one-line
error naming the nearest spelling it knows."""

from __future__ import annotations

import difflib
import re
from functools import lru_cache
from typing import Dict, List, Optional, Tuple, Union

from dumpkit.analysis.codes.lookup import FAST_FAIL_BY_NAME, STATUS_CODES
from dumpkit.analysis.codes.model import (
    HRESULT,
    MASK32,
    STATUS,
    STATUS_ACCESS_VIOLATION,
    STATUS_STACK_BUFFER_OVERRUN,
    WIN32,
    ParsedCode,
)
from dumpkit.analysis.codes.notes import INFORMAL_ALIASES, PLAIN_WORDS, STATUS_ROWS
from dumpkit.analysis.codes.table import code_table, error_table
from dumpkit.analysis.codes.winerror import reads_as_hresult

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
# How IDEs, shells and launchers say an exit code: "exit code X", "Process finished with
# exit code X" (PyCharm), "exited with code X", and Visual Studio's "The program '[1234]
# python.exe' has exited with code X (0x...)."
_PREFIX_RE = re.compile(
    r"^(?:process finished with\s+|(?:.*?\s)?(?:has\s+)?exited\s+with\s+)?(?:(?:exit\s+)?(?:code|status)\b\s*:?\s*)",
    re.IGNORECASE,
)
# Windows' application-error dialog for an access violation: "The instruction at 0x... referenced
# memory at 0x.... The memory could not be read." (or written)
_MEMORY_DIALOG_RE = re.compile(r"referenced memory at .*the memory could not be", re.IGNORECASE | re.DOTALL)
_TWIN_RE = re.compile(r"^(\S+)\s*\(\s*(\S+)\s*\)$")
# What Python prints for a native crash, as users paste it: faulthandler's line ("Windows fatal
# exception: access violation", or "code 0xc06d007e" for a code it has no words for), and the
# OSError ctypes raises for an exception in the function it called ("exception: access
# violation reading 0x0000000000000010", or for a code it has no words for
# PyErr_SetFromWindowsErr's "[WinError -1066598274] Windows Error 0xc06d007e"; a small
# positive WinError is a Win32 error: "[WinError 126] The specified module could not be found").
_OSERROR = r"^(?:(?:os|windows)error:\s*)?"
_FAULTHANDLER_RE = re.compile(r"^(?:fatal python error:\s*)?windows fatal exception:\s*(?:code\s+)?", re.IGNORECASE)
_CTYPES_RE = re.compile(
    _OSERROR + r"exception:\s*(?P<what>.*?)(?:\s+(?:reading|writing|executing)(?:\s+(?:0x)?[0-9a-f]+)?)?$",
    re.IGNORECASE,
)
_WINERROR_RE = re.compile(_OSERROR + r"\[winerror\s+(?P<number>[-+]?\d+)\]\s*(?P<message>.*)$", re.IGNORECASE)
_WINDOWS_ERROR_RE = re.compile(r"windows error\s+(0x[0-9a-f]+)\.?", re.IGNORECASE)
# A DLL that would not load, in the words Python passes on from FormatMessage, in the
# Windows display language: "ImportError: DLL load failed while importing
# _pywrap_tensorflow_internal: The specified module could not be found." (or
# "...: 找不到指定的模块。"), and ctypes' "Could not find module 'x.dll' (or one of its
# dependencies)" (3.8+, for error 126). Terminals wrap the message and users paste it
# across lines, so it may hold a line break anywhere.
_DLL_LOAD_RE = re.compile(
    r"dll load failed(?:\s*while importing\s*[\w.]+)?\s*:\s*(?P<message>.+)$", re.IGNORECASE | re.DOTALL
)
_COULD_NOT_FIND_MODULE_RE = re.compile(r"could not find module .*\(or one of its dependencies\)", re.IGNORECASE)
# FormatMessage's text of each error in the languages most Windows machines show it in:
# English, Chinese (simplified, traditional), Japanese, Korean, German, French, Spanish,
# Russian, Italian and Portuguese (Brazil). Each was checked against output pasted in public
# issues and projects, or Microsoft's localized list of system error codes; a language
# whose text for an error could not be checked so is left out for that error. Compared
# without whitespace and case (a fragment of the sentence, distinct among the four).
_DLL_LOAD_MESSAGES = (
    (
        126,
        (
            "the specified module could not be found",
            "找不到指定的模块",
            "找不到指定的模組",
            "指定されたモジュールが見つかりません",
            "지정된 모듈을 찾을 수 없습니다",
            "das angegebene modul wurde nicht gefunden",
            "le module spécifié est introuvable",
            "no se puede encontrar el módulo especificado",
            "не найден указанный модуль",
            "impossibile trovare il modulo specificato",
            "não foi possível encontrar o módulo especificado",
        ),
    ),
    (
        127,
        (
            "the specified procedure could not be found",
            "找不到指定的程序",
            "指定されたプロシージャが見つかりません",
            "지정된 프로시저를 찾을 수 없습니다",
            "die angegebene prozedur wurde nicht gefunden",
            "la procédure spécifiée est introuvable",
            "no se encontró el procedimiento especificado",
            "не найдена указанная процедура",
            "impossibile trovare la procedura specificata",
        ),
    ),
    (
        193,
        (
            "is not a valid win32 application",
            "不是有效的 win32 应用程序",
            "不是有效的 win32 應用程式",
            "は有効な win32 アプリケーションではありません",
            "올바른 win32 응용 프로그램이 아닙니다",
            "ist keine gültige win32-anwendung",
            "pas une application win32 valide",
            "no es una aplicación win32 válida",
            "не является приложением win32",
        ),
    ),
    (
        1114,
        (
            "initialization routine failed",
            "动态链接库(dll)初始化例程失败",
            "動態連結程式庫 (dll) 初始化例行程序失敗",
            "初期化ルーチンの実行に失敗しました",
            "dll 초기화 루틴을 실행할 수 없습니다",
            "dll-initialisierungsroutine ist fehlgeschlagen",
            "bibliothèque de liens dynamiques (dll) a échoué",
            "rutina de inicialización de biblioteca de vínculos dinámicos",
            "инициализации библиотеки динамической компоновки",
        ),
    ),
)


def _squeezed(text: str) -> str:
    """Text as the DLL-load messages are compared: lower case, no whitespace."""
    return "".join(text.lower().split())


def _dll_load_error(message: str) -> Optional[int]:
    """The Win32 error whose FormatMessage text `message` holds, in any language above."""
    said = _squeezed(message)
    for error, texts in _DLL_LOAD_MESSAGES:
        if any(_squeezed(t) in said for t in texts):
            return error
    return None


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
        raise _Bad("not a code or name dumpkit knows")
    if value > MASK32:
        raise _Bad("out of range for a 32-bit status code")
    return value


def number_kind(value: int) -> str:
    """How a bare number reads: an NTSTATUS / exception / exit code unless no status has
    that value and it is an HRESULT (named in winerror.h, or wrapping a Win32 error)."""
    if value < 0x80000000 or value in STATUS_CODES:  # the tables stay unread for these
        return STATUS
    return HRESULT if reads_as_hresult(value) else STATUS


def _parse_code_token(token: str) -> Tuple[int, Optional[int], str]:
    """A code given as a number or a name: (value, subcode, kind). A FAST_FAIL_* name
    yields 0xC0000409 plus its subcode."""
    t = token.strip()
    up = t.upper()
    if looks_like_number(t):  # no name does (a test keeps it so): the table stays unread
        value = _parse_number(t)
        return value, None, number_kind(value)
    subcode = _fast_fail_value(up)
    if subcode is not None:
        return STATUS_STACK_BUFFER_OVERRUN, subcode, STATUS
    m = _UNKNOWN_FF_RE.fullmatch(t.lower())
    if m:
        return STATUS_STACK_BUFFER_OVERRUN, int(m.group(1), 16), STATUS
    names = _name_to_code()
    if up in names:
        return names[up], None, STATUS
    errors = error_table()
    if up in errors.hresult_values:
        return errors.hresult_values[up], None, HRESULT
    for name in (up, "ERROR_" + up):  # "file not found": ERROR_FILE_NOT_FOUND
        if name in errors.win32_values:
            return errors.win32_values[name], None, WIN32
    raise _Bad("not a code or name dumpkit knows")


def _words(text: str) -> str:
    """Plain words as PLAIN_WORDS keys them: lower case, runs of other characters one space."""
    return " ".join(re.sub(r"[^a-z0-9+:()]+", " ", text.lower()).split())


def _from_words(text: str) -> Optional[ParsedCode]:
    """ "stack overflow", "Access violation", "abort": a PLAIN_WORDS phrase, or a code's
    name written with spaces."""
    words = _words(text)
    if words in PLAIN_WORDS:
        code, subcode = PLAIN_WORDS[words]
        return ParsedCode(code, subcode)
    name = re.sub(r"[^A-Z0-9]+", "_", words.upper()).strip("_")
    if not name[:1].isalpha() or looks_like_number(name):  # "0xC0000409/7" is no name: tables stay unread
        return None
    try:
        code, subcode, kind = _parse_code_token(name)
    except _Bad:
        return None
    return ParsedCode(code, subcode, kind)


@lru_cache(maxsize=1)
def _spellings() -> Dict[str, str]:
    """Every name and phrase explain knows, keyed by its plain-words form."""
    out: Dict[str, str] = {}
    errors = error_table()
    for group in (
        PLAIN_WORDS,
        _name_to_code(),
        FAST_FAIL_BY_NAME,
        code_table().fast_fail_values,
        errors.hresult_values,
        errors.win32_values,
    ):
        for name in group:
            out.setdefault(_words(name.replace("_", " ")), name)
    return out


def nearest_spelling(text: str) -> Optional[str]:
    """The known name or phrase closest to what was typed (a typo, a word too many), or None."""
    key = _words(text.replace("_", " "))
    if not key:
        return None
    spellings = _spellings()
    match: List[str] = difflib.get_close_matches(key, list(spellings), n=1, cutoff=0.8)
    return spellings[match[0]] if match else None


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


def _as_python_printed(text: str) -> Union[str, ParsedCode]:
    """The code in a line faulthandler or ctypes printed, as parse_code reads codes; other
    text comes back as it was. A DLL-load line whose message is not read raises ValueError."""
    t = text.strip()
    m = _DLL_LOAD_RE.search(t)
    if m:
        error = _dll_load_error(m.group("message"))
        if error is None:  # its message is in words (or a language) not read above
            raise ValueError(
                f"a DLL that would not load, in words dumpkit does not read: {text!r}; give its Win32 error "
                "number instead (ctypes.WinDLL on the same file prints it as [WinError N])"
            )
        return ParsedCode(error, None, WIN32)
    if _COULD_NOT_FIND_MODULE_RE.search(t):
        return ParsedCode(126, None, WIN32)
    if _MEMORY_DIALOG_RE.search(t):
        return ParsedCode(STATUS_ACCESS_VIOLATION)
    m = _FAULTHANDLER_RE.match(t)
    if m:
        return t[m.end() :]
    m = _CTYPES_RE.match(t)
    if m:
        return m.group("what")
    m = _WINERROR_RE.match(t)
    if m is None:
        return text
    number, message = m.group("number"), m.group("message").strip()
    hexed = _WINDOWS_ERROR_RE.fullmatch(message)
    if hexed:
        return f"{number} ({hexed.group(1)})"  # the signed and the hex spelling must agree
    value = int(number)
    return ParsedCode(value, None, WIN32) if 0 < value <= 0xFFFF else number


def parse_code(text: str) -> ParsedCode:
    """Read a code the way users paste it.

    Accepted: signed or unsigned decimal (-1073741571, 3221225725; what Python's
    subprocess and most launchers print), hex with or without 0x in any case
    (0xC00000FD, C00000FD), "-1073741571 (0xC00000FD)" as IDEs print it, names
    (STATUS_STACK_OVERFLOW, stack_overflow, EXCEPTION_ACCESS_VIOLATION), FAST_FAIL_* names
    (-> 0xC0000409 + subcode), and a fail-fast subcode after '/' or ':'
    (0xC0000409/7, 0xC0000409:7, -1073740791/2, 0xC0000409/FATAL_APP_EXIT).
    An 8-digit all-decimal-digit string that reads as a hex code with severity bits set
    ("80000003") is taken as hex, the way WER prints codes. A line faulthandler printed
    ("Windows fatal exception: stack overflow") or ctypes' OSError ("exception: access
    violation reading 0x10", "[WinError -1066598274] Windows Error 0xc06d007e") gives the
    code it names.

    Raises ValueError with a one-line message for anything else.
    """
    if not isinstance(text, str):
        raise ValueError(f"not a code or name dumpkit knows: {text!r}")
    original = text
    printed = _as_python_printed(text)
    if isinstance(printed, ParsedCode):
        return printed
    try:
        t = _PREFIX_RE.sub("", printed.strip()).strip().rstrip(".")
        if not t:
            raise _Bad("not a code or name dumpkit knows")
        subcode: Optional[int] = None
        code: Optional[int] = None
        words = None if looks_like_number(t) else _from_words(t)
        if words is not None:
            return words
        kind = STATUS
        twin = _TWIN_RE.match(t)
        if twin:
            first, _, kind = _parse_code_token(twin.group(1))
            second, _, _ = _parse_code_token(twin.group(2))
            if first != second:
                raise _Bad(f"the two spellings disagree (0x{first:08X} vs 0x{second:08X})")
            code = first
        else:
            parts = re.split(r"\s*[/:]\s*", t)
            if len(parts) > 2:
                raise _Bad("not a code or name dumpkit knows")
            code, subcode, kind = _parse_code_token(parts[0])
            if len(parts) == 2:
                if subcode is not None:
                    raise _Bad("a FAST_FAIL name already includes its subcode")
                subcode = _parse_subcode(parts[1])
        if subcode is not None and code != STATUS_STACK_BUFFER_OVERRUN:
            raise _Bad("a subcode only applies to 0xC0000409 (fail-fast)")
        return ParsedCode(code, subcode, kind)
    except _Bad as exc:
        near = nearest_spelling(original) if str(exc) == "not a code or name dumpkit knows" else None
        hint = f"; did you mean {near}?" if near else ""
        raise ValueError(f"{exc}: {original!r}{hint}") from None
