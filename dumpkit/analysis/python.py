"""Recursion in Python terms: is a cycle Python functions calling each other (the eval
loop is in it), C code recursing through an object protocol (repr, json, pickle,
comparison...), or recursion inside an extension module (NumPy, TensorFlow)?

Names come from the frames (exports, COFF or PDB symbols, demangled) and, for functions
that have none (an MSVC module's static functions without its PDB), from what their code
refers to (`codefacts`): the strings it loads and the exported functions it calls. Each
recognition says which evidence it rests on, and what could not be told."""

from __future__ import annotations

import re
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from dumpkit.analysis.codefacts import CodeFacts
from dumpkit.analysis.model import PYTHON_CALLS, Cycle, RecursionKind, Recursing
from dumpkit.analysis.recursion import call_order
from dumpkit.cpython.interpreter import interpreter_minor
from dumpkit.unwind.frames import without_offset

PYTHON_DLL = re.compile(r"^python(\d)(\d{1,2})(_d)?\.dll$", re.I)
UNNAMED = re.compile(r"^func_[0-9a-f]+$|^\S+\+0x[0-9a-f]+$|^0x[0-9a-f]+$")


def no_c_name(name: str) -> bool:
    """Has the function no C name here: unnamed, or named only by CPython's tables
    (`list.__repr__`, pe/pynames.py: a dot no C identifier has), so that its code, not its
    name, says what it calls?"""
    return bool(UNNAMED.match(name)) or "." in name


# The functions each Python-level call runs through (CPython 3.8-3.13).
EVAL_LOOP = frozenset({"_PyEval_EvalFrameDefault", "_PyEval_EvalFrame", "PyEval_EvalFrameEx", "_PyEval_Vector"})

# Object protocols, recognised by an exported entry point in the cycle or called by its
# code (or the `slot_tp_*` function through which the protocol calls a class's special
# method, pe/pynames.py), or by a string its code loads: (what, plain words, names, string
# prefixes).
PROTOCOLS: Tuple[Tuple[str, str, Tuple[str, ...], Tuple[str, ...]], ...] = (
    (
        "json",
        "json's C encoder (json.dumps / json.dump)",
        (),
        ("Circular reference detected", " while encoding a JSON object", "_iterencode_list needs"),
    ),
    (
        "pickle",
        "pickle's C pickler (pickle.dumps / pickle.dump)",
        (),
        ("__reduce__ must return", " while pickling an object", "can't pickle", "Can't pickle"),
    ),
    (
        "repr",
        "repr() of nested containers (each repr calls repr on its items)",
        ("PyObject_Repr", "Py_ReprEnter", "slot_tp_repr"),
        (),
    ),
    ("str", "str() of nested objects", ("PyObject_Str", "slot_tp_str"), ()),
    (
        "comparison",
        "rich comparison (==, <, ...) of nested containers",
        ("PyObject_RichCompare", "PyObject_RichCompareBool", "slot_tp_richcompare"),
        (" in comparison",),
    ),
    ("hash", "hash() of nested objects", ("PyObject_Hash", "slot_tp_hash"), ()),
    (
        "getattr",
        "attribute lookup (__getattr__ / properties calling each other)",
        ("PyObject_GetAttr", "slot_tp_getattr_hook", "_Py_slot_tp_getattr_hook"),
        (),
    ),
    (
        "subscript",
        "subscripts (obj[key]) of nested objects",
        ("PyObject_GetItem", "slot_mp_subscript", "slot_sq_item"),
        (),
    ),
    (
        "call",
        "calls between C functions and callables (PyObject_Call)",
        ("PyObject_Call", "_PyObject_MakeTpCall", "slot_tp_call"),
        (),
    ),
)

# The type slot of each protocol, as CPython's tables name a static function (pe/pynames.py):
# a cycle through `list.__repr__` is repr() recursing.
PROTOCOL_SLOTS: Dict[str, str] = {
    "repr": ".__repr__",
    "str": ".__str__",
    "comparison": ".tp_richcompare",
    "hash": ".__hash__",
    "getattr": ".__getattribute__",
    "subscript": ".__getitem__",
    "call": ".__call__",
}

