"""CPython's structures for the PSF's Windows x64 builds, transcribed for the tests from
each version's headers as ctypes structures with fixed-size types (LLP64: `long` and
`unsigned long` are c_int32/c_uint32; pointers c_uint64). ctypes lays them out by the C
rules, independently of the reader's own offset tables (dumpkit/cpython/layouts.py).
Only the fields up to the last one anything reads are declared; trailing fields do not
move earlier ones."""

from __future__ import annotations

from ctypes import Structure, c_char, c_int8, c_int16, c_int32, c_int64, c_uint8, c_uint16, c_uint32, c_uint64

PTR = c_uint64
SSIZE = c_int64
LONG = c_int32  # LLP64
ULONG = c_uint32  # LLP64


def struct(name, fields):
    return type(name, (Structure,), {"_fields_": list(fields)})


def fields(cls, start=None, stop=None):
    """cls's fields from the one named `start` up to, not including, the one named `stop`."""
    names = [n for n, _ in cls._fields_]
    return cls._fields_[names.index(start) if start else 0 : names.index(stop) if stop else None]


def renamed(field_list, **new_names):
    return [(new_names.get(n, n), t) for n, t in field_list]


HEAD = [("ob_refcnt", SSIZE), ("ob_type", PTR)]  # Include/object.h PyObject_HEAD
VAR_HEAD = HEAD + [("ob_size", SSIZE)]  # PyObject_VAR_HEAD

# Include/cpython/unicodeobject.h
ASCII_38 = struct("ASCII_38", HEAD + [("length", SSIZE), ("hash", SSIZE), ("state", c_uint32), ("wstr", PTR)])
COMPACT_38 = struct("COMPACT_38", [("_base", ASCII_38), ("utf8_length", SSIZE), ("utf8", PTR), ("wstr_length", SSIZE)])
ASCII_312 = struct("ASCII_312", HEAD + [("length", SSIZE), ("hash", SSIZE), ("state", c_uint32)])
COMPACT_312 = struct("COMPACT_312", [("_base", ASCII_312), ("utf8_length", SSIZE), ("utf8", PTR)])
# Include/cpython/bytesobject.h
BYTES = struct("BYTES", VAR_HEAD + [("ob_shash", SSIZE), ("ob_sval", c_char * 1)])

# _PyErr_StackItem up to 3.10
ERR_ITEM = struct("ERR_ITEM", [("exc_type", PTR), ("exc_value", PTR), ("exc_traceback", PTR), ("previous_item", PTR)])
PYINTERPRETERS = struct("PYINTERPRETERS", [("mutex", PTR), ("head", PTR), ("main", PTR), ("next_id", c_int64)])

# ---- 3.8 / 3.9 ----------------------------------------------------------------------
RUNTIME_38 = struct(
    "RUNTIME_38",
    [
        ("preinitializing", c_int32),
        ("preinitialized", c_int32),
        ("core_initialized", c_int32),
        ("initialized", c_int32),
        ("finalizing", PTR),
        ("interpreters", PYINTERPRETERS),
    ],
)
INTERP_38 = struct("INTERP_38", [("next", PTR), ("tstate_head", PTR), ("id", c_int64)])
INTERP_39 = struct("INTERP_39", [("next", PTR), ("tstate_head", PTR), ("runtime", PTR), ("id", c_int64)])
TSTATE_38 = struct(
    "TSTATE_38",
    [
        ("prev", PTR),
        ("next", PTR),
        ("interp", PTR),
        ("frame", PTR),
        ("recursion_depth", c_int32),
        ("overflowed", c_char),
        ("recursion_critical", c_char),
        ("stackcheck_counter", c_int32),
        ("tracing", c_int32),
        ("use_tracing", c_int32),
        ("c_profilefunc", PTR),
        ("c_tracefunc", PTR),
        ("c_profileobj", PTR),
        ("c_traceobj", PTR),
        ("curexc_type", PTR),
        ("curexc_value", PTR),
        ("curexc_traceback", PTR),
        ("exc_state", ERR_ITEM),
        ("exc_info", PTR),
        ("dict", PTR),
        ("gilstate_counter", c_int32),
        ("async_exc", PTR),
        ("thread_id", ULONG),
        ("trash_delete_nesting", c_int32),
    ],
)
FRAME_38 = struct(
    "FRAME_38",
    VAR_HEAD
    + [
        ("f_back", PTR),
        ("f_code", PTR),
        ("f_builtins", PTR),
        ("f_globals", PTR),
        ("f_locals", PTR),
        ("f_valuestack", PTR),
        ("f_stacktop", PTR),
        ("f_trace", PTR),
        ("f_trace_lines", c_char),
        ("f_trace_opcodes", c_char),
        ("f_gen", PTR),
        ("f_lasti", c_int32),
        ("f_lineno", c_int32),
        ("f_iblock", c_int32),
        ("f_executing", c_char),
    ],
)
CODE_38 = struct(
    "CODE_38",
    HEAD
    + [
        ("co_argcount", c_int32),
        ("co_posonlyargcount", c_int32),
        ("co_kwonlyargcount", c_int32),
        ("co_nlocals", c_int32),
        ("co_stacksize", c_int32),
        ("co_flags", c_int32),
        ("co_firstlineno", c_int32),
        ("co_code", PTR),
        ("co_consts", PTR),
        ("co_names", PTR),
        ("co_varnames", PTR),
        ("co_freevars", PTR),
        ("co_cellvars", PTR),
        ("co_cell2arg", PTR),
        ("co_filename", PTR),
        ("co_name", PTR),
        ("co_lnotab", PTR),
        ("co_zombieframe", PTR),
    ],
)
RUNTIME_39 = struct(  # _finalizing: a _Py_atomic_address (one uintptr_t) instead of a pointer
    "RUNTIME_39",
    fields(RUNTIME_38, None, "finalizing") + [("_finalizing", c_uint64)] + fields(RUNTIME_38, "interpreters"),
)

