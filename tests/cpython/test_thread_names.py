"""threading.Thread names read from the interpreter (dumpkit/cpython/thread_names.py over
objects.py), checked against what the programs themselves recorded, never against dumpkit:

- sample_dumps/hangs *_full_*: full-memory dumps of hung CPython 3.8, 3.11, 3.12 and 3.13
  processes under Wine; their MARKER line (manifest.json `threads`: native id, name, Python
  stack as sys._current_frames() saw it) says which thread id carries which name. The names
  must be exactly those, for the dump's own threads, and the thread given each name must run
  the Python stack the program recorded for it.
- the same scenarios' MiniDumpNormal dumps: no heap, so no names (or fewer), said, no error.
- where this machine has them, the release headers compiled by mingw-w64 give every offset
  the readers take from their own field lists; synthetic memory covers the ways of storing
  an instance's attributes the real dumps do not show (a materialised __dict__), and damaged
  memory must never raise.

A dump, image, compiler or header tree that is absent skips."""

from __future__ import annotations

import io
import json
import random
import re
import shutil
import struct
import subprocess
import tarfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from dumpkit.cpython import read_python_state
from dumpkit.cpython.layouts import LAYOUTS
from dumpkit.cpython.objects import TPFLAGS_INLINE_VALUES, TPFLAGS_MANAGED_DICT, ObjectLayout, Objects, object_layout
from dumpkit.cpython.thread_names import read_thread_names, thread_names
from dumpkit.sources.minidump import open_dump
from dumpkit.target import MemoryNotInDump
from tests.support.cpython_heap import DICT_TYPE, Heap
from tests.support.fakes.target import MemoryTarget
from tests.support.samples import ROOT, SAMPLES, cpython_git, interpreter_exports
from tests.support.wine import cache_dir as lane_cache

HANGS = SAMPLES / "hangs"
WINPYTHON = ROOT.parent / "shared" / "winpython"
LANE = lane_cache()  # the Wine lanes' interpreters, where they were built


def _entries() -> List[dict]:
    path = HANGS / "manifest.json"
    return json.loads(path.read_text())["dumps"] if path.exists() else []


FULL = [d for d in _entries() if d.get("dump_type") == "full"]
NORMAL = [d for d in _entries() if d.get("dump_type") == "normal"]


def _name(entry: dict) -> str:
    return entry.get("name") or entry["file"].split(".")[0]


def _image_folders(minor: str) -> List[str]:
    """Where python3X.dll may be, for a dump whose own memory lacks its export table."""
    short = minor.replace(".", "")
    candidates = [WINPYTHON / f"cpython-{minor}-amd64", LANE / "capture-lane" / f"py{short}"]
    candidates += list(LANE.glob(f"*/py{short}")) if LANE.is_dir() else []
    return [str(c) for c in candidates if c.is_dir()]


_OPENED: Dict[str, tuple] = {}


def _open(entry: dict, plain):
    """(target, exports, interpreter) of the entry's dump; python3X.dll's exports from the
    dump's own memory, else from an image on this machine, else skip."""
    if entry["file"] in _OPENED:
        return _OPENED[entry["file"]]
    dump = HANGS / entry["file"]
    if not dump.exists():
        pytest.skip(f"{dump.name} is not here")
    target = open_dump(str(plain(dump)))
    exports, interp = interpreter_exports(target, _image_folders(entry["python_minor"]))
    _OPENED[entry["file"]] = (target, exports, interp)
    return _OPENED[entry["file"]]


def _recorded(entry: dict) -> Dict[int, str]:
    """Thread id -> name, as the program's MARKER recorded them."""
    return {t["tid"]: t["name"] for t in entry.get("threads") or ()}


def test_every_version_with_a_full_dump_is_covered():
    if not FULL:
        pytest.skip("sample_dumps/hangs is not here")
    assert {"3.8", "3.11", "3.12", "3.13"} <= {d["python_minor"] for d in FULL}


@pytest.mark.parametrize("entry", FULL, ids=_name)
def test_a_full_dump_names_every_thread_as_the_program_did(entry, plain):
    target, exports, interp = _open(entry, plain)
    found = read_thread_names(target, exports, interp)
    assert found.problem is None
    assert found.names == _recorded(entry)
    assert set(found.names) <= {t.tid for t in target.threads}
    assert "MainThread" in found.names.values()


