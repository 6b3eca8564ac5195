"""Blame: the first frame of the crashing stack in the program's own code, not in the
system's or a runtime's, which is where a reader starts looking (Sentry's "in-app" frame,
WinDbg's "FAULTING_SOURCE" after its own skip lists).

A frame is passed over when its module is Windows' (ntdll, kernel32, kernelbase, ... or
any module loaded from the Windows folder), a C/C++ runtime (ucrtbase, msvcrt, vcruntime,
msvcp, libstdc++, libgcc, winpthread) or the Python runtime (python3X.dll, python.exe), or
when its function is runtime machinery linked into the program itself (abort, the stack
probe, memcpy, the allocator...). Frames found by unvalidated stack scanning are passed
over too (they may not be frames at all), and so are IPs outside every module (a jump
into data or freed code is not anyone's code). In a stack overflow that a recursion
caused (signature rule 6) blame starts at the recursion: the frames above it are wherever
its last repetition ran out of stack. A process that ended itself (analysis/ending.py) is
blamed from the caller of its way out (abort, a fatal log's destructor, CPython's
fatal-error path): the way out says how, not where. A delay-load failure is blamed from
the frame that called through the import slot (analysis/delayload.py): above it are the
linker's helper and thunk, linked into the caller's module."""

from __future__ import annotations

from typing import Iterable, List, Optional

from dumpkit.analysis.model import (
    BlameFrame,
    BlameKind,
    FrameRecord,
    ModuleRecord,
    PassedFrame,
    PythonTrust,
    ThreadReport,
)
from dumpkit.analysis.moduleroles import PYTHON_RUNTIME, module_role
from dumpkit.analysis.pyentry import INTERPRETER, PythonEntry
from dumpkit.analysis.raiser import RUNTIME_FUNCTIONS
from dumpkit.analysis.signature import MACHINERY, without_offset
from dumpkit.records import replace
from dumpkit.unwind.frames import Trust

RUNTIME_CODE, SCANNED, OUTSIDE_MODULES, ABOVE_RECURSION, WAY_OUT = (
    "runtime code",
    "found by stack scanning",
    "outside every module",
    "above the recursion",
    "the way out",
)
DELAY_LOAD_HELPER = "the delay-load helper"
LOOK = 64  # frames looked at from the top: the program's code is never deeper than this below a crash

# Runtime functions linked into the program's own modules (static CRTs, mingw): the
# fail-fast and exception machinery, the allocator, and the string and memory routines.
_RUNTIME_FUNCTIONS = frozenset(n.lower().lstrip("_") for n in RUNTIME_FUNCTIONS) | MACHINERY
_MEMORY_FUNCTIONS = frozenset("memcpy memmove memset memcmp strlen strcpy strncpy strcmp wcslen wcscpy".split())


def frame_role(f: FrameRecord, paths: Optional[dict] = None) -> Optional[str]:
    """Why this frame is passed over, or None when it is the program's own code."""
    if f.trust == Trust.SCAN:
        return SCANNED
    if f.module is None:
        return OUTSIDE_MODULES
    role = module_role(f.module, (paths or {}).get((f.module or "").lower()))
    if role is not None:
        return role
    if f.symbol and "!" in f.symbol:
        function = without_offset(f.symbol.split("!", 1)[1]).lower().lstrip("_")
        if function in _RUNTIME_FUNCTIONS or function in _MEMORY_FUNCTIONS:
            return RUNTIME_CODE
    return None


def _display_name(f: FrameRecord) -> str:
    """The frame's function as the stack shows it, without the offset into it."""
    if f.symbol:
        return without_offset(f.symbol)
    if f.module is not None and f.rva is not None:
        return f"{f.module}+{f.rva:#x}"
    return f"{f.ip:#x}"


def blame_frame(
    thread: Optional[ThreadReport],
    modules: Iterable[ModuleRecord] = (),
    start: Optional[int] = None,
    entry: Optional[PythonEntry] = None,
    way_out: Optional[int] = None,
    delay_load_caller: Optional[int] = None,
) -> Optional[BlameFrame]:
    """The first frame from the top in the program's own code, with the frames passed over
    above it; None when the first LOOK frames (from `start`) are all system or runtime code.
    `start`: the first frame of the recursion that overflowed the stack
    (signature.overflow_start); the frames above it are passed over. `entry`: in a Python
    process, how Python code reached the native code (`pyentry.crash_entry`, read from
    every frame, not only the ones a report keeps): the blame says it, and when every
    native frame is runtime code, the Python frame (when the dump holds it) is the blame.
    `way_out`: the caller of a process's way out (analysis/ending.py); `delay_load_caller`:
    the frame that called through a delay-load's import slot (analysis/delayload.py)."""
    if way_out is not None:
        found = _native_blame(thread, modules, way_out, WAY_OUT)
    elif delay_load_caller is not None:
        found = _native_blame(thread, modules, delay_load_caller, DELAY_LOAD_HELPER)
    else:
        found = _native_blame(thread, modules, start)
    if thread is None or entry is None or (entry.via == INTERPRETER and entry.python_frame is None):
        return found
    if found is not None:
        return replace(found, python_frame=entry.python_frame, python_via=entry.how)
    if entry.python_frame is None:
        return None
    paths = {m.name.lower(): m.path for m in modules}
    passed = tuple(
        PassedFrame(f.index, _display_name(f), frame_role(f, paths) or PYTHON_RUNTIME)
        for f in thread.frames[:LOOK]
        if f.index <= entry.interpreter_frame
    )
    return BlameFrame(
        frame_index=entry.python_frame_index,
        function=entry.python_frame,
        module=None,
        trust=PythonTrust.PYTHON_STACK,
        named=True,
        skipped=passed,
        python_frame=entry.python_frame,
        python_via=entry.how,
        kind=BlameKind.PYTHON,
    )


def _native_blame(
    thread: Optional[ThreadReport],
    modules: Iterable[ModuleRecord] = (),
    start: Optional[int] = None,
    above: str = ABOVE_RECURSION,
) -> Optional[BlameFrame]:
    if thread is None:
        return None
    paths = {m.name.lower(): m.path for m in modules}
    skipped: List[PassedFrame] = []
    first = 0
    if start is not None:
        first = next((i for i, f in enumerate(thread.frames) if f.index >= start), len(thread.frames))
    for f in thread.frames[:first]:
        skipped.append(PassedFrame(f.index, _display_name(f), above))
    for f in thread.frames[first : first + LOOK]:
        role = frame_role(f, paths)
        if role is None:
            return BlameFrame(
                frame_index=f.index,
                function=_display_name(f),
                module=f.module,
                trust=f.trust,
                named=bool(f.symbol and "!" in f.symbol),
                skipped=tuple(skipped),
            )
        skipped.append(PassedFrame(f.index, _display_name(f), role))
    return None
