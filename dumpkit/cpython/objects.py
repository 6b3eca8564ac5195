"""Small typed reads of CPython objects in a target's memory: str, small int, dict lookup and
iteration, an instance's attributes, and an imported module's globals (through the
interpreter's sys.modules), for the PSF's Windows x64 builds of 3.8-3.13 (release, not
debug, not free-threaded).

What each version keeps where, from its headers (Windows x64, LLP64, offsets computed by
`clayout` from the field lists below, in layouts.py's style; tests/cpython/test_thread_names.py
compiles the release headers with mingw-w64 and compares, where they are at hand):

- PyTypeObject (Include/cpython/object.h): tp_name, tp_basicsize, tp_flags, tp_dictoffset;
  PyHeapTypeObject.ht_cached_keys, the keys an instance's split values are indexed by.
- PyDictObject (Include/cpython/dictobject.h): ma_keys, ma_values.
- PyDictKeysObject: 3.8-3.10 (Objects/dict-common.h) dk_size, dk_lookup, dk_usable,
  dk_nentries, then dk_size indices of 1/2/4/8 bytes, then (hash, key, value) entries;
  3.11+ (Include/internal/pycore_dict.h) dk_log2_size, dk_log2_index_bytes, dk_kind, then
  1 << dk_log2_index_bytes bytes of indices, then (key, value) entries for unicode/split
  kinds and (hash, key, value) for the general kind. A split table's values live apart:
  `ma_values` (3.8-3.10 a PyObject *[]; 3.11-3.12 PyDictValues, values first; 3.13
  PyDictValues with capacity/size/embedded/valid bytes before them).
- An instance's own attributes: 3.8-3.10 the __dict__ at tp_dictoffset; 3.11
  (Py_TPFLAGS_MANAGED_DICT) a values pointer at obj-32 and a dict pointer at obj-24
  (Include/internal/pycore_object.h _PyObject_ValuesPointer/_PyObject_ManagedDictPointer);
  3.12 one PyDictOrValues at obj-24, tagged with bit 0 for values (values = tag + 1);
  3.13 (Py_TPFLAGS_INLINE_VALUES) values inline at obj + tp_basicsize while their `valid`
  byte is set, else the managed dict at obj-24.
- PyLongObject: 3.8-3.11 ob_size (signed digit count) then 30-bit digits; 3.12+ lv_tag
  (digit count << 3 | sign: 0 positive, 1 zero, 2 negative) then the digits.
- PyModuleObject: md_dict right after the object head (Objects/moduleobject.c 3.8-3.11,
  Include/internal/pycore_moduleobject.h 3.12+).
- sys.modules: PyInterpreterState.modules (3.8-3.11), .imports.modules (3.12+; 3.13 says
  where itself, `_Py_DebugOffsets.interpreter_state.imports_modules`).

A dict is searched for a str key as the interpreter searches it: the key's hash (strhash.py,
keyed by the exported _Py_HashSecret) picks a slot of the index table (1, 2, 4 or 8 bytes a
slot, by the table's size) and the probe follows the perturbation sequence of
Objects/dictobject.c to the entry or an empty slot; a few pages read instead of every key's
(what `dumpkit capture` then records stays small). Where the secret or the table cannot be
read, every key is read and compared.

Everything read is dump data: each read has a fixed size or a cap, every loop a bound, nothing
recurses; memory the dump lacks, a wrong type or a structure that does not hold together
makes a read return None, never raise. Types are checked where cheap: against the exported
type object (PyDict_Type, ...) when the caller has the exports, else by ob_type->tp_name."""

from __future__ import annotations

import struct
from typing import Any, Callable, Dict, List, Optional, Tuple

from dumpkit.cpython.clayout import offsets
from dumpkit.cpython.debug_offsets import DebugOffsetsError, layout_from_record, parse_fields, record_size
from dumpkit.cpython.interpreter import Interpreter, find_interpreter
from dumpkit.cpython.layouts import LAYOUTS, OBJECT_HEAD, P, VAR_HEAD, Layout
from dumpkit.cpython.strhash import str_hash
from dumpkit.records import record
from dumpkit.target import MemoryNotInDump, Target

ExportAddress = Callable[[str], Optional[int]]  # export name -> its address in the process

MAX_ENTRIES = 1 << 16  # dict entries read at most (sys.modules of a big program: a few thousand)
MAX_STRING_CHARS = 1024
MAX_TYPE_NAME = 128
MAX_INTERPRETERS = 64
MAX_DIGITS = 3  # ints up to 2**90: ids, counts, thread idents
PAGE = 4096
MAX_CACHED_PAGES = 1024  # 4 MiB of the target's memory at most
USER_SPACE_END = 1 << 47  # x64 user-mode addresses lie below
_U64 = struct.Struct("<Q").unpack_from
_I64 = struct.Struct("<q").unpack_from
_U32 = struct.Struct("<I").unpack_from

