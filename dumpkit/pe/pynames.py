"""Python names for the C functions of python3X.dll and of extension modules, read from the
tables CPython itself keeps in the image's data: the PyMethodDef arrays of modules and
types (`nt.abort`, `list.append`), static PyTypeObjects' slots (`list.__repr__`,
`numpy.ndarray.tp_richcompare`) and those of their number, sequence and mapping
sub-tables (`dict.__getitem__`, `int.__add__`), the PyGetSetDef arrays of attributes
(`numpy.ndarray.shape.__set__`: the C function `a.shape = ...` runs),
the PyType_Slot arrays of types made from a PyType_Spec (`_pickle.Pickler.dump`), and
typeobject.c's `slotdefs`, which gives a class's special methods their C entry points
(`slot_tp_repr`, CPython's own name for the function repr() of an instance calls).

Why: python.org ships no PDBs beside its DLLs, wheels ship none for their .pyd files, and
the functions that matter in a Python process's crash (the repr of a list that calls repr
of its items, os.abort(), NumPy's comparison of object arrays) are static: no export names
them, so the walk says `func_3ca9c`. The interpreter names them for Python code the same
way: a function reached through one of these tables is what `repr(x)` or `os.abort()`
calls.

How: the function's address (the image's preferred base + its RVA in a file image, the
load address in a memory image) is looked up among the aligned pointers into the image in
its writable data sections, where C compilers put these non-const static tables (indexed
once per image, sorted: `_pointers`). Each place it is found at is
tried as a PyMethodDef's `ml_meth` (name, flags and doc must read as one; the table's
owner is the PyModuleDef, static type or PyType_Spec that points to its first entry), as a
PyGetSetDef's getter or setter (its name and the other pointers must read as one, the table's
owner found the same way), as a slot of a static type (the type's `tp_name` must be a dotted identifier, its sizes sane,
its reference count small), as a slot of a sub-table that such a type points to, as a
PyType_Slot, and as the function of a `slotdefs` entry (it and a neighbour must read as
entries). The offsets are those of 64-bit CPython 3.x, checked on python.org's 3.8-3.13
builds; 3.14 keeps them, but its static types' reference counts were not seen. A function
several tables hold is named by the plainest of those names (`name`).

Bounded: images whose writable data exceed MAX_DATA are not read; at most MAX_POINTERS
matches a section are indexed, and MAX_HITS places per pointer, MAX_ENTRIES entries per
table and MAX_SLOTS slots per spec are looked at."""

from __future__ import annotations

import array
import bisect
import itertools
import re
import sys
import weakref
from typing import Callable, Dict, List, Optional, Protocol, Sequence, Tuple

from dumpkit.pe.errors import PEError
from dumpkit.pe.headers import Section
from dumpkit.pe.winnt import IMAGE_SCN_CNT_CODE, IMAGE_SCN_MEM_EXECUTE
from dumpkit.target import MemoryNotInDump

MAX_DATA = 4 << 20  # writable data read per image: python3X.dll has 0.4-1.5 MiB, TensorFlow's
# pybind11 DLL 8.5 MiB and no static tables (its frames would pay ~12 ms a name for nothing)
MAX_HITS = 64  # places one pointer value is checked at
MAX_ENTRIES = 4096  # PyMethodDef entries walked back to a table's start
MAX_SLOTS = 128  # PyType_Slot entries walked back to a spec's slot array start
_INITIALIZED_DATA = 0x40  # IMAGE_SCN_CNT_INITIALIZED_DATA
_DISCARDABLE = 0x02000000
_WRITABLE = 0x80000000  # IMAGE_SCN_MEM_WRITE
_USER_END = 1 << 47  # above: no user-mode address of a 64-bit process

_NAME_READ = 130  # bytes read for a name: 128 characters and the NUL
_IDENT = re.compile(rb"[A-Za-z_][A-Za-z0-9_]{0,127}\Z")
_DOTTED = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*){0,8}\Z")

METHOD_SIZE = 32  # PyMethodDef: ml_name, ml_meth, ml_flags (int, padded), ml_doc
_METH_BITS = 0x3FF  # VARARGS KEYWORDS NOARGS O CLASS STATIC COEXIST FASTCALL STACKLESS METHOD
_METH_CALL = 0x28F  # a calling convention must be among the flags

