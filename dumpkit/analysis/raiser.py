"""Who raised a fail-fast, abort, invalid-parameter or heap-corruption exception.

The frames at the top of such a stack are the mechanism (the C runtime's abort(),
__report_gsfailure, _invalid_parameter, the heap's reporting code); the function to blame
is the first frame below them. That is only knowable when the frames have names: an
unnamed frame (module+offset) may itself be a statically linked abort(), and the reader
must be told so instead of being handed frame 0 as the culprit."""

from __future__ import annotations

from typing import Optional, Sequence

from dumpkit.unwind.frames import Frame
from dumpkit.records import record

__all__ = ["Raiser", "find_raiser", "raising_function", "is_runtime_frame", "RUNTIME_MODULES", "RUNTIME_FUNCTIONS"]

# Runtime modules whose frames are the mechanism of a fail-fast, not its cause.
RUNTIME_MODULES = frozenset(
    {
        "ntdll.dll",
        "kernelbase.dll",
        "kernel32.dll",
        "ucrtbase.dll",
        "ucrtbased.dll",
        "msvcrt.dll",
        "vcruntime140.dll",
        "vcruntime140_1.dll",
        "vcruntime140d.dll",
        "msvcp140.dll",
        "api-ms-win-crt-runtime-l1-1-0.dll",
    }
)
RUNTIME_FUNCTIONS = (
    "abort",
    "__fastfail",
    "_invalid_parameter",
    "_invalid_parameter_noinfo",
    "_invalid_parameter_noinfo_noreturn",
    "__report_gsfailure",
    "__security_check_cookie",
    "_invoke_watson",
    "terminate",
    "raise",
    "__report_rangecheckfailure",
    "_call_reportfault",
    "__crt_fast_fail",
    "__stack_chk_fail",
    "__chk_fail",
    # a statically linked CRT's allocator lives in the module itself
    "free",
    "_free_base",
    "_free_dbg",
    "malloc",
    "_malloc_base",
    "calloc",
    "_calloc_base",
    "realloc",
    "_realloc_base",
    "operator delete",
    "operator new",
)
_RUNTIME_SHORT = frozenset(r.lstrip("_") for r in RUNTIME_FUNCTIONS)
_LOOK = 32  # the machinery is never deeper than this


def is_named(f: Frame) -> bool:
    """Does a symbol name this frame's function (module!name), not just module+offset?"""
    return "!" in f.function_name


def is_runtime_frame(f: Frame) -> bool:
    """A frame of the C runtime / system machinery, by module or by function name."""
    if f.module and f.module.lower() in RUNTIME_MODULES:
        return True
    return f.function_name.split("!", 1)[-1].lstrip("_") in _RUNTIME_SHORT


@record
class Raiser:
    """The frame blamed for raising the exception, and how sure that is.

    `named` is False when the frame has no symbol: it may then be the runtime's own
    abort() / __report_gsfailure linked into the module, and `caller` (the next frame
    below it outside the runtime modules) is the other candidate."""

    name: str
    index: int
    named: bool
    caller: Optional[str] = None
    caller_trust: Optional[str] = None
    outside_machinery: bool = True  # False: every frame looked at is machinery (frame 0 taken)


def find_raiser(frames: Sequence[Frame], fallback: bool = True) -> Optional[Raiser]:
    """The first frame, from the top, that is not part of the runtime machinery; else
    frame 0 with `fallback` (marked `outside_machinery=False`), else None."""
    top = list(frames[:_LOOK])
    for i, f in enumerate(top):
        if is_runtime_frame(f):
            continue
        caller = next((g for g in top[i + 1 :] if not is_runtime_frame(g)), None)
        return Raiser(
            f.function_name,
            f.index,
            is_named(f),
            caller.function_name if caller is not None else None,
            caller.trust if caller is not None else None,
        )
    if frames and fallback:
        f = frames[0]
        return Raiser(f.function_name, f.index, is_named(f), outside_machinery=False)
    return None


def raising_function(frames: Sequence[Frame], fallback: bool = True) -> Optional[str]:
    """The name of `find_raiser`'s frame (what CrashInfo.raised_by carries)."""
    r = find_raiser(frames, fallback)
    return r.name if r is not None else None