# Include/object.h
TPFLAGS_INLINE_VALUES = 1 << 2  # 3.13+
TPFLAGS_MANAGED_DICT = 1 << 4  # 3.11+
TPFLAGS_HEAPTYPE = 1 << 9
DICT_KEYS_GENERAL = 0  # Include/internal/pycore_dict.h: enum DictKeysKind (3.11+)
DKIX_EMPTY = -1  # an index slot never used: a probe ends there (Objects/dictobject.c)
PERTURB_SHIFT = 5
MAX_PROBES = 1 << 12  # a probe visits a few slots; a table that loops is not followed further
_UNANSWERED: Any = object()  # a probe that could not tell: the caller reads every key

# --- the structures, as the headers declare them -------------------------------------------
# Include/cpython/object.h: struct _typeobject, up to tp_vectorcall (3.8+)
_TYPE_FIELDS = (
    *VAR_HEAD,
    ("tp_name", P),
    ("tp_basicsize", "Py_ssize_t"),
    ("tp_itemsize", "Py_ssize_t"),
    ("tp_dealloc", P),
    ("tp_vectorcall_offset", "Py_ssize_t"),
    ("tp_getattr", P),
    ("tp_setattr", P),
    ("tp_as_async", P),
    ("tp_repr", P),
    ("tp_as_number", P),
    ("tp_as_sequence", P),
    ("tp_as_mapping", P),
    ("tp_hash", P),
    ("tp_call", P),
    ("tp_str", P),
    ("tp_getattro", P),
    ("tp_setattro", P),
    ("tp_as_buffer", P),
    ("tp_flags", "unsigned long"),
    ("tp_doc", P),
    ("tp_traverse", P),
    ("tp_clear", P),
    ("tp_richcompare", P),
    ("tp_weaklistoffset", "Py_ssize_t"),
    ("tp_iter", P),
    ("tp_iternext", P),
    ("tp_methods", P),
    ("tp_members", P),
    ("tp_getset", P),
    ("tp_base", P),
    ("tp_dict", P),
    ("tp_descr_get", P),
    ("tp_descr_set", P),
    ("tp_dictoffset", "Py_ssize_t"),
    ("tp_init", P),
    ("tp_alloc", P),
    ("tp_new", P),
    ("tp_free", P),
    ("tp_is_gc", P),
    ("tp_bases", P),
    ("tp_mro", P),
    ("tp_cache", P),
    ("tp_subclasses", P),
    ("tp_weaklist", P),
    ("tp_del", P),
    ("tp_version_tag", "unsigned int"),
    ("tp_finalize", P),
    ("tp_vectorcall", P),
)
TYPE_38 = (*_TYPE_FIELDS, ("tp_print", P))  # bpo-37250: kept in 3.8 only
TYPE_39 = _TYPE_FIELDS
TYPE_312 = (*_TYPE_FIELDS, ("tp_watched", "char"))  # unsigned char
TYPE_313 = (*TYPE_312, ("tp_versions_used", "uint16_t"))


def _pointers(*names: str) -> tuple:
    return tuple((n, P) for n in names)


# Include/cpython/object.h: the slot tables a heap type carries inline
ASYNC_38 = _pointers("am_await", "am_aiter", "am_anext")
ASYNC_310 = (*ASYNC_38, ("am_send", P))
NUMBER = _pointers(
    *"nb_add nb_subtract nb_multiply nb_remainder nb_divmod nb_power nb_negative nb_positive".split(),
    *"nb_absolute nb_bool nb_invert nb_lshift nb_rshift nb_and nb_xor nb_or nb_int nb_reserved".split(),
    *"nb_float nb_inplace_add nb_inplace_subtract nb_inplace_multiply nb_inplace_remainder".split(),
    *"nb_inplace_power nb_inplace_lshift nb_inplace_rshift nb_inplace_and nb_inplace_xor".split(),
    *"nb_inplace_or nb_floor_divide nb_true_divide nb_inplace_floor_divide".split(),
    *"nb_inplace_true_divide nb_index nb_matrix_multiply nb_inplace_matrix_multiply".split(),
)
MAPPING = _pointers("mp_length", "mp_subscript", "mp_ass_subscript")
SEQUENCE = _pointers(
    *"sq_length sq_concat sq_repeat sq_item was_sq_slice sq_ass_item was_sq_ass_slice".split(),
    *"sq_contains sq_inplace_concat sq_inplace_repeat".split(),
)
BUFFER = _pointers("bf_getbuffer", "bf_releasebuffer")


