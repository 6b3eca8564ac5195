"""Names for the functions a pybind11 extension module binds at module level: the name
`m.def("Flatten", ...)` gives the function Python calls (`_pywrap_utils.Flatten`), and
pybind11's one dispatcher, which every such call enters first.

Why: TensorFlow's `_pywrap_*` modules (and most C++ extensions) are pybind11, which builds
its method tables on the heap when the module is imported: no static table (pe/pynames.py)
and no export names the function a Python call enters, so a frame of TensorFlow's Python
boundary read `_pywrap_utils.pyd!func_1120`.

How, from the code alone (MSVC, pybind11 2.x; what TensorFlow 2.13's and 2.18's modules
show):
- a binding's `cpp_function::initialize<...>` instantiation (the *binder*) loads, with
  RIP-relative LEAs, the binding's signature template (`({%}, {bool}) -> %`) and the entry
  of the binding's dispatcher thunk (the *impl*, which `rec->impl` holds and pybind11's
  dispatcher calls for every Python call of this binding), then passes the template to
  `initialize_generic`;
- `m.def(name, ...)` either calls a `module_::def<...>` instantiation with the name in RDX
  (a *wrapper*: it calls one binder and `PyModule_AddObject`), or is inlined where the
  module is defined: the name is passed to `PyObject_GetAttrString` (pybind11 looks up a
  sibling overload), the binder is called (2.13) or inlined there (2.18: the impl's entry
  and the template loaded in the definition itself), then `add_object` with the same name,
  which calls `PyModule_AddObject`. A method of a class ends in `add_class_method` instead,
  and is left unnamed: its class is not in the code around it;
- `initialize_generic` stores the dispatcher's entry (the method table's `ml_meth`) beside
  a small capsule destructor thunk: the one large function whose entry it loads.
The module is defined in its `PyInit_` export or in a function it calls directly; those are
the only functions read for definitions. An impl that more than one definition reaches
(bindings of plain function pointers of one type share one) is left unnamed, and so is one
that two names reach: no name is guessed.

Instructions are matched as bytes (`lea r64, [rip+d]`, `call rel32`, `call [rip+d]` or its
tail call `jmp [rip+d]`, `mov rdx, r64`), as pe/cython.py does: each match is taken only
when what it points at is what it must be (an identifier in read-only data, a function's
entry, an import's address-table entry), so bytes that only look like one name nothing.

Bounded: MAX_DEFINERS functions read for definitions, MAX_CODE bytes and MAX_EVENTS
matched instructions of any function, MAX_CALLEES callees of a wrapper classified, and
MAX_FUNCTIONS functions and CODE_BUDGET bytes of one image's code (each ~20 times what
TensorFlow's largest module needs): a hostile image costs seconds at most, never more."""

from __future__ import annotations

import re
from typing import Callable, Dict, FrozenSet, List, Optional, Sequence, Set, Tuple

from dumpkit.pe.cython import INIT_PREFIX, extension_modules
from dumpkit.pe.imports import ImportTable

MAX_DEFINERS = 64  # PyInit_ and the functions it calls directly
MAX_CODE = 256 << 10  # bytes of one function read (TensorFlow's largest module body: ~70 KiB)
MAX_EVENTS = 1 << 14  # matched instructions kept of one function (TensorFlow's most: 2,176)
MAX_CALLEES = 32  # direct callees of a wrapper looked at (module_::def<F> calls ~5)
MAX_FUNCTIONS = 1 << 13  # functions read per image (TensorFlow 2.13/2.18's most: 440)
CODE_BUDGET = 4 << 20  # bytes of code read per image (TensorFlow's most: 190 KiB)
# bytes: pybind11's dispatcher is 9-12 KiB, the other function initialize_generic stores
# (the capsule's destructor thunk) 51
MIN_DISPATCHER = 1 << 10
DISPATCHER = "pybind11::cpp_function::dispatcher"
MAX_NAME = 200  # bytes of a loaded string read

# the signature template pybind11 compiles into each binding: "({%}, {bool}) -> %", "() -> None"
_SIGNATURE = re.compile(r"\((?:\{[^{}]*\}(?:, \{[^{}]*\})*)?\) -> \S.*")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RDX = 2
_VOLATILE = frozenset({0, 1, 2, 8, 9, 10, 11})  # rax, rcx, rdx, r8-r11: a call may change them

