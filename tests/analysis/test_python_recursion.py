"""Recursion in Python terms, on the real CPython 3.8 dumps in sample_dumps/python: the
kind (Python functions, C recursion through a protocol, an extension module), the protocol
or library, and the depth, checked against what each program did (its manifest entry)."""

from __future__ import annotations

import pytest

from dumpkit.analysis.codefacts import CodeFacts
from dumpkit.analysis.model import Cycle
from dumpkit.analysis.python import classify_recursion
from tests.support.samples import python_manifest

RECURSIONS = [d for d in python_manifest() if d.get("expected_class") == "recursion"]
LIBRARIES = {"numpy": "NumPy", "tensorflow": "TensorFlow"}


@pytest.mark.parametrize("facts", RECURSIONS, ids=[d["file"] for d in RECURSIONS])
@pytest.mark.slow
def test_the_recursion_is_named_in_python_terms(facts, python_report):
    report = python_report(facts)
    crash = next(t for t in report.threads if t.is_crashing)
    assert crash.tid == facts["crash_thread_tid"]
    assert report.verdict.kind == "recursion", report.verdict.headline
    kind = crash.cycles[0].kind
    assert kind is not None and kind.kind == facts["recursion_kind"], (kind, report.verdict.headline)
    headline = report.verdict.headline
    if kind.kind == "python":
        assert "Python functions recursed" in headline
        assert any("eval loop" in e for e in report.verdict.evidence)
        if facts.get("extension"):  # through an extension's C code: whose, and which of its functions
            assert kind.library == LIBRARIES[facts["extension"]]
            assert f"recursed through {kind.library}'s {facts['attribute_setter']}" in headline
            assert f"{facts['extension_module']}!{facts['attribute_setter']}" in crash.cycles[0].functions
    elif kind.kind == "c_protocol":
        assert kind.protocol == facts["protocol"]
        assert "not Python functions calling each other" in headline
        assert facts["protocol"] in headline  # "json's C encoder", "pickle's C pickler", "repr()"
    else:
        assert kind.library == LIBRARIES[facts["extension"]]
        assert f"recursion inside {kind.library}" in headline
        if facts.get("python_api"):
            assert facts["python_api"] in headline
    # one repetition per nesting level (or Python call): never more than the program built
    assert kind.depth is not None and 100 < kind.depth <= facts["depth_built"]


CYTHON = [d for d in python_manifest() if d.get("cython_functions")]


@pytest.mark.parametrize("facts", CYTHON, ids=[d["file"] for d in CYTHON])
def test_cython_functions_in_the_cycle_have_their_traceback_names(facts, python_report):
    """numpy.random is Cython: no table names `default_rng` or SeedSequence's functions,
    and each is named by the traceback name its own code holds, the name Python prints."""
    report = python_report(facts)
    crash = next(t for t in report.threads if t.is_crashing)
    in_extensions = [f.split("!", 1)[1] for f in crash.cycles[0].functions if f.split("!", 1)[0].endswith(".pyd")]
    named = {name for name in in_extensions if not name.startswith("func_")}
    # every name given is a function the program's recursion passes through
    assert named <= set(facts["cython_functions"]), in_extensions
    # the Python-visible entry: a PyMethodDef no table owns
    assert facts["cython_functions"][0] in named, in_extensions
    # SeedSequence.__init__ twice: the type's tp_init slot (CPython's tables name it) and
    # the implementation it calls, which no table points to
    assert in_extensions.count("numpy.random.bit_generator.SeedSequence.__init__") == 2, in_extensions
    assert facts["cython_functions"][0] in report.signature.text
    # the headline says where Python code called in: the first Cython function in call order
    assert f"recursed through NumPy's {facts['cython_functions'][0]}," in report.verdict.headline


BOUND = [d for d in python_manifest() if d.get("python_binding")]


@pytest.mark.parametrize("facts", BOUND, ids=[d["file"] for d in BOUND])
@pytest.mark.slow
def test_the_pybind11_function_python_called_is_named_by_its_definition(facts, python_report):
    """tf.nest.flatten calls TensorFlow's pybind11 function `_pywrap_utils.Flatten`: no
    table or export names it (pybind11 builds its method table on the heap), and its
    `m.def("Flatten", ...)` does (pe/pybind11.py)."""
    report = python_report(facts)
    crash = next(t for t in report.threads if t.is_crashing)
    binding = facts["python_binding"]
    module = binding.split(".", 1)[0] + ".pyd"
    assert f"{module}!{binding}" in crash.cycles[0].entry_path, crash.cycles[0].entry_path
    # and the frame Python's call entered first: pybind11's one dispatcher, which calls it
    path = list(crash.cycles[0].entry_path)
    assert path[path.index(f"{module}!{binding}") + 1] == f"{module}!pybind11::cpp_function::dispatcher", path
    # the one name given in that module is the function the program called
    named = {f.split("!", 1)[1].split("+", 1)[0] for f in crash.cycles[0].entry_path if f.startswith(f"{module}!")}
    assert {n for n in named if not n.startswith(("func_", "pybind11::"))} == {binding}, named
    assert report.blame is not None and report.blame.python_via == f"through {binding} (the extension module {module})"


