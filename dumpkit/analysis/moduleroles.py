"""Whose a module is: Windows', a C/C++ runtime's, the Python runtime's, or the program's
own. Blame passes over the first three (analysis/blame.py); signature rule 11 ends a line at
the interpreter only below a frame in the program's own code (analysis/signature.py)."""

from __future__ import annotations

import re
from typing import Optional

SYSTEM, C_RUNTIME, PYTHON_RUNTIME = ("system", "C/C++ runtime", "Python runtime")

SYSTEM_MODULES = frozenset(
    (
        "ntdll.dll kernel32.dll kernelbase.dll user32.dll win32u.dll gdi32.dll gdi32full.dll combase.dll "
        "ole32.dll oleaut32.dll rpcrt4.dll sechost.dll advapi32.dll ws2_32.dll bcrypt.dll bcryptprimitives.dll "
        "shell32.dll shlwapi.dll shcore.dll msvcp_win.dll wow64.dll wow64win.dll wow64cpu.dll dbghelp.dll "
        "dbgcore.dll cfgmgr32.dll setupapi.dll crypt32.dll imm32.dll uxtheme.dll"
    ).split()
)
_C_RUNTIME = re.compile(
    r"^(ucrtbased?|msvcrt\w*|vcruntime\d+\w*|msvcp\d+\w*|concrt\d+\w*|api-ms-win-crt-[\w-]+"
    r"|libstdc\+\+[\w-]*|libgcc[\w-]*|libwinpthread[\w-]*)\.dll$"
)
_CTYPES = re.compile(r"^_ctypes(_d)?(\.cp\d+[\w-]*)?\.pyd$", re.I)
_LIBFFI = re.compile(r"^libffi(-\d+)?\.dll$", re.I)


def is_libffi(module: Optional[str]) -> bool:
    return bool(module and _LIBFFI.match(module))


def is_ctypes_machinery(module: Optional[str]) -> bool:
    """libffi or _ctypes: the frames of a ctypes call, which ship with CPython."""
    return bool(module and (_CTYPES.match(module) or _LIBFFI.match(module)))


# The interpreter; ctypes' C code and libffi, which ship with it, count too: a crash in them
# is reached from Python code, which the blame then names.
_PYTHON_RUNTIME = re.compile(r"^(python\d*t?(_d)?\.dll|pythonw?(_d)?\.exe)$")


def module_role(name: Optional[str], path: Optional[str] = None) -> Optional[str]:
    """SYSTEM, C_RUNTIME or PYTHON_RUNTIME for such a module, else None (the program's own)."""
    if not name:
        return None
    low = name.lower()
    if _C_RUNTIME.match(low):
        return C_RUNTIME
    if _PYTHON_RUNTIME.match(low) or is_ctypes_machinery(low):
        return PYTHON_RUNTIME
    if low in SYSTEM_MODULES:
        return SYSTEM
    where = (path or "").lower().replace("/", "\\")
    if re.search(r"^[a-z]:\\windows\\(system32|syswow64|winsxs)\\", where):
        return SYSTEM
    return None
