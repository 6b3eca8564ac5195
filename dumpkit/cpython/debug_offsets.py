"""CPython 3.13+ describes its own structures: `_PyRuntime` starts with a `_Py_DebugOffsets`
record (Include/internal/pycore_runtime.h in 3.13, pycore_debug_offsets.h in 3.14): the
cookie "xdebugpy", PY_VERSION_HEX, a free-threading flag, then groups of uint64_t offsets,
each group starting with the size of the structure it describes. The reader only needs the
order of those uint64_t fields, which is fixed for a minor version (remote debuggers rely on
it); the offsets themselves come from the dump."""

from __future__ import annotations

import struct
from typing import Any, Dict, Optional, Sequence, Tuple

from dumpkit.cpython.layouts import PY_OBJECT_TYPE, Layout
from dumpkit.cpython.verified import VERIFIED_BUILDS

COOKIE = b"xdebugpy"

# The uint64_t fields after cookie/version/free_threaded, in declaration order: the 3.13
# `struct _Py_DebugOffsets` (group name, field names). Only the groups up to the last one
# the reader uses are listed.
FIELDS_313: Sequence[Tuple[str, Sequence[str]]] = (
    ("runtime_state", ("size", "finalizing", "interpreters_head")),
    (
        "interpreter_state",
        (
            "size",
            "id",
            "next",
            "threads_head",
            "gc",
            "imports_modules",
            "sysdict",
            "builtins",
            "ceval_gil",
            "gil_runtime_state",
            "gil_runtime_state_enabled",
            "gil_runtime_state_locked",
            "gil_runtime_state_holder",
        ),
    ),
    (
        "thread_state",
        (
            "size",
            "prev",
            "next",
            "interp",
            "current_frame",
            "thread_id",
            "native_thread_id",
            "datastack_chunk",
            "status",
        ),
    ),
    ("interpreter_frame", ("size", "previous", "executable", "instr_ptr", "localsplus", "owner")),
    (
        "code_object",
        (
            "size",
            "filename",
            "name",
            "qualname",
            "linetable",
            "firstlineno",
            "argcount",
            "localsplusnames",
            "localspluskinds",
            "co_code_adaptive",
        ),
    ),
    ("pyobject", ("size", "ob_type")),
    ("type_object", ("size", "tp_name", "tp_repr", "tp_flags")),
    ("tuple_object", ("size", "ob_item", "ob_size")),
    ("list_object", ("size", "ob_item", "ob_size")),
    ("dict_object", ("size", "ma_keys", "ma_values")),
    ("float_object", ("size", "ob_fval")),
    ("long_object", ("size", "lv_tag", "ob_digit")),
    ("bytes_object", ("size", "ob_size", "ob_sval")),
    ("unicode_object", ("size", "state", "length", "asciiobject_size")),
)
# 3.14's record (Include/internal/pycore_debug_offsets.h): 3.13's groups, with the main
# thread's head in interpreter_state, the code-object and thread-local-bytecode generations
# after the GIL's fields, the value-stack pointer and thread-local-bytecode index of a frame,
# a code object's thread-local bytecode, and a set_object group before dict_object. The
# fields that only a free-threaded build fills in are 0 in a default one.
_INTERP_313 = tuple(FIELDS_313[1][1])
FIELDS_314: Sequence[Tuple[str, Sequence[str]]] = (
    FIELDS_313[0],
    # size, id, next, threads_head, then threads_main, then 3.13's others, then two more
    (
        "interpreter_state",
        (*_INTERP_313[:4], "threads_main", *_INTERP_313[4:], "code_object_generation", "tlbc_generation"),
    ),
    FIELDS_313[2],
    ("interpreter_frame", (*FIELDS_313[3][1], "stackpointer", "tlbc_index")),
    ("code_object", (*FIELDS_313[4][1], "co_tlbc")),
    *FIELDS_313[5:9],  # pyobject, type_object, tuple_object, list_object
    ("set_object", ("size", "used", "table", "mask")),
    *FIELDS_313[9:],  # dict_object ... unicode_object
)
# The minors whose record this reader knows, and the field order of each.
FIELDS_BY_VERSION: Dict[Tuple[int, int], Sequence[Tuple[str, Sequence[str]]]] = {
    (3, 13): FIELDS_313,
    (3, 14): FIELDS_314,
}
# Layout field -> the _Py_DebugOffsets field that gives it
_ROLES = {
    "runtime_interpreters_head": "runtime_state.interpreters_head",
    "interp_next": "interpreter_state.next",
    "interp_threads_head": "interpreter_state.threads_head",
    "tstate_next": "thread_state.next",
    "tstate_thread_id": "thread_state.thread_id",
    "tstate_frame": "thread_state.current_frame",
    "frame_back": "interpreter_frame.previous",
    "frame_code": "interpreter_frame.executable",
    "frame_instr": "interpreter_frame.instr_ptr",
    "frame_owner": "interpreter_frame.owner",
    "code_filename": "code_object.filename",
    "code_name": "code_object.name",
    "code_firstlineno": "code_object.firstlineno",
    "code_line_table": "code_object.linetable",
    "code_adaptive": "code_object.co_code_adaptive",
    "unicode_length": "unicode_object.length",
    "unicode_state": "unicode_object.state",
    "unicode_ascii_size": "unicode_object.asciiobject_size",
    "bytes_size": "bytes_object.ob_size",
    "bytes_sval": "bytes_object.ob_sval",
}
# enum _frameowner (Include/internal/pycore_frame.h; pycore_interpframe_structs.h in 3.14):
# from this value up a frame is not Python code. 3.13: FRAME_OWNED_BY_CSTACK (a C entry
# shim) = 3; 3.14: FRAME_OWNED_BY_INTERPRETER (the eval loop's entry frame) = 3 and
# FRAME_OWNED_BY_CSTACK = 4.
FRAME_NOT_PYTHON_OWNER = 3
# 3.14's f_executable is a _PyStackRef: the code object's address with tag bits in its low
# bits (a deferred reference sets the lowest); the low two are cleared, as pystack does.
STACKREF_TAG_BITS = 3
HEADER_SIZE = 8 + 8 + 8  # cookie, version, free_threaded


