"""Where native code on a crashing stack was entered from Python, in Python's words.

Below the native frames of a Python process sits the interpreter (python3X.dll). What lies
between says how Python code got there: libffi and _ctypes frames are a ctypes call into a
DLL; _ctypes frames alone are ctypes' own C code (reading or writing memory through a
ctypes object); an extension module's frame (NAME.pyd) is a function of that module; no
frame at all is the interpreter's own C code (repr, pickle, comparison...). That is read
from the C stack alone, so a minidump says it too; when the dump also holds the Python
stack, the innermost Python frame of the thread is the line that made the call.

Bounded: at most LOOK frames below the native code are looked at."""

from __future__ import annotations

import re
from typing import Optional, Protocol, Sequence, Tuple

from dumpkit.analysis.model import Cycle, PythonFrameRecord, PythonThreadReport
from dumpkit.analysis.moduleroles import C_RUNTIME, SYSTEM, is_ctypes_machinery, is_libffi, module_role
from dumpkit.analysis.pystack import optional_line
from dumpkit.analysis.stdlib_names import STDLIB_NAMES
from dumpkit.cpython.interpreter import interpreter_minor
from dumpkit.records import record

LOOK = 64  # frames below the native code: ctypes' and the interpreter's never take more

_INTERPRETER = re.compile(r"^python3\d{0,2}t?(_d)?\.dll$", re.I)
_EXTENSION = r"(?i)\.pyd$"  # compiled at first use, as _INSTALLED

CTYPES = "ctypes"  # a ctypes call into a DLL (libffi on the stack)
CTYPES_OWN = "ctypes_own"  # ctypes' own C code (_ctypes.pyd without libffi above it)
EXTENSION = "extension"  # a function of an extension module (NAME.pyd)
INTERPRETER = "interpreter"  # the interpreter's own C code
NATIVE = "native"  # a DLL the interpreter called some other way (a callback, an embedding)


class _Framed(Protocol):
    @property
    def module(self) -> Optional[str]: ...


@record
class PythonEntry:
    """How the native code at the top of a stack was reached from Python.

    `via`: CTYPES, CTYPES_OWN, EXTENSION, INTERPRETER or NATIVE; `how`: that in a phrase
    ("through a ctypes call into nativelib.dll"); `module`: the module Python code called (the DLL
    a ctypes call went into, the extension module); `handover`: the frame indices of the
    ctypes/libffi machinery (first, last), empty when there is none; `interpreter_frame`:
    the index of the first interpreter frame below; `python_frame`: the innermost Python
    frame of the thread, as `function (file:line)`, when the dump holds the Python stack."""

    via: str
    how: str
    module: Optional[str]
    handover: Tuple[int, ...]
    interpreter_frame: int
    python_frame: Optional[str] = None
    interpreter: Optional[str] = None
    python_frame_index: int = 0  # the python_frame's index in the thread's Python stack (0 = innermost)
    # EXTENSION: the extension's function Python called, by its Python name, when a frame
    # carries one (`_pywrap_utils.Flatten`, `numpy.random._generator.default_rng`)
    function: Optional[str] = None

    @property
    def evidence(self) -> str:
        """The frames that show it: 'frames 3-5 are a ctypes call (libffi, _ctypes.pyd) and
        frame 6 is the interpreter (python39.dll)', and the Python frame when known."""
        k = self.interpreter_frame
        below = f"frame {k} is the interpreter ({self.interpreter})"
        if self.handover:
            a, b = self.handover[0], self.handover[-1]
            span = f"frame {a}" if a == b else f"frames {a}-{b}"
            what = "a ctypes call (libffi, _ctypes.pyd)" if self.via == CTYPES else f"in {self.module}"
            text = f"{span} {'is' if a == b else 'are'} {what} and {below}"
        elif self.via == EXTENSION:
            called = f"{self.function} in {self.module}" if self.function else self.module
            text = f"{below}, which called {called}"
        else:
            text = below
        if self.python_frame:
            text += f"; the Python stack read from the dump has the thread at {self.python_frame}"
        return text

    @property
    def machinery(self) -> str:
        """The entry as an entry path shows it instead of libffi's and ctypes' internal
        functions: 'Python through ctypes (libffi-8.dll, _ctypes.pyd)'."""
        return _MACHINERY[self.via]

    @property
    def words(self) -> str:
        """'from Python code at build_index (C:\\scripts\\job.py:30) through a ctypes call
        into nativelib.dll'; without the Python stack, 'from Python through ...'."""
        at = f" code at {self.python_frame}" if self.python_frame else ""
        return f"from Python{at} {self.how}"


