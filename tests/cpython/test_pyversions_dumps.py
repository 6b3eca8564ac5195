"""Real crash dumps of python.org's CPython 3.9.13, 3.10.11, 3.11.9, 3.12.9 and 3.13.2
(sample_dumps/pyversions): the Python stack of every thread, and the verdict in Python's
words. Every expectation comes from the manifest, i.e. from what each crashed program
printed of itself just before it crashed (its MARKER line) and the builder's own reading of
the dump, never from dumpkit.

Full-memory dumps carry everything the analysis needs (python3X.dll's pages included);
the minidumps need python3X.dll's image for unwinding through it, from ../shared/winpython
(those tests skip without it)."""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from tests.support.samples import ROOT, SAMPLES, plain_dump

HERE = SAMPLES / "pyversions"
WINPYTHON = ROOT.parent / "shared" / "winpython"
NATIVELIB_DIR = HERE / "bin"
_UNPACKED = Path(tempfile.mkdtemp(prefix="dumpkit-pyversions-"))  # per process: xdist workers unpack apart
atexit.register(shutil.rmtree, _UNPACKED, True)


def _manifest() -> List[dict]:
    path = HERE / "manifest.json"
    return json.loads(path.read_text())["dumps"] if path.exists() else []


CASES = _manifest()
FULL = [d for d in CASES if d["dump_type"] == "full"]
NORMAL = [d for d in CASES if d["dump_type"] == "normal"]


def _ids(d: dict) -> str:
    return d["name"]


def _python_dir(entry: dict) -> Path:
    return WINPYTHON / f"cpython-{entry['python_minor']}-amd64"


@lru_cache(maxsize=None)
def _report(name: str, with_images: bool):
    from dumpkit.engine import Options, analyze
    from dumpkit.sources.minidump import open_dump

    entry = next(d for d in CASES if d["name"] == name)
    images = [str(NATIVELIB_DIR)]
    if with_images:
        if not _python_dir(entry).is_dir():
            pytest.skip(f"{_python_dir(entry)} is not here (../shared/winpython)")
        images.append(str(_python_dir(entry)))
    path = plain_dump(HERE / entry["file"], _UNPACKED)
    target = open_dump(str(path))
    try:
        return analyze(
            target, Options(image_paths=images, use_recorded_paths=False), problems=target.soft_errors
        ).report
    finally:
        target.close()


def _truth(entry: dict) -> Dict[int, List[Tuple[str, str, int]]]:
    """Thread id -> Python frames outermost first, as the program printed them."""
    marker = entry["marker"]
    return {t["native_id"]: [tuple(f) for f in t["frames"]] for t in marker.get("threads", [])}


def _stacks(report) -> Dict[int, List[Tuple[str, str, int]]]:
    assert report.python is not None and report.python.status == "read", report.python and report.python.message
    return {
        t.thread_id: [(f.function, f.filename, f.line) for f in reversed(t.frames)]
        for t in report.python.threads
        if t.frames
    }


@pytest.mark.parametrize("entry", FULL, ids=_ids)
def test_every_threads_python_stack_is_what_the_program_printed(entry):
    report = _report(entry["name"], False)
    stacks = _stacks(report)
    marker = entry["marker"]
    if "threads" in marker:  # crashed in a call: every thread's stack exactly
        assert stacks == _truth(entry)
    else:  # a recursion: the stack it was entered from, then only the recursing functions
        crashing = stacks[marker["crash_native_id"]]
        entry_stack = [tuple(f) for f in marker["stack_at_entry"]]
        assert crashing[: len(entry_stack)] == entry_stack
        # C recursion (repr of a nested list) adds no Python frame: cycle None
        assert {f[0] for f in crashing[len(entry_stack) :]} == set(marker["cycle"] or ())


@pytest.mark.parametrize("entry", FULL, ids=_ids)
def test_the_layout_is_verified_on_this_build_and_the_report_says_which(entry):
    python = _report(entry["name"], False).python
    version = entry["python_dll_version_string"]  # the builder read it from the DLL's version resource
    assert python.layout_verified and python.version == version
    assert f"verified on real crash dumps of CPython {version}" in python.layout_note or (
        version.startswith("3.13") and "_Py_DebugOffsets" in python.layout_note
    )


