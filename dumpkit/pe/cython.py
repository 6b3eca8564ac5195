"""Names for the functions of Cython extension modules: the name each one gives itself in a
Python traceback.

Why: pandas, scikit-learn, h5py, pyarrow and numpy.random are Cython, and no table names
most of their functions. A `def` of a module, or of a class with `binding` on (Cython 3's
default), is a PyMethodDef no module or type table holds; a `cdef` function has no entry
at all. In pandas 3.1.1's 28 top-level extension modules CPython's tables
(pe/pynames.py) name 178 of ~2,000 Python-visible functions, and none in `algos`.

How: Cython's generated code reports an error by adding a traceback entry under the
function's own qualified name, `__Pyx_AddTraceback("pandas._libs.algos.take_2d_axis1_
object_object", ...)` (and `__Pyx_WriteUnraisable` the same way where it cannot raise),
so a function that can fail loads a pointer to its own name, with a RIP-relative LEA, from
the image's read-only data. A function whose code loads exactly one string of that shape
(the module's name as the extension module's `PyInit_` export spells it, then a qualified
name) is named by it: over pandas 3.1.1's 45 modules, 4,730 functions. One that loads
several (a callee inlined with its own error path: 22 there) is left unnamed rather than
guessed; one that loads none (Cython's utility code, a function that cannot fail) too.
Only images that import what `__Pyx_AddTraceback` calls are scanned (`builds_tracebacks`):
hand-written C extensions (NumPy's core) and pybind11 ones are left as they were.

Bounded: MAX_CODE bytes of a function and MAX_LOADS of its LEAs are looked at, and
MAX_NAME bytes of each string they load; an image's functions are scanned until CODE_BUDGET
bytes of its code have been (a hostile image's overlapping .pdata entries could otherwise
make every distinct frame of a long stack cost MAX_CODE)."""

from __future__ import annotations

import re
from typing import Callable, Iterable, List, Optional, Sequence

from dumpkit.pe.imports import ImportTable

MAX_CODE = 256 << 10  # bytes of one function read (pandas' largest is ~60 KiB)
MAX_LOADS = 512  # RIP-relative LEAs of one function whose target is read
MAX_NAME = 200  # bytes read of a loaded string
CODE_BUDGET = 32 << 20  # bytes of one image's code scanned in all (pandas' largest .pyd: 1.7 MiB)
# lea r64, [rip+disp32]: REX.W (R for r8-r15), 8D, ModRM with mod 00 and r/m 101
_LEA_RIP = re.compile(rb"[\x48\x4c]\x8d[\x05\x0d\x15\x1d\x25\x2d\x35\x3d]")
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
INIT_PREFIX = "PyInit_"


def builds_tracebacks(imports: ImportTable) -> bool:
    """Does the image import what `__Pyx_AddTraceback` calls (PyFrame_New, PyTraceBack_Here)
    from the interpreter's DLL? Every Cython module does; NumPy's and pandas' hand-written C
    extensions (13 of 64 .pyd files looked at) do not, and their code is not scanned."""
    return any(
        {"PyFrame_New", "PyTraceBack_Here"} <= set(dll.names)
        for dll in imports.dlls
        if dll.dll.lower().startswith("python")
    )


def extension_modules(export_names: Iterable[str]) -> List[str]:
    """The module names an extension image initialises (`PyInit_lib` -> `lib`)."""
    return [n[len(INIT_PREFIX) :] for n in export_names if n.startswith(INIT_PREFIX) and len(n) > len(INIT_PREFIX)]


def traceback_pattern(modules: Sequence[str]) -> "re.Pattern[str]":
    """A qualified name in one of these modules: the package path, the module, then at
    least one more part (`pandas._libs.index.IndexEngine.get_indexer`)."""
    names = "|".join(re.escape(m) for m in modules)
    return re.compile(rf"(?:{_IDENT}\.)*(?:{names})(?:\.{_IDENT})+")


def traceback_name(
    code: bytes, start: int, string_at: Callable[[int], Optional[str]], pattern: "re.Pattern[str]"
) -> Optional[str]:
    """The one traceback name the function whose code is `code` (at rva `start`) loads, or
    None. `string_at(rva)`: the NUL-terminated string at a read-only data rva, or None."""
    found: List[str] = []
    for count, match in enumerate(_LEA_RIP.finditer(code, 0, min(len(code), MAX_CODE))):
        if count >= MAX_LOADS:
            break
        end = match.end() + 4
        if end > len(code):
            break
        target = start + end + int.from_bytes(code[match.end() : end], "little", signed=True)
        text = string_at(target)
        if text is not None and pattern.fullmatch(text) and text not in found:
            found.append(text)
            if len(found) > 1:
                return None
    return found[0] if found else None
