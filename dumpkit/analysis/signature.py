"""A crash signature: one line naming a crash the same way on every run and every machine,
so that dumps of one bug group together (`dumpkit triage` will group by it).

Rules, version 13 (RULES):
1. The kind first: the exception code's name without STATUS_/EXCEPTION_ (STACK_OVERFLOW,
   ACCESS_VIOLATION), the fail-fast subcode's name for 0xC0000409
   (FAST_FAIL_INVALID_ARG), the thrown type for an MSVC C++ exception
   (CPP_EH_EXCEPTION(std::bad_alloc)); an unnamed code as 0xE0434352. A process that
   ended itself (rule 8) is named by how, not by the mechanism that carried it out.
2. Then the crashing thread's frames from the top, skipping the exception and fail-fast
   machinery and stack probes (KiUserExceptionDispatcher, RaiseException, abort,
   __report_gsfailure, _invalid_parameter, ___chkstk_ms, ...): they say how the crash was
   raised, not where. Thread-start frames (BaseThreadInitThunk, RtlUserThreadStart,
   mainCRTStartup, invoke_main, the CRT's thread_start, ...) are skipped wherever they
   are: every thread has them, so they only pad the line.
3. Each frame as module!function: the module in lower case (Windows names are
   case-insensitive and differ between machines), the function without its +0x offset. A
   frame without a symbol is module+0xRVA: an offset into the module, stable across runs
   and ASLR bases, but only for one build of that module (a rebuilt or updated module
   gives another RVA, so unsymbolled crashes group per build). Below the top element an
   unsymbolled frame in Windows' own loader modules (ntdll, kernel32, kernelbase) is
   skipped: those change with every Windows update and would split one crash by the
   machine's patch level; on top it stays (the crash is in there). A frame outside every
   module is `?`. No absolute address ever appears.
4. A recursion counts as one element, `recursion(a > b > c)`: its functions in call order,
   rotated to start at the alphabetically first, so the depth at which the stack ran out
   (and so which member was on top) does not change the line; the partial repetition
   below the cycle's complete ones belongs to it.
5. The first MAX_ELEMENTS elements are kept; the walk stops early at a frame found by
   unvalidated stack scanning (its neighbours may be noise that differs between runs).
6. A stack overflow whose largest recursion fills at least OVERFLOW_SHARE of the used
   stack starts at that recursion: the frames above it are wherever the last repetition
   happened to run out of stack (a helper, an allocator, the guard-page fault in ntdll),
   which differs from run to run and says nothing of the cause.
7. Native code that Python called through ctypes: below the top element, the first frame of
   the call's machinery (libffi, _ctypes.pyd) is one element, `python(ctypes)`, and the line
   ends there; so does the first interpreter frame below a top element in ctypes' own code
   (a ctypes object reading or writing a bad address). libffi's functions have no names and their RVAs change with libffi's build,
   and below them is the interpreter, which differs between Python versions: neither says
   anything of the crash, and either would split one bug by the user's Python.
9. A dump without an exception (a snapshot of a stuck process): DEADLOCK followed by the
   lines of the threads in the cycle (`read_catalog (data.py:60)`: the function and the file
   without its folder, and the line, which is what makes two deadlocks the same), sorted;
   GIL_HELD followed by the holder's line; else HANG followed by the line of the wait a
   reader starts at (verdict/hang.py). No frames: a hang's native frames are the wait's.
   Where threads stopped in system DLLs whose images are not here (no wait can be named,
   analysis/waits.py): GIL_HELD followed by the holder's line when the interpreter's state
   names the holder and counts threads waiting for the GIL; else, where the dump holds
   their Python stacks, SNAPSHOT followed by those threads' lines, sorted, a Thread.join
   left out (it only follows another thread).
8. A process that ended itself (analysis/ending.py): the kind is FATAL_PYTHON_ERROR, ABORT
   or EXIT(code), the same whether Windows carried an abort() out as a fail-fast (subcode 7)
   or as exit code 3 under Wine, and followed, in parentheses, by what the runtime said
   when the dump holds it: a Fatal Python error's function (`PyThreadState_Get`, or the
   message's own leading name on 3.8, or the message), Check failed's condition, OpenMP's
   error number, the C++ type in flight, an assertion's expression; numbers in it become
   `N` (they change between runs: `Check failed: 3 vs. 4`). The frames start at the
   ending's caller: the way out (abort, raise, _exit, ExitProcess, CPython's fatal-error
   path) says how, not where; a walk that never got past the way out (the C runtime's image
   not at hand) gives the kind alone. An OpenMP runtime's error has no frames: it is about which
   runtimes were loaded, wherever the second one started, so two programs that load two
   of them group together.
10. A delay-load failure (0xC06D007E, 0xC06D007F): the kind names what was missing, the
   DLL in lower case, `DELAYLOAD_MOD_NOT_FOUND(cudnn64_8.dll)`, and the function too when
   the DLL loaded without it, `DELAYLOAD_PROC_NOT_FOUND(cudart64_110.dll!cudaMallocAsync)`;
   the frames start at the one that called through the import slot (analysis/delayload.py):
   the helper and its thunk above it say how it failed, and have no names without a PDB.
11. Native code that Python called as an extension module: below an element in the
   extension's own code (not Windows', a C/C++ runtime's or the interpreter's), the first
   interpreter frame (python3X.dll, python.exe) or interpreter recursion is one element,
   `python`, and the line ends there. As with ctypes (rule 7), the interpreter's frames
   below the call differ between Python versions, and with how deep the Python code that
   made the call was (up to 3.10 each Python call nests two C frames, which reads as a
   recursion); they would split one bug by the user's Python and call path.
Elements are joined with " | ".

Version 12 had the same rules over other names: a function a pybind11 module binds at
module level (`m.def("Flatten", ...)`) was `func_<rva>` where that definition now names it
(`_pywrap_utils.pyd!func_195d0` is `_pywrap_utils.pyd!_pywrap_utils.Flatten`,
pe/pybind11.py).

Version 11 had the same rules over other names: a function of a Cython extension module
that no CPython table holds was `func_<rva>` where the traceback name its code loads now
names it (`_generator.cp38-win_amd64.pyd!func_2c600` is
`_generator.cp38-win_amd64.pyd!numpy.random._generator.default_rng`, pe/cython.py).

Version 10 gave a snapshot whose waits have no names (the system DLLs' images not here) no
signature: a folder of them made one group, whatever each process was doing.

Version 9 had the same rules over other names: the functions through which a class's
number, mapping, sequence and async methods are called (`python310.dll!func_3fae4` is
`python310.dll!slot_mp_subscript` in a `__getitem__` that subscripts its child, named from
`slotdefs` past PyTypeObject, pe/pynames.py) were `func_<rva>`.

Version 8 had the same rules over other names: the `slot_tp_*` functions through which a
class's special methods are called (`python311.dll!func_a4298` is
`python311.dll!slot_tp_repr`, named from typeobject.c's `slotdefs`, pe/pynames.py) were
`func_<rva>`.

Version 7 had the same rules over other names: a static function of python3X.dll or of an
extension module was `func_<rva>` where CPython's own method and type tables now name it
(`python38.dll!func_3ca9c` is `python38.dll!list.__repr__`, pe/pynames.py).

Version 6 kept the way out as frames when the walk ended inside it:
`EXIT(3) | ntdll.dll!RtlExitUserProcess | kernel32.dll!ExitProcess | ucrtbase.dll+0x24b28`.

Version 5 named a delay-load failure by its code in hex and kept the helper's frames, and
kept the interpreter's frames below an extension module's (rule 11).

Version 4 named an abort() by its mechanism (FAST_FAIL_FATAL_APP_EXIT from a fail-fast,
BREAKPOINT from an exit a debugger stopped) and kept the way out as frames.

Version 3 ended a recursion entered through ctypes in `libffi-8.dll+0x4730 |
libffi-8.dll+0x42e0` (issue #29).

Version 2 started a stack overflow at the top: `repr(x)` of a self-nesting list gave
`func_57d80 | PyUnicode_New | _PyUnicodeWriter_PrepareInternal` (where the stack ran out)
and never reached the recursion. Version 1 kept thread-start frames and system-module RVAs: a short stack's signature then
ended in `kernel32.dll+0x13677 | ntdll.dll+0x39d42`, which differs between Windows builds.
"""

