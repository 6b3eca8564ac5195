"""CPython interpreter state read from a target's memory: the Python-level stack of every
thread, for the versions whose structure layouts are known (3.8-3.12 from their headers,
3.13 from the _Py_DebugOffsets record it carries)."""

from __future__ import annotations

from dumpkit.cpython.interpreter import Interpreter, find_interpreter
from dumpkit.cpython.model import PythonFrame, PythonState, PythonThread, Status
from dumpkit.cpython.stacks import export_lookup, read_python_state

__all__ = [
    "Interpreter",
    "PythonFrame",
    "PythonState",
    "PythonThread",
    "Status",
    "export_lookup",
    "find_interpreter",
    "read_python_state",
]