_MACHINERY = {
    CTYPES: "Python, through a ctypes call (libffi, _ctypes.pyd)",
    CTYPES_OWN: "Python, through ctypes' own C code (_ctypes.pyd)",
    EXTENSION: "Python, through an extension module",
    INTERPRETER: "Python, in the interpreter's own C code",
    NATIVE: "the Python interpreter",
}


def is_interpreter(module: Optional[str]) -> bool:
    return bool(module and _INTERPRETER.match(module))


# Python code that is not the user's: the standard library (the installation's Lib and DLLs
# folders, its pythonXY.zip), installed packages, frozen modules. Only the analysis of a
# process running Python code asks, so the patterns are strings that re compiles (and
# caches) at their first use: compiling them at import cost ~0.7 ms of every start-up.
_INSTALLED = r"(?i)[\\/](?:site|dist)-packages[\\/]"
_RELATIVE = r"^(?![A-Za-z]:|[\\/])[^<]"  # no drive, no leading separator
_STDLIB_ZIP = r"(?i)[\\/]python3\d{1,2}\.zip[\\/]"
# where a library file's module path starts, tried in this order
_LIBRARY_ROOTS = (
    r"(?i)^.*[\\/](?:site|dist)-packages[\\/]",
    r"(?i)^.*?[\\/]python3\d{1,2}\.zip[\\/]",
    r"(?i)^.*?[\\/]Lib[\\/]",
)
USER_LOOK = 64  # Python frames looked at for the user's (the head a report keeps)


def is_library_file(filename: Optional[str], installation: Optional[str] = None) -> bool:
    """Is `filename` the standard library's or an installed package's, not the program's?
    `installation`: the folder of the process's python3X.dll, when known."""
    if not filename:
        return False
    if filename.startswith("<frozen "):
        return True
    if re.search(_INSTALLED, filename) or re.search(_STDLIB_ZIP, filename):
        return True
    if re.match(_RELATIVE, filename):
        # a relative path: the embeddable distributions' precompiled standard library
        # records "threading.py", "json\\encoder.py" (a user's `python job.py` records
        # "job.py" too, so only the standard library's own module names count)
        top = re.split(r"[\\/]", filename, maxsplit=1)[0]
        return (top[:-3] if top.endswith(".py") else top) in STDLIB_NAMES
    if installation:
        folder = installation.replace("/", "\\").rstrip("\\").lower() + "\\"
        name = filename.replace("/", "\\").lower()
        return name.startswith((folder + "lib\\", folder + "dlls\\"))
    return False


def library_name(f: PythonFrameRecord) -> str:
    """'ctypes.string_at' for string_at in ...\\Lib\\ctypes\\__init__.py (or in the stdlib zip, or
    site-packages): the module's dotted name and the function."""
    filename = f.filename or ""
    if filename.startswith("<frozen ") and filename.endswith(">"):
        module = filename[len("<frozen ") : -1]
    else:
        rest = filename.replace("/", "\\")
        root = next((r for r in _LIBRARY_ROOTS if re.search(r, rest)), None)
        rest = re.sub(root, "", rest, count=1) if root is not None else rest
        parts = [p for p in rest.split("\\") if p]
        if parts and parts[-1].lower().endswith(".py"):
            parts[-1] = parts[-1][:-3]
        if parts and parts[-1] == "__init__":
            parts.pop()
        module = ".".join(parts)
    function = f.function or "?"
    return f"{module}.{function}" if module else function


