"""The Python line a verdict names is the user's (issue #41 item 6): the innermost frame
outside the standard library (the installation's Lib folder, its pythonXY.zip, frozen
modules) and installed packages (site-packages), with the library call it made named."""

from __future__ import annotations

from dumpkit.analysis.model import PythonFrameRecord, PythonThreadReport
from dumpkit.analysis.pyentry import installation_of, is_library_file, library_name, user_python

INSTALL = "C:\\Python311"


def _thread(*frames) -> PythonThreadReport:
    records = tuple(PythonFrameRecord(i, fn, file, line, 1) for i, (fn, file, line) in enumerate(frames))
    return PythonThreadReport(260, len(records), records, 0)


def test_the_users_frame_below_the_standard_library_calls_its_function():
    thread = _thread(
        ("string_at", "C:\\Python311\\Lib\\ctypes\\__init__.py", 519),
        ("leaf", "C:\\scripts\\job.py", 3),
        ("main", "C:\\scripts\\job.py", 9),
    )
    assert user_python(thread, INSTALL) == (1, "leaf (C:\\scripts\\job.py:3), calling ctypes.string_at")


def test_the_stdlib_zip_installed_packages_and_frozen_modules_are_library_code_without_the_installation():
    thread = _thread(
        ("iterencode", "Z:\\py310\\python310.zip\\json\\encoder.py", 257),
        ("encode", "Z:\\py310\\python310.zip\\json\\encoder.py", 199),
        ("dumps", "Z:\\py310\\python310.zip\\json\\__init__.py", 231),
        ("save_config", "Z:\\work\\train.py", 12),
    )
    assert user_python(thread) == (3, "save_config (Z:\\work\\train.py:12), calling json.dumps")
    assert is_library_file("C:\\venv\\Lib\\site-packages\\numpy\\core\\fromnumeric.py")
    assert is_library_file("<frozen importlib._bootstrap>")
    frozen = PythonFrameRecord(0, "_find_and_load", "<frozen importlib._bootstrap>", 1, 1)
    assert library_name(frozen) == "importlib._bootstrap._find_and_load"
    numpy = PythonFrameRecord(0, "sum", "C:\\venv\\Lib\\site-packages\\numpy\\core\\fromnumeric.py", 1, 1)
    assert library_name(numpy) == "numpy.core.fromnumeric.sum"


def test_a_users_own_lib_folder_is_the_users_and_the_innermost_user_frame_stands_alone():
    thread = _thread(("parse", "C:\\work\\lib\\parser.py", 40), ("main", "C:\\work\\run.py", 2))
    assert user_python(thread, INSTALL) == (0, "parse (C:\\work\\lib\\parser.py:40)")
    # everything library code: the innermost frame, as before
    only = _thread(("run", "C:\\Python311\\Lib\\threading.py", 975))
    assert user_python(only, INSTALL) == (0, "run (C:\\Python311\\Lib\\threading.py:975)")


def test_the_installation_is_the_folder_of_the_interpreters_dll():
    assert installation_of("C:\\Python311\\python311.dll") == "C:\\Python311"
    assert installation_of("python311.dll") is None


def test_the_embeddable_distributions_relative_stdlib_paths_are_library_code():
    """python.org's embeddable zip records stdlib filenames relative ("threading.py"); a
    user's own relative script ("job.py") stays the user's."""
    assert is_library_file("threading.py") and is_library_file("json\\encoder.py")
    assert not is_library_file("job.py") and not is_library_file("mylib\\parser.py")
    thread = _thread(
        ("_wait_for_tstate_lock", "threading.py", 1139), ("join", "threading.py", 1119), ("<module>", "job.py", 20)
    )
    assert user_python(thread) == (2, "<module> (job.py:20), calling threading.join")


def test_python_entered_an_extension_through_the_function_its_python_name_says():
    from types import SimpleNamespace

    from dumpkit.analysis.pyentry import EXTENSION, python_entry

    def stack(*symbols: str):
        return [SimpleNamespace(module=s.split("!")[0], symbol=s) for s in symbols]

    # the outermost frame of the extension that carries a Python name of that module: the
    # function Python called (pybind11's impl; the C++ above it is not a Python name)
    entry = python_entry(
        stack(
            "_pywrap_tensorflow_internal.pyd!tensorflow::swig::Flatten",
            "_pywrap_utils.pyd!func_9450+0x54",
            "_pywrap_utils.pyd!_pywrap_utils.Flatten+0x16",
            "_pywrap_utils.pyd!func_cc40+0x14ad",
            "python38.dll!func_52750",
        )
    )
    assert entry is not None and entry.via == EXTENSION and entry.function == "_pywrap_utils.Flatten"
    assert entry.how == "through _pywrap_utils.Flatten (the extension module _pywrap_utils.pyd)"
    assert entry.evidence.startswith("frame 4 is the interpreter (python38.dll), which called _pywrap_utils.Flatten in")
    # a type's slot from CPython's tables is a Python name too, but not one of the module's
    # own functions; a C++ name is none: the module alone is said
    for symbol in ("_multiarray_umath.cp38-win_amd64.pyd!numpy.ndarray.__repr__", "my_ops.pyd!ops::run"):
        entry = python_entry(stack(symbol, "python38.dll!func_52750"))
        assert entry is not None and entry.function is None
        assert entry.how == f"through the extension module {symbol.split('!')[0]}"
