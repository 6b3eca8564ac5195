"""The GIL layouts (dumpkit/cpython/gil_layouts.py) against CPython's own headers, where this
machine has them: the release tarballs as deadsnakes imported them (git dirs named
`deadsnakes+python3.X/repo` under $DUMPKIT_CPYTHON_GIT, by default .mirror beside the repository, where the
`fetch github:deadsnakes/python3.X` tool puts them; docs/cpython-layout-stability.md). The
headers of each release are compiled by mingw-w64's x86_64-w64-mingw32-gcc, a Windows x64
compiler (LLP64, windows.h: CRITICAL_SECTION, SRWLOCK), with the release's PC/pyconfig.h; the
offsets are read from the assembly it writes (`-S`), so nothing runs. Skips when the
compiler or a release's git dir is absent."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Dict

import pytest

from dumpkit.cpython.gil_layouts import GIL_LAYOUTS, STATUS_ACTIVE_BIT, STATUS_HOLDS_GIL_BIT_313, GilLayout
from dumpkit.cpython.gil_layouts import gil_layout_from_debug_offsets
from tests.support.samples import cpython_git

MIRROR = cpython_git()
# The release each minor's samples run, or the newest deadsnakes has of it (3.12.9 and
# 3.13.2 were released after its last import; the real dumps check those).
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
#include "internal/pycore_gil.h"
#define OFF(name, expr) const unsigned long long name = (expr);
#if PY_MINOR_VERSION < 12
OFF(gil, offsetof(_PyRuntimeState, ceval.gil))
OFF(tstate_current, offsetof(_PyRuntimeState, gilstate.tstate_current))
#else
OFF(gil, offsetof(PyInterpreterState, ceval.gil))
OFF(own_gil, offsetof(PyInterpreterState, _gil))
OFF(own_gil_locked, offsetof(PyInterpreterState, _gil.locked))
OFF(own_gil_last_holder, offsetof(PyInterpreterState, _gil.last_holder))
OFF(tstate_status, offsetof(PyThreadState, _status))
typedef union { __typeof__(((PyThreadState *)0)->_status) s; unsigned int u; } status_word;
const status_word active_bits = {.s = {.active = 1}};
#endif
#if PY_MINOR_VERSION >= 13
const status_word holds_gil_bits = {.s = {.holds_gil = 1}};
#endif
OFF(interval, offsetof(struct _gil_runtime_state, interval))
OFF(last_holder, offsetof(struct _gil_runtime_state, last_holder))
OFF(locked, offsetof(struct _gil_runtime_state, locked))
OFF(switch_number, offsetof(struct _gil_runtime_state, switch_number))
#if PY_MINOR_VERSION < 13
OFF(cond_waiting, offsetof(struct _gil_runtime_state, cond.waiting))
#endif
"""
_SIZES = {".byte": 1, ".word": 2, ".value": 2, ".short": 2, ".long": 4, ".quad": 8}


def _git_dir(minor: int) -> Path:
    found = MIRROR / f"deadsnakes+python3.{minor}" / "repo"
    if not found.is_dir():
        pytest.skip(f"no deadsnakes git dir for 3.{minor} under {MIRROR} (fetch github:deadsnakes/python3.{minor})")
    return found


def _headers(minor: int, into: Path) -> Path:
    """Include/ and PC/pyconfig.h of the release, as its tarball had them."""
    tag = f"upstream/{RELEASES[minor]}"
    git = ["git", "--git-dir", str(_git_dir(minor))]
    listed = subprocess.run([*git, "ls-tree", "--name-only", tag, "PC/"], capture_output=True, text=True, timeout=60)
    if listed.returncode:
        pytest.skip(f"3.{minor}: no tag {tag} ({listed.stderr.strip()})")
    config = "PC/pyconfig.h" if "PC/pyconfig.h" in listed.stdout.split() else "PC/pyconfig.h.in"  # 3.13: a template
    archive = subprocess.run([*git, "archive", tag, "Include", config], capture_output=True, timeout=120)
    assert archive.returncode == 0, archive.stderr[-2000:]
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        if hasattr(tarfile, "data_filter"):  # 3.12+: say so, or it warns
            tar.extractall(into, filter="data")
        else:
            tar.extractall(into)
    if config.endswith(".in"):
        shutil.copy(into / config, into / "PC" / "pyconfig.h")
    return into


def _compiled(minor: int, tmp_path: Path) -> Dict[str, int]:
    """Each constant of PROGRAM as the compiler laid it out (little-endian bytes joined)."""
    if shutil.which(CC) is None:
        pytest.skip(f"{CC} (mingw-w64) is not installed")
    root = _headers(minor, tmp_path / "src")
    (tmp_path / "gil.c").write_text(PROGRAM)
    built = subprocess.run(
        [CC, "-S", "-O0", "-o", "-", f"-I{root / 'Include'}", f"-I{root / 'PC'}", str(tmp_path / "gil.c")],
        capture_output=True,
        text=True,
        timeout=120,
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
        elif name is not None and parts and parts[0] == ".space":
            data += bytes(int(parts[1], 0))
    return values


@pytest.mark.parametrize("minor", [8, 9, 10, 11, 12])
def test_the_gil_layout_is_the_headers(minor, tmp_path):
    found = _compiled(minor, tmp_path)
    layout: GilLayout = GIL_LAYOUTS[(3, minor)]
    fields = ("gil", "interval", "last_holder", "locked", "switch_number", "cond_waiting")
    assert {f: getattr(layout, f) for f in fields} == {f: found[f] for f in fields}
    if minor <= 11:
        assert layout.in_runtime and layout.tstate_current == found["tstate_current"]
    else:
        assert not layout.in_runtime and layout.tstate_current is None
        assert layout.tstate_status == found["tstate_status"]
        assert 1 << layout.status_bit == found["active_bits"] and layout.status_field == "active"
        assert layout.status_bit == STATUS_ACTIVE_BIT


def test_313s_debug_offsets_mean_what_the_reader_takes_them_for(tmp_path):
    """3.13's _Py_DebugOffsets publish offsets in PyInterpreterState of its own `_gil` and
    of `_gil.locked` / `_gil.last_holder` (pycore_runtime_init.h): computed from the header
    as the interpreter computes them, they give the places inside the GIL the header has;
    holds_gil is the bit the reader tests."""
    found = _compiled(13, tmp_path)
    values = {
        "interpreter_state.ceval_gil": found["gil"],
        "interpreter_state.gil_runtime_state": found["own_gil"],
        "interpreter_state.gil_runtime_state_locked": found["own_gil_locked"],
        "interpreter_state.gil_runtime_state_holder": found["own_gil_last_holder"],
        "thread_state.status": found["tstate_status"],
    }
    layout = gil_layout_from_debug_offsets(values)
    assert (layout.locked, layout.last_holder) == (found["locked"], found["last_holder"])
    assert (layout.interval, layout.switch_number) == (found["interval"], found["switch_number"])
    assert (layout.gil, layout.tstate_status) == (found["gil"], found["tstate_status"])
    assert layout.cond_waiting is None  # a native CONDITION_VARIABLE counts no waiters
    assert 1 << layout.status_bit == found["holds_gil_bits"] and layout.status_field == "holds_gil"
    assert layout.status_bit == STATUS_HOLDS_GIL_BIT_313
    assert 1 << STATUS_ACTIVE_BIT == found["active_bits"]  # active keeps its place below holds_gil
