"""Names from CPython's own tables (dumpkit/pe/pynames.py) for the static C functions of
python3X.dll and of extension modules, which no export names: checked against the genuine
interpreters (where the tables hold an exported function, the export says what it is) and
against what real programs called before they crashed or ended."""

from __future__ import annotations

import json
from pathlib import Path

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


@pytest.mark.parametrize("minor", MINORS)
def test_each_slot_function_of_slotdefs_is_one_static_function(minor):
    """typeobject.c's `slotdefs` gives each `slot_tp_*` function to one or more special
    methods (slot_tp_richcompare to all six comparisons): each name goes to exactly one
    function of the image, none of them exported, and no other function gets one."""
    from dumpkit.pe.pynames import SLOT_FUNCTIONS, python_names

    image = _interpreter(minor)
    names = python_names(image)
    assert names is not None
    exported = {rva for rva, _ in image.exports()}
    named: dict = {}
    for key in names._pointers():
        target = key >> 32
        name = image.python_name(target)
        if name is not None and name.startswith("slot_tp_"):
            named.setdefault(name, set()).add(target)
    assert set(named) == set(SLOT_FUNCTIONS.values())
    assert all(len(rvas) == 1 for rvas in named.values()), named
    assert not any(rvas & exported for rvas in named.values())


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