# PyTypeObject (64-bit): ob_refcnt 0, ob_type 8, ob_size 16, tp_name 24, tp_basicsize 32, tp_itemsize 40
TYPE_SIZE, TYPE_NAME, TYPE_BASICSIZE, TYPE_ITEMSIZE = 16, 24, 32, 40
TYPE_METHODS = 232
TYPE_GETSET = 248  # tp_getset
# PyGetSetDef (64-bit): name 0, get 8, set 16, doc 24, closure 32; an attribute's getter and
# setter are named as Python reaches them, through the getset_descriptor's __get__/__set__
GETSET_SIZE = 40
GETSET_ROLES = ((8, "__get__"), (16, "__set__"))
# the number, sequence and mapping sub-tables a static type points to (tp_as_number at 96,
# tp_as_sequence 104, tp_as_mapping 112): offset in the sub-table -> the slot's Python name
NUMBER_SLOTS: Dict[int, str] = {
    i * 8: name
    for i, name in enumerate(
        "__add__ __sub__ __mul__ __mod__ __divmod__ __pow__ __neg__ __pos__ __abs__ __bool__ __invert__ "
        "__lshift__ __rshift__ __and__ __xor__ __or__ __int__ - __float__ __iadd__ __isub__ __imul__ __imod__ "
        "__ipow__ __ilshift__ __irshift__ __iand__ __ixor__ __ior__ __floordiv__ __truediv__ __ifloordiv__ "
        "__itruediv__ __index__ __matmul__ __imatmul__".split()
    )
    if name != "-"  # nb_reserved
}
SEQUENCE_SLOTS: Dict[int, str] = {
    0: "__len__",
    8: "__add__",  # sq_concat
    16: "__mul__",  # sq_repeat
    24: "__getitem__",  # sq_item
    40: "__setitem__",  # sq_ass_item
    56: "__contains__",
    64: "__iadd__",  # sq_inplace_concat
    72: "__imul__",  # sq_inplace_repeat
}
MAPPING_SLOTS: Dict[int, str] = {0: "__len__", 8: "__getitem__", 16: "__setitem__"}
SUBTABLES = ((96, NUMBER_SLOTS), (104, SEQUENCE_SLOTS), (112, MAPPING_SLOTS))
SUBTABLE_SPAN = 280  # from a sub-table's start to its last slot (PyNumberMethods' 36th)
MAX_POINTERS = 1 << 20  # matches looked at when the pointers into the image are indexed
# the type's own function slots: offset -> the name Python code knows the slot by
TYPE_SLOTS: Dict[int, str] = {
    48: "tp_dealloc",
    88: "__repr__",
    120: "__hash__",
    128: "__call__",
    136: "__str__",
    144: "__getattribute__",
    152: "__setattr__",
    184: "tp_traverse",
    192: "tp_clear",
    200: "tp_richcompare",
    216: "__iter__",
    224: "__next__",
    272: "__get__",
    280: "__set__",
    296: "__init__",
    312: "__new__",
}
# PyType_Slot ids (Include/typeslots.h, stable ABI) of function slots
SPEC_SLOTS: Dict[int, str] = {
    3: "__setitem__",
    4: "__len__",
    5: "__getitem__",
    7: "__add__",
    29: "__mul__",
    36: "__sub__",
    39: "__setitem__",
    41: "__contains__",
    44: "__getitem__",
    45: "__len__",
    50: "__call__",
    51: "tp_clear",
    52: "tp_dealloc",
    58: "__getattribute__",
    59: "__hash__",
    60: "__init__",
    62: "__iter__",
    63: "__next__",
    65: "__new__",
    66: "__repr__",
    67: "tp_richcompare",
    69: "__setattr__",
    70: "__str__",
    71: "tp_traverse",
    80: "tp_finalize",
}
SPEC_METHODS = 64  # Py_tp_methods
SPEC_GETSET = 73  # Py_tp_getset
# typeobject.c's `slotdefs`: for each special method a class may define, the C function a heap
# type's slot gets (`slot_tp_repr` calls the class's __repr__). An entry (64-bit, 56 bytes):
# name 0, offset 8 (int, padded), function 16, wrapper 24, doc 32, flags 40 (int, padded),
# name_strobj 48 (NULL in the file, a str once the interpreter ran). The offset is the
# slot's in PyHeapTypeObject, whose PyTypeObject comes first; the type's own slots keep the
# same offsets in 3.8-3.13, as TYPE_SLOTS does. The functions' names in CPython's source:
SLOTDEF_SIZE = 56
SLOT_FUNCTIONS: Dict[int, str] = {
    88: "slot_tp_repr",
    120: "slot_tp_hash",
    128: "slot_tp_call",
    136: "slot_tp_str",
    144: "slot_tp_getattr_hook",  # _Py_slot_tp_getattr_hook from 3.12
    152: "slot_tp_setattro",
    200: "slot_tp_richcompare",
    216: "slot_tp_iter",
    224: "slot_tp_iternext",
    272: "slot_tp_descr_get",
    280: "slot_tp_descr_set",
    296: "slot_tp_init",
    312: "slot_tp_new",
    392: "slot_tp_finalize",
}
_SLOTDEF_OFFSET_END = 1 << 10  # past PyHeapTypeObject's slots: not a slotdefs entry
# The sub-tables PyHeapTypeObject holds after its PyTypeObject (as_async, as_number,
# as_mapping, as_sequence, as_buffer) start where PyTypeObject ends, which moves between
# versions (the number table at 440 in 3.8, 432 in 3.9, 440 in 3.10-3.11, 448 in 3.12-3.13);
# the table says where: its first `__add__` is nb_add, PyNumberMethods' first member, and
# the members after it keep their order and size in 3.8-3.13. A slot's function is "slot_"
# and its member's name (SLOT1BINFULL and the rest write it so), with one alias: typeobject.c
# defines slot_mp_length as slot_sq_length. Members whose entry has no function
# (sq_concat, sq_repeat and their in-place forms) never name one.
NUMBER_MEMBERS = (
    "nb_add nb_subtract nb_multiply nb_remainder nb_divmod nb_power nb_negative nb_positive"
    " nb_absolute nb_bool nb_invert nb_lshift nb_rshift nb_and nb_xor nb_or nb_int nb_reserved"
    " nb_float nb_inplace_add nb_inplace_subtract nb_inplace_multiply nb_inplace_remainder"
    " nb_inplace_power nb_inplace_lshift nb_inplace_rshift nb_inplace_and nb_inplace_xor"
    " nb_inplace_or nb_floor_divide nb_true_divide nb_inplace_floor_divide nb_inplace_true_divide"
    " nb_index nb_matrix_multiply nb_inplace_matrix_multiply"
).split()
HEAP_MEMBERS = tuple(
    NUMBER_MEMBERS
    + (
        "mp_length mp_subscript mp_ass_subscript"
        " sq_length sq_concat sq_repeat sq_item was_sq_slice sq_ass_item was_sq_ass_slice sq_contains"
        " sq_inplace_concat sq_inplace_repeat"
        " bf_getbuffer bf_releasebuffer"  # __buffer__ / __release_buffer__, from 3.12
    ).split()
)
ASYNC_MEMBERS = ("am_await", "am_aiter", "am_anext")  # from the table's `__await__`, am_await
SLOT_ALIASES = {"slot_mp_length": "slot_sq_length"}
MAX_SLOTDEFS = 256  # entries read each way from one when a table's layout is looked for (3.13: 94)
# PyModuleDef (64-bit): m_base (40 bytes), m_name 40, m_doc 48, m_size 56, m_methods 64
MODULE_NAME, MODULE_SIZE, MODULE_METHODS = 40, 56, 64
SPEC_SLOTS_AT = 24  # PyType_Spec: name, basicsize, itemsize, flags (ints), slots