def user_python(thread: Optional[PythonThreadReport], installation: Optional[str] = None) -> Optional[Tuple[int, str]]:
    """The innermost Python frame of the user's code (issue #41 item 6) as (index, label):
    `leaf (C:\\scripts\\job.py:3)`, with `, calling ctypes.string_at` when library frames
    (the standard library, installed packages) sit above it; the innermost frame when the
    head of the stack is all library code."""
    if thread is None:
        return None
    frames = thread.frames[:USER_LOOK]
    first = next((i for i, f in enumerate(frames) if optional_line(f)), None)
    if first is None:
        return None
    for i in range(first, len(frames)):
        f = frames[i]
        line = optional_line(f)
        if line is None or is_library_file(f.filename, installation):
            continue
        if i == first:
            return frames[i].index, line
        return frames[i].index, f"{line}, calling {library_name(_called(frames, i))}"
    return frames[first].index, optional_line(frames[first]) or ""


# Decorators' inner functions: the name a library frame has when the function the user
# called was wrapped (TensorFlow's tf_export wrapper, functools.wraps-style decorators)
_WRAPPERS = frozenset(
    {
        "wrapper",
        "wrapped",
        "_wrapper",
        "inner",
        "decorated",
        "new_func",
        "wrapped_fn",
        "error_handler",
        "op_dispatch_handler",
    }
)


def _called(frames: Sequence[PythonFrameRecord], user: int) -> PythonFrameRecord:
    """The library function the user's frame at `user` called: the frame just above it, or,
    when that is a decorator's wrapper, the first one above it that is not (at most 4)."""
    i = user - 1
    while i > 0 and user - i <= 4 and (frames[i].function or "") in _WRAPPERS:
        i -= 1
    return frames[i]


def innermost_python(thread: Optional[PythonThreadReport], installation: Optional[str] = None) -> Optional[str]:
    """The Python frame a reader starts at: the innermost frame of the user's code
    (`user_python`), as `function (file:line)`."""
    found = user_python(thread, installation)
    return found[1] if found is not None else None


def installation_of(dll_path: Optional[str]) -> Optional[str]:
    """The folder of the interpreter's DLL (`C:\\Python311` from its path), where its
    standard library lives; None for a bare name."""
    if not dll_path:
        return None
    folder, sep, _ = dll_path.replace("/", "\\").rpartition("\\")
    return folder if sep and folder else None


def python_entry(
    frames: Sequence[_Framed],
    start: int = 0,
    python: Optional[PythonThreadReport] = None,
    installation: Optional[str] = None,
) -> Optional[PythonEntry]:
    """How the native code at frame `start` was reached from Python: the frames from `start`
    down to the first interpreter frame (at most LOOK of them) say it. None when no
    interpreter frame is within reach (not called from Python, or the walk lost the way)."""
    end = min(len(frames), start + LOOK)
    below = next((i for i in range(start, end) if is_interpreter(frames[i].module)), None)
    if below is None:
        return None
    between = [frames[i].module for i in range(start, below) if not _stale(frames[i])]
    handover = tuple(i for i in range(start, below) if is_ctypes_machinery(frames[i].module))
    user = user_python(python, installation)
    python_frame = user[1] if user is not None else None
    at = user[0] if user is not None else 0
    interpreter = frames[below].module
    if any(is_libffi(m) for m in between):
        first = handover[0] if handover else below
        callee = next((frames[i].module for i in range(first - 1, start - 1, -1) if frames[i].module), None)
        how = "through a ctypes call" + (f" into {callee}" if callee else "")
        return PythonEntry(CTYPES, how, callee, handover, below, python_frame, interpreter, at)
    if handover:
        module = frames[handover[0]].module
        return PythonEntry(
            CTYPES_OWN, f"through ctypes' own C code ({module})", module, handover, below, python_frame, interpreter, at
        )
    extension = next((m for m in reversed(between) if m and re.search(_EXTENSION, m)), None)
    if extension is not None:
        called = next(
            (n for n in (_python_name(frames[i], extension) for i in range(below - 1, start - 1, -1)) if n), None
        )
        how = f"through the extension module {extension}"
        if called is not None:
            how = f"through {called} (the extension module {extension})"
        return PythonEntry(EXTENSION, how, extension, (), below, python_frame, interpreter, at, called)
    if below == start:
        how = f"in the interpreter's own C code ({interpreter})"
        return PythonEntry(INTERPRETER, how, interpreter, (), below, python_frame, interpreter, at)
    callee = next((m for m in reversed(between) if m), None)
    if callee is None and start > 0:
        callee = frames[start - 1].module  # only stale words between: the native code above is what was called
    # a bare scanned word of the interpreter (its code not at hand to show a call) may be a
    # stale return address or a pointer to its data: said so, as an ending's caller is
    unconfirmed = (
        ", unconfirmed: a word found by stack scanning" if getattr(frames[below], "trust", None) == "scan" else ""
    )
    return PythonEntry(
        NATIVE,
        f"through {callee} (called by {interpreter}{unconfirmed})",
        callee,
        (),
        below,
        python_frame,
        interpreter,
        at,
    )