from __future__ import annotations

import re
from typing import List, Optional, Sequence, Tuple

from dumpkit.analysis.codes.model import DELAYLOAD_PROC_NOT_FOUND, MASK32, STATUS_STACK_OVERFLOW
from dumpkit.analysis.model import (
    CrashInfo,
    CrashSignature,
    Cycle,
    Ending,
    EndingRoute,
    FrameRecord,
    PythonReport,
    ReasonKind,
    ThreadReport,
)
from dumpkit.analysis.moduleroles import module_role
from dumpkit.analysis.moduleroles import is_ctypes_machinery
from dumpkit.analysis.pyentry import is_interpreter
from dumpkit.analysis.recursion import call_order
from dumpkit.unwind.frames import Trust

RULES = 13
MAX_ELEMENTS = 3
MAX_REASON = 60  # characters of a reason kept in the kind (rule 8)
# Rule 6: the share of the used stack a recursion must fill to be the overflow's cause.
OVERFLOW_SHARE = 0.5
SEPARATOR = " | "
CTYPES_ELEMENT = "python(ctypes)"  # rule 7
PYTHON_ELEMENT = "python"  # rule 11


def _function_names(*names: str) -> frozenset:
    """Function names as frames are compared with them: lower case, without leading
    underscores (CRTs and compilers disagree on how many: __chkstk, ___chkstk_ms)."""
    return frozenset(name.lower().lstrip("_") for name in names)