def _heap_type(type_fields: tuple, async_fields: tuple) -> tuple:
    # Include/cpython/object.h: PyHeapTypeObject, up to ht_cached_keys
    return (
        ("ht_type", type_fields),
        ("as_async", async_fields),
        ("as_number", NUMBER),
        ("as_mapping", MAPPING),
        ("as_sequence", SEQUENCE),
        ("as_buffer", BUFFER),
        ("ht_name", P),
        ("ht_slots", P),
        ("ht_qualname", P),
        ("ht_cached_keys", P),
    )


# Include/cpython/dictobject.h: PyDictObject (3.8-3.13: ma_version_tag is a uint64_t)
DICT = (*OBJECT_HEAD, ("ma_used", "Py_ssize_t"), ("ma_version_tag", "uint64_t"), ("ma_keys", P), ("ma_values", P))
# Objects/dict-common.h: struct _dictkeysobject (3.8-3.10)
KEYS_38 = (
    ("dk_refcnt", "Py_ssize_t"),
    ("dk_size", "Py_ssize_t"),
    ("dk_lookup", P),
    ("dk_usable", "Py_ssize_t"),
    ("dk_nentries", "Py_ssize_t"),
    ("dk_indices", ("array", "char", 8)),  # char dk_indices[]: where the indices start
)
# Include/internal/pycore_dict.h: struct _dictkeysobject (3.11-3.13, not free-threaded)
KEYS_311 = (
    ("dk_refcnt", "Py_ssize_t"),
    ("dk_log2_size", "uint8_t"),
    ("dk_log2_index_bytes", "uint8_t"),
    ("dk_kind", "uint8_t"),
    ("dk_version", "uint32_t"),
    ("dk_usable", "Py_ssize_t"),
    ("dk_nentries", "Py_ssize_t"),
    ("dk_indices", ("array", "char", 8)),
)
ENTRY = (("me_hash", "Py_hash_t"), ("me_key", P), ("me_value", P))  # PyDictKeyEntry
UNICODE_ENTRY = (("me_key", P), ("me_value", P))  # PyDictUnicodeEntry (3.11+)
# Include/internal/pycore_dict.h: struct _dictvalues
VALUES_311 = (("values", ("array", P, 1)),)
VALUES_313 = (
    ("capacity", "uint8_t"),
    ("size", "uint8_t"),
    ("embedded", "uint8_t"),
    ("valid", "uint8_t"),
    ("values", ("array", P, 1)),
)
# Include/cpython/longintrepr.h (3.8-3.11: PyObject_VAR_HEAD; 3.12+: _PyLongValue)
LONG_38 = (*VAR_HEAD, ("ob_digit", ("array", "uint32_t", 1)))
LONG_312 = (*OBJECT_HEAD, ("long_value", (("lv_tag", "uintptr_t"), ("ob_digit", ("array", "uint32_t", 1)))))
DIGIT_BITS = 30  # PYLONG_BITS_IN_DIGIT on 64-bit Windows (Include/pyport.h)
# Objects/moduleobject.c (3.8-3.11), Include/internal/pycore_moduleobject.h (3.12+)
MODULE = (*OBJECT_HEAD, ("md_dict", P))
# Include/internal/pycore_pystate.h (3.8): struct _is up to modules. 3.9-3.12 put the ceval
# and gc states (3.12 also much else) before it: their offsets are given as the release
# headers compile for Windows x64 (mingw-w64, -DMS_WIN64, offsetof), the test compares again.
INTERP_38 = (
    ("next", P),
    ("tstate_head", P),
    ("id", "int64_t"),
    ("id_refcount", "int64_t"),
    ("requires_idref", "int"),
    ("id_mutex", P),
    ("finalizing", "int"),
    ("modules", P),
)
INTERP_MODULES = {
    (3, 8): offsets(INTERP_38)["modules"],
    (3, 9): 856,  # 3.9.13: offsetof(PyInterpreterState, modules)
    (3, 10): 856,  # 3.10.11
    (3, 11): 888,  # 3.11.9
    (3, 12): 944,  # 3.12.6: offsetof(PyInterpreterState, imports.modules)
}