def _python_name(frame: _Framed, extension: str) -> Optional[str]:
    """The Python name a frame of `extension` carries (pe/cython.py's, pe/pybind11.py's:
    a dotted name with the module's own name among its parts), else None."""
    symbol = getattr(frame, "symbol", None)
    if frame.module != extension or not isinstance(symbol, str) or not symbol.startswith(f"{extension}!"):
        return None
    name = re.split(r"[+-]0x", symbol[len(extension) + 1 :], maxsplit=1)[0]
    parts = name.split(".")
    stem = extension.split(".", 1)[0]
    if len(parts) < 2 or stem not in parts or not all(p.isidentifier() for p in parts):
        return None
    return name


def _stale(frame: _Framed) -> bool:
    """A frame of Windows or a C runtime found by bare stack scanning (no code to check it):
    most often the return address of a call that already returned, left in a local. It says
    nothing of how Python got to the native code."""
    if getattr(frame, "trust", None) != "scan":
        return False
    return module_role(frame.module) in (SYSTEM, C_RUNTIME)


def _module_of(name: str) -> Optional[str]:
    """'libffi-8.dll' from 'libffi-8.dll!func_4730' or 'libffi-8.dll+0x4730'."""
    for sep in ("!", "+"):
        if sep in name:
            return name.split(sep, 1)[0]
    return None


def entry_path_words(
    path: Sequence[str], entry: Optional[PythonEntry], python: Optional[PythonThreadReport] = None, most: int = 5
) -> Tuple[str, ...]:
    """An entry path (frame names below a recursion, outermost last) as a reader wants it:
    the ctypes machinery as one step instead of libffi's and _ctypes' internal functions,
    and from the interpreter on, the Python frames when the dump holds them (else the
    interpreter once), not its C functions."""
    out = []
    machinery_said = False
    for name in path[:LOOK]:
        module = _module_of(name)
        if is_ctypes_machinery(module) and entry is not None:
            if not machinery_said:
                out.append(entry.machinery)
                machinery_said = True
            continue
        if is_interpreter(module):
            frames = [x for x in (optional_line(f) for f in python.frames[:most]) if x] if python else []
            out.extend(frames or [f"{module} (the interpreter)"])
            break
        out.append(name)
    return tuple(out[:most])


def python_minor(module: Optional[str]) -> Optional[int]:
    """12 from 'python312.dll' or 'C:\\Python312\\python312.dll'."""
    return interpreter_minor(module) if module else None


def crash_entry(
    frames: Sequence[_Framed],
    cause: Optional[Cycle],
    python: Optional[PythonThreadReport] = None,
    installation: Optional[str] = None,
) -> Optional[PythonEntry]:
    """How the crashing thread's native code was entered from Python: below `cause`, the
    recursion that overflowed the stack (signature rule 6), else below the top frame.
    `installation`: the interpreter's folder, where the standard library is."""
    return python_entry(frames, cause.last_frame + 1 if cause is not None else 0, python, installation)