# ---- 3.10 ---------------------------------------------------------------------------
TSTATE_310 = struct(  # use_tracing moved into CFrame, recursion_headroom replaced the two chars
    "TSTATE_310",
    fields(TSTATE_38, None, "recursion_depth")
    + [
        ("recursion_depth", c_int32),
        ("recursion_headroom", c_int32),
        ("stackcheck_counter", c_int32),
        ("tracing", c_int32),
        ("cframe", PTR),
    ]
    + fields(TSTATE_38, "c_profilefunc"),
)
FRAME_310 = struct(  # f_stacktop gave way to f_stackdepth after f_trace; f_state replaced f_executing
    "FRAME_310",
    fields(FRAME_38, None, "f_stacktop")
    + [("f_trace", PTR), ("f_stackdepth", c_int32)]
    + fields(FRAME_38, "f_trace_lines", "f_executing")
    + [("f_state", c_int8)],
)
CODE_310 = struct(  # co_lnotab renamed co_linetable (a new format)
    "CODE_310",
    renamed(fields(CODE_38, None, "co_zombieframe"), co_lnotab="co_linetable") + [("co_exceptiontable", PTR)],
)

# ---- 3.11 ---------------------------------------------------------------------------
RUNTIME_311 = struct("RUNTIME_311", [("_initialized", c_int32)] + fields(RUNTIME_39))
PYTHREADS = struct("PYTHREADS", [("next_unique_id", c_uint64), ("head", PTR), ("count", LONG), ("stacksize", c_uint64)])
INTERP_311 = struct("INTERP_311", [("next", PTR), ("threads", PYTHREADS), ("runtime", PTR), ("id", c_int64)])
TSTATE_311 = struct(
    "TSTATE_311",
    [
        ("prev", PTR),
        ("next", PTR),
        ("interp", PTR),
        ("_initialized", c_int32),
        ("_static", c_int32),
        ("recursion_remaining", c_int32),
        ("recursion_limit", c_int32),
        ("recursion_headroom", c_int32),
        ("tracing", c_int32),
        ("tracing_what", c_int32),
        ("cframe", PTR),
        ("c_profilefunc", PTR),
        ("c_tracefunc", PTR),
        ("c_profileobj", PTR),
        ("c_traceobj", PTR),
        ("curexc_type", PTR),
        ("curexc_value", PTR),
        ("curexc_traceback", PTR),
        ("exc_info", PTR),
        ("dict", PTR),
        ("gilstate_counter", c_int32),
        ("async_exc", PTR),
        ("thread_id", ULONG),
        ("native_thread_id", ULONG),
    ],
)
CFRAME_311 = struct("CFRAME_311", [("use_tracing", c_uint8), ("current_frame", PTR), ("previous", PTR)])
IFRAME_311 = struct(
    "IFRAME_311",
    [
        ("f_func", PTR),
        ("f_globals", PTR),
        ("f_builtins", PTR),
        ("f_locals", PTR),
        ("f_code", PTR),
        ("frame_obj", PTR),
        ("previous", PTR),
        ("prev_instr", PTR),
        ("stacktop", c_int32),
        ("is_entry", c_uint8),
        ("owner", c_int8),
    ],
)
CODE_311 = struct(
    "CODE_311",
    VAR_HEAD
    + [
        ("co_consts", PTR),
        ("co_names", PTR),
        ("co_exceptiontable", PTR),
        ("co_flags", c_int32),
        ("co_warmup", c_int16),
        ("_co_linearray_entry_size", c_int16),
        ("co_argcount", c_int32),
        ("co_posonlyargcount", c_int32),
        ("co_kwonlyargcount", c_int32),
        ("co_stacksize", c_int32),
        ("co_firstlineno", c_int32),
        ("co_nlocalsplus", c_int32),
        ("co_nlocals", c_int32),
        ("co_nplaincellvars", c_int32),
        ("co_ncellvars", c_int32),
        ("co_nfreevars", c_int32),
        ("co_localsplusnames", PTR),
        ("co_localspluskinds", PTR),
        ("co_filename", PTR),
        ("co_name", PTR),
        ("co_qualname", PTR),
        ("co_linetable", PTR),
        ("co_weakreflist", PTR),
        ("_co_code", PTR),
        ("_co_linearray", PTR),
        ("_co_firsttraceable", c_int32),
        ("co_extra", PTR),
        ("co_code_adaptive", c_char * 2),
    ],
)

