"""Where CPython keeps its GIL and who holds it, for the PSF's Windows x64 builds (release,
not debug, not free-threaded), written down as each version's headers declare it, in
layouts.py's style: fields in header order with their C types, up to the last field read,
offsets computed by `clayout` with MSVC's x64 (LLP64) rules.

- 3.8-3.11: `_PyRuntime.ceval.gil` is the GIL itself (struct _gil_runtime_state, inline),
  and `_PyRuntime.gilstate.tstate_current` is the thread state of the thread running
  Python (NULL while the GIL is released): two witnesses.
- 3.12: each interpreter's `ceval.gil` points to the GIL it uses (its own `_gil`, or the
  main interpreter's); `PyThreadState._status.active` marks the thread state swapped in
  (PyEval_SaveThread clears it before dropping the GIL, PyEval_RestoreThread sets it after
  taking it).
- 3.13: `_Py_DebugOffsets` gives `ceval.gil`, and the offsets of the interpreter's own
  `_gil` and of its `locked` and `last_holder` (so the two fields' places inside the GIL
  are their difference); `PyThreadState._status.holds_gil` says "currently holds the GIL"
  (the source of truth to ceval_gil.c's own `current_thread_holds_gil`).

Headers: the release tarballs as imported by deadsnakes (`upstream/3.X.Y` tags of
github:deadsnakes/python3.X): 3.8.1, 3.9.13, 3.10.11 and 3.11.9, the builds the samples
run; 3.12.6 (the newest 3.12 there; the samples run 3.12.9, checked on its dumps) and
3.13.0rc2 (the newest 3.13 there: the bit-field order of `_status`, which sits in the public
Include/cpython/pystate.h, frozen since rc1; the offsets themselves come from the dump).
tests/cpython/test_gil_layouts_against_headers.py compiles those headers with mingw-w64
(LLP64, windows.h) and compares."""

from __future__ import annotations

from typing import Dict, Optional, Tuple

from dumpkit.cpython.clayout import offsets
from dumpkit.cpython.layouts import INTERP_312, P, RUNTIME_38, RUNTIME_39, RUNTIME_311, TSTATE_312
from dumpkit.records import record

# --- what the GIL is built of on Windows ---------------------------------------------------
# Include/internal/pycore_atomic.h (MSVC): _Py_atomic_int is { volatile int _value; },
# _Py_atomic_address { volatile uintptr_t _value; }: written below as int and uintptr_t.
# winnt.h: RTL_CRITICAL_SECTION (CRITICAL_SECTION)
CRITICAL_SECTION = (
    ("DebugInfo", P),
    ("LockCount", "long"),
    ("RecursionCount", "long"),
    ("OwningThread", P),  # HANDLE
    ("LockSemaphore", P),  # HANDLE
    ("SpinCount", "uintptr_t"),  # ULONG_PTR
)
# Include/internal/pycore_condvar.h, 3.8-3.12: _PY_EMULATED_WIN_CV is 1, so PyMUTEX_T is a
# CRITICAL_SECTION and PyCOND_T this struct, whose `waiting` counts the threads inside a wait
# not yet signalled (Python/condvar.h): on the GIL's `cond`, threads in take_gil
COND_EMULATED = (("sem", P), ("waiting", "int"))
# 3.13: _PY_EMULATED_WIN_CV is 0: PyMUTEX_T is an SRWLOCK, PyCOND_T a CONDITION_VARIABLE,
# each one pointer (winnt.h RTL_SRWLOCK, RTL_CONDITION_VARIABLE)
SRWLOCK = (("Ptr", P),)
CONDITION_VARIABLE = (("Ptr", P),)

