"""Where CPython 3.8-3.12 keep what the reader needs, for the PSF's Windows x64 builds
(release, not debug, not free-threaded), written down as each version's headers declare it.

Each structure below lists its fields in header order with their C types, up to the last
field the reader uses; `clayout` computes the offsets with MSVC's x64 (LLP64) rules. The
header each list comes from is named beside it, so a reviewer can check them line by line
against `git show v3.X.0:Include/...`. 3.13 and later describe themselves
(`_Py_DebugOffsets`, see debug_offsets.py) and need no table here.

Verified on real crash dumps (every thread's Python stack matched what the crashed program
printed): the PSF's 3.8.1 and python.org's 3.9.13, 3.10.11, 3.11.9 and 3.12.9 Windows
builds under Wine; which other patch releases are trusted, and why, is verified.py's
judgement. Also tested on synthetic memory laid out by ctypes from independently
transcribed field lists."""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from dumpkit.cpython.clayout import offsets
from dumpkit.cpython.verified import VERIFIED_BUILDS
from dumpkit.records import record

P = "ptr"
OBJECT_HEAD = (("ob_refcnt", "Py_ssize_t"), ("ob_type", P))  # Include/object.h (release build)
VAR_HEAD = (*OBJECT_HEAD, ("ob_size", "Py_ssize_t"))
PY_OBJECT_TYPE = offsets(OBJECT_HEAD)["ob_type"]


@record
class Layout:
    """Offsets (bytes) of what the walk reads; None where a version has no such field."""

    version: Tuple[int, int]
    verified: bool  # checked on a real dump of a build of this minor (verified.py says which)
    source: str  # where the offsets come from
    frames: str  # "frame_object" (3.8-3.10) or "interpreter_frame" (3.11+)
    line_table: str  # "lnotab" (3.8-3.9), "linetable" (3.10), "locations" (3.11+)
    runtime_interpreters_head: int
    interp_next: int
    interp_threads_head: int
    tstate_next: int
    tstate_thread_id: int  # unsigned long: 4 bytes on Windows
    tstate_frame: int  # the frame itself (3.8-3.10, 3.13+) or the _PyCFrame pointer (3.11-3.12)
    cframe_current_frame: Optional[int]
    frame_back: int
    frame_code: int
    frame_instr: int  # f_lasti (int) for frame objects, prev_instr/instr_ptr (pointer) otherwise
    frame_owner: Optional[int]
    # the first frame owner that is not Python code (3.12-3.13's C shim, FRAME_OWNED_BY_CSTACK;
    # 3.14's entry frame and C shim, FRAME_OWNED_BY_INTERPRETER and _CSTACK, are it and above)
    owner_cstack: Optional[int]
    frame_size: int  # bytes to read per frame (covers every field above)
    code_filename: int
    code_name: int
    code_firstlineno: int
    code_line_table: int
    code_adaptive: Optional[int]  # co_code_adaptive: the instructions prev_instr points into
    code_size: int
    unicode_length: int
    unicode_state: int
    unicode_ascii_size: int  # sizeof(PyASCIIObject): compact ASCII data follows
    unicode_compact_size: int  # sizeof(PyCompactUnicodeObject): compact non-ASCII data follows
    bytes_size: int
    bytes_sval: int
    code_tag_mask: int = 0  # tag bits below the code object's address in frame_code (3.14's _PyStackRef)


def _prefix_size(table: Dict[str, int], *fields: str) -> int:
    # enough bytes to hold every field the reader uses, and no more
    return max(table[f + ":end"] for f in fields)


# --- strings and bytes ----------------------------------------------------------------
# Include/cpython/unicodeobject.h (3.8-3.11): PyASCIIObject, PyCompactUnicodeObject
ASCII_38 = (
    *OBJECT_HEAD,
    ("length", "Py_ssize_t"),
    ("hash", "Py_hash_t"),
    ("state", "unsigned int"),  # interned:2 kind:3 compact:1 ascii:1 ready:1 :24
    ("wstr", P),  # wchar_t *, gone in 3.12
)
COMPACT_38 = (("_base", ASCII_38), ("utf8_length", "Py_ssize_t"), ("utf8", P), ("wstr_length", "Py_ssize_t"))
# 3.12: wstr and wstr_length removed
ASCII_312 = ASCII_38[:-1]
COMPACT_312 = (("_base", ASCII_312), ("utf8_length", "Py_ssize_t"), ("utf8", P))
# Include/cpython/bytesobject.h: PyBytesObject
BYTES = (*VAR_HEAD, ("ob_shash", "Py_hash_t"), ("ob_sval", ("array", "char", 1)))

