"""The 3.11/3.12 layouts against CPython's own headers where this machine has them
(python3.11-dev on Debian 12): a C compiler computes offsetof() from the real structure
definitions. The host is Linux (LP64), Windows is LLP64: the offsets still agree because no
`long` precedes any field the reader uses (thread_id itself is an unsigned long, read as 4
bytes as on Windows). Skips when gcc or the internal headers are absent."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from dumpkit.cpython.layouts import LAYOUTS

FIELDS = {
    "runtime_interpreters_head": "offsetof(_PyRuntimeState, interpreters.head)",
    "interp_next": "offsetof(PyInterpreterState, next)",
    "interp_threads_head": "offsetof(PyInterpreterState, threads.head)",
    "tstate_next": "offsetof(PyThreadState, next)",
    "tstate_thread_id": "offsetof(PyThreadState, thread_id)",
    "tstate_frame": "offsetof(PyThreadState, cframe)",
    "cframe_current_frame": "offsetof(_PyCFrame, current_frame)",
    "frame_back": "offsetof(_PyInterpreterFrame, previous)",
    "frame_code": "offsetof(_PyInterpreterFrame, f_code)",
    "frame_instr": "offsetof(_PyInterpreterFrame, prev_instr)",
    "frame_owner": "offsetof(_PyInterpreterFrame, owner)",
    "code_filename": "offsetof(PyCodeObject, co_filename)",
    "code_name": "offsetof(PyCodeObject, co_name)",
    "code_firstlineno": "offsetof(PyCodeObject, co_firstlineno)",
    "code_line_table": "offsetof(PyCodeObject, co_linetable)",
    "code_adaptive": "offsetof(PyCodeObject, co_code_adaptive)",
    "unicode_length": "offsetof(PyASCIIObject, length)",
    "unicode_state": "offsetof(PyASCIIObject, state)",
    "unicode_ascii_size": "sizeof(PyASCIIObject)",
    "unicode_compact_size": "sizeof(PyCompactUnicodeObject)",
    "bytes_size": "offsetof(PyVarObject, ob_size)",
    "bytes_sval": "offsetof(PyBytesObject, ob_sval)",
}

PROGRAM = """
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#include "internal/pycore_runtime.h"
#include "internal/pycore_interp.h"
#include "internal/pycore_frame.h"
int main(void) {
%s
  return 0;
}
"""


@pytest.mark.parametrize("minor", [11, 12])
def test_layout_matches_offsetof_from_the_real_headers(minor, tmp_path):
    include = Path(f"/usr/include/python3.{minor}")
    if not (include / "internal" / "pycore_frame.h").exists():
        pytest.skip(f"CPython 3.{minor} headers not installed here")
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    body = "\n".join(f'  printf("{k} %zu\\n", (size_t)({v}));' for k, v in FIELDS.items())
    (tmp_path / "off.c").write_text(PROGRAM % body)
    built = subprocess.run(
        [cc, f"-I{include}", str(tmp_path / "off.c"), "-o", str(tmp_path / "off")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    out = subprocess.run([str(tmp_path / "off")], capture_output=True, text=True, timeout=30).stdout
    from_headers = {k: int(v) for k, v in (line.split() for line in out.splitlines())}
    layout = LAYOUTS[(3, minor)]
    assert {k: getattr(layout, k) for k in FIELDS} == from_headers