# Include/internal/pycore_gil.h: struct _gil_runtime_state (FORCE_SWITCHING is defined
# there, so switch_cond and switch_mutex are present)
GIL_38 = (
    ("interval", "unsigned long"),  # microseconds: sys.getswitchinterval(), 5000 unless set
    ("last_holder", "uintptr_t"),  # _Py_atomic_address: the PyThreadState holding / having held it
    ("locked", "int"),  # _Py_atomic_int: 1 taken, 0 free, -1 not created
    ("switch_number", "unsigned long"),  # times it changed hands
    ("cond", COND_EMULATED),
    ("mutex", CRITICAL_SECTION),
    ("switch_cond", COND_EMULATED),
    ("switch_mutex", CRITICAL_SECTION),
)
# 3.13: last_holder and locked are plain PyThreadState * and int (read with _Py_atomic_*);
# `int enabled` leads only under Py_GIL_DISABLED (the free-threaded build, not read)
GIL_313 = (
    ("interval", "unsigned long"),
    ("last_holder", P),
    ("locked", "int"),
    ("switch_number", "unsigned long"),
    ("cond", CONDITION_VARIABLE),
    ("mutex", SRWLOCK),
    ("switch_cond", CONDITION_VARIABLE),
    ("switch_mutex", SRWLOCK),
)
# Include/internal/pycore_pystate.h (3.8), pycore_runtime.h (3.9-3.11): the head of struct
# _gilstate_runtime_state, up to tstate_current (_Py_atomic_address)
GILSTATE_38 = (("check_enabled", "int"), ("tstate_current", "uintptr_t"))

# --- 3.8 -------------------------------------------------------------------------------------
# Include/cpython/objimpl.h: PyGC_Head
GC_HEAD = (("_gc_next", "uintptr_t"), ("_gc_prev", "uintptr_t"))
# Include/internal/pycore_pymem.h (3.8), pycore_gc.h (3.12): struct gc_generation,
# gc_generation_stats, _gc_runtime_state (NUM_GENERATIONS is 3)
GC_GENERATION = (("head", GC_HEAD), ("threshold", "int"), ("count", "int"))
GC_GENERATION_STATS = (("collections", "Py_ssize_t"), ("collected", "Py_ssize_t"), ("uncollectable", "Py_ssize_t"))
GC_RUNTIME_38 = (
    ("trash_delete_later", P),
    ("trash_delete_nesting", "int"),
    ("enabled", "int"),
    ("debug", "int"),
    ("generations", ("array", GC_GENERATION, 3)),
    ("generation0", P),
    ("permanent_generation", GC_GENERATION),
    ("generation_stats", ("array", GC_GENERATION_STATS, 3)),
    ("collecting", "int"),
    ("garbage", P),
    ("callbacks", P),
    ("long_lived_total", "Py_ssize_t"),
    ("long_lived_pending", "Py_ssize_t"),
)
# Include/internal/pycore_pystate.h: struct _pending_calls (NPENDINGCALLS is 32)
PENDING_CALL = (("func", P), ("arg", P))
PENDING_CALLS_38 = (
    ("finishing", "int"),
    ("lock", P),  # PyThread_type_lock
    ("calls_to_do", "int"),  # _Py_atomic_int
    ("async_exc", "int"),
    ("calls", ("array", PENDING_CALL, 32)),
    ("first", "int"),
    ("last", "int"),
)
# Include/internal/pycore_pystate.h: struct _ceval_runtime_state
CEVAL_RUNTIME_38 = (
    ("recursion_limit", "int"),
    ("tracing_possible", "int"),
    ("eval_breaker", "int"),  # _Py_atomic_int
    ("gil_drop_request", "int"),  # _Py_atomic_int
    ("pending", PENDING_CALLS_38),
    ("signals_pending", "int"),  # _Py_atomic_int
    ("gil", GIL_38),
)
# What follows `interpreters` in struct pyruntimestate, 3.8-3.11, up to `ceval`
RUNTIME_MIDDLE_38 = (
    ("xidregistry", (("mutex", P), ("head", P))),
    ("main_thread", "unsigned long"),
    ("exitfuncs", ("array", P, 32)),  # NEXITFUNCS
    ("nexitfuncs", "int"),
)
# Include/internal/pycore_pystate.h: struct pyruntimestate (the gc state is still here in 3.8)
RUNTIME_GIL_38 = (
    *RUNTIME_38,
    *RUNTIME_MIDDLE_38,
    ("gc", GC_RUNTIME_38),
    ("ceval", CEVAL_RUNTIME_38),
    ("gilstate", GILSTATE_38),
)

