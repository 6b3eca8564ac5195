"""pe/pybind11.py's rules at their edges, on code assembled here in the shapes MSVC gave
TensorFlow 2.13's and 2.18's modules (what names a real module's functions is tested on
the TensorFlow dumps: tests/analysis/test_python_recursion.py and
tests/cpython/test_pyversions_dumps.py)."""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from dumpkit.pe import pybind11
from dumpkit.pe.imports import ImportedDll, ImportTable

GETATTR, ADD_OBJECT, INSTANCE_METHOD = 0x9000, 0x9008, 0x9010  # address-table entries
PYTHON = ImportedDll(
    "python38.dll",
    ("PyObject_GetAttrString", "PyModule_AddObject", "PyInstanceMethod_New"),
    (),
    False,
    True,
    (GETATTR, ADD_OBJECT, INSTANCE_METHOD),
)
RAX, RCX, RDX, R8, R15 = 0, 1, 2, 8, 15


class Image:
    """Functions assembled at chosen rvas and the strings of a read-only data section."""

    def __init__(self) -> None:
        self.functions: Dict[int, bytes] = {}
        self.strings: Dict[int, str] = {}
        self._next_string = 0x20000

    def string(self, text: str) -> int:
        at = self._next_string
        self.strings[at] = text
        self._next_string += 0x100
        return at

    def function(self, at: int, *instructions: "Instruction") -> int:
        code = bytearray()
        for make in instructions:
            code += make(at + len(code))
        code += b"\xc3"
        self.functions[at] = bytes(code)
        return at

    def function_at(self, rva: int) -> Optional[Tuple[int, int]]:
        code = self.functions.get(rva)
        return (rva, rva + len(code)) if code is not None else None

    def read(self, rva: int, size: int) -> bytes:
        return self.functions[rva][:size]

    def names(self, imports: Tuple[ImportedDll, ...] = (PYTHON,), init: int = 0x1000) -> Dict[int, str]:
        table = ImportTable(imports, True)
        return pybind11.bindings("_mod", init, table, self.function_at, self.read, self.strings.get)


Instruction = "Callable[[int], bytes]"


def _rel(target: int, end: int) -> bytes:
    return (target - end).to_bytes(4, "little", signed=True)


def lea(reg: int, target: int):
    def make(at: int) -> bytes:
        return bytes([0x4C if reg >= 8 else 0x48, 0x8D, 0x05 | ((reg & 7) << 3)]) + _rel(target, at + 7)

    return make


def call(target: int):
    return lambda at: b"\xe8" + _rel(target, at + 5)


def icall(slot: int):
    return lambda at: b"\xff\x15" + _rel(slot, at + 6)


def mov_rdx(src: int):
    return lambda at: bytes([0x49 if src >= 8 else 0x48, 0x8B, 0xD0 | (src & 7)])


def raw(data: bytes):
    return lambda at: data


IMPL, IMPL2 = 0x2000, 0x2100


def _module() -> Tuple[Image, int, int, int]:
    """An image with two impls, a binder for each (a signature template and the impl's
    entry loaded, as cpp_function::initialize<...> does), and add_object."""
    image = Image()
    image.function(IMPL)
    image.function(IMPL2)
    signature = image.string("({%}, {bool}) -> %")
    binder = image.function(0x3000, lea(RAX, signature), lea(RCX, IMPL))
    binder2 = image.function(0x3100, lea(RAX, image.string("({int}) -> None")), lea(RCX, IMPL2))
    add_object = image.function(0x3200, icall(ADD_OBJECT))
    return image, binder, binder2, add_object


def _inline(image: Image, name: str, binder: int, add: int, *between) -> List:
    """m.def(name, ...) inlined where the module is defined: the sibling lookup, the
    binder, then add_object under the same name."""
    at = image.string(name)
    return [lea(R15, at), mov_rdx(R15), icall(GETATTR), call(binder), *between, mov_rdx(R15), call(add)]


def test_a_wrapper_called_with_the_name_in_rdx_names_its_binders_impl():
    image, binder, _, add_object = _module()
    wrapper = image.function(0x4000, icall(GETATTR), call(binder), call(add_object))
    body = image.function(0x5000, lea(RDX, image.string("FastPathExecute")), call(wrapper))
    image.function(0x1000, call(body))
    assert image.names() == {IMPL: "_mod.FastPathExecute"}


def test_an_inline_definition_is_named_by_its_sibling_lookup_and_add_object():
    image, binder, binder2, add_object = _module()
    image.function(
        0x1000, *_inline(image, "Flatten", binder, add_object), *_inline(image, "IsNested", binder2, add_object)
    )
    assert image.names() == {IMPL: "_mod.Flatten", IMPL2: "_mod.IsNested"}


def test_a_binder_inlined_into_the_definition_names_the_one_entry_it_stores():
    # TensorFlow 2.18: rec->impl = the entry, the template passed to initialize_generic
    image, _, _, add_object = _module()
    generic = image.function(0x3300)
    flatten = image.string("Flatten")
    image.function(
        0x1000,
        lea(R15, flatten),
        mov_rdx(R15),
        icall(GETATTR),
        lea(RCX, IMPL),
        lea(R8, image.string("({object}, {bool}) -> object")),
        call(generic),
        lea(RDX, flatten),
        call(add_object),
    )
    assert image.names() == {IMPL: "_mod.Flatten"}