@pytest.mark.parametrize("entry", FULL, ids=_name)
def test_each_name_goes_to_the_thread_running_that_threads_code(entry, plain):
    """The thread named 'ingest' runs ingest_main (and so on): the functions the program saw
    on each named thread's Python stack are on the stack the dump holds for the thread id
    the name was read for."""
    target, exports, interp = _open(entry, plain)
    names = thread_names(target, exports, interp)
    state = read_python_state(target, exports, interp)
    by_name = {name: tid for tid, name in names.items()}
    for recorded in entry.get("threads") or ():
        expected = {frame[0] for frame in recorded.get("python_frames") or ()}
        if not expected:
            continue
        thread = state.thread(by_name[recorded["name"]])
        assert thread is not None, recorded["name"]
        assert expected <= {f.function for f in thread.frames}, recorded["name"]
    if entry["scenario"] == "lock_deadlock":
        ingest = state.thread(by_name["ingest"])
        assert ingest is not None and "ingest_main" in {f.function for f in ingest.frames}
        assert set(names.values()) == {"MainThread", "ingest", "reindex"}  # 'marker' had ended


@pytest.mark.parametrize("entry", NORMAL, ids=_name)
def test_a_minidump_without_the_heap_gives_what_it_has_and_says_why(entry, plain):
    target, exports, interp = _open(entry, plain)
    found = read_thread_names(target, exports, interp)
    recorded = _recorded(entry)
    assert all(recorded.get(tid) == name for tid, name in found.names.items())
    if not found.names:
        assert found.problem and "not in the dump" in found.problem


class _NoMemory:
    """A dump's modules with none of its memory (a MiniDumpNormal without data segments)."""

    def __init__(self, target):
        self.modules = target.modules

    def read(self, address: int, size: int) -> bytes:
        raise MemoryNotInDump(address, size)

    def read_available(self, address: int, size: int) -> bytes:
        return b""


@pytest.mark.parametrize("minor", ["3.8", "3.11", "3.12", "3.13"])
def test_a_dump_without_the_interpreters_memory_says_so(minor, plain):
    entry = next((d for d in FULL if d["python_minor"] == minor), None)
    if entry is None:
        pytest.skip(f"no full {minor} dump")
    target, exports, interp = _open(entry, plain)
    found = read_thread_names(_NoMemory(target), exports, interp)  # type: ignore[arg-type]
    assert found.names == {}
    assert found.problem and "is not in the dump" in found.problem


def test_no_exports_or_no_python_is_an_empty_answer():
    empty = MemoryTarget()
    assert thread_names(empty, None) == {}
    assert read_thread_names(empty, None).problem == "no CPython interpreter in this process"


# --- damaged memory --------------------------------------------------------------------------
class _Flipping:
    """A target whose reads return the dump's bytes with some flipped (seeded): what a
    damaged heap looks like to the reader."""

    def __init__(self, target, seed: int, rate: float):
        self._target = target
        self._random = random.Random(seed)
        self._rate = rate
        self.modules = target.modules

    def _damage(self, data: bytes) -> bytes:
        out = bytearray(data)
        for i in range(len(out)):
            if self._random.random() < self._rate:
                out[i] = self._random.randrange(256)
        return bytes(out)

    def read(self, address: int, size: int) -> bytes:
        return self._damage(self._target.read(address, size))

    def read_available(self, address: int, size: int) -> bytes:
        return self._damage(self._target.read_available(address, size))


@pytest.mark.parametrize("minor", ["3.8", "3.11", "3.12", "3.13"])
def test_damaged_memory_never_raises_and_stays_bounded(minor, plain):
    entry = next((d for d in FULL if d["python_minor"] == minor), None)
    if entry is None:
        pytest.skip(f"no full {minor} dump")
    target, exports, interp = _open(entry, plain)
    recorded = _recorded(entry)
    for seed in range(40):
        damaged = _Flipping(target, seed, rate=0.002 if seed % 2 else 0.02)
        started = time.monotonic()
        found = read_thread_names(damaged, exports, interp)  # type: ignore[arg-type]
        assert time.monotonic() - started < 10
        assert isinstance(found.names, dict)
        assert all(isinstance(k, int) and isinstance(v, str) for k, v in found.names.items())
    assert read_thread_names(target, exports, interp).names == recorded  # the real one, unharmed