# One pattern per instruction form, matched at every offset (a lookahead: forms may overlap):
# lea r64, [rip+disp32] (REX.W, 8D, ModRM mod 00 r/m 101); call rel32; call [rip+disp32] or
# jmp [rip+disp32] (a tail call through the import's address-table entry);
# mov rdx, r64 as 8B /r (ModRM 11 010 src) or 89 /r (ModRM 11 src 010).
_FORMS = re.compile(
    rb"(?=(?P<lea>[\x48\x4c]\x8d[\x05\x0d\x15\x1d\x25\x2d\x35\x3d])"
    rb"|(?P<call>\xe8)"
    rb"|(?P<icall>\xff[\x15\x25])"
    rb"|(?P<mov8b>[\x48\x49]\x8b[\xd0-\xd7])"
    rb"|(?P<mov89>[\x48\x4c]\x89[\xc2\xca\xd2\xda\xe2\xea\xf2\xfa]))",
    re.DOTALL,
)

LEA, CALL, ICALL, MOV_RDX = "lea", "call", "icall", "mov_rdx"
Event = Tuple[int, str, int, int]  # (rva, form, register (lea: written; mov: source), target rva)

FunctionAt = Callable[[int], Optional[Tuple[int, int]]]  # rva -> (begin, end) of the function beginning there
ReadCode = Callable[[int, int], bytes]
StringAt = Callable[[int], Optional[str]]


def events(code: bytes, start: int) -> List[Event]:
    """The instructions of these forms in `code` (at rva `start`), in address order."""
    out: List[Event] = []
    for m in _FORMS.finditer(code):
        if len(out) >= MAX_EVENTS:
            break
        at = m.start()
        kind = m.lastgroup
        if kind == "lea":
            end = at + 7
            if end > len(code):
                break
            reg = ((code[at + 2] >> 3) & 7) | (8 if code[at] & 4 else 0)
            out.append((start + at, LEA, reg, start + end + int.from_bytes(code[at + 3 : end], "little", signed=True)))
        elif kind == "call":
            end = at + 5
            if end <= len(code):
                out.append(
                    (start + at, CALL, 0, start + end + int.from_bytes(code[at + 1 : end], "little", signed=True))
                )
        elif kind == "icall":
            end = at + 6
            if end <= len(code):
                out.append(
                    (start + at, ICALL, 0, start + end + int.from_bytes(code[at + 2 : end], "little", signed=True))
                )
        elif kind == "mov8b":
            out.append((start + at, MOV_RDX, (code[at + 2] & 7) | (8 if code[at] & 1 else 0), 0))
        else:  # mov89
            out.append((start + at, MOV_RDX, ((code[at + 2] >> 3) & 7) | (8 if code[at] & 4 else 0), 0))
    return out


def extension_init(exported: Sequence[Tuple[int, str]]) -> Optional[Tuple[str, int]]:
    """(module, rva of its `PyInit_` function) for an image that initialises exactly one
    extension module, from its (rva, name) exports; else None."""
    modules = extension_modules(name for _, name in exported)
    if len(modules) != 1:
        return None
    init = INIT_PREFIX + modules[0]
    return next(((modules[0], rva) for rva, name in exported if name == init), None)


def may_bind(imports: ImportTable) -> bool:
    """Does the image import what pybind11 calls from the interpreter's DLL: for a
    module-level definition (PyObject_GetAttrString for the sibling, PyModule_AddObject)
    and for the methods its class machinery makes (PyInstanceMethod_New, in every pybind11
    module)? All 62 of TensorFlow 2.13's modules import the last two; 51 import all three
    (the other 11 define classes only, and bind no function at module level). None of
    NumPy 1.24's 19 (C and Cython) imports PyInstanceMethod_New, and their code is not
    read."""
    return all(
        imports.slots_of(name, "python")
        for name in ("PyModule_AddObject", "PyObject_GetAttrString", "PyInstanceMethod_New")
    )


class _Module:
    """One image's code as the rules read it: each function's events once, within the budget."""

    def __init__(self, function_at: FunctionAt, read_code: ReadCode, string_at: StringAt) -> None:
        self.function_at = function_at
        self.read_code = read_code
        self.string_at = string_at
        self.left = CODE_BUDGET
        self._events: Dict[int, List[Event]] = {}
        self._strings: Dict[int, Optional[str]] = {}

    def is_function(self, rva: int) -> bool:
        return self.function_at(rva) is not None

    def events(self, rva: int) -> List[Event]:
        found = self._events.get(rva)
        if found is None:
            found = []
            extent = self.function_at(rva) if len(self._events) < MAX_FUNCTIONS else None
            if extent is not None and self.left > 0:
                size = max(0, min(extent[1] - rva, MAX_CODE, self.left))
                self.left -= size
                found = events(self.read_code(rva, size), rva) if size else []
            self._events[rva] = found
        return found

    def string(self, rva: int) -> Optional[str]:
        if rva not in self._strings:
            self._strings[rva] = self.string_at(rva)
        return self._strings[rva]


