"""Readable names for decorated symbols: what a frame shows instead of
``?Flatten@swig@tensorflow@@YAPEAU_object@@PEAU3@_N@Z``.

MSVC C++ names (exports of MSVC-built modules, PDB public symbols) are read by ``msvc``;
anything else (plain C names, Itanium ``_Z`` names from mingw) is not decorated in a way we
read and gives None, so callers keep the name they had.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Optional

from dumpkit.records import record


@record
class Demangled:
    """``qualified``: the function's (or object's) qualified name, what a frame is named by,
    e.g. ``tensorflow::swig::Flatten``. ``full``: the whole declaration with access, return
    type, calling convention and parameters, as WinDbg and llvm-undname write it, e.g.
    ``struct _object * __cdecl tensorflow::swig::Flatten(struct _object *, bool)``."""

    qualified: str
    full: str


def demangle(name: str) -> Optional[Demangled]:
    """The demangled form of ``name``, or None when it is not a decorated name this can read
    (then show ``name`` as it is). Never raises, whatever the input."""
    if not isinstance(name, str):  # checked before the cache, which would choke on a list
        return None
    return _demangle(name)


@lru_cache(maxsize=8192)  # a recursing stack names the same few functions thousands of times
def _demangle(name: str) -> Optional[Demangled]:
    from dumpkit.symbols import msvc  # imported here: ~1.5 ms of start-up, and frames without names never need it

    parsed = msvc.parse(name)
    if parsed is None:
        return None
    return Demangled(qualified=parsed[0], full=parsed[1])


def display_name(name: str) -> str:
    """What to show for a symbol name: its qualified name if decorated, else the name itself."""
    d = demangle(name)
    return d.qualified if d is not None else name