# --- synthetic memory: the ways of keeping attributes the real dumps do not show -------------
def _layout(minor: int) -> ObjectLayout:
    if minor < 13:
        found = object_layout((3, minor), LAYOUTS[(3, minor)])
    else:  # what a 3.13 process's _Py_DebugOffsets says of the fields these readers take from it
        debug = {
            "interpreter_state.imports_modules": 7648,
            "type_object.tp_name": 24,
            "type_object.tp_flags": 168,
            "dict_object.ma_keys": 32,
            "dict_object.ma_values": 40,
            "long_object.lv_tag": 16,
            "long_object.ob_digit": 24,
            "interpreter_state.size": 10360,
            "type_object.size": 416,
            "dict_object.size": 48,
            "long_object.size": 32,
        }
        found = object_layout((3, 13), replace(LAYOUTS[(3, 12)], version=(3, 13)), debug)
    assert found is not None
    return found


def _name_of(heap: Heap, thread: int) -> Optional[str]:
    objects = heap.objects()
    found = objects.attribute(thread, "_name")
    return objects.text(found) if found else None


@pytest.mark.parametrize("minor", [8, 9, 10])
def test_an_instance_dict_at_tp_dictoffset(minor):
    heap = Heap(_layout(minor))
    heap.thread_type(0, dictoffset=16)
    attrs = heap.dict({"_target": 0x999000, "_name": heap.string("loader")})
    thread = heap.instance(b"", after=struct.pack("<QQ", attrs, 0))
    assert _name_of(heap, thread) == "loader"


@pytest.mark.parametrize("minor", [8, 10])
def test_a_split_instance_dict_takes_its_values_from_ma_values(minor):
    heap = Heap(_layout(minor))
    heap.thread_type(0, dictoffset=16)
    keys = heap.keys(["_target", "_name"], None)
    values = heap.put(struct.pack("<QQ", 0x999000, heap.string("saver")))
    lay = heap.layout
    raw = bytearray(lay.dict_values + 8)
    struct.pack_into("<qQ", raw, 0, 1, DICT_TYPE)
    struct.pack_into("<Q", raw, lay.dict_keys, keys)
    struct.pack_into("<Q", raw, lay.dict_values, values)
    attrs = heap.put(bytes(raw))
    thread = heap.instance(b"", after=struct.pack("<QQ", attrs, 0))
    assert _name_of(heap, thread) == "saver"


@pytest.mark.parametrize("minor", [11, 12, 13])
def test_a_materialised_managed_dict(minor):
    """vars(thread) (or setting many attributes) makes a real dict out of the values."""
    heap = Heap(_layout(minor))
    heap.thread_type(TPFLAGS_MANAGED_DICT | (TPFLAGS_INLINE_VALUES if minor >= 13 else 0), dictoffset=-1)
    attrs = heap.dict({"_name": heap.string("writer"), "_ident": 0})
    preheader = struct.pack("<QQQQ", 0, attrs, 0, 0)  # values (3.11) / weakrefs, dict, GC links
    after = struct.pack("<BBBB4xQ", 1, 1, 1, 0, 0) if minor >= 13 else b""  # inline values, not valid
    thread = heap.instance(preheader, after)
    assert _name_of(heap, thread) == "writer"


@pytest.mark.parametrize("minor", [11, 12, 13])
def test_values_in_the_object_use_the_types_cached_keys(minor):
    heap = Heap(_layout(minor))
    keys = heap.keys(["_target", "_name", "_ident"], None)
    heap.thread_type(TPFLAGS_MANAGED_DICT | (TPFLAGS_INLINE_VALUES if minor >= 13 else 0), -1, keys)
    name = heap.string("uploader")
    if minor == 13:  # inline, after the object: capacity, size, embedded, valid, values
        thread = heap.instance(struct.pack("<QQQQ", 0, 0, 0, 0), struct.pack("<BBBB4xQQQ", 3, 3, 1, 1, 0, name, 0))
    else:
        values = heap.put(struct.pack("<QQQ", 0x999000, name, 0))
        pointer = values if minor == 11 else values - 1  # 3.12 tags the pointer (bit 0 set)
        preheader = struct.pack("<QQQQ", values, 0, 0, 0) if minor == 11 else struct.pack("<QQQQ", 0, pointer, 0, 0)
        thread = heap.instance(preheader)
    assert _name_of(heap, thread) == "uploader"