def test_python_recursion_through_named_extension_code_lists_it_in_call_order():
    # callee first, as a cycle lists its frames: Python calls pkg.a.f, which calls pkg.b.g,
    # which calls Python again
    cycle = _cycle(
        [
            "python311.dll!_PyEval_EvalFrameDefault",
            "python311.dll!slot_sq_length",
            "b.cp311-win_amd64.pyd!pkg.b.g",
            "b.cp311-win_amd64.pyd!func_1d00",
            "a.cp311-win_amd64.pyd!pkg.a.f",
            "python311.dll!func_52750",
        ]
    )
    kind = classify_recursion(cycle, {})
    assert kind.kind == "python" and kind.library == "pkg"
    assert kind.what.endswith("through pkg's pkg.a.f, pkg.b.g (2 extension modules)"), kind.what
    assert any("a.cp311-win_amd64.pyd, b.cp311-win_amd64.pyd: pkg.a.f, pkg.b.g" in e for e in kind.evidence)


def _cycle(functions, reps=1000):
    return Cycle(tuple(functions), len(functions), reps, 128 * len(functions), 0, reps * len(functions), 0)


def test_an_unnamed_interpreter_cycle_is_recognised_by_the_strings_its_code_uses():
    cycle = _cycle(["python38.dll!func_b50e0", "python38.dll!func_b5a50"])
    facts = {
        "python38.dll!func_b5a50": CodeFacts(("_iterencode_list needs a sequence",), ("python38.dll!PySequence_Fast",))
    }
    kind = classify_recursion(cycle, facts)
    assert (kind.kind, kind.protocol, kind.depth) == ("c_protocol", "json", 1000)
    assert any("'_iterencode_list needs a sequence'" in e for e in kind.evidence)


def test_without_names_or_known_strings_it_says_what_cannot_be_told():
    kind = classify_recursion(_cycle(["python38.dll!func_1000", "python38.dll!func_2000"]), {})
    assert kind.kind == "c_protocol" and kind.protocol is None
    assert any("cannot be told without its PDB" in e for e in kind.evidence)


def test_the_eval_loop_in_the_cycle_makes_it_python_recursion_even_through_a_protocol():
    cycle = _cycle(["python310.dll!_PyEval_EvalFrameDefault", "python310.dll!PyObject_Repr", "python310.dll!func_10"])
    kind = classify_recursion(cycle, {})
    assert kind.kind == "python" and kind.module == "python310.dll"
    assert any("repr()" in e for e in kind.evidence)


def test_a_tensorflow_entry_point_names_the_python_api():
    cycle = _cycle(["_pywrap_tensorflow_internal.pyd!func_12262a0"])
    cycle = Cycle(
        cycle.functions,
        1,
        5000,
        96,
        0,
        4999,
        480000,
        entry_path=("_pywrap_tensorflow_internal.pyd!tensorflow::swig::Flatten",),
    )
    kind = classify_recursion(cycle, {})
    assert (kind.kind, kind.library, kind.what) == ("extension", "TensorFlow", "tf.nest.flatten")


def test_plain_native_recursion_stays_native():
    kind = classify_recursion(_cycle(["opkernels.dll!visit", "opkernels.dll!expand"]), {})
    assert kind.kind == "native"


def test_a_cycle_of_the_interpreters_bare_addresses_is_not_called_c_recursion():
    """No name at all (python3X.dll's image not at hand, not even its exports): the eval loop
    could be any of them, so Python functions and C recursion cannot be told apart; from
    3.12 a Python call nests no C frames, so there it is C recursion."""
    kind = classify_recursion(_cycle(["python38.dll+0x78c6d", "python38.dll+0x65def", "python38.dll+0x64550"]), {})
    assert kind.kind == "interpreter" and kind.module == "python38.dll"
    assert any("cannot be told" in e for e in kind.evidence)
    assert not any("not Python functions" in e for e in kind.evidence)
    later = classify_recursion(_cycle(["python312.dll+0x1000", "python312.dll+0x2000"]), {})
    assert later.kind == "c_protocol" and any("from Python 3.12" in e for e in later.evidence)


def test_two_python_calls_a_repetition_count_twice_and_a_library_between_them_is_named():
    """A cycle with two eval-loop frames is two Python calls a repetition; NumPy's C code
    between them (an attribute setter reached from Python) is named as what they pass through."""
    cycle = _cycle(
        [
            "python38.dll!_PyEval_EvalFrameDefault",
            "python38.dll!getset_descriptor.__set__",
            "_multiarray_umath.cp38-win_amd64.pyd!numpy.ndarray.shape.__set__",
            "_multiarray_umath.cp38-win_amd64.pyd!func_d8700",
            "python38.dll!PyNumber_Index",
            "python38.dll!_PyEval_EvalFrameDefault",
        ],
        reps=700,
    )
    kind = classify_recursion(cycle, {})
    assert (kind.kind, kind.library, kind.depth) == ("python", "NumPy", 1400)
    assert kind.what.endswith("through NumPy's numpy.ndarray.shape.__set__ (_multiarray_umath.cp38-win_amd64.pyd)")
    assert any("each repetition is 2 Python-level calls" in e for e in kind.evidence)
    plain = classify_recursion(_cycle(["python38.dll!_PyEval_EvalFrameDefault", "python38.dll!func_10"], 700), {})
    assert (plain.library, plain.depth, plain.what) == (None, 700, "Python functions calling each other")