# The special method through which Python code recurses when a protocol's C code is in a
# cycle with the eval loop, and the built-in that calls it: (method, built-in).
SPECIAL_METHODS: Dict[str, Tuple[str, str]] = {
    "repr": ("__repr__", "repr()"),
    "str": ("__str__", "str()"),
    "comparison": ("__eq__ (or another rich comparison)", "a comparison"),
    "hash": ("__hash__", "hash()"),
    "getattr": ("__getattr__ (or a property)", "an attribute lookup"),
    "subscript": ("__getitem__", "obj[key]"),
    "pickle": ("__reduce__ (or __getstate__)", "pickle"),
    "json": ("json default=", "json.dumps"),
}

# Extension modules by file name: (library, pattern).
EXTENSIONS: Tuple[Tuple[str, "re.Pattern[str]"], ...] = (
    ("NumPy", re.compile(r"^_?(multiarray_umath|multiarray|umath)\b.*\.pyd$", re.I)),
    ("TensorFlow", re.compile(r"^_pywrap_tensorflow_internal\b.*\.pyd$|^_pywrap_tf.*\.pyd$|^_pywrap_.*\.pyd$", re.I)),
    ("PyTorch", re.compile(r"^(torch_cpu|torch_python|c10)\.dll$|^_C\..*\.pyd$", re.I)),
)

# TensorFlow C++ entry points and the Python API that reaches them (tensorflow/python/util/
# util.cc, exposed through _pywrap_utils to tensorflow/python/util/nest.py).
TENSORFLOW_APIS: Tuple[Tuple[str, str], ...] = (
    ("tensorflow::swig::FlattenForData", "tf.data's nest.flatten (tensorflow.python.data.util.nest)"),
    ("tensorflow::swig::Flatten", "tf.nest.flatten"),
    ("tensorflow::swig::AssertSameStructureForData", "tf.data's nest.assert_same_structure"),
    ("tensorflow::swig::AssertSameStructure", "tf.nest.assert_same_structure"),
    ("tensorflow::swig::IsNestedForData", "tf.data's nest.is_nested"),
    ("tensorflow::swig::IsNested", "tf.nest.is_nested"),
    ("tensorflow::swig::IsSequence", "tf.nest.is_nested (is_sequence)"),
    ("tensorflow::swig::SameNamedtuples", "tf.nest (namedtuple structure checks)"),
)


def split_name(function: str) -> Tuple[Optional[str], str]:
    """('python38.dll', 'PyObject_Repr') from 'python38.dll!PyObject_Repr'."""
    if "!" in function:
        module, name = function.split("!", 1)
        return module, without_offset(name)
    return (function.split("+", 1)[0] if "+" in function else None), function


def _library(module: Optional[str]) -> Optional[str]:
    if module is None:
        return None
    return next((lib for lib, pattern in EXTENSIONS if pattern.match(module)), None)


def _protocol(names: Sequence[str], facts: Mapping[str, CodeFacts]) -> Optional[Tuple[str, str, str]]:
    """(key, plain words, the evidence) of the first protocol the cycle's names, callees or
    strings show."""
    callees = {split_name(c)[1] for f in facts.values() for c in f.callees}
    strings = [s for f in facts.values() for s in f.strings]
    for key, words, entry_points, prefixes in PROTOCOLS:
        slot = PROTOCOL_SLOTS.get(key)
        filled = next((n for n in names if n.endswith(slot)), None) if slot else None
        words = _of_type(words, filled)
        named = next((n for n in names if n in entry_points), None)
        if named is not None:
            return key, words, f"{named} is in the cycle"
        if filled is not None:
            return key, words, f"{filled} (a type's slot, as CPython's type table names it) is in the cycle"
        called = next((n for n in entry_points if n in callees), None)
        if called is not None:
            return key, words, f"the cycle's code calls {called}"
        text = next((s for s in strings if s.startswith(prefixes)), None) if prefixes else None
        if text is not None:
            return key, words, f"the cycle's code uses the string {text.strip()!r}"
    return None


# the built-in containers whose slot in a cycle says what was nested
_CONTAINERS = {"list": "lists", "tuple": "tuples", "dict": "dicts", "set": "sets", "frozenset": "frozensets"}


def _of_type(words: str, slot_function: Optional[str]) -> str:
    """'repr() of nested lists (...)' for 'repr() of nested containers (...)' when the
    cycle holds `list.__repr__`: the type whose slot recursed is the type that was nested."""
    if slot_function is None:
        return words
    plural = _CONTAINERS.get(slot_function.rsplit(".", 1)[0])
    if plural is None:
        return words
    return words.replace("nested containers", f"nested {plural}").replace("nested objects", f"nested {plural}")