# --- 3.8 ---------------------------------------------------------------------------------
# Include/internal/pycore_pystate.h: struct pyruntimestate
RUNTIME_38 = (
    ("preinitializing", "int"),
    ("preinitialized", "int"),
    ("core_initialized", "int"),
    ("initialized", "int"),
    ("finalizing", P),  # PyThreadState *
    ("interpreters", (("mutex", P), ("head", P), ("main", P), ("next_id", "int64_t"))),
)
# Include/internal/pycore_pystate.h: struct _is
INTERP_38 = (("next", P), ("tstate_head", P), ("id", "int64_t"))
# Include/cpython/pystate.h: _PyErr_StackItem (3.7-3.10)
ERR_STACKITEM_38 = (("exc_type", P), ("exc_value", P), ("exc_traceback", P), ("previous_item", P))
# Runs of fields that several versions' struct _ts share, in header order:
TRACE_FUNCS = (("c_profilefunc", P), ("c_tracefunc", P), ("c_profileobj", P), ("c_traceobj", P))  # 3.8-3.12
CUREXC = (("curexc_type", P), ("curexc_value", P), ("curexc_traceback", P))  # 3.8-3.11
# ... exc_info up to thread_id, the last field read (3.8-3.12)
TSTATE_END = (
    ("exc_info", P),
    ("dict", P),
    ("gilstate_counter", "int"),
    ("async_exc", P),
    ("thread_id", "unsigned long"),
)
# Include/cpython/pystate.h: struct _ts
TSTATE_38 = (
    ("prev", P),
    ("next", P),
    ("interp", P),
    ("frame", P),  # struct _frame *
    ("recursion_depth", "int"),
    ("overflowed", "char"),
    ("recursion_critical", "char"),
    ("stackcheck_counter", "int"),
    ("tracing", "int"),
    ("use_tracing", "int"),
    *TRACE_FUNCS,
    *CUREXC,
    ("exc_state", ERR_STACKITEM_38),
    *TSTATE_END,
)
# Include/frameobject.h: struct _frame
FRAME_38 = (
    *VAR_HEAD,
    ("f_back", P),
    ("f_code", P),
    ("f_builtins", P),
    ("f_globals", P),
    ("f_locals", P),
    ("f_valuestack", P),
    ("f_stacktop", P),
    ("f_trace", P),
    ("f_trace_lines", "char"),
    ("f_trace_opcodes", "char"),
    ("f_gen", P),
    ("f_lasti", "int"),  # byte offset of the last instruction started
    ("f_lineno", "int"),  # only current while tracing
)
# Include/code.h: PyCodeObject (3.8-3.9; 3.10 names the last field co_linetable)
CODE_38 = (
    *OBJECT_HEAD,
    ("co_argcount", "int"),
    ("co_posonlyargcount", "int"),
    ("co_kwonlyargcount", "int"),
    ("co_nlocals", "int"),
    ("co_stacksize", "int"),
    ("co_flags", "int"),
    ("co_firstlineno", "int"),
    ("co_code", P),
    ("co_consts", P),
    ("co_names", P),
    ("co_varnames", P),
    ("co_freevars", P),
    ("co_cellvars", P),
    ("co_cell2arg", P),  # Py_ssize_t *
    ("co_filename", P),
    ("co_name", P),
    ("co_lnotab", P),
)

