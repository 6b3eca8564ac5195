"""Names from CPython's own tables (dumpkit/pe/pynames.py) for the static C functions of
python3X.dll and of extension modules, which no export names: checked against the genuine
interpreters (where the tables hold an exported function, the export says what it is) and
against what real programs called before they crashed or ended."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Callable, Dict, FrozenSet, Set, Tuple

import pytest

from dumpkit.engine import Options, analyze
from dumpkit.pe import PEImage
from dumpkit.pe.pynames import is_python_image

SAMPLES = Path(__file__).resolve().parents[2] / "sample_dumps"
WINPYTHON = SAMPLES.parent.parent / "shared" / "winpython"
WINE_DLLS = Path("/usr/lib/x86_64-linux-gnu/wine/x86_64-windows")
MINORS = (8, 9, 10, 11, 12, 13)

# exported functions CPython puts into the slots of many built-in types: the slot they fill
# is the Python name the tables must give them
SLOT_OF_EXPORT = {
    "PyObject_SelfIter": ".__iter__",
    "PyType_GenericNew": ".__new__",
    "PyObject_GenericGetAttr": ".__getattribute__",
    "PyObject_GenericSetAttr": ".__setattr__",
}
# exported functions no table holds
IN_NO_TABLE = ("Py_Initialize", "PyObject_Repr", "PyEval_SaveThread", "PyList_Append")


def _interpreter(minor: int) -> PEImage:
    path = WINPYTHON / f"cpython-3.{minor}-amd64" / f"python3{minor}.dll"
    if not path.exists():
        pytest.skip(f"needs ../shared/winpython ({path} is not here)")
    return PEImage.from_file(str(path))


@pytest.mark.parametrize("minor", MINORS)
def test_exported_slot_functions_are_named_by_the_slot_they_fill(minor):
    image = _interpreter(minor)
    exports = {name: rva for rva, name in image.exports()}
    for export, slot in SLOT_OF_EXPORT.items():
        name = image.python_name(exports[export])
        assert name is not None and name.endswith(slot), (export, name)
    for export in IN_NO_TABLE:
        assert image.python_name(exports[export]) is None, export


def _names_given(minor: int, keep: Callable[[str], bool]) -> Dict[str, FrozenSet[int]]:
    """{name: the RVAs the tables give it} of python3X.dll for the names `keep` takes, over
    every pointer into the image its data holds."""
    from dumpkit.pe.pynames import python_names

    image = _interpreter(minor)
    names = python_names(image)
    assert names is not None
    named: Dict[str, Set[int]] = {}
    for key in names._pointers():
        target = key >> 32
        name = image.python_name(target)
        if name is not None and keep(name):
            named.setdefault(name, set()).add(target)
    return {k: frozenset(v) for k, v in named.items()}


@lru_cache(maxsize=None)
def _slot_functions(minor: int) -> Tuple[Dict[str, FrozenSet[int]], FrozenSet[int]]:
    """({slot_* name: the RVAs the tables give it}, the exported RVAs) of python3X.dll."""
    named = _names_given(minor, lambda name: name.startswith("slot_"))
    return named, frozenset(rva for rva, _ in _interpreter(minor).exports())


@pytest.mark.parametrize("minor", MINORS)
def test_each_slot_function_of_slotdefs_is_one_static_function(minor):
    """typeobject.c's `slotdefs` gives each `slot_tp_*` function to one or more special
    methods (slot_tp_richcompare to all six comparisons): each name goes to exactly one
    function of the image, none of them exported, and no other function gets one."""
    from dumpkit.pe.pynames import SLOT_FUNCTIONS

    every, exported = _slot_functions(minor)
    named = {k: v for k, v in every.items() if k.startswith("slot_tp_")}
    assert set(named) == set(SLOT_FUNCTIONS.values())
    assert all(len(rvas) == 1 for rvas in named.values()), named
    assert not any(rvas & exported for rvas in named.values())


# CPython's slot_* functions of the sub-tables (typeobject.c): "slot_" and the member's
# name for every member whose `slotdefs` entry has a function (not nb_reserved, sq_concat,
# sq_repeat, their in-place forms or the was_sq_* ones); slot_mp_length is a macro for
# slot_sq_length; __buffer__ and __release_buffer__ came in 3.12
_NUMBER = """add subtract multiply remainder divmod power negative positive absolute bool invert lshift
rshift and xor or int float inplace_add inplace_subtract inplace_multiply inplace_remainder inplace_power
inplace_lshift inplace_rshift inplace_and inplace_xor inplace_or floor_divide true_divide
inplace_floor_divide inplace_true_divide index matrix_multiply inplace_matrix_multiply""".split()
_SUB_TABLE_SLOTS = {f"slot_nb_{m}" for m in _NUMBER} | {"slot_mp_subscript", "slot_mp_ass_subscript"}
_SUB_TABLE_SLOTS |= {"slot_sq_length", "slot_sq_item", "slot_sq_ass_item", "slot_sq_contains"}
_SUB_TABLE_SLOTS |= {"slot_am_await", "slot_am_aiter", "slot_am_anext"}


@pytest.mark.parametrize("minor", MINORS)
def test_each_sub_table_slot_function_is_one_static_function(minor):
    """The number, mapping, sequence, async and buffer slots' functions sit in the heap
    type after PyTypeObject, whose size differs between versions: each of CPython's names
    goes to exactly one function of the image, none exported, and no function gets two."""
    every, exported = _slot_functions(minor)
    named = {k: v for k, v in every.items() if not k.startswith("slot_tp_")}
    buffers = {"slot_bf_getbuffer", "slot_bf_releasebuffer"} if minor >= 12 else set()
    assert set(named) == _SUB_TABLE_SLOTS | buffers
    assert all(len(rvas) == 1 for rvas in named.values()), named
    assert len(frozenset().union(*named.values())) == len(named)
    assert not any(rvas & exported for rvas in named.values())


# CPython's own attributes (frameobject.c, funcobject.c, exceptions.c, descrobject.c): a
# getter and a setter each, in every version 3.8-3.13
ATTRIBUTES_WITH_SETTERS = ("frame.f_lineno", "function.__code__", "function.__defaults__", "BaseException.args")


@lru_cache(maxsize=None)
def _attribute_functions(minor: int) -> Dict[str, FrozenSet[int]]:
    """{`type.attribute.__get__` or `.__set__`: the RVAs the tables give it} of python3X.dll."""
    return _names_given(minor, lambda name: name.count(".") >= 2 and name.endswith((".__get__", ".__set__")))


@pytest.mark.parametrize("minor", MINORS)
def test_attribute_getters_and_setters_are_named_by_their_attribute(minor):
    """A PyGetSetDef's get and set functions (`frame.f_lineno`, what reading or assigning
    the attribute runs) are named `type.attribute.__get__` / `.__set__`: each of CPython's
    attributes with a setter gets both, each name goes to one function, and the only
    exported ones are the generic `__dict__` pair, which many types' tables share."""
    image = _interpreter(minor)
    exports = {name: rva for rva, name in image.exports()}
    assert image.python_name(exports["PyObject_GenericGetDict"]).endswith(".__dict__.__get__")
    assert image.python_name(exports["PyObject_GenericSetDict"]).endswith(".__dict__.__set__")
    named = _attribute_functions(minor)
    for attribute in ATTRIBUTES_WITH_SETTERS:
        get, set_ = named.get(f"{attribute}.__get__"), named.get(f"{attribute}.__set__")
        assert get and set_ and get != set_, (attribute, sorted(named)[:20])
    assert all(len(rvas) == 1 for rvas in named.values())
    exported = {rva for rva, _ in image.exports()}
    shared = {exports["PyObject_GenericGetDict"], exports["PyObject_GenericSetDict"]}
    assert {n for n, rvas in named.items() if rvas & exported} == {n for n, rvas in named.items() if rvas & shared}, (
        "an exported function other than the generic __dict__ pair was named as an attribute"
    )