def test_nonsense_keys_objects_read_as_nothing():
    heap = Heap(_layout(12))
    lay = heap.layout
    good = heap.dict({"_name": heap.string("x")})
    keys = struct.unpack_from("<Q", dict(heap.blocks)[good], lay.dict_keys)[0]
    objects = heap.objects()
    assert objects.dict_get(good, "_name") is not None
    target = objects.target
    for offset, value in (
        (lay.keys_nentries, struct.pack("<q", 1 << 40)),  # more entries than slots
        (lay.keys_nentries, struct.pack("<q", -1)),
        (lay.keys_size, b"\x50"),  # a 2**80-slot table
        (lay.keys_index_bytes, b"\x01"),  # fewer index bytes than slots
    ):
        original = target.read(keys + offset, len(value))
        target.memory.patch(keys + offset, value)
        assert heap.objects(target).dict_get(good, "_name") is None
        target.memory.patch(keys + offset, original)
        assert heap.objects(target).dict_get(good, "_name") is not None


def test_an_interpreter_list_that_loops_is_read_once():
    heap = Heap(_layout(11))
    lay = heap.layout
    runtime = heap.put(bytes(lay.runtime_interpreters_head + 8))
    interp = heap.put(bytes(max(lay.interp_next, lay.interp_modules) + 8))
    target = MemoryTarget(heap.blocks)
    target.memory.patch(runtime + lay.runtime_interpreters_head, struct.pack("<Q", interp))
    target.memory.patch(interp + lay.interp_next, struct.pack("<Q", interp))
    assert Objects(target, lay, runtime).interpreters() == [interp]


# --- the offsets against CPython's own headers ------------------------------------------------
MIRROR = cpython_git()
RELEASES = {8: "3.8.1", 9: "3.9.13", 10: "3.10.11", 11: "3.11.9", 12: "3.12.6", 13: "3.13.0_rc2"}
CC = "x86_64-w64-mingw32-gcc"
PROGRAM = r"""
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#if PY_MINOR_VERSION == 8
#include "internal/pycore_pystate.h"
#else
#include "internal/pycore_runtime.h"
#include "internal/pycore_interp.h"
#endif
#if PY_MINOR_VERSION >= 11
#include "internal/pycore_dict.h"
#else
#include "dict-common.h"
#endif
#if PY_MINOR_VERSION >= 12
#include "internal/pycore_moduleobject.h"
#define MODULES imports.modules
#define LONG_TAG long_value.lv_tag
#define LONG_DIGITS long_value.ob_digit
#else
typedef struct { PyObject_HEAD PyObject *md_dict; } PyModuleObject;  /* Objects/moduleobject.c */
#define MODULES modules
#define LONG_TAG ob_base.ob_size
#define LONG_DIGITS ob_digit
#endif
#define OFF(name, expr) const unsigned long long name = (expr);
OFF(type_name, offsetof(PyTypeObject, tp_name))
OFF(type_basicsize, offsetof(PyTypeObject, tp_basicsize))
OFF(type_flags, offsetof(PyTypeObject, tp_flags))
OFF(type_dictoffset, offsetof(PyTypeObject, tp_dictoffset))
OFF(heap_cached_keys, offsetof(PyHeapTypeObject, ht_cached_keys))
OFF(dict_keys, offsetof(PyDictObject, ma_keys))
OFF(dict_values, offsetof(PyDictObject, ma_values))
#if PY_MINOR_VERSION >= 11
OFF(keys_size, offsetof(PyDictKeysObject, dk_log2_size))
OFF(keys_index_bytes, offsetof(PyDictKeysObject, dk_log2_index_bytes))
OFF(keys_kind, offsetof(PyDictKeysObject, dk_kind))
OFF(values_values, offsetof(PyDictValues, values))
OFF(unicode_entry, sizeof(PyDictUnicodeEntry))
#else
OFF(keys_size, offsetof(PyDictKeysObject, dk_size))
#endif
#if PY_MINOR_VERSION >= 13
OFF(values_capacity, offsetof(PyDictValues, capacity))
OFF(values_valid, offsetof(PyDictValues, valid))
#endif
OFF(keys_nentries, offsetof(PyDictKeysObject, dk_nentries))
OFF(keys_indices, offsetof(PyDictKeysObject, dk_indices))
OFF(entry, sizeof(PyDictKeyEntry))
OFF(interp_modules, offsetof(PyInterpreterState, MODULES))
OFF(module_dict, offsetof(PyModuleObject, md_dict))
OFF(long_size, offsetof(PyLongObject, LONG_TAG))
OFF(long_digits, offsetof(PyLongObject, LONG_DIGITS))
OFF(digit_bits, PYLONG_BITS_IN_DIGIT)
OFF(tpflags_managed_dict, Py_TPFLAGS_MANAGED_DICT_OR_0)
"""
_SIZES = {".byte": 1, ".word": 2, ".value": 2, ".short": 2, ".long": 4, ".quad": 8}