# ---- 3.12 ---------------------------------------------------------------------------
RUNTIME_312 = RUNTIME_311
INTERP_312 = struct(
    "INTERP_312",
    [
        ("next", PTR),
        ("id", c_int64),
        ("id_refcount", c_int64),
        ("requires_idref", c_int32),
        ("id_mutex", PTR),
        ("_initialized", c_int32),
        ("finalizing", c_int32),
        ("monitoring_version", c_uint64),
        ("last_restart_version", c_uint64),
        ("threads", PYTHREADS),
    ],
)
TSTATE_312 = struct(
    "TSTATE_312",
    fields(TSTATE_311, None, "_initialized")
    + [
        ("_status", c_uint32),
        ("py_recursion_remaining", c_int32),
        ("py_recursion_limit", c_int32),
        ("c_recursion_remaining", c_int32),
        ("recursion_headroom", c_int32),
        ("tracing", c_int32),
        ("what_event", c_int32),
    ]
    + fields(TSTATE_311, "cframe", "curexc_type")
    + [("current_exception", PTR)]
    + fields(TSTATE_311, "exc_info"),
)
CFRAME_312 = struct("CFRAME_312", [("current_frame", PTR), ("previous", PTR)])
IFRAME_312 = struct(
    "IFRAME_312",
    [
        ("f_code", PTR),
        ("previous", PTR),
        ("f_funcobj", PTR),
        ("f_globals", PTR),
        ("f_builtins", PTR),
        ("f_locals", PTR),
        ("frame_obj", PTR),
        ("prev_instr", PTR),
        ("stacktop", c_int32),
        ("return_offset", c_uint16),
        ("owner", c_int8),
    ],
)
CODE_312 = struct(
    "CODE_312",
    fields(CODE_311, None, "co_warmup")
    + fields(CODE_311, "co_argcount", "co_nlocals")
    + [("co_framesize", c_int32), ("co_nlocals", c_int32)]
    + fields(CODE_311, "co_ncellvars", "co_localsplusnames")
    + [("co_version", c_uint32)]
    + fields(CODE_311, "co_localsplusnames", "_co_code")
    + [("_co_cached", PTR), ("_co_instrumentation_version", c_uint64), ("_co_monitoring", PTR)]
    + fields(CODE_311, "_co_firsttraceable"),
)

# ---- 3.13 (the reader takes offsets from _Py_DebugOffsets; these only place the data) ---
TSTATE_313 = struct(
    "TSTATE_313",
    fields(TSTATE_312, None, "_status")
    + [("eval_breaker", c_uint64), ("_status", c_uint32), ("_whence", c_int32), ("state", c_int32)]
    + fields(TSTATE_312, "py_recursion_remaining", "cframe")
    + [("current_frame", PTR)]
    + fields(TSTATE_312, "c_profilefunc")
    + [
        ("delete_later", PTR),
        ("critical_section", c_uint64),
        ("coroutine_origin_tracking_depth", c_int32),
        ("async_gen_firstiter", PTR),
        ("async_gen_finalizer", PTR),
        ("context", PTR),
        ("context_ver", c_uint64),
        ("id", c_uint64),
        ("datastack_chunk", PTR),
    ],
)
IFRAME_313 = struct(
    "IFRAME_313", renamed(fields(IFRAME_312), f_code="f_executable", prev_instr="instr_ptr") + [("localsplus", PTR * 1)]
)
CODE_313 = struct(
    "CODE_313", fields(CODE_312, None, "_co_cached") + [("co_executors", PTR)] + fields(CODE_312, "_co_cached")
)
# The 3.13 interpreter starts with `struct _ceval_state ceval` (eval_breaker first); its
# size does not matter here because _Py_DebugOffsets publishes where `next` and `threads`
# are. A stand-in of the same shape keeps the fields at realistic distances.
INTERP_313 = struct(
    "INTERP_313",
    [
        ("ceval", c_uint8 * 1072),
        ("next", PTR),
        ("id", c_int64),
        ("id_refcount", c_int64),
        ("requires_idref", c_int32),
        ("id_mutex", PTR),
        ("_initialized", c_int32),
        ("finalizing", c_int32),
        ("monitoring_version", c_uint64),
        ("last_restart_version", c_uint64),
        (
            "threads",
            struct(
                "PYTHREADS_313",
                [("next_unique_id", c_uint64), ("head", PTR), ("main", PTR), ("count", LONG), ("stacksize", c_uint64)],
            ),
        ),
    ],
)