# The frames that raise or probe: how a crash is reported, not where it happened.
MACHINERY = _function_names(
    "KiUserExceptionDispatcher",
    "RtlRaiseException",
    "RaiseException",
    "RaiseFailFastException",
    "RtlReportCriticalFailure",
    "RtlpHeapHandleError",
    "RtlpLogHeapFailure",
    "RtlReportFatalFailure",
    "abort",
    "raise",
    "terminate",
    "_CxxThrowException",
    "__report_gsfailure",
    "__report_rangecheckfailure",
    "__security_check_cookie",
    "__stack_chk_fail",
    "__chk_fail",
    "_invalid_parameter",
    "_invalid_parameter_noinfo",
    "_invalid_parameter_noinfo_noreturn",
    "_invoke_watson",
    "_call_reportfault",
    "__crt_fast_fail",
    "__fastfail",
    "___chkstk_ms",
    "__chkstk",
    "_chkstk",
    "_alloca_probe",
    "__alloca_probe",
    "__alloca_probe_16",
)
# The frames every thread starts with.
THREAD_START = _function_names(
    "BaseThreadInitThunk",
    "RtlUserThreadStart",
    "RtlUserThreadStart@8",
    "mainCRTStartup",
    "wmainCRTStartup",
    "WinMainCRTStartup",
    "wWinMainCRTStartup",
    "DllMainCRTStartup",
    "_DllMainCRTStartup",
    "__scrt_common_main",
    "__scrt_common_main_seh",
    "__tmainCRTStartup",
    "invoke_main",
    "thread_start",
    "thread_start<unsigned int (__cdecl*)(void *),1>",
    "_threadstartex",
    "_callthreadstartex",
    "RtlpTpWorkCallback",
    "TppWorkerThread",
)
# Windows modules whose RVAs change with every update (rule 3).
SYSTEM_MODULES = frozenset(("ntdll.dll", "kernel32.dll", "kernelbase.dll"))
_OFFSET = re.compile(r"\+0x[0-9a-fA-F]+$")