def is_python_image(module_name: str) -> bool:
    """Is this the interpreter's DLL or an extension module (.pyd), where the tables live?"""
    low = module_name.lower()
    return low.endswith(".pyd") or (low.startswith("python3") and low.endswith(".dll"))


class PythonNames:
    """The names one image's tables give its functions. `writable`: (rva, bytes) of its
    writable data sections, where the tables are; `read(rva, size)`: any other bytes of the
    image (the names, in its read-only data), None where they cannot be read; `base`: what
    its pointers are relative to (its preferred base in a file, its load address in memory)."""

    def __init__(
        self,
        writable: List[Tuple[int, bytes]],
        read: Callable[[int, int], Optional[bytes]],
        base: int,
        size_of_image: int,
    ):
        self._writable = sorted(writable)
        self._read = read
        self._base = base
        self._size = size_of_image
        self._cache: Dict[int, Optional[str]] = {}
        self._pages: Dict[int, Optional[bytes]] = {}  # the other data, read a page at a time
        self._tables: Dict[int, int] = {}  # a PyMethodDef entry -> its table's first entry
        self._getset_tables: Dict[int, int] = {}  # a PyGetSetDef entry -> its table's first entry
        self._sorted: Optional[List[int]] = None  # see _pointers
        self._slot_tables: Dict[int, Tuple[Optional[int], Optional[int]]] = {}  # see _heap_bases

    # ------------------------------------------------------------ reading the data
    def _at(self, rva: int, size: int) -> Optional[bytes]:
        for start, data in self._writable:
            if start <= rva and rva + size <= start + len(data):
                return data[rva - start : rva - start + size]
        out = b""
        for page in range(rva >> 12, ((rva + size - 1) >> 12) + 1):
            if page not in self._pages:
                at = page << 12
                self._pages[page] = self._read(at, min(4096, self._size - at)) if at < self._size else None
            got = self._pages[page]
            if got is None:
                return None
            out += got
        skip = rva & 0xFFF
        return out[skip : skip + size] if len(out) >= skip + size else None

    def _u64(self, rva: int) -> Optional[int]:
        b = self._at(rva, 8)
        return None if b is None else int.from_bytes(b, "little")

    def _u32(self, rva: int) -> Optional[int]:
        b = self._at(rva, 4)
        return None if b is None else int.from_bytes(b, "little")

    def _rva_of(self, pointer: Optional[int]) -> Optional[int]:
        if pointer is None or pointer < self._base or pointer - self._base >= self._size:
            return None
        return pointer - self._base

    def _text(self, pointer: Optional[int], dotted: bool) -> Optional[str]:
        """The identifier (dotted: a module path) a pointer in the image points to."""
        rva = self._rva_of(pointer)
        if rva is None:
            return None
        raw = self._at(rva, min(_NAME_READ, self._size - rva))
        end = raw.find(b"\0") if raw is not None else -1
        if raw is None or end < 0:
            return None
        raw = raw[:end]
        return raw.decode("ascii") if (_DOTTED if dotted else _IDENT).match(raw) else None

    def _pointers(self) -> List[int]:
        """Every aligned pointer into the image in its writable data, as `target RVA << 32 |
        place RVA`, sorted. Made once, at the first question: a pointer into the image
        shares its five upper bytes with the image's addresses within one 16 MiB, so the
        regular-expression engine finds those bytes (in C) rather than Python reading every
        word; at most MAX_POINTERS matches a section."""
        if self._sorted is None:
            lo, hi = self._base, self._base + self._size
            found: List[int] = []
            for window in range(lo >> 24, ((hi - 1) >> 24) + 1):
                upper = re.compile(re.escape((window & 0xFFFFFFFFFF).to_bytes(5, "little")))
                for start, data in self._writable:
                    words = array.array("Q")
                    words.frombytes(data[: len(data) // 8 * 8])
                    if sys.byteorder != "little":
                        words.byteswap()
                    at = [m.start() - 3 for m in itertools.islice(upper.finditer(data, 3), MAX_POINTERS)]
                    # sections start page-aligned: a place's alignment is its offset's
                    found += [(words[i >> 3] - lo) << 32 | (start + i) for i in at if not i & 7]
            self._sorted = sorted(k for k in found if 0 <= k >> 32 < hi - lo)
        return self._sorted

    def _pointing(self, first: int, last: int) -> List[Tuple[int, int]]:
        """(place, target) RVAs of the pointers whose target RVA is in [first, last]: at most
        MAX_HITS places for each target (a type object is the ob_type of thousands of static
        objects in 3.12's data; they must not hide the other targets of the range)."""
        keys = self._pointers()
        out: List[Tuple[int, int]] = []
        i = bisect.bisect_left(keys, max(first, 0) << 32)
        while i < len(keys) and keys[i] >> 32 <= last:  # bounded: each turn moves to the next target
            target = keys[i] >> 32
            end = bisect.bisect_left(keys, (target + 1) << 32, i)
            out += [(k & 0xFFFFFFFF, target) for k in keys[i : min(end, i + MAX_HITS)]]
            i = end
        return out

    def _refs(self, rva: int) -> List[int]:
        """RVAs of the aligned places in the writable data that point to `rva`."""
        return [place for place, _ in self._pointing(rva, rva)]

    def _pointers_into(self, rva: int, span: int) -> List[Tuple[int, int]]:
        """(place, target) RVAs of the aligned pointers whose target is in [rva - span, rva]."""
        return self._pointing(rva - span, rva)

    # ------------------------------------------------------------ the tables
    def _method_name(self, entry: int) -> Optional[str]:
        """ml_name of the PyMethodDef at `entry`, when it reads as one."""
        flags, pad = self._u32(entry + 16), self._u32(entry + 20)
        if flags is None or pad != 0 or flags & ~_METH_BITS or not flags & _METH_CALL:
            return None
        # the doc is the image's own text in a file, but a running process may have pointed
        # it at the heap (NumPy's add_newdoc does): any user-mode address will do
        doc = self._u64(entry + 24)
        if doc is None or doc >= _USER_END:
            return None
        meth = self._rva_of(self._u64(entry + 8))
        if meth is None:
            return None
        return self._text(self._u64(entry), dotted=False)

    def _table_start(self, entry: int) -> int:
        return _first_entry(entry, METHOD_SIZE, self._method_name, self._tables)

    def _getset_name(self, entry: int) -> Optional[str]:
        """The attribute name of the PyGetSetDef at `entry`, when it reads as one: a getter,
        a setter or both in the image, and a doc that is NULL or a user-mode address (NumPy's
        add_newdoc points it at the heap in a running process). A PyMethodDef read this way
        has its flags where the setter is, and is refused."""
        get, set_ = self._u64(entry + 8), self._u64(entry + 16)
        if get is None or set_ is None or not (get or set_):
            return None
        if (get and self._rva_of(get) is None) or (set_ and self._rva_of(set_) is None):
            return None
        doc = self._u64(entry + 24)
        if doc is None or doc >= _USER_END:
            return None
        return self._text(self._u64(entry), dotted=False)

    def _getset_start(self, entry: int) -> int:
        return _first_entry(entry, GETSET_SIZE, self._getset_name, self._getset_tables)

    def _getset_owner(self, table: int) -> Optional[str]:
        """The static type (tp_getset) or PyType_Spec (a Py_tp_getset slot) whose attribute
        table starts at `table`."""
        for ref in self._refs(table):
            tp = self._type_name(ref - TYPE_GETSET)
            if tp is not None:
                return tp
            if self._u32(ref - 8) == SPEC_GETSET and self._u32(ref - 4) == 0:
                spec = self._spec_name(ref - 8)
                if spec is not None:
                    return spec
        return None

    def _getset_names(self, ref: int) -> List[str]:
        """`type.attribute.__get__` / `.__set__` for a function the place `ref` holds as a
        PyGetSetDef's getter or setter, where the table's owner is found."""
        out: List[str] = []
        for at, role in GETSET_ROLES:
            entry = ref - at
            attribute = self._getset_name(entry)
            if attribute is None:
                continue
            owner = self._getset_owner(self._getset_start(entry))
            if owner is not None:
                out.append(f"{owner}.{attribute}.{role}")
        return out

    def _type_name(self, obj: int) -> Optional[str]:
        """tp_name of a static PyTypeObject at `obj`, when it reads as one: a reference count
        below 2**32 (1, 3.12's immortal 0xFFFFFFFF, or what the process made of 1 in memory;
        a pointer, as a PyType_Spec has there, is not one), an
        ob_size of 0 (PyVarObject_HEAD_INIT(type, 0)), sane sizes, and a dotted name that is
        not a dunder (PyMemberDef and slot-wrapper tables hold those at the same offset)."""
        refcnt, size = self._u64(obj), self._u64(obj + TYPE_SIZE)
        if refcnt is None or not 0 < refcnt < 1 << 32 or size != 0:
            return None
        basic, item = self._u64(obj + TYPE_BASICSIZE), self._u64(obj + TYPE_ITEMSIZE)
        if basic is None or item is None or not 16 <= basic <= 1 << 24 or item > 1 << 16:
            return None
        name = self._text(self._u64(obj + TYPE_NAME), dotted=True)
        return None if name is None or name.startswith("__") else name

    def _spec_name(self, slot_rva: int) -> Optional[str]:
        """The name of the PyType_Spec whose slot array holds the PyType_Slot at `slot_rva`."""
        start = slot_rva
        for _ in range(MAX_SLOTS):
            before, pad = self._u32(start - 16), self._u32(start - 12)
            if before is None or pad != 0 or not 1 <= before <= 90:
                break
            start -= 16
        for ref in self._refs(start):
            spec = ref - SPEC_SLOTS_AT
            size = self._u32(spec + 8)
            if size is not None and size <= 1 << 24:
                name = self._text(self._u64(spec), dotted=True)
                if name is not None:
                    return name
        return None

    def _owner_of_table(self, table: int) -> Optional[str]:
        """The module or type whose method table starts at `table`: a PyModuleDef's m_name, a
        static type's or a PyType_Spec's name."""
        for ref in self._refs(table):
            module = self._text(self._u64(ref - MODULE_METHODS + MODULE_NAME), dotted=True)
            size = self._u64(ref - MODULE_METHODS + MODULE_SIZE)
            if module is not None and size is not None and (size == (1 << 64) - 1 or size < 1 << 24):
                return module
            tp = self._type_name(ref - TYPE_METHODS)
            if tp is not None:
                return tp
            if self._u32(ref - 8) == SPEC_METHODS and self._u32(ref - 4) == 0:
                spec = self._spec_name(ref - 8)
                if spec is not None:
                    return spec
        return None

    def _slotdef(self, entry: int) -> Optional[int]:
        """The slot offset of the `slotdefs` entry at `entry`, when it reads as one: its name
        and doc point into the image (the doc may be NULL), its wrapper too (NULL where the
        method has none, as __getattr__), flags 0 or PyWrapperFlag_KEYWORDS, no padding set."""
        offset, pad = self._u32(entry + 8), self._u32(entry + 12)
        flags, pad2 = self._u32(entry + 40), self._u32(entry + 44)
        if offset is None or pad != 0 or pad2 != 0 or flags not in (0, 1) or not 0 < offset < _SLOTDEF_OFFSET_END:
            return None
        if self._rva_of(self._u64(entry)) is None or self._u64(entry + 16) is None:
            return None
        for at in (entry + 24, entry + 32):  # wrapper, doc
            pointer = self._u64(at)
            if pointer is None or (pointer != 0 and self._rva_of(pointer) is None):
                return None
        return offset

    def _slot_function(self, ref: int) -> Optional[str]:
        """CPython's name for the function `ref` holds as a `slotdefs` entry's function: the
        entry must read as one and so must the entry before or after it (the table has ~90)."""
        entry = ref - 16
        offset = self._slotdef(entry)
        if offset is None:
            return None
        if self._slotdef(entry - SLOTDEF_SIZE) is None and self._slotdef(entry + SLOTDEF_SIZE) is None:
            return None
        name = SLOT_FUNCTIONS.get(offset)
        if name is None and offset > max(SLOT_FUNCTIONS):
            name = self._heap_slot_function(entry, offset)
        return name

    def _heap_slot_function(self, entry: int, offset: int) -> Optional[str]:
        """The function of a sub-table's slot (slot_nb_add, slot_mp_subscript, ...), placed
        by the table's own nb_add and am_await entries (see NUMBER_MEMBERS)."""
        number, awaits = self._heap_bases(entry)
        if number is not None and offset >= number:
            start, members = number, HEAP_MEMBERS
        elif awaits is not None and offset >= awaits:
            start, members = awaits, ASYNC_MEMBERS
        else:
            return None
        index, rest = divmod(offset - start, 8)
        if rest or index >= len(members):
            return None
        name = f"slot_{members[index]}"
        return SLOT_ALIASES.get(name, name)

    def _heap_bases(self, entry: int) -> Tuple[Optional[int], Optional[int]]:
        """(offset of nb_add, offset of am_await) in the `slotdefs` table holding `entry`:
        its first `__add__` and its `__await__` entries, read once per table."""
        first = entry
        for _ in range(MAX_SLOTDEFS):
            if self._slotdef(first - SLOTDEF_SIZE) is None:
                break
            first -= SLOTDEF_SIZE
        if first not in self._slot_tables:
            adds: List[int] = []
            awaits: List[int] = []
            at = first
            for _ in range(2 * MAX_SLOTDEFS):
                offset = self._slotdef(at)
                if offset is None:
                    break
                name = self._text(self._u64(at), dotted=False)
                if name == "__add__":
                    adds.append(offset)
                elif name == "__await__":
                    awaits.append(offset)
                at += SLOTDEF_SIZE
            self._slot_tables[first] = (min(adds) if adds else None, min(awaits) if awaits else None)
        return self._slot_tables[first]

    def _names(self, rva: int) -> List[str]:
        """Every name the tables give the function at `rva`."""
        found: List[str] = []
        for ref in self._refs(rva):
            slot_function = self._slot_function(ref)
            if slot_function is not None:
                found.append(slot_function)
                continue
            method = self._method_name(ref - 8)
            if method is not None:
                owner = self._owner_of_table(self._table_start(ref - 8))
                if owner is not None:
                    found.append(f"{owner}.{method}")
                continue
            attributes = self._getset_names(ref)
            if attributes:
                found += attributes
                continue
            before = len(found)
            for offset, slot in TYPE_SLOTS.items():
                tp = self._type_name(ref - offset)
                if tp is not None:
                    found.append(f"{tp}.{slot}")
            slot_id, pad = self._u32(ref - 8), self._u32(ref - 4)
            if slot_id in SPEC_SLOTS and pad == 0:
                spec = self._spec_name(ref - 8)
                if spec is not None:
                    found.append(f"{spec}.{SPEC_SLOTS[slot_id]}")
            if len(found) > before:
                continue  # a slot of the type itself or of a spec: no sub-table holds this place
            for place, table in self._pointers_into(ref, SUBTABLE_SPAN):
                for pointer_at, slots in SUBTABLES:
                    held = slots.get(ref - table)
                    tp = self._type_name(place - pointer_at) if held is not None else None
                    if tp is not None:
                        found.append(f"{tp}.{held}")
        return list(dict.fromkeys(found))

    def name(self, rva: int) -> Optional[str]:
        """The Python name of the function that starts at `rva`, or None. A function several
        tables hold (aliases such as `_thread.lock.acquire`, `acquire_lock` and `__enter__`;
        one implementation shared by types, as BaseException's __new__ is by every built-in
        exception; identical code the linker folded) is named by the plainest of them: a
        method before a slot or a dunder, the shortest, then the first alphabetically."""
        if rva not in self._cache:
            names = self._names(rva)
            self._cache[rva] = min(names, key=_plainness) if names else None
        return self._cache[rva]


def _plainness(name: str) -> Tuple[bool, int, str]:
    attribute = name.rsplit(".", 1)[-1]
    return attribute.startswith(("_", "tp_")), len(name), name


class _Image(Protocol):
    """What is read of a PEImage (pe/image.py, which asks this module)."""

    source: str
    base: int
    image_base: int
    size_of_image: int

    @property
    def sections(self) -> Sequence[Section]: ...

    def read_rva(self, rva: int, size: int) -> bytes: ...


def python_names(image: _Image) -> Optional[PythonNames]:
    """The names `image`'s tables give, or None when its writable data is larger than
    MAX_DATA or cannot be read (a memory image whose data pages the dump lacks)."""
    wanted = [
        s
        for s in image.sections
        if s.characteristics & _INITIALIZED_DATA
        and s.characteristics & _WRITABLE
        and not s.characteristics & (IMAGE_SCN_CNT_CODE | IMAGE_SCN_MEM_EXECUTE | _DISCARDABLE)
    ]
    if not wanted or sum(s.mapped_size for s in wanted) > MAX_DATA:
        return None
    writable: List[Tuple[int, bytes]] = []
    for s in wanted:
        try:
            writable.append((s.rva, image.read_rva(s.rva, s.mapped_size)))
        except (PEError, MemoryNotInDump):
            continue
    if not writable:
        return None

    held = weakref.ref(image)  # the image keeps its names: no reference cycle back to it

    def read(rva: int, size: int) -> Optional[bytes]:
        owner = held()
        if owner is None:
            return None
        try:
            return owner.read_rva(rva, size)
        except (PEError, MemoryNotInDump):
            return None

    base = image.base if image.source == "memory" else image.image_base
    return PythonNames(writable, read, base, image.size_of_image)


def _first_entry(entry: int, size: int, reads: Callable[[int], Optional[str]], known: Dict[int, int]) -> int:
    """The first entry of the table of `size`-byte entries holding `entry`: walked back to
    the one before which nothing `reads` as an entry (the table before ends with a NULL
    sentinel), at most MAX_ENTRIES; every entry walked is remembered in `known`."""
    if entry in known:
        return known[entry]
    walked = [entry]
    start = entry
    for _ in range(MAX_ENTRIES):
        if start - size in known:
            start = known[start - size]
            break
        if reads(start - size) is None:
            break
        start -= size
        walked.append(start)
    for at in walked:
        known[at] = start
    return start