# --- 3.9-3.11 -------------------------------------------------------------------------------
# Include/internal/pycore_runtime.h: struct _ceval_runtime_state kept signals_pending and the
# GIL (the rest went to the interpreter's _ceval_state); 3.10's `#ifndef
# EXPERIMENTAL_ISOLATED_SUBINTERPRETERS` around `gil` holds in release builds
CEVAL_RUNTIME_39 = (("signals_pending", "int"), ("gil", GIL_38))
# Include/internal/pycore_runtime.h: struct pyruntimestate, gc moved to the interpreter
RUNTIME_GIL_39 = (*RUNTIME_39, *RUNTIME_MIDDLE_38, ("ceval", CEVAL_RUNTIME_39), ("gilstate", GILSTATE_38))
RUNTIME_GIL_310 = RUNTIME_GIL_39
# 3.11: `_initialized` first, as RUNTIME_311
RUNTIME_GIL_311 = (*RUNTIME_311, *RUNTIME_MIDDLE_38, ("ceval", CEVAL_RUNTIME_39), ("gilstate", GILSTATE_38))

# --- 3.12 -----------------------------------------------------------------------------------
# Include/internal/pycore_ceval_state.h: struct _ceval_state, up to the GIL pointer
CEVAL_STATE_312 = (
    ("eval_breaker", "int"),  # _Py_atomic_int
    ("gil_drop_request", "int"),  # _Py_atomic_int
    ("recursion_limit", "int"),
    ("gil", P),  # struct _gil_runtime_state *
)
# Include/internal/pycore_interp.h: struct _is, from `threads` on to `ceval`
INTERP_GIL_312 = (
    *INTERP_312,
    ("runtime", P),
    ("_finalizing", "uintptr_t"),  # _Py_atomic_address
    ("gc", GC_RUNTIME_38),  # Include/internal/pycore_gc.h: the same fields as 3.8's
    ("sysdict", P),
    ("builtins", P),
    ("ceval", CEVAL_STATE_312),
)
# Include/cpython/pystate.h: PyThreadState._status, unsigned int bit-fields from bit 0
# (MSVC allocates them from the low bit): initialized, bound, unbound, bound_gilstate,
# active (3.12, 3.13), holds_gil (3.13 only), then the finalization bits
STATUS_ACTIVE_BIT = 4
STATUS_HOLDS_GIL_BIT_313 = 5


@record
class GilLayout:
    """Where the GIL and its witnesses are, for one CPython minor: offsets in bytes."""

    version: Tuple[int, int]
    source: str  # the headers, or _Py_DebugOffsets
    in_runtime: bool  # 3.8-3.11: the GIL is inside _PyRuntime; else each interpreter points to one
    gil: int  # offset of the GIL in _PyRuntime, or of the pointer to it in PyInterpreterState
    interval: int  # offsets inside struct _gil_runtime_state
    last_holder: int
    locked: int
    switch_number: int
    cond_waiting: Optional[int] = None  # the emulated condition variable's count of waiters (3.8-3.12)
    tstate_current: Optional[int] = None  # in _PyRuntime (3.8-3.11)
    tstate_status: Optional[int] = None  # PyThreadState._status (3.12+)
    status_bit: Optional[int] = None  # the bit of _status that says it holds the GIL
    status_field: Optional[str] = None  # that bit's name: "active" (3.12), "holds_gil" (3.13)

    @property
    def gil_size(self) -> int:
        """Bytes to read of the GIL: up to the last field read."""
        waiting = 0 if self.cond_waiting is None else self.cond_waiting + 4
        return max(self.interval + 4, self.last_holder + 8, self.locked + 4, self.switch_number + 4, waiting)