def without_offset(name: str) -> str:
    """`m.dll!f+0x1c` -> `m.dll!f`."""
    return _OFFSET.sub("", name)


def frame_function(f: FrameRecord) -> str:
    """A frame as a signature names it: module!function, module+0xRVA, or `?`."""
    if f.symbol and "!" in f.symbol:
        module, function = f.symbol.split("!", 1)
        return f"{module.lower()}!{without_offset(function)}"
    if f.module is not None and f.rva is not None:
        return f"{f.module.lower()}+{f.rva:#x}"
    return "?"


def _member(name: str) -> str:
    """A cycle member (a function name as the recursion analysis keeps it) by rule 3."""
    if "!" in name:
        module, function = name.split("!", 1)
        return f"{module.lower()}!{without_offset(function)}"
    if "+0x" in name and not name.startswith("0x"):
        module, rva = name.split("+", 1)
        return f"{module.lower()}+{rva}"
    return "?"


def _function_key(f: FrameRecord) -> Optional[str]:
    """The frame's function name as MACHINERY and THREAD_START hold them, if it has one."""
    if not f.symbol or "!" not in f.symbol:
        return None
    return without_offset(f.symbol.split("!", 1)[1]).lower().lstrip("_")


def is_machinery(f: FrameRecord) -> bool:
    return _function_key(f) in MACHINERY


def is_thread_start(f: FrameRecord) -> bool:
    return _function_key(f) in THREAD_START


def is_unnamed_system(f: FrameRecord) -> bool:
    """An unsymbolled frame in ntdll/kernel32/kernelbase: its RVA depends on the Windows build."""
    return _function_key(f) is None and f.module is not None and f.module.lower() in SYSTEM_MODULES


def _from_first(order: List[str]) -> str:
    """A cycle's members in call order, rotated to start at the alphabetically first, so
    which member was on top when the stack ran out does not change the name: `a > b > c`."""
    start = min(range(len(order)), key=lambda i: order[i]) if order else 0
    return " > ".join(order[start:] + order[:start])


def cycle_element(c: Cycle) -> str:
    """`recursion(a > b > c)`: call order, rotated to its alphabetically first member."""
    return f"recursion({_from_first([_member(n) for n in call_order(c)])})"


def signature_kind(crash: CrashInfo) -> str:
    if crash.fastfail_name:
        return crash.fastfail_name
    name = crash.code_name
    if not name or name.startswith("0x"):
        return f"0x{crash.code & 0xFFFFFFFF:08X}"
    for prefix in ("STATUS_", "EXCEPTION_"):
        if name.startswith(prefix):
            name = name[len(prefix) :]
            break
    if crash.cxx_types:
        name += f"({crash.cxx_types[0]})"
    missing = crash.delay_load
    if missing is not None and missing.dll:
        proc = f"!{missing.function}" if crash.code & MASK32 == DELAYLOAD_PROC_NOT_FOUND and missing.function else ""
        name += f"({missing.dll.lower()}{proc})"
    return name


def overflow_start(cycles: Sequence[Cycle], stack_overflow: bool) -> Optional[int]:
    """Rule 6: the first frame of a stack overflow's largest recursion (`cycles` come
    largest first) when it fills at least OVERFLOW_SHARE of the used stack, else None. The
    frames above it are where the last repetition ran out of stack; blame passes over them
    too."""
    cause = cycles[0] if stack_overflow and cycles else None
    if cause is not None and cause.stack_share is not None and cause.stack_share >= OVERFLOW_SHARE:
        return cause.first_frame
    return None


