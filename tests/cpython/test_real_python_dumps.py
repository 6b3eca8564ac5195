"""The reader on real dumps of the PSF's CPython 3.8 under Wine (sample_dumps/python/):
every expectation comes from the manifest the dumps were built with (the Python frames
the scripts mark, and the facts read from the dump by the builder's own parser), never
from dumpkit. Skips cleanly when the dumps, their manifest or python38.dll are absent."""

from __future__ import annotations

import json
import lzma
import shutil
from typing import Callable, Dict, List, Optional

import pytest

from dumpkit.cpython import PythonThread, Status, export_lookup, find_interpreter, read_python_state
from dumpkit.images import ImageLocator
from dumpkit.sources.minidump import open_dump
from tests.support.samples import ROOT, SAMPLES, open_any, python_dump

PYDUMPS = SAMPLES / "python"
# Where python38.dll's image (its export table: _PyRuntime, PyCode_Type...) may be found.
IMAGE_DIRS = [PYDUMPS / "bin", ROOT.parent / "shared" / "winpython" / "cpython-3.8-amd64"]


def _manifest() -> List[dict]:
    path = PYDUMPS / "manifest.json"
    if not path.exists():
        return []
    return [d for d in json.loads(path.read_text())["dumps"] if d.get("python_dll_path")]


CASES = _manifest()
FULL = [d for d in CASES if d.get("dump_type") == "full" and d.get("python_stack_expected")]
NORMAL = [d for d in CASES if d.get("dump_type") == "normal"]


@pytest.fixture(scope="module")
def state_of(tmp_path_factory):
    unpacked = tmp_path_factory.mktemp("pyxz")
    cache: Dict[str, object] = {}

    def read(entry: dict):
        name = entry["file"]
        if name in cache:
            return cache[name]
        src = python_dump(entry)  # the committed bundle for NumPy and TensorFlow
        path = src
        if src.suffix == ".dkb":
            target = open_any(src)
        elif name.endswith(".xz"):
            path = unpacked / name[:-3]
            with lzma.open(src) as fin, open(path, "wb") as fout:
                shutil.copyfileobj(fin, fout, 1 << 20)
        if src.suffix != ".dkb":
            target = open_dump(str(path))
        state = read_python_state(target, _exports(target))
        cache[name] = state
        return state

    return read


def _exports(target) -> Optional[Callable[[str], Optional[int]]]:
    interp = find_interpreter(target.modules)
    if interp is None:
        return None
    store = getattr(target, "image_store", None)  # a bundle's python38.dll pages
    found = ImageLocator([str(d) for d in IMAGE_DIRS if d.exists()], use_recorded_path=False, store=store).locate(
        interp.module, None
    )
    if found is None:
        pytest.skip(f"no image of {interp.module.name} to read its exports from")
    return export_lookup(interp.module.base, found.image.exports())


def _same_file(windows_path: str, co_filename: Optional[str]) -> bool:
    return co_filename is not None and co_filename.lower() == windows_path.lower()


def _check_chain(thread: PythonThread, expected: List[dict]) -> None:
    """`expected` is outermost first: a fixed entry path, then the members of the recursion
    cycle (`"cycle": true`) that repeat down to the innermost frame."""
    frames = list(reversed(thread.frames))
    path = [e for e in expected if not e.get("cycle")]
    cycle = [e for e in expected if e.get("cycle")]
    for want, got in zip(path, frames):
        assert (got.function, got.line) == (want["function"], want["line"]), got.location
        assert _same_file(want["file"], got.filename), got.location
    if not cycle:
        return
    rest = frames[len(path) :]
    assert len(rest) >= 2 * len(cycle), f"only {len(rest)} frames below the entry path"
    for i, got in enumerate(rest):
        want = cycle[i % len(cycle)]
        assert got.function == want["function"], (i, got.location)
        assert _same_file(want["file"], got.filename)
        if i < len(rest) - 1:  # the innermost frame may be anywhere in its function
            assert got.line == want["line"], (i, got.location)


@pytest.mark.parametrize("entry", FULL, ids=lambda e: e["file"])
def test_full_dump_python_stack_matches_the_script(entry, state_of):
    state = state_of(entry)
    assert state.status is Status.READ, state.message
    assert state.layout_verified and state.version.startswith("3.8")
    crashed = state.thread(entry["crash_thread_tid"])
    assert crashed is not None, f"no Python thread state for the crashing thread {entry['crash_thread_tid']}"
    assert not crashed.problems and all(f.problem is None for f in crashed.frames)
    _check_chain(crashed, entry["python_stack_expected"])
    main_expected = entry.get("python_stack_expected_main_thread")
    if main_expected:
        main = state.thread(entry["main_thread_tid"])
        assert main is not None
        _check_chain(main, main_expected)


@pytest.mark.parametrize("entry", [e for e in FULL if e.get("python_threads_in_dump")], ids=lambda e: e["file"])
def test_full_dump_agrees_with_the_builders_own_parser(entry, state_of):
    """The dump builder walked the same structures with its own struct offsets: the same
    threads, frame counts, innermost and outermost frames."""
    state = state_of(entry)
    theirs = {t["thread_id"]: t for t in entry["python_threads_in_dump"]}
    assert {t.thread_id for t in state.threads} == set(theirs)
    for thread in state.threads:
        fact = theirs[thread.thread_id]
        assert thread.depth == fact["frame_count"]
        for want, got in zip(fact["innermost"], thread.frames):
            assert (got.function, got.filename, got.line) == (want["function"], want["file"], want["line"])
        for want, got in zip(fact["outermost"], reversed(thread.frames)):
            assert (got.function, got.filename, got.line) == (want["function"], want["file"], want["line"])


@pytest.mark.parametrize("entry", NORMAL, ids=lambda e: e["file"])
@pytest.mark.slow
def test_normal_dump_says_what_is_missing_and_which_dump_has_it(entry, state_of):
    state = state_of(entry)
    assert state.status is Status.MEMORY_MISSING
    assert "MiniDumpWithFullMemory" in state.message and "procdump -ma" in state.message
    assert "\n" not in state.message