def test_only_the_interpreter_and_extension_modules_are_asked():
    assert is_python_image("python312.dll") and is_python_image("_ctypes.pyd")
    assert is_python_image("_multiarray_umath.cp311-win_amd64.pyd")
    assert not is_python_image("python.exe") and not is_python_image("ucrtbase.dll")


def test_a_list_nested_a_million_deep_recurses_through_list_repr():
    """The program builds `[[[...]]]` and calls repr() on it (sample_dumps/python/src/
    repr_recursion.py): list_repr -> PyObject_Repr -> list_repr. python38.dll's image is in
    the full dump's memory; no export names list_repr, its type's tp_repr slot does."""
    path = SAMPLES / "python" / "repr_recursion_full.trimmed.dmp.xz"
    from dumpkit.commands.inputs import open_target

    target, problems = open_target(str(path))
    try:
        report = analyze(target, Options(use_recorded_paths=False), problems=problems).report
    finally:
        target.close()
    assert "python38.dll!list.__repr__" in report.signature.text
    assert "func_" not in report.signature.text.split("|")[1]
    # the type whose slot recursed is what was nested
    assert "through repr() of nested lists" in report.verdict.headline


def _endings_facts():
    return json.loads((SAMPLES / "endings" / "manifest.json").read_text())["dumps"]