@pytest.mark.parametrize("entry", [d for d in CASES if d["scenario"] == "ctypes_recursion"], ids=_ids)
def test_a_native_recursion_entered_through_ctypes_says_so_in_python_terms(entry):
    report = _report(entry["name"], True)
    verdict = report.verdict
    marker = entry["marker"]
    cycle = " -> ".join(f"nativelib.dll!{f}" for f in marker["native_cycle"])
    assert verdict.kind == "recursion" and verdict.confidence == "high"
    assert cycle in verdict.headline and "through a ctypes call into nativelib.dll" in verdict.headline
    assert report.signature.text.endswith("| nativelib.dll!nl_sum_tree | python(ctypes)")
    assert "libffi" not in report.signature.text
    entered = next(e for e in verdict.evidence if e.startswith("entered from: "))
    assert "Python, through a ctypes call (libffi, _ctypes.pyd)" in entered and "func_" not in entered
    if entry["dump_type"] == "full":  # the Python line that made the call, from the Python stack
        name, file, line = marker["threads"][0]["frames"][-1]
        assert f"called from Python code at {name} ({file}:{line})" in verdict.headline
        assert report.blame.python_frame == f"{name} ({file}:{line})"
    minor = int(entry["python_minor"].split(".")[1])
    says_native = any(s.startswith(f"Python 3.{minor} counts C recursion") for s in verdict.next_steps)
    assert says_native is (minor >= 12)


@pytest.mark.parametrize("entry", [d for d in CASES if d["scenario"] == "thread_av"], ids=_ids)
def test_an_access_violation_names_the_python_line_that_led_into_it(entry):
    report = _report(entry["name"], False)
    crashing = next(t for t in entry["marker"]["threads"] if t["crashing"])
    name, file, line = crashing["frames"][-1]
    at = f"{name} ({file}:{line})"
    assert report.crash.thread_id == entry["crash_thread_tid"] != entry["main_thread_tid"]
    assert f"from Python code at {at} through ctypes' own C code (_ctypes.pyd)" in report.verdict.headline
    blame = report.blame
    assert blame.kind == "python" and blame.function == at and "_ctypes.pyd" in blame.python_via
    assert report.signature.text.startswith("ACCESS_VIOLATION | _ctypes.pyd+0x")
    assert report.signature.text.endswith("| python(ctypes)")
    steps = " ".join(report.verdict.next_steps)
    assert "no need to rerun with faulthandler" in steps and at in steps


def test_the_python_line_reaches_every_format():
    from dumpkit.report.html import render_html
    from dumpkit.report.json_report import render_json
    from dumpkit.report.markdown import render_markdown
    from dumpkit.report.text import render_text

    entry = next(d for d in FULL if d["scenario"] == "thread_av")
    report = _report(entry["name"], False)
    at = report.blame.function
    assert json.loads(render_json(report))["blame"]["python_frame"] == at
    for text in (render_text(report, width=200), render_markdown(report), render_html(report)):
        assert "read_field" in text and "Python frame" in text


@pytest.mark.parametrize("entry", [d for d in NORMAL if d["scenario"] == "slot_recursion"], ids=_ids)
def test_a_repr_method_calling_repr_is_named_and_its_calls_confirmed(entry):
    report = _report(entry["name"], True)
    verdict = report.verdict
    assert verdict.kind == "recursion" and verdict.confidence == "high", verdict.evidence
    assert "a Python __repr__ method calling repr() recursed" in verdict.headline
    assert not any("FAILED" in e for e in verdict.evidence)
    # PyObject_Repr reaches the class's __repr__ through the heap type's tp_repr, which
    # CPython fills with slot_tp_repr (named from its `slotdefs` table, pe/pynames.py)
    cycle = [f.split("!", 1)[1] for f in report.threads[0].cycles[0].functions]  # callees first
    assert cycle[cycle.index("PyObject_Repr") - 1] == "slot_tp_repr", cycle
    assert "slot_tp_repr" in report.signature.text