@record
class ObjectLayout:
    """Where one CPython minor keeps what these readers use (bytes)."""

    version: Tuple[int, int]
    source: str
    runtime_interpreters_head: int
    interp_next: int
    interp_modules: int
    type_name: int
    type_basicsize: int
    type_flags: int
    type_dictoffset: int
    heap_cached_keys: int
    dict_keys: int
    dict_values: int
    keys_log2: bool  # 3.11+: dk_log2_size / dk_log2_index_bytes / dk_kind; else dk_size
    keys_size: int  # dk_size (3.8-3.10) or dk_log2_size (3.11+)
    keys_index_bytes: Optional[int]  # dk_log2_index_bytes (3.11+)
    keys_kind: Optional[int]  # dk_kind (3.11+)
    keys_nentries: int
    keys_indices: int
    values_values: int  # where a PyDictValues' values start (0 before 3.13)
    values_capacity: Optional[int]  # 3.13: uint8_t capacity
    values_valid: Optional[int]  # 3.13: uint8_t valid
    long_tagged: bool  # 3.12+: lv_tag
    long_size: int  # ob_size or lv_tag
    long_digits: int
    module_dict: int
    unicode_length: int
    unicode_state: int
    unicode_ascii_size: int
    unicode_compact_size: int


def _table(version: Tuple[int, int]) -> Dict[str, Any]:
    type_fields: tuple
    async_fields: tuple
    if version == (3, 8):
        type_fields, async_fields = TYPE_38, ASYNC_38
    elif version == (3, 9):
        type_fields, async_fields = TYPE_39, ASYNC_38
    elif version < (3, 12):
        type_fields, async_fields = TYPE_39, ASYNC_310
    else:
        type_fields, async_fields = (TYPE_312 if version == (3, 12) else TYPE_313), ASYNC_310
    heap = offsets(_heap_type(type_fields, async_fields))
    typ = offsets(type_fields)
    keys = offsets(KEYS_311 if version >= (3, 11) else KEYS_38)
    values = offsets(VALUES_313 if version >= (3, 13) else VALUES_311)
    long_ = offsets(LONG_312 if version >= (3, 12) else LONG_38)
    dict_ = offsets(DICT)
    found: Dict[str, Any] = {
        "type_name": typ["tp_name"],
        "type_basicsize": typ["tp_basicsize"],
        "type_flags": typ["tp_flags"],
        "type_dictoffset": typ["tp_dictoffset"],
        "heap_cached_keys": heap["ht_cached_keys"],
        "dict_keys": dict_["ma_keys"],
        "dict_values": dict_["ma_values"],
        "keys_nentries": keys["dk_nentries"],
        "keys_indices": keys["dk_indices"],
        "values_values": values["values"],
        "module_dict": offsets(MODULE)["md_dict"],
    }
    if version >= (3, 11):
        found.update(
            keys_size=keys["dk_log2_size"], keys_index_bytes=keys["dk_log2_index_bytes"], keys_kind=keys["dk_kind"]
        )
    else:
        found.update(keys_size=keys["dk_size"], keys_index_bytes=None, keys_kind=None)
    if version >= (3, 13):
        found.update(values_capacity=values["capacity"], values_valid=values["valid"])
    else:
        found.update(values_capacity=None, values_valid=None)
    if version >= (3, 12):
        found.update(long_size=long_["long_value.lv_tag"], long_digits=long_["long_value.ob_digit"])
    else:
        found.update(long_size=long_["ob_size"], long_digits=long_["ob_digit"])
    return found


def object_layout(
    version: Tuple[int, int], layout: Layout, debug_offsets: Optional[Dict[str, int]] = None
) -> Optional[ObjectLayout]:
    """The ObjectLayout of a minor, from its headers; for 3.13 the fields the process's
    `_Py_DebugOffsets` (`debug_offsets`, as parse_fields reads them) gives are taken from
    it. `layout` is the stack reader's (for the interpreter list and str objects). None for
    a version these readers do not know."""
    if not (3, 8) <= version <= (3, 13):
        return None
    found = _table(version)
    if version >= (3, 13):
        if debug_offsets is None:
            return None
        found.update(
            interp_modules=debug_offsets["interpreter_state.imports_modules"],
            type_name=debug_offsets["type_object.tp_name"],
            type_flags=debug_offsets["type_object.tp_flags"],
            dict_keys=debug_offsets["dict_object.ma_keys"],
            dict_values=debug_offsets["dict_object.ma_values"],
            long_size=debug_offsets["long_object.lv_tag"],
            long_digits=debug_offsets["long_object.ob_digit"],
        )
        # the record's own check (debug_offsets._check) covers the groups the stack reader
        # uses; these are checked here: each field inside the structure its group sizes
        for group, fields in _DEBUG_GROUPS.items():
            size = debug_offsets.get(f"{group}.size", 0)
            if not 0 < size < 1 << 20 or any(debug_offsets[f"{group}.{f}"] + 8 > size for f in fields):
                return None
        source = f"CPython {version[0]}.{version[1]} headers and the dump's _Py_DebugOffsets"
    else:
        found["interp_modules"] = INTERP_MODULES[version]
        source = f"CPython {version[0]}.{version[1]} headers (Windows x64, LLP64)"
    ascii_size = layout.unicode_ascii_size
    if not (
        0 < ascii_size <= 256
        and layout.unicode_length + 8 <= ascii_size
        and layout.unicode_state + 4 <= ascii_size
        and ascii_size < layout.unicode_compact_size <= 256
    ):
        return None
    return ObjectLayout(
        version=version,
        source=source,
        runtime_interpreters_head=layout.runtime_interpreters_head,
        interp_next=layout.interp_next,
        keys_log2=version >= (3, 11),
        long_tagged=version >= (3, 12),
        unicode_length=layout.unicode_length,
        unicode_state=layout.unicode_state,
        unicode_ascii_size=layout.unicode_ascii_size,
        unicode_compact_size=layout.unicode_compact_size,
        **found,
    )