# --- 3.9 ---------------------------------------------------------------------------------
# Include/internal/pycore_runtime.h: `_finalizing` became a _Py_atomic_address (one uintptr_t)
RUNTIME_39 = (*RUNTIME_38[:4], ("_finalizing", "uintptr_t"), RUNTIME_38[5])
# Include/internal/pycore_interp.h: struct _is gained `runtime` before `id`
INTERP_39 = (("next", P), ("tstate_head", P), ("runtime", P), ("id", "int64_t"))
# Include/cpython/pystate.h, Include/cpython/frameobject.h, Include/cpython/code.h: as 3.8
TSTATE_39 = TSTATE_38
FRAME_39 = FRAME_38
CODE_39 = CODE_38

# --- 3.10 --------------------------------------------------------------------------------
RUNTIME_310 = RUNTIME_39
INTERP_310 = INTERP_39
# Include/cpython/pystate.h: use_tracing moved into CFrame; recursion_headroom replaces the chars
TSTATE_310 = (
    ("prev", P),
    ("next", P),
    ("interp", P),
    ("frame", P),
    ("recursion_depth", "int"),
    ("recursion_headroom", "int"),
    ("stackcheck_counter", "int"),
    ("tracing", "int"),
    ("cframe", P),  # CFrame *
    *TRACE_FUNCS,
    *CUREXC,
    ("exc_state", ERR_STACKITEM_38),
    *TSTATE_END,
)
# Include/cpython/frameobject.h: f_stacktop gave way to f_stackdepth; f_lasti counts code units
FRAME_310 = (
    *VAR_HEAD,
    ("f_back", P),
    ("f_code", P),
    ("f_builtins", P),
    ("f_globals", P),
    ("f_locals", P),
    ("f_valuestack", P),
    ("f_trace", P),
    ("f_stackdepth", "int"),
    ("f_trace_lines", "char"),
    ("f_trace_opcodes", "char"),
    ("f_gen", P),
    ("f_lasti", "int"),  # index of the last instruction (in 2-byte code units)
    ("f_lineno", "int"),
)
# Include/cpython/code.h: as 3.8 with co_lnotab replaced by co_linetable
CODE_310 = (*CODE_38[:-1], ("co_linetable", P))

# --- 3.11 --------------------------------------------------------------------------------
# Include/internal/pycore_runtime.h: `_initialized` first
RUNTIME_311 = (("_initialized", "int"), *RUNTIME_39)
# Include/internal/pycore_interp.h: threads moved into a struct right after `next`
THREADS_311 = (("next_unique_id", "uint64_t"), ("head", P), ("count", "long"), ("stacksize", "size_t"))
INTERP_311 = (("next", P), ("threads", THREADS_311), ("runtime", P), ("id", "int64_t"))
# Include/cpython/pystate.h: struct _ts
TSTATE_311 = (
    ("prev", P),
    ("next", P),
    ("interp", P),
    ("_initialized", "int"),
    ("_static", "int"),
    ("recursion_remaining", "int"),
    ("recursion_limit", "int"),
    ("recursion_headroom", "int"),
    ("tracing", "int"),
    ("tracing_what", "int"),
    ("cframe", P),  # _PyCFrame *
    *TRACE_FUNCS,
    *CUREXC,  # exc_state moved to the end of the struct
    *TSTATE_END,
)
# Include/cpython/pystate.h: _PyCFrame
CFRAME_311 = (("use_tracing", "uint8_t"), ("current_frame", P), ("previous", P))
# Include/internal/pycore_frame.h: _PyInterpreterFrame
IFRAME_311 = (
    ("f_func", P),
    ("f_globals", P),
    ("f_builtins", P),
    ("f_locals", P),
    ("f_code", P),
    ("frame_obj", P),
    ("previous", P),
    ("prev_instr", P),  # _Py_CODEUNIT *
    ("stacktop", "int"),
    ("is_entry", "bool"),
    ("owner", "char"),
)
# Runs of fields the 3.11 and 3.12 code objects share, in header order:
CODE_HEAD_311 = (*VAR_HEAD, ("co_consts", P), ("co_names", P), ("co_exceptiontable", P), ("co_flags", "int"))
CODE_ARGS_311 = tuple((name, "int") for name in ("co_argcount", "co_posonlyargcount", "co_kwonlyargcount"))
CODE_NAMES_311 = tuple(
    (name, P)
    for name in (
        "co_localsplusnames",
        "co_localspluskinds",
        "co_filename",
        "co_name",
        "co_qualname",
        "co_linetable",
        "co_weakreflist",
    )
)
# Include/cpython/code.h: _PyCode_DEF
CODE_311 = (
    *CODE_HEAD_311,
    ("co_warmup", "short"),
    ("_co_linearray_entry_size", "short"),
    *CODE_ARGS_311,
    ("co_stacksize", "int"),
    ("co_firstlineno", "int"),
    ("co_nlocalsplus", "int"),
    ("co_nlocals", "int"),
    ("co_nplaincellvars", "int"),
    ("co_ncellvars", "int"),
    ("co_nfreevars", "int"),
    *CODE_NAMES_311,
    ("_co_code", P),
    ("_co_linearray", P),
    ("_co_firsttraceable", "int"),
    ("co_extra", P),
    ("co_code_adaptive", ("array", "char", 1)),
)