BINDER, WRAPPER, ADDER = "binder", "wrapper", "adder"


class _Kinds:
    """What a called function is to the rules: a binder (with its impl), a wrapper (with
    its binder's impl), an adder (it calls PyModule_AddObject), or none of them."""

    def __init__(self, module: _Module, add_slots: Sequence[int]) -> None:
        self.module = module
        self.add_slots = frozenset(add_slots)
        self._kinds: Dict[int, Optional[Tuple[str, int]]] = {}
        self._impls: Dict[int, Optional[int]] = {}
        self.generics: Set[int] = set()  # where binders pass their templates: initialize_generic

    def impl_of(self, rva: int) -> Optional[int]:
        """The impl a binder at `rva` stores: the first function entry its code loads, when
        it loads exactly one signature template; worked out once per function (every
        wrapper's callees include the same add_object)."""
        if rva not in self._impls:
            self._impls[rva] = self._impl_of(rva)
        return self._impls[rva]

    def _impl_of(self, rva: int) -> Optional[int]:
        code = self.module.events(rva)
        signatures = {t for _, form, _, t in code if form == LEA and _is_signature(self.module.string(t))}
        if len(signatures) != 1:
            return None
        generic = _called_after_signature(code, self.module)
        if generic is not None:
            self.generics.add(generic)
        for _, form, _, target in code:
            if form == LEA and target != rva and self.module.is_function(target):
                return target
        return None

    def adds(self, rva: int) -> bool:
        return any(form == ICALL and t in self.add_slots for _, form, _, t in self.module.events(rva))

    def of(self, rva: int) -> Optional[Tuple[str, int]]:
        if rva in self._kinds:
            return self._kinds[rva]
        kind: Optional[Tuple[str, int]] = None
        if self.module.is_function(rva):
            impl = self.impl_of(rva)
            if impl is not None:
                kind = (BINDER, impl)
            elif self.adds(rva):
                kind = (ADDER, 0)
            else:
                kind = self._wrapper(rva)
        self._kinds[rva] = kind
        return kind

    def _wrapper(self, rva: int) -> Optional[Tuple[str, int]]:
        callees = list(dict.fromkeys(t for _, form, _, t in self.module.events(rva) if form == CALL))
        callees = [t for t in callees if t != rva and self.module.is_function(t)]
        if not callees or len(callees) > MAX_CALLEES:
            return None
        impls = {impl for impl in (self.impl_of(t) for t in callees) if impl is not None}
        if len(impls) != 1 or not any(self.adds(t) for t in callees):
            return None
        return (WRAPPER, impls.pop())


def bindings(
    module_name: str,
    init_rva: int,
    imports: ImportTable,
    function_at: FunctionAt,
    read_code: ReadCode,
    string_at: StringAt,
) -> Dict[int, str]:
    """rva of each impl -> `module.name` for the module-level definitions found in the
    `PyInit_` function at `init_rva` and the functions it calls directly."""
    add_slots = imports.slots_of("PyModule_AddObject", "python")
    getattr_slots = frozenset(imports.slots_of("PyObject_GetAttrString", "python"))
    import_slots = frozenset(at for dll in imports.dlls for at in dll.slots)
    module = _Module(function_at, read_code, string_at)
    kinds = _Kinds(module, add_slots)
    definers = [init_rva] + [t for _, form, _, t in module.events(init_rva) if form == CALL]
    names: Dict[int, Set[str]] = {}
    sites: Dict[int, int] = {}
    for definer in list(dict.fromkeys(t for t in definers if module.is_function(t)))[:MAX_DEFINERS]:
        _definitions(module.events(definer), kinds, module, getattr_slots, import_slots, names, sites)
    named = {
        impl: f"{module_name}.{next(iter(found))}"
        for impl, found in names.items()
        if len(found) == 1 and sites.get(impl) == 1
    }
    dispatcher = _dispatcher(kinds.generics, module) if named else None
    if dispatcher is not None and dispatcher not in named:
        named[dispatcher] = DISPATCHER
    return named