def test_a_class_method_is_not_named():
    # class_::def ends in add_class_method, not add_object: the class is not in the code
    image, binder, _, _ = _module()
    add_class_method = image.function(0x3400, icall(GETATTR))
    image.function(0x1000, *_inline(image, "close", binder, add_class_method))
    assert image.names() == {}


def test_an_impl_two_definitions_reach_is_not_named():
    # bindings of plain function pointers of one type share their binder and impl: named
    # twice, or once at module level and once as a method, it is not one function
    image, binder, _, add_object = _module()
    add_class_method = image.function(0x3400, icall(GETATTR))
    image.function(
        0x1000, *_inline(image, "DeleteGauge0", binder, add_object), *_inline(image, "DeleteGauge1", binder, add_object)
    )
    assert image.names() == {}
    image.function(
        0x1000, *_inline(image, "DeleteGauge0", binder, add_object), *_inline(image, "delete", binder, add_class_method)
    )
    assert image.names() == {}


def test_a_definition_added_under_another_name_is_not_named():
    image, binder, _, add_object = _module()
    other = image.string("Other")
    code = _inline(image, "Flatten", binder, add_object)
    code[-2] = lea(RDX, other)
    image.function(0x1000, *code)
    assert image.names() == {}


def test_bytes_that_only_look_like_a_call_leave_the_name():
    # lea rcx, [rsp+0xe8] holds an E8 byte: read as a call it would point at no function
    image, binder, _, add_object = _module()
    looks_like_call = raw(bytes.fromhex("488d8c24e8000000"))
    at = image.string("FlattenDictItems")
    image.function(
        0x1000,
        lea(R15, at),
        mov_rdx(R15),
        icall(GETATTR),
        call(binder),
        mov_rdx(R15),
        looks_like_call,
        call(add_object),
    )
    assert image.names() == {IMPL: "_mod.FlattenDictItems"}


def test_only_images_that_import_pybind11s_calls_are_read():
    assert pybind11.may_bind(ImportTable((PYTHON,), True))
    cython_like = ImportedDll(
        "python38.dll", ("PyObject_GetAttrString", "PyModule_AddObject"), (), False, True, (GETATTR, ADD_OBJECT)
    )
    assert not pybind11.may_bind(ImportTable((cython_like,), True))
    # names without their address-table entries (a table read from memory without them)
    assert not pybind11.may_bind(ImportTable((ImportedDll("python38.dll", PYTHON.names, (), False, True),), True))


def test_one_module_per_image():
    exported = [(0x14C40, "PyInit__pywrap_utils"), (0x14BB0, "?what@error_already_set@pybind11@@UEBAPEBDXZ")]
    assert pybind11.extension_init(exported) == ("_pywrap_utils", 0x14C40)
    assert pybind11.extension_init([(0x10, "PyInit_a"), (0x20, "PyInit_b")]) is None
    assert pybind11.extension_init([(0x10, "PyInit_")]) is None


def test_a_hostile_image_is_read_within_the_bounds():
    # a "module definition" that calls 20,000 distinct functions: read until MAX_FUNCTIONS
    image = Image()
    callees = [image.function(0x100000 + 16 * i) for i in range(20_000)]
    image.function(0x1000, *(call(c) for c in callees))
    reads: List[int] = []
    read = image.read
    image.read = lambda rva, size: reads.append(rva) or read(rva, size)  # type: ignore[method-assign]
    assert image.names() == {}
    assert len(reads) <= pybind11.MAX_FUNCTIONS
    # one function's matched instructions stop at MAX_EVENTS
    assert len(pybind11.events(b"\xe8" * (pybind11.MAX_EVENTS * 8), 0)) == pybind11.MAX_EVENTS


def _with_generic(dispatcher_sizes: Tuple[int, ...]) -> Image:
    """A module whose binder passes its template to initialize_generic, which loads the
    entries of functions of these sizes (pybind11: the dispatcher and a small thunk)."""
    image = Image()
    image.function(IMPL)
    entries = []
    for i, size in enumerate(dispatcher_sizes):
        entries.append(image.function(0x6000 + 0x1000 * i, *([raw(b"\x90" * size)] if size else [])))
    generic = image.function(0x4000, *(lea(RAX, e) for e in entries))
    binder = image.function(0x3000, lea(RCX, IMPL), lea(R8, image.string("({%}, {bool}) -> %")), call(generic))
    add_object = image.function(0x3200, icall(ADD_OBJECT))
    image.function(0x1000, *_inline(image, "Flatten", binder, add_object))
    return image


def test_the_dispatcher_is_the_large_function_initialize_generic_stores():
    # pybind11's dispatcher (9-12 KiB in TensorFlow) beside the capsule's destructor thunk
    image = _with_generic((pybind11.MIN_DISPATCHER + 100, 50))
    assert image.names() == {IMPL: "_mod.Flatten", 0x6000: pybind11.DISPATCHER}
    # two large candidates, or none: no dispatcher named
    assert image_names(_with_generic((pybind11.MIN_DISPATCHER, pybind11.MIN_DISPATCHER + 1))) == ["_mod.Flatten"]
    assert image_names(_with_generic((50,))) == ["_mod.Flatten"]


def image_names(image: Image) -> List[str]:
    return sorted(image.names().values())