def _compiled(minor: int, tmp_path: Path) -> Dict[str, int]:
    if shutil.which(CC) is None:
        pytest.skip(f"{CC} (mingw-w64) is not installed")
    git_dir = MIRROR / f"deadsnakes+python3.{minor}" / "repo"
    if not git_dir.is_dir():
        pytest.skip(f"no deadsnakes git dir for 3.{minor} under {MIRROR}")
    git = ["git", "--git-dir", str(git_dir)]
    tag = f"upstream/{RELEASES[minor]}"
    listed = subprocess.run([*git, "ls-tree", "--name-only", tag, "PC/"], capture_output=True, text=True, timeout=60)
    if listed.returncode:
        pytest.skip(f"3.{minor}: no tag {tag}")
    config = "PC/pyconfig.h" if "PC/pyconfig.h" in listed.stdout.split() else "PC/pyconfig.h.in"
    paths = ["Include", config] + (["Objects/dict-common.h"] if minor < 11 else [])
    archive = subprocess.run([*git, "archive", tag, *paths], capture_output=True, timeout=120)
    assert archive.returncode == 0, archive.stderr[-2000:]
    root = tmp_path / "src"
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(root, filter="data")
        else:
            tar.extractall(root)
    if config.endswith(".in"):
        shutil.copy(root / config, root / "PC" / "pyconfig.h")
    flag = "Py_TPFLAGS_MANAGED_DICT" if minor >= 11 else "0"
    source = tmp_path / "objects.c"
    source.write_text(PROGRAM.replace("Py_TPFLAGS_MANAGED_DICT_OR_0", flag))
    # MS_WIN64: what MSVC's _WIN64 gives PC/pyconfig.h (SIZEOF_VOID_P 8, so 30-bit digits)
    includes = [f"-I{root / 'Include'}", f"-I{root / 'PC'}", f"-I{root / 'Objects'}"]
    built = subprocess.run(
        [CC, "-DMS_WIN64", "-S", "-O0", "-o", "-", *includes, str(source)], capture_output=True, text=True, timeout=120
    )
    assert built.returncode == 0, built.stderr[-3000:]
    values: Dict[str, int] = {}
    name, data = None, b""
    for line in built.stdout.splitlines() + ["end:"]:
        label = re.match(r"^(\w+):$", line)
        if label:
            if name is not None and data:
                values[name] = int.from_bytes(data, "little")
            name, data = label.group(1), b""
            continue
        parts = line.split()
        if name is not None and parts and parts[0] in _SIZES:
            data += int(parts[1], 0).to_bytes(_SIZES[parts[0]], "little")
        elif name is not None and parts and parts[0] in (".zero", ".space"):  # a constant 0 (.bss)
            data += bytes(int(parts[1], 0))
    return values


@pytest.mark.parametrize("minor", [8, 9, 10, 11, 12, 13])
def test_offsets_match_the_release_headers(minor, tmp_path):
    compiled = _compiled(minor, tmp_path)
    layout = _layout(minor)
    for field in (
        "type_name",
        "type_basicsize",
        "type_flags",
        "type_dictoffset",
        "heap_cached_keys",
        "dict_keys",
        "dict_values",
        "keys_size",
        "keys_nentries",
        "keys_indices",
        "interp_modules",
        "module_dict",
        "long_size",
        "long_digits",
        "values_capacity",
        "values_valid",
    ):
        if field in compiled:
            assert getattr(layout, field) == compiled[field], field
    if minor >= 11:
        assert (layout.keys_index_bytes, layout.keys_kind) == (compiled["keys_index_bytes"], compiled["keys_kind"])
        assert layout.values_values == compiled["values_values"] and compiled["unicode_entry"] == 16
        assert compiled["tpflags_managed_dict"] == TPFLAGS_MANAGED_DICT
    assert compiled["entry"] == 24 and compiled["digit_bits"] == 30