def _called_after_signature(code: List[Event], module: _Module) -> Optional[int]:
    """The function a binder's code calls first after loading its signature template:
    `initialize_generic`, which every binding of the module calls with it."""
    seen = False
    for _, form, _, target in code:
        if form == LEA and not seen:
            seen = _is_signature(module.string(target))
        elif form == CALL and seen and module.is_function(target):
            return target
    return None


def _dispatcher(generics: Set[int], module: _Module) -> Optional[int]:
    """pybind11's one dispatcher, which every Python call of a binding enters: the function
    `initialize_generic` stores as the method table's `ml_meth`, told from the capsule
    destructor thunk it also stores by size. None unless every binding passed its template
    to one function and that function loads exactly one entry of a large function."""
    if len(generics) != 1:
        return None
    (generic,) = generics
    large = set()
    for _, form, _, target in module.events(generic):
        extent = module.function_at(target) if form == LEA and target != generic else None
        if extent is not None and extent[1] - extent[0] >= MIN_DISPATCHER:
            large.add(target)
    return large.pop() if len(large) == 1 else None


class _Span:
    """One inline definition, from its sibling lookup (`PyObject_GetAttrString(m, name)`)
    on: the binders it calls, and the function entries and signature templates its own
    code loads (a binder inlined into the defining function)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.binders: List[int] = []
        self.entries: List[int] = []
        self.signatures = 0
        self.template_passed = False  # a template was loaded: the next call is initialize_generic

    def impl(self) -> Optional[int]:
        """The one impl this definition stores, or None when it is not one."""
        if len(self.binders) == 1 and not self.signatures:
            return self.binders[0]
        if not self.binders and self.signatures == 1 and len(self.entries) == 1:
            return self.entries[0]
        return None


def _definitions(
    code: List[Event],
    kinds: _Kinds,
    module: _Module,
    getattr_slots: FrozenSet[int],
    import_slots: FrozenSet[int],
    names: Dict[int, Set[str]],
    sites: Dict[int, int],
) -> None:
    """Follow one defining function's code: which identifier each register holds (set by a
    LEA since the last definition ended), a wrapper called with a name, or an inline
    definition from its sibling lookup to the `add_object` under the same name. `sites`
    counts every definition that reaches an impl, module-level or not."""
    held: Dict[int, str] = {}  # register -> identifier loaded since the last definition ended
    rdx: Optional[str] = None
    span: Optional[_Span] = None
    for _, form, reg, target in code:
        if form == LEA:
            text = module.string(target)
            if text is not None and _IDENT.fullmatch(text):
                held[reg] = text
            else:
                held.pop(reg, None)
                if span is not None:
                    if _is_signature(text):
                        span.signatures += 1
                        span.template_passed = True
                        for entry in span.entries:
                            sites[entry] = sites.get(entry, 0) + 1
                    elif text is None and module.is_function(target):
                        span.entries.append(target)
            if reg == _RDX:
                rdx = held.get(reg)
            continue
        if form == MOV_RDX:
            rdx = held.get(reg)
            continue
        # bytes that only look like a call (an E8 inside another instruction) point at no
        # function or import, and change nothing
        if not (target in import_slots if form == ICALL else module.is_function(target)):
            continue
        if form == CALL and span is not None and span.template_passed:
            kinds.generics.add(target)
            span.template_passed = False
        kind: Optional[Tuple[str, int]] = None
        if form == ICALL:
            if target in getattr_slots:
                span = _Span(rdx) if rdx is not None else None
            elif target in kinds.add_slots:
                kind = (ADDER, 0)
        else:  # CALL
            kind = kinds.of(target)
        if kind is not None:
            what, impl = kind
            if what == WRAPPER:
                sites[impl] = sites.get(impl, 0) + 1
                if rdx is not None:
                    names.setdefault(impl, set()).add(rdx)
                held, span = {}, None
            elif what == BINDER:
                sites[impl] = sites.get(impl, 0) + 1
                if span is not None:
                    span.binders.append(impl)
            elif span is not None:  # ADDER: an inline definition's add_object
                stored = span.impl() if rdx == span.name else None
                if stored is not None:
                    names.setdefault(stored, set()).add(span.name)
                held, span = {}, None
        # a call leaves the volatile registers undefined
        held = {r: v for r, v in held.items() if r not in _VOLATILE}
        rdx = None


def _is_signature(text: Optional[str]) -> bool:
    return text is not None and _SIGNATURE.fullmatch(text) is not None