# --- 3.12 --------------------------------------------------------------------------------
RUNTIME_312 = RUNTIME_311  # Include/internal/pycore_runtime.h: same prefix
# Include/internal/pycore_interp.h: id and friends moved before threads
INTERP_312 = (
    ("next", P),
    ("id", "int64_t"),
    ("id_refcount", "int64_t"),
    ("requires_idref", "int"),
    ("id_mutex", P),
    ("_initialized", "int"),
    ("finalizing", "int"),
    ("monitoring_version", "uint64_t"),
    ("last_restart_version", "uint64_t"),
    ("threads", THREADS_311),
)
# Include/cpython/pystate.h: struct _ts
TSTATE_312 = (
    ("prev", P),
    ("next", P),
    ("interp", P),
    ("_status", "unsigned int"),  # eight 1-bit fields and :24 padding
    ("py_recursion_remaining", "int"),
    ("py_recursion_limit", "int"),
    ("c_recursion_remaining", "int"),
    ("recursion_headroom", "int"),
    ("tracing", "int"),
    ("what_event", "int"),
    ("cframe", P),  # _PyCFrame *
    *TRACE_FUNCS,
    ("current_exception", P),  # replaces curexc_type/value/traceback
    *TSTATE_END,
)
CFRAME_312 = (("current_frame", P), ("previous", P))  # use_tracing is gone
# Include/internal/pycore_frame.h: _PyInterpreterFrame, f_code first
IFRAME_312 = (
    ("f_code", P),
    ("previous", P),
    ("f_funcobj", P),
    ("f_globals", P),
    ("f_builtins", P),
    ("f_locals", P),
    ("frame_obj", P),
    ("prev_instr", P),
    ("stacktop", "int"),
    ("return_offset", "uint16_t"),
    ("owner", "char"),
)
# Include/cpython/code.h: _PyCode_DEF
CODE_312 = (
    *CODE_HEAD_311,
    *CODE_ARGS_311,
    ("co_stacksize", "int"),
    ("co_firstlineno", "int"),
    ("co_nlocalsplus", "int"),
    ("co_framesize", "int"),
    ("co_nlocals", "int"),
    ("co_ncellvars", "int"),
    ("co_nfreevars", "int"),
    ("co_version", "uint32_t"),
    *CODE_NAMES_311,
    ("_co_cached", P),
    ("_co_instrumentation_version", "uint64_t"),
    ("_co_monitoring", P),
    ("_co_firsttraceable", "int"),
    ("co_extra", P),
    ("co_code_adaptive", ("array", "char", 1)),
)
FRAME_OWNED_BY_CSTACK_312 = 3  # Include/internal/pycore_frame.h: enum _frameowner