def record_size(version: Tuple[int, int] = (3, 13)) -> int:
    """Bytes of `version`'s record (3.13's for a minor this reader does not know: enough to
    read its header and refuse it)."""
    fields = FIELDS_BY_VERSION.get(version, FIELDS_313)
    return HEADER_SIZE + 8 * sum(len(names) for _, names in fields)


class DebugOffsetsError(ValueError):
    """The record is not a _Py_DebugOffsets this reader understands (one line)."""


def parse_header(raw: bytes) -> Tuple[int, bool]:
    """(PY_VERSION_HEX, free_threaded) from the first 24 bytes, after checking the cookie."""
    if len(raw) < HEADER_SIZE or raw[:8] != COOKIE:
        raise DebugOffsetsError(f"no _Py_DebugOffsets cookie at the start of _PyRuntime (found {raw[:8]!r})")
    version, free_threaded = struct.unpack_from("<QQ", raw, 8)
    return version, bool(free_threaded)


def parse_fields(raw: bytes, version: Tuple[int, int] = (3, 13)) -> Dict[str, int]:
    """The record's offsets by "group.field", in `version`'s order."""
    fields = FIELDS_BY_VERSION[version]
    values: Dict[str, int] = {}
    at = HEADER_SIZE
    for group, names in fields:
        for name in names:
            (values[f"{group}.{name}"],) = struct.unpack_from("<Q", raw, at)
            at += 8
    return values


def _check(v: Dict[str, int]) -> Optional[str]:
    # Each offset must lie inside the structure whose size heads its group: a record read
    # with the wrong field order, or from damaged memory, fails this.
    for group in ("runtime_state", "interpreter_state", "thread_state", "interpreter_frame", "code_object"):
        size = v[f"{group}.size"]
        if not 0 < size < 1 << 20:
            return f"{group}.size = {size}"
        for key, value in v.items():
            if key.startswith(group + ".") and key != f"{group}.size" and value >= size:
                if key == "interpreter_state.gil_runtime_state_enabled" and value == 0:
                    continue
                return f"{key} = {value} is not inside {group} ({size} bytes)"
    return None


def layout_from_record(raw: bytes, version: Tuple[int, int]) -> Layout:
    """The reader's Layout from a 3.13 or 3.14 _Py_DebugOffsets record (raw bytes from _PyRuntime)."""
    hexversion, free_threaded = parse_header(raw)
    found = ((hexversion >> 24) & 0xFF, (hexversion >> 16) & 0xFF)
    if found != version:
        raise DebugOffsetsError(f"_Py_DebugOffsets says {found[0]}.{found[1]}, the DLL is {version[0]}.{version[1]}")
    if free_threaded:
        raise DebugOffsetsError("free-threaded build (python3Xt.dll): object headers differ; not read")
    if found not in FIELDS_BY_VERSION:
        raise DebugOffsetsError(f"_Py_DebugOffsets of {found[0]}.{found[1]} is not known to this reader")
    if len(raw) < record_size(found):
        raise DebugOffsetsError("_Py_DebugOffsets record is cut short")
    v = parse_fields(raw, found)
    problem = _check(v)
    if problem:
        raise DebugOffsetsError(f"_Py_DebugOffsets does not hold together: {problem}")
    values: Dict[str, Any] = {key: v[field] for key, field in _ROLES.items()}
    frame_fields = ("previous", "executable", "instr_ptr")
    code_fields = ("filename", "name", "firstlineno", "linetable")
    values["frame_size"] = max(
        max(v[f"interpreter_frame.{k}"] for k in frame_fields) + 8, v["interpreter_frame.owner"] + 1
    )
    values["code_size"] = max(max(v[f"code_object.{k}"] for k in code_fields) + 8, PY_OBJECT_TYPE + 8)
    # PyCompactUnicodeObject = PyASCIIObject + utf8_length + utf8 (3.12+)
    values["unicode_compact_size"] = v["unicode_object.asciiobject_size"] + 16
    return Layout(
        version=found,
        verified=found in VERIFIED_BUILDS,
        source=f"_Py_DebugOffsets in the dump ({found[0]}.{found[1]})",
        frames="interpreter_frame",
        line_table="locations",
        cframe_current_frame=None,
        owner_cstack=FRAME_NOT_PYTHON_OWNER,
        code_tag_mask=STACKREF_TAG_BITS if found >= (3, 14) else 0,
        **values,
    )