def signature_elements(
    frames: Sequence[FrameRecord], cycles: Sequence[Cycle], stack_overflow: bool = False
) -> Tuple[str, ...]:
    """Rules 2-6 over the crashing thread's (kept) frames."""
    by_first = {c.first_frame: c for c in cycles}
    start = overflow_start(cycles, stack_overflow)
    if start is not None:
        frames = [f for f in frames if f.index >= start]
    out: List[str] = []
    skip_to = -1
    members: frozenset = frozenset()  # of the cycle just passed: its partial repetition below goes with it
    leading = True
    ctypes_on_top = False  # the top element is ctypes' own code: the interpreter below it ends the line
    extension = False  # an element in an extension's own code: the interpreter below it ends the line
    for f in frames:
        if len(out) >= MAX_ELEMENTS:
            break
        if f.index <= skip_to:
            continue
        if f.trust == Trust.SCAN:
            break
        cycle = by_first.get(f.index)
        if extension and is_interpreter(f.module):
            out.append(PYTHON_ELEMENT)
            break
        if cycle is not None:
            out.append(cycle_element(cycle))
            skip_to = cycle.last_frame
            members = frozenset(_member(n) for n in cycle.functions)
            leading = False
            continue
        if frame_function(f) in members:
            continue
        members = frozenset()
        if out and (is_ctypes_machinery(f.module) or (ctypes_on_top and is_interpreter(f.module))):
            out.append(CTYPES_ELEMENT)
            break
        ctypes_on_top = not out and is_ctypes_machinery(f.module)
        if leading and is_machinery(f):
            continue
        if is_thread_start(f) or (out and is_unnamed_system(f)):
            continue
        leading = False
        out.append(frame_function(f))
        extension = extension or _extension_code(f)
    return tuple(out)


def _extension_code(f: FrameRecord) -> bool:
    """A frame in a module of the program's own (rule 11): not Windows', a C/C++ runtime or
    the interpreter's."""
    return f.module is not None and module_role(f.module) is None


def _is_stack_overflow(crash: CrashInfo) -> bool:
    return crash.code & 0xFFFFFFFF == STATUS_STACK_OVERFLOW


def recursion_start(crash: Optional[CrashInfo], thread: Optional[ThreadReport]) -> Optional[int]:
    """Rule 6 for the crashing thread: where the recursion that overflowed its stack
    starts, or None (not a stack overflow, or no recursion that fills it)."""
    if crash is None or thread is None:
        return None
    return overflow_start(thread.cycles, _is_stack_overflow(crash))


# Only an ending's signature reads these (and _FOLDERS... below, a Python recursion's or a
# hang's): strings that re compiles (and caches) at their first use, not at every start-up
_NUMBER = r"(?<![A-Za-z_])(?:0x[0-9a-fA-F]+|\d+(?:\.\d+)?)"
_LEADING_NAME = r"^([A-Za-z_][A-Za-z0-9_]{2,80}): "


def ending_kind(ending: Ending) -> str:
    """Rule 8's kind: FATAL_PYTHON_ERROR(...), ABORT(...) or EXIT(code)."""
    route, reason = ending.route, ending.reason
    if route is EndingRoute.FATAL_PYTHON_ERROR:
        kind = "FATAL_PYTHON_ERROR"
    elif route in (EndingRoute.ABORT, EndingRoute.TERMINATE, EndingRoute.ASSERT, EndingRoute.SIGNAL):
        kind = "ABORT"
    else:
        code = ending.exit_code
        return "EXIT" if code is None else f"EXIT({code})" if code < 0x10000 else f"EXIT({code:#010x})"
    if reason is None:
        return kind
    if reason.kind is ReasonKind.FATAL_PYTHON_ERROR:
        message = reason.message or ""
        leading = re.match(_LEADING_NAME, message)
        said = reason.function or (leading.group(1) if leading else message)
    elif reason.kind is ReasonKind.OPENMP:
        # OpenMP's error number is the error itself ("OMP: Error #15"): kept
        number = re.search(r"Error #\d+", reason.text)
        return f"{kind}(OMP: {number.group() if number else 'Error'})"
    elif reason.kind in (ReasonKind.CXX_EXCEPTION, ReasonKind.ASSERTION):
        said = reason.message or reason.text
    else:
        said = reason.text
    said = re.sub(_NUMBER, "N", " ".join(said.split()))
    said = said if len(said) <= MAX_REASON else said[: MAX_REASON - 3] + "..."
    return f"{kind}({said})"