# Where each Layout field comes from: (structure, field), per family of versions. The
# structures are named by their role; each version supplies its own field lists.
_COMMON = {
    "runtime_interpreters_head": ("runtime", "interpreters.head"),
    "interp_next": ("interp", "next"),
    "tstate_next": ("tstate", "next"),
    "tstate_thread_id": ("tstate", "thread_id"),
    "code_filename": ("code", "co_filename"),
    "code_name": ("code", "co_name"),
    "code_firstlineno": ("code", "co_firstlineno"),
    "unicode_length": ("ascii", "length"),
    "unicode_state": ("ascii", "state"),
    "unicode_ascii_size": ("ascii", "sizeof"),
    "unicode_compact_size": ("compact", "sizeof"),
    "bytes_size": ("bytes", "ob_size"),
    "bytes_sval": ("bytes", "ob_sval"),
}
_FRAME_OBJECT = {
    "interp_threads_head": ("interp", "tstate_head"),
    "tstate_frame": ("tstate", "frame"),
    "frame_back": ("frame", "f_back"),
    "frame_code": ("frame", "f_code"),
    "frame_instr": ("frame", "f_lasti"),
}
_INTERPRETER_FRAME = {
    "interp_threads_head": ("interp", "threads.head"),
    "tstate_frame": ("tstate", "cframe"),
    "cframe_current_frame": ("cframe", "current_frame"),
    "frame_back": ("frame", "previous"),
    "frame_code": ("frame", "f_code"),
    "frame_instr": ("frame", "prev_instr"),
    "frame_owner": ("frame", "owner"),
    "code_line_table": ("code", "co_linetable"),
    "code_adaptive": ("code", "co_code_adaptive"),
}


def _from_headers(version: Tuple[int, int], line_table: str, structs: Dict[str, tuple]) -> Layout:
    tables = {role: offsets(fields) for role, fields in structs.items()}
    frame_object = "cframe" not in structs
    roles = {**_COMMON, **(_FRAME_OBJECT if frame_object else _INTERPRETER_FRAME)}
    values: Dict[str, Any] = {key: tables[role][name] for key, (role, name) in roles.items()}
    if frame_object:
        table_field = "co_lnotab" if line_table == "lnotab" else "co_linetable"
        values.update(code_line_table=tables["code"][table_field], cframe_current_frame=None, code_adaptive=None)
        values.update(
            frame_owner=None, frame_size=_prefix_size(tables["frame"], "f_back", "f_code", "f_lasti", "ob_type")
        )
    else:
        table_field = "co_linetable"
        values["frame_size"] = _prefix_size(tables["frame"], "previous", "f_code", "prev_instr", "owner")
    values["code_size"] = _prefix_size(
        tables["code"], "co_filename", "co_name", "co_firstlineno", table_field, "ob_type"
    )
    values["owner_cstack"] = FRAME_OWNED_BY_CSTACK_312 if version >= (3, 12) else None
    return Layout(
        version=version,
        verified=version in VERIFIED_BUILDS,
        source=f"CPython {version[0]}.{version[1]} headers (Windows x64, LLP64)",
        frames="frame_object" if frame_object else "interpreter_frame",
        line_table=line_table,
        **values,
    )


def _structs(
    runtime, interp, tstate, frame, code, cframe=None, ascii_=ASCII_38, compact=COMPACT_38
) -> Dict[str, tuple]:
    found = {"runtime": runtime, "interp": interp, "tstate": tstate, "frame": frame, "code": code}
    found.update(ascii=ascii_, compact=compact, bytes=BYTES)
    if cframe is not None:
        found["cframe"] = cframe
    return found


LAYOUTS: Dict[Tuple[int, int], Layout] = {
    (3, 8): _from_headers((3, 8), "lnotab", _structs(RUNTIME_38, INTERP_38, TSTATE_38, FRAME_38, CODE_38)),
    (3, 9): _from_headers((3, 9), "lnotab", _structs(RUNTIME_39, INTERP_39, TSTATE_39, FRAME_39, CODE_39)),
    (3, 10): _from_headers((3, 10), "linetable", _structs(RUNTIME_310, INTERP_310, TSTATE_310, FRAME_310, CODE_310)),
    (3, 11): _from_headers(
        (3, 11), "locations", _structs(RUNTIME_311, INTERP_311, TSTATE_311, IFRAME_311, CODE_311, CFRAME_311)
    ),
    (3, 12): _from_headers(
        (3, 12),
        "locations",
        _structs(RUNTIME_312, INTERP_312, TSTATE_312, IFRAME_312, CODE_312, CFRAME_312, ASCII_312, COMPACT_312),
    ),
}