# 3.13: the _Py_DebugOffsets fields taken, by group (the group's `size` bounds them)
_DEBUG_GROUPS = {
    "interpreter_state": ("imports_modules",),
    "type_object": ("tp_name", "tp_flags"),
    "dict_object": ("ma_keys", "ma_values"),
    "long_object": ("lv_tag", "ob_digit"),
}

# Exported type objects checked by address before falling back to tp_name
_EXPORTED_TYPES = {"dict": "PyDict_Type", "str": "PyUnicode_Type", "int": "PyLong_Type", "module": "PyModule_Type"}


class Objects:
    """Typed reads of one interpreter build's objects in a target's memory. Every method
    returns None for what cannot be read or is not what it should be; none raises on dump
    data. Reads go through a small page cache (a live debugger pays per call)."""

    def __init__(
        self,
        target: Target,
        layout: ObjectLayout,
        runtime: int,
        types: Optional[Dict[str, int]] = None,
        hash_secret: Optional[int] = None,
    ):
        self.target = target
        self.layout = layout
        self.runtime = runtime
        self.types = dict(types or {})  # type name -> the type object's address (exports)
        self.hash_secret = hash_secret  # where _Py_HashSecret is (exports): str keys are probed for, not scanned
        self._secret: Optional[Tuple[int, int]] = None
        self._pages: Dict[int, bytes] = {}
        self._type_names: Dict[int, Optional[str]] = {}
        self._strings: Dict[int, Optional[str]] = {}

    # --- memory ------------------------------------------------------------------------
    def read(self, address: int, size: int) -> Optional[bytes]:
        if size < 0 or not 0 < address < USER_SPACE_END or address + size > USER_SPACE_END:
            return None
        page = address & ~(PAGE - 1)
        end = address - page + size
        if end <= PAGE:
            data = self._pages.get(page)
            if data is None:
                if len(self._pages) >= MAX_CACHED_PAGES:
                    self._pages.clear()
                data = self.target.read_available(page, PAGE)
                self._pages[page] = data
            if end <= len(data):
                return data[address - page : end]
            # the page's start is not readable, or not all of it: a dump may hold a range
            # that starts inside a page (a minidump's small ranges), so ask for the bytes
        try:
            return self.target.read(address, size)
        except MemoryNotInDump:
            return None

    def pointer(self, address: int) -> Optional[int]:
        raw = self.read(address, 8)
        return None if raw is None else _U64(raw)[0]

    # --- types -----------------------------------------------------------------------------
    def type_of(self, obj: int) -> Optional[int]:
        if obj % 8:
            return None
        found = self.pointer(obj + 8)  # ob_type, after ob_refcnt (Include/object.h, release build)
        return found if found and found % 8 == 0 else None

    def type_name(self, type_address: int) -> Optional[str]:
        """tp_name of a type object (a C string; at most MAX_TYPE_NAME bytes)."""
        if type_address in self._type_names:
            return self._type_names[type_address]
        name: Optional[str] = None
        at = self.pointer(type_address + self.layout.type_name)
        if at:
            raw = self.read(at, MAX_TYPE_NAME) or self._c_string_prefix(at)
            if raw is not None and b"\0" in raw:
                name = raw[: raw.index(b"\0")].decode("utf-8", errors="replace")
        self._type_names[type_address] = name
        return name

    def _c_string_prefix(self, address: int) -> Optional[bytes]:
        # a short name near the end of readable memory: what the page holds
        try:
            return self.target.read_available(address, MAX_TYPE_NAME) or None
        except MemoryNotInDump:
            return None

    def is_a(self, obj: int, name: str) -> bool:
        """`obj` is an instance of exactly the type named `name` (tp_name)."""
        found = self.type_of(obj)
        if found is None:
            return False
        exported = self.types.get(name)
        if exported is not None and exported == found:
            return True
        return self.type_name(found) == name

    # --- str and int -------------------------------------------------------------------------
    def text(self, obj: int) -> Optional[str]:
        """A compact str object's text (None if longer than MAX_STRING_CHARS)."""
        if obj in self._strings:
            return self._strings[obj]
        found = self._text(obj) if self.is_a(obj, "str") else None
        self._strings[obj] = found
        return found

    def _text(self, obj: int) -> Optional[str]:
        lay = self.layout
        head = self.read(obj, lay.unicode_ascii_size)
        if head is None:
            return None
        (length,) = _I64(head, lay.unicode_length)
        (state,) = _U32(head, lay.unicode_state)
        # state bit-fields (MSVC allocates from bit 0): interned:2 kind:3 compact:1 ascii:1
        kind, compact, ascii_ = (state >> 2) & 7, (state >> 5) & 1, (state >> 6) & 1
        if not compact or kind not in (1, 2, 4) or not 0 <= length <= MAX_STRING_CHARS:
            return None
        data = obj + (lay.unicode_ascii_size if ascii_ else lay.unicode_compact_size)
        raw = self.read(data, length * kind) if length else b""
        if raw is None:
            return None
        codec = {1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}[kind]
        return raw.decode(codec, errors="replace")

    def small_int(self, obj: int) -> Optional[int]:
        """An int object's value, when it has at most MAX_DIGITS 30-bit digits."""
        lay = self.layout
        if not self.is_a(obj, "int"):
            return None
        raw = self.read(obj + lay.long_size, 8)
        if raw is None:
            return None
        if lay.long_tagged:
            (tag,) = _U64(raw)
            ndigits, sign = tag >> 3, tag & 3
            if sign == 1:
                return 0
            if sign == 3:
                return None
            negative = sign == 2
        else:
            (size,) = _I64(raw)
            ndigits, negative = abs(size), size < 0
        if ndigits == 0:
            return 0
        if ndigits > MAX_DIGITS:
            return None
        digits = self.read(obj + lay.long_digits, 4 * ndigits)
        if digits is None:
            return None
        value = 0
        for i in reversed(range(ndigits)):
            (digit,) = _U32(digits, 4 * i)
            if digit >> DIGIT_BITS:
                return None
            value = (value << DIGIT_BITS) | digit
        return -value if negative else value

    # --- dicts -------------------------------------------------------------------------------
    def _shape(self, keys: int) -> Optional[Tuple[int, int, int, bool, int, int]]:
        """(dk_size, bytes of the index table, dk_nentries, whether entries carry a hash,
        entry size, offset of the key in an entry) of a PyDictKeysObject that holds together."""
        lay = self.layout
        head = self.read(keys, lay.keys_indices)
        if head is None:
            return None
        (nentries,) = _I64(head, lay.keys_nentries)
        if lay.keys_log2:
            assert lay.keys_index_bytes is not None and lay.keys_kind is not None
            log2_size, log2_index_bytes, kind = head[lay.keys_size], head[lay.keys_index_bytes], head[lay.keys_kind]
            if not 3 <= log2_size <= 40 or not log2_size <= log2_index_bytes <= log2_size + 3 or kind > 2:
                return None
            size, index_bytes = 1 << log2_size, 1 << log2_index_bytes
            general = kind == DICT_KEYS_GENERAL
        else:
            (size,) = _I64(head, lay.keys_size)
            if size < 8 or size & (size - 1):
                return None
            width = 1 if size <= 0xFF else 2 if size <= 0xFFFF else 4 if size <= 0xFFFFFFFF else 8
            index_bytes, general = size * width, True
        if not 0 <= nentries <= size:
            return None
        entry, key_at = (24, 8) if general else (16, 0)  # (hash, key, value) or (key, value)
        return size, index_bytes, nentries, general, entry, key_at

    def _entries(self, keys: int) -> Optional[Tuple[bytes, int, int, int]]:
        """(the entries' bytes, entry size, offset of the key, of the value in an entry) of a
        PyDictKeysObject: dk_nentries of them, at most MAX_ENTRIES."""
        shape = self._shape(keys)
        if shape is None:
            return None
        size, index_bytes, nentries, general, entry, key_at = shape
        count = min(nentries, MAX_ENTRIES)
        start = keys + self.layout.keys_indices + index_bytes
        raw = self.read(start, count * entry) if count else b""
        if raw is None:
            return None
        return raw, entry, key_at, key_at + 8

    def _hash(self, text: str) -> Optional[int]:
        """hash(text) in the process (its _Py_HashSecret), None when that is not readable."""
        if self._secret is None:
            raw = self.read(self.hash_secret, 16) if self.hash_secret else None
            if raw is None:
                return None
            self._secret = (_U64(raw)[0], _U64(raw, 8)[0])
        return str_hash(text, self._secret, self.layout.version)

    def _probe(self, obj: int, key: str) -> Any:
        """The value a dict holds for a str key, found as the interpreter finds it: the
        key's hash picks a slot of the index table and the probe follows the perturbation
        sequence (Objects/dictobject.c) to the entry or to an empty slot (None: absent).
        _UNANSWERED when the hash, the table or an entry cannot be read: the caller scans."""
        lay = self.layout
        keys = self.pointer(obj + lay.dict_keys)
        values = self.pointer(obj + lay.dict_values)
        shape = self._shape(keys) if keys else None
        wanted = self._hash(key) if shape is not None else None
        if keys is None or values is None or shape is None or wanted is None:
            return _UNANSWERED
        size, index_bytes, nentries, general, entry, key_at = shape
        width = index_bytes // size
        entries = keys + lay.keys_indices + index_bytes
        mask, i, perturb = size - 1, wanted & (size - 1), wanted
        for _ in range(min(size, MAX_PROBES)):
            raw = self.read(keys + lay.keys_indices + i * width, width)
            if raw is None:
                return _UNANSWERED
            ix = int.from_bytes(raw, "little", signed=True)
            if ix == DKIX_EMPTY:
                return None
            if 0 <= ix < nentries:
                found = self.read(entries + ix * entry, entry)
                if found is None:
                    return _UNANSWERED
                (candidate,) = _U64(found, key_at)
                if (not general or _U64(found)[0] == wanted) and candidate and self.text(candidate) == key:
                    if not values:
                        return _U64(found, key_at + 8)[0] or None
                    split = self._values(values, ix + 1)  # a split table's values live apart
                    if split is None or ix >= len(split):
                        return _UNANSWERED
                    return split[ix] or None
            perturb >>= PERTURB_SHIFT
            i = (i * 5 + perturb + 1) & mask
        return _UNANSWERED

    def _values(self, values: int, count: int) -> Optional[List[int]]:
        """The first `count` slots of a split table's PyDictValues (3.13: at most its capacity)."""
        lay = self.layout
        if lay.values_capacity is not None:
            head = self.read(values, lay.values_values)
            if head is None:
                return None
            count = min(count, head[lay.values_capacity])
        raw = self.read(values + lay.values_values, 8 * count) if count else b""
        if raw is None:
            return None
        return [_U64(raw, 8 * i)[0] for i in range(count)]

    def _pairs(self, keys: int, values: Optional[int]) -> Optional[List[Tuple[int, int]]]:
        """(key, value) of every live entry of a keys object, its values from `values` (a
        split table's) when given, else from the entries."""
        found = self._entries(keys)
        if found is None:
            return None
        raw, entry, key_at, value_at = found
        count = len(raw) // entry
        split = self._values(values, count) if values else None
        if values and split is None:
            return None
        pairs: List[Tuple[int, int]] = []
        for i in range(count):
            (key,) = _U64(raw, i * entry + key_at)
            if split is not None:
                value = split[i] if i < len(split) else 0
            else:
                (value,) = _U64(raw, i * entry + value_at)
            if key and value:
                pairs.append((key, value))
        return pairs

    def dict_items(self, obj: int) -> Optional[List[Tuple[int, int]]]:
        """(key, value) object addresses of a dict, in insertion order (at most MAX_ENTRIES)."""
        if not self.is_a(obj, "dict"):
            return None
        lay = self.layout
        keys = self.pointer(obj + lay.dict_keys)
        values = self.pointer(obj + lay.dict_values)
        if not keys or values is None:
            return None
        return self._pairs(keys, values or None)

    def _find(self, pairs: List[Tuple[int, int]], key: str) -> Optional[int]:
        for k, v in pairs:
            if self.text(k) == key:
                return v
        return None

    def dict_get(self, obj: int, key: str) -> Optional[int]:
        """The value a dict holds for a str key (compared by text): probed for by its hash,
        else every key read."""
        if not self.is_a(obj, "dict"):
            return None
        found = self._probe(obj, key)
        if found is not _UNANSWERED:
            return found
        pairs = self.dict_items(obj)
        return None if pairs is None else self._find(pairs, key)

    # --- instances and modules -------------------------------------------------------------------
    def attribute(self, obj: int, name: str) -> Optional[int]:
        """An instance's own attribute (what its __dict__ holds for `name`), however the
        version stores it; None for attributes that live elsewhere (slots, the class)."""
        lay = self.layout
        tp = self.type_of(obj)
        if tp is None:
            return None
        head = self.read(tp, max(lay.type_flags, lay.type_basicsize, lay.type_dictoffset) + 8)
        if head is None:
            return None
        (flags,) = _U32(head, lay.type_flags)
        (basicsize,) = _I64(head, lay.type_basicsize)
        (dictoffset,) = _I64(head, lay.type_dictoffset)
        version = lay.version
        if version >= (3, 13) and flags & TPFLAGS_INLINE_VALUES:
            values = obj + basicsize
            assert lay.values_valid is not None
            head_values = self.read(values, lay.values_values)
            if head_values is None:
                return None
            if head_values[lay.values_valid]:
                return self._values_get(tp, flags, values, name)
        if version >= (3, 11) and flags & TPFLAGS_MANAGED_DICT:
            dict_or_values = self.pointer(obj - 24)  # MANAGED_DICT_OFFSET
            if dict_or_values is None:
                return None
            if version == (3, 11):
                values = self.pointer(obj - 32)  # _PyObject_ValuesPointer
                if values is None:
                    return None
                if values:
                    return self._values_get(tp, flags, values, name)
            elif version == (3, 12) and dict_or_values & 1:
                return self._values_get(tp, flags, dict_or_values + 1, name)
            return self.dict_get(dict_or_values, name) if dict_or_values else None
        if dictoffset == 0:
            return None
        if dictoffset < 0:  # counted from the end of a variable-size object
            raw = self.read(obj + 16, 8)
            itemsize = self.read(tp + lay.type_basicsize + 8, 8)
            if raw is None or itemsize is None:
                return None
            size = basicsize + abs(_I64(raw)[0]) * _I64(itemsize)[0]
            dictoffset += (size + 7) // 8 * 8
            if dictoffset <= 0:
                return None
        found = self.pointer(obj + dictoffset)
        return self.dict_get(found, name) if found else None

    def _values_get(self, tp: int, flags: int, values: int, name: str) -> Optional[int]:
        """`name` in an instance's split values, indexed by its type's cached keys."""
        if not flags & TPFLAGS_HEAPTYPE:
            return None
        keys = self.pointer(tp + self.layout.heap_cached_keys)
        if not keys:
            return None
        return self._find(self._pairs(keys, values) or [], name)

    def interpreters(self) -> List[int]:
        """The runtime's interpreter states, newest first (the main one is last)."""
        lay = self.layout
        found: List[int] = []
        interp = self.pointer(self.runtime + lay.runtime_interpreters_head)
        while interp and len(found) < MAX_INTERPRETERS and interp not in found:
            found.append(interp)
            interp = self.pointer(interp + lay.interp_next)
        return found

    def module_dict(self, interp: int, module: str) -> Optional[int]:
        """The globals of a module the interpreter has imported (sys.modules[module].__dict__)."""
        modules = self.pointer(interp + self.layout.interp_modules)
        if not modules:
            return None
        found = self.dict_get(modules, module)
        if found is None or not self.is_a(found, "module"):
            return None
        md_dict = self.pointer(found + self.layout.module_dict)
        return md_dict if md_dict and self.is_a(md_dict, "dict") else None