def _tensorflow_api(functions: Sequence[str]) -> Optional[Tuple[str, str]]:
    """(C++ function, Python API) of the first known TensorFlow entry point among
    `functions` (named as frames are: MSVC-decorated names already demangled)."""
    for function in functions:
        name = split_name(function)[1]
        for cpp, api in TENSORFLOW_APIS:
            if name == cpp or name.startswith(cpp + "("):
                return cpp, api
    return None


def _through_library(functions: Sequence[str]) -> Optional[Tuple[str, str, str]]:
    """(library, words, evidence) when a cycle of Python calls passes through a known
    library's extension module: its C code, called by Python code, called Python again.
    The words name the library's functions the cycle holds by their Python names (an
    attribute's setter, a method: what the Python code did), else the module."""
    for function in functions:
        module, _ = split_name(function)
        library = _library(module)
        if library is None:
            continue
        named = [n for m, n in (split_name(f) for f in functions) if m == module and "." in n and not UNNAMED.match(n)]
        named = list(dict.fromkeys(named))[:3]
        words = f"{library}'s {', '.join(named)} ({module})" if named else f"{library} ({module})"
        said = (
            f"the calls pass through {library}'s C code ({module}"
            + (f": {', '.join(named)}" if named else "")
            + "), which Python code called and which called Python code again"
        )
        return library, words, said
    return None


# A compiled module's Python names start with its package: the library it belongs to
PACKAGES = {
    "numpy": "NumPy",
    "tensorflow": "TensorFlow",
    "torch": "PyTorch",
    "sklearn": "scikit-learn",
    "scipy": "SciPy",
    "pyarrow": "PyArrow",
}


def _through_python_names(in_call_order: Sequence[str]) -> Optional[Tuple[str, str, str]]:
    """(library, words, evidence) when a cycle of Python calls passes through extension
    modules that are not a known library's, by the Python names their frames carry
    (`numpy.random._generator.default_rng`, from CPython's tables or Cython's own name),
    in call order (recursion.call_order): the library is the names' top package."""
    named: List[str] = []
    modules: List[str] = []
    for module, name in (split_name(f) for f in in_call_order):
        if module is None or not module.lower().endswith(".pyd") or "." not in name or UNNAMED.match(name):
            continue
        named.append(name)
        modules.append(module)
    if not named:
        return None
    top = named[0].split(".", 1)[0]
    library = PACKAGES.get(top, top)
    names = list(dict.fromkeys(named))
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    distinct = list(dict.fromkeys(modules))
    said = (
        f"the calls pass through {library}'s compiled code ({', '.join(distinct)}: {', '.join(names)}), "
        "which Python code called and which called Python code again"
    )
    where = distinct[0] if len(distinct) == 1 else f"{len(distinct)} extension modules"
    return library, f"{library}'s {shown} ({where})", said