@pytest.mark.parametrize("entry", [d for d in NORMAL if d["scenario"] == "getitem_recursion"], ids=_ids)
def test_a_getitem_method_subscripting_its_child_is_named_through_the_mapping_slot(entry):
    """Node.__getitem__ returns self.child[key] down a million-node chain (src/
    getitem_recursion.py): the subscript reaches the class's method through the heap type's
    mp_subscript, which CPython fills with slot_mp_subscript. PyHeapTypeObject's mapping
    table moves between versions; the name comes from where `slotdefs` says it is."""
    report = _report(entry["name"], True)
    verdict = report.verdict
    method = entry["marker"]["cycle"][0]
    assert verdict.kind == "recursion" and verdict.confidence == "high", verdict.evidence
    assert f"a Python {method} method calling obj[key] recursed" in verdict.headline
    cycle = [f.split("!", 1)[1] for f in report.threads[0].cycles[0].functions]
    # a class with __getitem__ fills both mp_subscript and sq_item; obj[key] takes the first
    assert "slot_mp_subscript" in cycle and "slot_sq_item" not in cycle, cycle
    assert "slot_mp_subscript" in report.signature.text


def test_a_tail_jump_into_the_next_function_is_a_confirmed_call():
    entry = next(d for d in NORMAL if d["name"] == "slot_recursion_py311")
    report = _report(entry["name"], True)
    edges = report.threads[0].cycles[0].call_edges
    tail = [e for e in edges if e.tail_jump is not None]
    assert tail and all(e.confirmed for e in tail)
    assert any("tail-jumps to the callee" in e for e in report.verdict.evidence)


@pytest.mark.parametrize("entry", [d for d in NORMAL if d["scenario"] == "repr_recursion"], ids=_ids)
def test_c_recursion_through_repr(entry):
    verdict = _report(entry["name"], True).verdict
    assert verdict.kind == "recursion" and "C recursion inside python3" in verdict.headline
    # the program nests lists (src/repr_recursion.py): list's repr slot is the cycle
    assert "through repr() of nested lists" in verdict.headline


@pytest.mark.parametrize("entry", [d for d in NORMAL if d["scenario"] == "py_recursion"], ids=_ids)
def test_python_recursion_on_the_versions_where_it_still_overflows(entry):
    verdict = _report(entry["name"], True).verdict
    assert verdict.kind == "recursion" and verdict.confidence == "high"
    assert "Python functions recursed" in verdict.headline


def test_tensorflow_on_311_names_tf_nest_flatten():
    from dumpkit.engine import Options, analyze
    from tests.support.samples import open_any

    bundle = HERE / "tf311" / "tf_nest_flatten_py311.dkb"
    facts = json.loads((HERE / "tf311" / "facts.json").read_text())
    target = open_any(bundle)
    try:
        report = analyze(target, Options(use_recorded_paths=False), problems=target.soft_errors).report
    finally:
        target.close()
    assert report.crash.thread_id == facts["crash_thread_tid"]
    # Wine's dump of a TensorFlow process lists 1,442,994 memory ranges: every one is read
    assert facts["memory_ranges"] > 1 << 20 and not report.soft_errors, report.soft_errors
    verdict = report.verdict
    assert verdict.kind == "recursion" and verdict.confidence == "high"
    assert "recursion inside TensorFlow: tf.nest.flatten" in verdict.headline
    assert any("tensorflow::swig::Flatten" in e for e in verdict.evidence)
    # the pybind11 function Python called, named by its m.def (pe/pybind11.py: this build
    # inlines the binding into the module's definition, where 2.13's calls it)
    binding = facts["python_binding"]
    module = binding.split(".", 1)[0] + ".pyd"
    assert f"{module}!{binding}" in report.signature.frames, report.signature.frames
    path = list(next(t for t in report.threads if t.is_crashing).cycles[0].entry_path)
    assert path[path.index(f"{module}!{binding}") + 1] == f"{module}!pybind11::cpp_function::dispatcher", path
    assert report.blame is not None and report.blame.python_via == f"through {binding} (the extension module {module})"
