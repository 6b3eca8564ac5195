"""Who holds the GIL, read from real full-memory dumps of CPython 3.8-3.13 under Wine, and
checked against what each program did at the moment of its dump (its source and its MARKER
line, in the manifests), never against dumpkit:

- sample_dumps/pyversions (3.9.13-3.13.2), sample_dumps/python (the PSF's 3.8.1): crashes.
  The crashing thread holds the GIL when it crashed in C code the interpreter runs with
  the GIL held; a function called through ctypes.CDLL runs with it released.
- sample_dumps/endings fatal_gil_full_*: PyThreadState_Get called through ctypes.CDLL,
  i.e. without the GIL, ends in Py_FatalError, which does not take it.
- sample_dumps/hangs (when its dumps are there): hung processes whose MARKER says who holds
  the GIL (`gil.held_by`: a thread's name, or null) and that thread's PyThreadState.

A dump, manifest or image that is absent skips."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from dumpkit.cpython import read_python_state
from dumpkit.cpython.model import GilSource
from dumpkit.sources.minidump import open_dump
from tests.support.samples import ROOT, SAMPLES, interpreter_exports

WINPYTHON = ROOT.parent / "shared" / "winpython"

# What each program was doing when its dump was written, and so where the GIL must be.
CRASHING = "the crashing thread holds it"
FREE = "nobody holds it; the crashing thread released it last"
EXPECTED = {
    # C code the interpreter runs with the GIL held: ctypes' own getter of
    # c_int.from_address(0x10).value (no foreign call), the eval loop recursing, list_repr
    # of a nested list, a __repr__ reached through its type slot
    "thread_av": CRASHING,
    "py_recursion": CRASHING,
    "repr_recursion": CRASHING,
    "slot_recursion": CRASHING,
    "py_recursion_full": CRASHING,  # the 3.8 samples' names
    "repr_recursion_full": CRASHING,
    # NumPy's ufunc loop over 1,024 doubles runs with the GIL released
    # (NPY_BEGIN_THREADS_THRESHOLDED: loops over 500 elements), and faults there
    "numpy_strided_av_full": FREE,
    # a function called through ctypes.CDLL runs with the GIL released (Py_BEGIN_ALLOW_THREADS
    # around the foreign call), and the crashing thread was the only Python thread
    "ctypes_recursion": FREE,
    "fatal_gil": FREE,  # and Py_FatalError does not take it back
}


def _entries(folder: str, keep) -> List[dict]:
    path = SAMPLES / folder / "manifest.json"
    if not path.exists():
        return []
    return [dict(d, folder=folder) for d in json.loads(path.read_text())["dumps"] if keep(d)]


CRASHES = (
    _entries("pyversions", lambda d: d.get("dump_type") == "full")
    + _entries("python", lambda d: d.get("dump_type") == "full" and d.get("python_stack_expected"))
    + _entries("endings", lambda d: d.get("dump_type") == "full" and d.get("scenario") == "fatal_gil")
)
HANGS = _entries("hangs", lambda d: isinstance(d.get("marker"), dict) and "gil" in d["marker"])


def _name(entry: dict) -> str:
    return entry.get("name") or entry["file"].split(".")[0]


_STATES: Dict[Path, object] = {}  # one reading per dump per process


def _state(entry: dict, plain, images: Optional[Path] = None):
    """The reader's PythonState of the entry's dump: python3X.dll's exports from the dump's
    own memory (a full dump holds the image), else from `images`."""
    dump = SAMPLES / entry["folder"] / entry["file"]
    if dump not in _STATES:
        _STATES[dump] = _read(dump, plain, images)
    return _STATES[dump]


def _read(dump: Path, plain, images: Optional[Path]):
    if not dump.exists():
        pytest.skip(f"{dump.name} is not here")
    target = open_dump(str(plain(dump)))
    exports, interp = interpreter_exports(target, [str(images)] if images else [])
    try:
        return read_python_state(target, exports, interp)
    finally:
        target.close()


def _crash_tid(entry: dict) -> int:
    marker = entry.get("marker") or {}
    return marker.get("crash_native_id", entry["crash_thread_tid"])


@pytest.mark.parametrize("entry", CRASHES, ids=_name)
def test_the_gil_is_where_the_program_left_it(entry, plain):
    state = _state(entry, plain)
    gil = state.gil
    crash = _crash_tid(entry)
    assert entry["crash_thread_tid"] == crash  # the dump's exception thread is the MARKER's
    expected = EXPECTED[entry["scenario"]]
    if expected is CRASHING:
        assert gil.held is True and gil.holder_thread_id == crash
        assert gil.holder_thread_state == state.thread(crash).thread_state
    else:
        assert [t.thread_id for t in state.threads] == [crash]  # the only Python thread
        assert gil.held is False and gil.holder_thread_id is None and gil.holder_thread_state is None
        assert gil.last_holder_thread_id == crash
    # no thread wanted the GIL: thread_av's main thread waits in join() on a lock, with the
    # GIL released; 3.13's native condition variable keeps no count
    assert gil.waiters == (None if entry.get("python_minor") == "3.13" else 0)
    assert not gil.problems, gil.problems


@pytest.mark.parametrize("entry", CRASHES, ids=_name)
def test_two_witnesses_agree_on_every_version(entry, plain):
    gil = _state(entry, plain).gil
    minor = int(entry.get("python_minor", "3.8").split(".")[1])
    second = GilSource.TSTATE_CURRENT if minor <= 11 else GilSource.THREAD_STATUS
    assert [w.source for w in gil.witnesses] == [GilSource.GIL, second]
    assert len({w.thread_state for w in gil.witnesses}) == 1
    field = {12: "PyThreadState._status.active", 13: "PyThreadState._status.holds_gil"}
    assert gil.witnesses[1].field == field.get(minor, "_PyRuntime.gilstate.tstate_current")
    assert gil.layout.startswith("_Py_DebugOffsets" if minor == 13 else f"CPython 3.{minor} headers")
    assert gil.switches is not None and gil.switches >= 1


def _marker_thread(marker: dict, name: str) -> dict:
    return next(t for t in marker["threads"] if t["name"] == name)


@pytest.mark.parametrize("entry", HANGS, ids=_name)
def test_a_hung_process_names_the_thread_its_marker_says_holds_the_gil(entry, plain):
    """Full dumps, and the minidumps dumpkit capture writes (Python-aware: they keep the
    pages the reader reads); a plain MiniDumpNormal dump has no GIL to read, and says so."""
    gil = _state(entry, plain, WINPYTHON / f"cpython-{entry.get('python_minor')}-amd64").gil
    if gil.held is None:
        assert entry["dump_type"] == "normal", gil.problems
        assert any("full-memory dump" in q for q in gil.problems)
        return
    marker = entry["marker"]
    said: Dict = marker["gil"]
    if said.get("held_by") is None:
        assert gil.held is False and gil.holder_thread_id is None
    else:
        holder = _marker_thread(marker, said["held_by"])
        assert gil.held is True and gil.holder_thread_id == holder["native_id"]
        assert gil.holder_thread_state == (said.get("tstate") or holder["tstate"])
    if gil.waiters is not None:  # at most the threads the program left waiting for it
        assert gil.waiters <= len(said.get("waiting") or ())
    assert not gil.problems, gil.problems
    # the builder's own reading (sample_dumps/hangs/src/facts.py scans python3X.dll's data
    # for a GIL-shaped record): the same GIL where it found exactly one
    found = (entry.get("gil") or {}).get("candidates") or []
    if len(found) == 1:
        assert gil.address == found[0]["address"]


@pytest.mark.parametrize(
    "entry",
    _entries("pyversions", lambda d: d.get("dump_type") == "normal" and d.get("scenario") == "ctypes_recursion"),
    ids=_name,
)
def test_a_minidump_says_the_gil_is_not_known_and_which_dump_has_it(entry, plain):
    gil = _state(entry, plain, WINPYTHON / f"cpython-{entry['python_minor']}-amd64").gil
    assert gil.held is None and not gil.witnesses
    assert any("is not in the dump" in q and "MiniDumpWithFullMemory" in q for q in gil.problems)


def test_the_report_carries_the_gil_and_json_writes_its_thread_states_in_hex(plain):
    from dumpkit.engine import Options, analyze
    from dumpkit.report.json_report import render_json

    entry = next((d for d in CRASHES if d.get("name") == "thread_av_py311"), None)
    if entry is None or not (SAMPLES / "pyversions" / entry["file"]).exists():
        pytest.skip("thread_av_py311 is not here")
    target = open_dump(str(plain(SAMPLES / "pyversions" / entry["file"])))
    try:
        images = Options(image_paths=[str(SAMPLES / "pyversions" / "bin")])
        report = analyze(target, images, problems=target.soft_errors).report
    finally:
        target.close()
    gil = report.python.gil
    assert gil.held and gil.holder_thread_id == entry["crash_thread_tid"]
    shown = json.loads(render_json(report))["python"]["gil"]
    assert shown["holder_thread_id"] == entry["crash_thread_tid"]
    assert shown["holder_thread_state"] == f"{gil.holder_thread_state:#x}"
    assert [w["source"] for w in shown["witnesses"]] == ["gil", "tstate_current"]
