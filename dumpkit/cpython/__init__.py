"""CPython interpreter state read from a target's memory: the Python-level stack of every
thread, for the versions whose structure layouts are known (3.8-3.12 from their headers,
3.13 from the _Py_DebugOffsets record it carries).

Wiring, for a front door that has an image locator::

    interp = find_interpreter(target.modules)          # None: not a Python process
    image = locator.locate(interp.module, target.read)  # python3X.dll, for its export table
    exports = export_lookup(interp.module.base, image.image.exports()) if image else None
    state = read_python_state(target, exports, interp)  # never raises on dump data

`state.status` says how far it got (a MiniDumpNormal dump: MEMORY_MISSING, with a message
naming the dump type that would have the memory); `state.threads[i].thread_id` is the OS
thread id of dumpkit.target.Thread.tid; `state.gil` says which thread holds the GIL (gil.py,
its layouts in gil_layouts.py)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dumpkit.cpython.interpreter import Interpreter, find_interpreter
    from dumpkit.cpython.model import PythonFrame, PythonState, PythonThread, Status
    from dumpkit.cpython.stacks import export_lookup, read_python_state

# Where each name lives: the package imports its modules when a name is first used, so
# importing a light submodule (verified.py, for `dumpkit explain`) does not load the reader.
_HOMES = {
    "Interpreter": "interpreter",
    "find_interpreter": "interpreter",
    "PythonFrame": "model",
    "PythonState": "model",
    "PythonThread": "model",
    "Status": "model",
    "export_lookup": "stacks",
    "read_python_state": "stacks",
}

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


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