def _runtime_gil(version: Tuple[int, int], runtime: tuple) -> GilLayout:
    table = offsets(runtime)
    return GilLayout(
        version=version,
        source=f"CPython {version[0]}.{version[1]} headers (Windows x64, LLP64): _PyRuntime.ceval.gil",
        in_runtime=True,
        gil=table["ceval.gil"],
        interval=table["ceval.gil.interval"] - table["ceval.gil"],
        last_holder=table["ceval.gil.last_holder"] - table["ceval.gil"],
        locked=table["ceval.gil.locked"] - table["ceval.gil"],
        switch_number=table["ceval.gil.switch_number"] - table["ceval.gil"],
        cond_waiting=table["ceval.gil.cond.waiting"] - table["ceval.gil"],
        tstate_current=table["gilstate.tstate_current"],
    )


def _gil_312() -> GilLayout:
    gil = offsets(GIL_38)
    return GilLayout(
        version=(3, 12),
        source="CPython 3.12 headers (Windows x64, LLP64): PyInterpreterState.ceval.gil",
        in_runtime=False,
        gil=offsets(INTERP_GIL_312)["ceval.gil"],
        interval=gil["interval"],
        last_holder=gil["last_holder"],
        locked=gil["locked"],
        switch_number=gil["switch_number"],
        cond_waiting=gil["cond.waiting"],
        tstate_status=offsets(TSTATE_312)["_status"],
        status_bit=STATUS_ACTIVE_BIT,
        status_field="active",
    )


GIL_LAYOUTS: Dict[Tuple[int, int], GilLayout] = {
    (3, 8): _runtime_gil((3, 8), RUNTIME_GIL_38),
    (3, 9): _runtime_gil((3, 9), RUNTIME_GIL_39),
    (3, 10): _runtime_gil((3, 10), RUNTIME_GIL_310),
    (3, 11): _runtime_gil((3, 11), RUNTIME_GIL_311),
    (3, 12): _gil_312(),
}


class GilOffsetsError(ValueError):
    """_Py_DebugOffsets' GIL fields do not hold together (one line)."""


def gil_layout_from_debug_offsets(values: Dict[str, int], version: Tuple[int, int] = (3, 13)) -> GilLayout:
    """3.13's or 3.14's GilLayout from the parsed _Py_DebugOffsets record (debug_offsets.parse_fields).
    `gil_runtime_state_locked` and `_holder` are offsets in PyInterpreterState of the
    interpreter's own `_gil.locked` and `_gil.last_holder`: less `gil_runtime_state` (of
    `_gil`), they are the fields' places inside any struct _gil_runtime_state, which is
    what `ceval.gil` points to. interval and switch_number are not published: the header's
    places, once the published ones agree with the header's (3.13's header for 3.14 too: a
    3.14 whose published places differ gets no GIL layout). The second witness, PyThreadState._status.holds_gil, is read on
    3.13 alone: 3.14's bit-field was not checked against a real build."""
    base = values["interpreter_state.gil_runtime_state"]
    locked = values["interpreter_state.gil_runtime_state_locked"] - base
    holder = values["interpreter_state.gil_runtime_state_holder"] - base
    header = offsets(GIL_313)
    if (locked, holder) != (header["locked"], header["last_holder"]):
        raise GilOffsetsError(
            f"_Py_DebugOffsets puts the GIL's locked at +{locked} and last_holder at +{holder}; "
            f"3.13's header has +{header['locked']} and +{header['last_holder']}"
        )
    witness = version == (3, 13)
    return GilLayout(
        version=version,
        source=f"_Py_DebugOffsets in the dump ({version[0]}.{version[1]}): PyInterpreterState.ceval.gil",
        in_runtime=False,
        gil=values["interpreter_state.ceval_gil"],
        interval=header["interval"],
        last_holder=holder,
        locked=locked,
        switch_number=header["switch_number"],
        tstate_status=values["thread_state.status"] if witness else None,
        status_bit=STATUS_HOLDS_GIL_BIT_313 if witness else None,
        status_field="holds_gil" if witness else None,
    )