def crash_signature(
    crash: Optional[CrashInfo], thread: Optional[ThreadReport], ending: Optional[Ending] = None
) -> Optional[CrashSignature]:
    """The signature of the crash, or None when the dump holds no exception."""
    if crash is None:
        return None
    if ending is not None:
        kind = ending_kind(ending)
        if ending.reason is not None and ending.reason.kind is ReasonKind.OPENMP:
            return CrashSignature(kind, kind, (), RULES)
        # from the caller on; a walk that never got past the way out has no frames to give
        start = ending.caller_frame
        kept = [f for f in thread.frames if f.index >= start] if thread is not None and start is not None else []
        frames = signature_elements(kept, thread.cycles if thread is not None else ())
        return CrashSignature(SEPARATOR.join((kind,) + frames), kind, frames, RULES)
    kind = signature_kind(crash)
    if thread is None:
        return CrashSignature(kind, kind, (), RULES)
    caller = crash.delay_load.caller_frame if crash.delay_load is not None else None
    own = [f for f in thread.frames if f.index >= caller] if caller is not None else thread.frames
    frames = signature_elements(own, thread.cycles, _is_stack_overflow(crash))
    return CrashSignature(SEPARATOR.join((kind,) + frames), kind, frames, RULES)


_FOLDERS = r"[\\/]"
_PY_FUNCTION = r"^(?P<name>.*?) \((?P<where>.*?)(?::\d+)?\)$"


def _python_member(label: str) -> str:
    """'walk (C:\\scripts\\job.py:51)' -> 'walk (job.py)': the file without its folder (which
    holds user names and differs between machines) and without the line (which moves with
    every edit above it)."""
    m = re.match(_PY_FUNCTION, label)
    if m is None:
        return label
    file = re.split(_FOLDERS, m.group("where"))[-1]
    return f"{m.group('name')} ({file})"


def python_recursion(python: Optional[PythonReport], thread_id: Optional[int]) -> Optional[str]:
    """The crashing thread's largest Python recursion, named as rule 4 names a native one:
    `walk (job.py) > visit (job.py)`, in call order from its alphabetically first member.
    Not part of the signature (a minidump of the same crash holds no Python stack, and must
    group with the full dump); `dumpkit triage` lists it within a group, where every
    Python-level recursion otherwise shows the same eval-loop signature. None when the dump
    holds no Python recursion on that thread."""
    if python is None or thread_id is None:
        return None
    thread = next((t for t in python.threads if t.thread_id == thread_id), None)
    if thread is None or not thread.cycles:
        return None
    cycle = max(thread.cycles, key=lambda c: c.period * c.repetitions)
    return _from_first([_python_member(f) for f in reversed(cycle.functions)])  # stack order is callee first


_FOLDER_OF = r"\((?:[^()]*[\\/])?([^\\/()]*)\)"


def _line_element(label: str) -> str:
    """'read_catalog (C:\\app\\data.py:60), calling queue.get' -> 'read_catalog (data.py:60)'."""
    head = label.split(", calling ", 1)[0]
    return re.sub(_FOLDER_OF, lambda m: f"({m.group(1)})", head)


def hang_signature(kind: str, lines: Sequence[str]) -> CrashSignature:
    """Rule 9's signature: `kind` (DEADLOCK, GIL_HELD, HANG, SNAPSHOT) and the lines that say it."""
    elements = tuple(_line_element(x) for x in lines if x)
    if kind in ("DEADLOCK", "SNAPSHOT"):
        elements = tuple(sorted(elements))
    elements = elements[:MAX_ELEMENTS]
    return CrashSignature(SEPARATOR.join((kind,) + elements), kind, elements, RULES)