def open_objects(
    target: Target, export_address: Optional[ExportAddress], interpreter: Optional[Interpreter] = None
) -> Optional[Objects]:
    """An Objects reader for the process's CPython, found as read_python_state finds it
    (`export_address` gives python3X.dll's exports, for _PyRuntime and the type objects);
    None when there is no CPython, no exports, or a version or build these readers do not
    know, or _PyRuntime is not in the dump (3.13 reads its offsets there)."""
    interp = interpreter or find_interpreter(target.modules)
    if interp is None or export_address is None or interp.free_threaded or interp.debug:
        return None
    runtime = export_address("_PyRuntime")
    if runtime is None:
        return None
    layout: Optional[Layout] = LAYOUTS.get(interp.version)
    debug: Optional[Dict[str, int]] = None
    if layout is None and interp.version == (3, 13):
        try:
            raw = target.read(runtime, record_size())
            layout = layout_from_record(raw, interp.version)
        except (MemoryNotInDump, DebugOffsetsError):
            return None
        debug = parse_fields(raw)
    if layout is None:
        return None
    objects = object_layout(interp.version, layout, debug)
    if objects is None:
        return None
    types = {name: export_address(symbol) for name, symbol in _EXPORTED_TYPES.items()}
    known = {k: v for k, v in types.items() if v is not None}
    return Objects(target, objects, runtime, known, export_address("_Py_HashSecret"))