# what the program called (its MARKER) -> the C function behind it on Windows (the os
# module's functions are the nt module's; signal's are _signal's)
BEHIND = {
    "os.abort()": "nt.abort",
    "os._exit(3)": "nt._exit",
    "signal.raise_signal(signal.SIGABRT)": "_signal.raise_signal",
}


@pytest.mark.parametrize(
    "name", ["os_abort_py38", "os_abort_py312", "os_exit3_py310", "os_exit3_py311", "sigabrt_py39", "sigabrt_py313"]
)
def test_the_python_function_that_ended_the_process_is_named(name):
    call = {d["name"]: d for d in _endings_facts()}[name]["marker"]["call"]
    minor = name.rsplit("_py3", 1)[1]
    images = WINPYTHON / f"cpython-3.{minor}-amd64"
    if not images.is_dir() or not WINE_DLLS.is_dir():
        pytest.skip("needs ../shared/winpython and Wine's own DLLs (Debian's wine64)")
    from dumpkit.commands.inputs import open_target

    target, problems = open_target(str(SAMPLES / "endings" / f"{name}.dmp.xz"))
    try:
        options = Options(image_paths=[str(WINE_DLLS), str(images)], use_recorded_paths=False)
        report = analyze(target, options, problems=problems).report
    finally:
        target.close()
    assert f"python3{minor}.dll!{BEHIND[call]}" in report.signature.text, (call, report.signature.text)
    if call.startswith("os."):  # the function that called the C runtime's way out: said as Python called it
        assert f"({call.split('(')[0]}() in Python)" in report.verdict.headline, report.verdict.headline


def test_a_lock_wait_is_named_by_the_method_python_code_called():
    """lock_deadlock (sample_dumps/hangs/src): threads block in `with lock:` and
    `lock.acquire()` on threading.Lock. One C function serves `_thread.lock`'s acquire,
    acquire_lock and __enter__; the frame is named by the plain method, not by the
    deprecated alias or the dunder."""
    images = WINPYTHON / "cpython-3.12-amd64"
    if not images.is_dir() or not WINE_DLLS.is_dir():
        pytest.skip("needs ../shared/winpython and Wine's own DLLs (Debian's wine64)")
    from dumpkit.commands.inputs import open_target

    target, problems = open_target(str(SAMPLES / "hangs" / "lock_deadlock_py312.dmp.xz"))
    try:
        folders = [str(WINE_DLLS), str(images), str(SAMPLES / "hangs" / "bin")]
        report = analyze(target, Options(image_paths=folders, use_recorded_paths=False), problems=problems).report
    finally:
        target.close()
    symbols = [f.symbol or "" for t in report.threads for f in t.frames]
    assert any(s.startswith("python312.dll!_thread.lock.acquire+") for s in symbols)
    assert not any("lock.acquire_lock" in s or "lock.__enter__" in s for s in symbols)


def test_numpys_reduce_is_named_from_the_running_process_tables():
    """numpy_strided_av (sample_dumps/python/src): `view.sum()` on an as_strided view past
    its buffer; numpy.core._methods._sum calls `np.add.reduce`, whose C function is
    `ufunc.reduce` in the ufunc type's method table. The full dump holds NumPy's image as
    the process had it, with docstrings NumPy pointed at the heap at import (add_newdoc):
    the table is still read as one."""
    from dumpkit.commands.inputs import open_target

    target, problems = open_target(str(SAMPLES / "python" / "numpy_strided_av_full.trimmed.dmp.xz"))
    try:
        report = analyze(target, Options(use_recorded_paths=False), problems=problems).report
    finally:
        target.close()
    crashing = next(t for t in report.threads if t.is_crashing)
    symbols = [f.symbol or "" for f in crashing.frames]
    assert any(s.startswith("_multiarray_umath.cp38-win_amd64.pyd!numpy.ufunc.reduce+") for s in symbols), symbols