# Include/internal/pycore_runtime.h (3.13): struct _Py_DebugOffsets, the uint64_t fields after
# cookie[8], version and free_threaded, in declaration order.
DEBUG_OFFSETS_313 = [
    ("runtime_state", ["size", "finalizing", "interpreters_head"]),
    (
        "interpreter_state",
        [
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
        ],
    ),
    (
        "thread_state",
        [
            "size",
            "prev",
            "next",
            "interp",
            "current_frame",
            "thread_id",
            "native_thread_id",
            "datastack_chunk",
            "status",
        ],
    ),
    ("interpreter_frame", ["size", "previous", "executable", "instr_ptr", "localsplus", "owner"]),
    (
        "code_object",
        [
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
        ],
    ),
    ("pyobject", ["size", "ob_type"]),
    ("type_object", ["size", "tp_name", "tp_repr", "tp_flags"]),
    ("tuple_object", ["size", "ob_item", "ob_size"]),
    ("list_object", ["size", "ob_item", "ob_size"]),
    ("dict_object", ["size", "ma_keys", "ma_values"]),
    ("float_object", ["size", "ob_fval"]),
    ("long_object", ["size", "lv_tag", "ob_digit"]),
    ("bytes_object", ["size", "ob_size", "ob_sval"]),
    ("unicode_object", ["size", "state", "length", "asciiobject_size"]),
    ("gc", ["size", "collecting"]),
]

# Include/internal/pycore_debug_offsets.h (3.14): struct _Py_DebugOffsets, the same way. Its
# groups grew: interpreter_state has threads_main and, after the GIL's fields, the code-object
# and thread-local-bytecode generations; interpreter_frame has stackpointer and tlbc_index;
# code_object has co_tlbc; set_object comes between list_object and dict_object; gen_object,
# llist_node and debugger_support follow gc.
_INTERP_FIELDS_313 = dict(DEBUG_OFFSETS_313)["interpreter_state"]
DEBUG_OFFSETS_314 = (
    DEBUG_OFFSETS_313[:1]
    + [
        (
            "interpreter_state",
            _INTERP_FIELDS_313[:4]
            + ["threads_main"]
            + _INTERP_FIELDS_313[4:]
            + ["code_object_generation", "tlbc_generation"],
        ),
        DEBUG_OFFSETS_313[2],
        (
            "interpreter_frame",
            ["size", "previous", "executable", "instr_ptr", "localsplus", "owner", "stackpointer", "tlbc_index"],
        ),
        ("code_object", dict(DEBUG_OFFSETS_313)["code_object"] + ["co_tlbc"]),
    ]
    + DEBUG_OFFSETS_313[5:9]  # pyobject, type_object, tuple_object, list_object
    + [("set_object", ["size", "used", "table", "mask"])]
    + DEBUG_OFFSETS_313[9:]  # dict_object ... gc
    + [
        ("gen_object", ["size", "gi_name", "gi_iframe", "gi_frame_state"]),
        ("llist_node", ["next", "prev"]),
        (
            "debugger_support",
            [
                "eval_breaker",
                "remote_debugger_support",
                "remote_debugging_enabled",
                "debugger_pending_call",
                "debugger_script_path",
                "debugger_script_path_size",
            ],
        ),
    ]
)
# Include/internal/pycore_interpframe_structs.h (3.14, default build): f_executable and
# f_funcobj are _PyStackRef (a pointer with tag bits in its low two bits), stackpointer
# replaces stacktop, `visited` follows owner. enum _frameowner: THREAD 0, GENERATOR 1,
# FRAME_OBJECT 2, INTERPRETER 3 (the eval loop's entry frame), CSTACK 4.
IFRAME_314 = struct(
    "IFRAME_314",
    fields(IFRAME_313, None, "stacktop")  # f_executable ... instr_ptr, 3.13's order and sizes
    + [("stackpointer", PTR), ("return_offset", c_uint16), ("owner", c_int8), ("visited", c_uint8)]
    + [("localsplus", PTR * 1)],
)
FRAME_OWNED_BY_INTERPRETER_314 = 3
FRAME_OWNED_BY_CSTACK_314 = 4
STACKREF_DEFERRED_314 = 1  # Py_TAG_DEFERRED: the low bit of a deferred reference