def classify_recursion(cycle: Cycle, facts: Mapping[str, CodeFacts]) -> RecursionKind:
    """What kind of recursion `cycle` is. `facts` maps cycle members (as named in
    `cycle.functions`) to what their code refers to."""
    members = [split_name(f) for f in cycle.functions]
    names = [n for _, n in members]
    modules = [m for m, _ in members]
    depth = cycle.repetitions
    unnamed = sorted({f for f, (_, n) in zip(cycle.functions, members) if no_c_name(n)})
    evidence: List[str] = []
    python_dlls = sorted({m for m in modules if m and PYTHON_DLL.match(m)})
    interpreter = python_dlls[0] if python_dlls else None

    loop = next((n for n in names if n in EVAL_LOOP), None)
    if loop is not None:
        # each eval-loop frame is a Python call (3.8-3.10; from 3.11 one frame may run
        # several, so this is the least): a cycle of two functions is two calls a repetition
        calls = sum(1 for n in names if n in EVAL_LOOP)
        depth = cycle.repetitions * calls
        evidence.append(
            f"{interpreter or 'the interpreter'}!{loop} (the eval loop) is in the cycle: "
            + (
                "each repetition is one Python-level call"
                if calls == 1
                else f"each repetition is {calls} Python-level calls"
            )
        )
        via = _protocol(names, facts)
        if via is not None and via[0] in SPECIAL_METHODS:
            method, builtin = SPECIAL_METHODS[via[0]]
            evidence.append(
                f"the calls go through {via[1]}: {via[2]}; Python code re-enters the eval loop from there only "
                f"through a special method, so a {method} method is calling {builtin} again"
            )
            return RecursionKind(
                Recursing.PYTHON,
                f"a Python {method} method calling {builtin}",
                interpreter,
                tuple(evidence),
                depth,
                protocol=via[0],
            )
        through = _through_library(cycle.functions) or _through_python_names(call_order(cycle))
        if through is not None:
            library, words, said = through
            evidence.append(said)
            return RecursionKind(
                Recursing.PYTHON, f"{PYTHON_CALLS} through {words}", interpreter, tuple(evidence), depth, library
            )
        return RecursionKind(Recursing.PYTHON, PYTHON_CALLS, interpreter, tuple(evidence), depth)

    libraries = [lib for lib in (_library(m) for m in modules) if lib]
    if libraries:
        library = libraries[0]
        module = next(m for m in modules if _library(m) == library)
        tf = _tensorflow_api(list(cycle.functions) + list(cycle.entry_path[:8])) if library == "TensorFlow" else None
        if tf is not None:
            cpp, api = tf
            evidence.append(f"the recursion is in {module}, entered through {cpp}, the C++ side of {api}")
            return RecursionKind(Recursing.EXTENSION, api, module, tuple(evidence), depth, library)
        via = _protocol(names, facts)
        what = f"C code of {library} ({module})"
        evidence.append(f"{len(libraries)} of the cycle's {len(members)} functions are in {module}")
        if via is not None:
            what += f", through {via[1]}"
            evidence.append(via[2])
        return RecursionKind(Recursing.EXTENSION, what, module, tuple(evidence), depth, library)

    minor = interpreter_minor(interpreter) if interpreter is not None else None
    only_interpreter = interpreter is not None and all(m == interpreter for m in modules)
    if only_interpreter and not any("!" in f for f in cycle.functions) and (minor is None or minor < 12):
        # no name at all, not even an export's: the image is not at hand, and the eval loop
        # (exported by every CPython 3) would be named if it were. From 3.12 a Python call
        # nests no C frames, so there a cycle of the interpreter's own frames is its C code.
        evidence.append(
            f"every function in the cycle is in {interpreter}, none of them named: its image is not at hand, "
            "so whether the eval loop (Python functions calling each other) or the interpreter's C code "
            "(repr, json, pickle of nested data) recursed cannot be told"
        )
        return RecursionKind(Recursing.INTERPRETER, f"code of {interpreter}", interpreter, tuple(evidence), depth)

    if only_interpreter:
        via = _protocol(names, facts)
        no_image = not any("!" in f for f in cycle.functions)
        evidence.append(
            f"every function in the cycle is C code of {interpreter}: from Python 3.12 a Python call nests no C "
            "frames, so this is C recursion, not Python functions calling each other"
            if no_image
            else f"every function in the cycle is C code of {interpreter} and the eval loop is not among "
            "them: C recursion, not Python functions calling each other"
        )
        if via is not None:
            evidence.append(via[2])
            return RecursionKind(Recursing.C_PROTOCOL, via[1], interpreter, tuple(evidence), depth, protocol=via[0])
        if no_image:
            evidence.append(f"{interpreter}'s image is not at hand: which C path recursed cannot be told without it")
        elif unnamed:
            evidence.append(
                f"{interpreter} has no symbols here (exports only) and its code shows no known "
                "protocol: which C path recursed cannot be told without its PDB"
            )
        return RecursionKind(Recursing.C_PROTOCOL, f"C code of {interpreter}", interpreter, tuple(evidence), depth)

    return RecursionKind(Recursing.NATIVE, "native code", modules[0] if modules else None, (), depth)


def facts_needed(cycle: Cycle) -> Tuple[str, ...]:
    """The cycle members whose code is worth reading: those without a C name (C names say
    enough for the others)."""
    return tuple(f for f in cycle.functions if no_c_name(split_name(f)[1]))


def by_name(functions: Sequence[str], facts: Sequence[CodeFacts]) -> Dict[str, CodeFacts]:
    return dict(zip(functions, facts))
