"""threading.Thread names, read from the interpreter in a dump: `threading._active` (ident ->
Thread, Lib/threading.py 3.8-3.13) of every interpreter's `sys.modules['threading']`, each
Thread's `_name`. On Windows a thread's ident is its OS thread id (PyThread_get_thread_ident
is GetCurrentThreadId), so the keys are dumpkit.target.Thread.tid values. The main thread
('MainThread'), threads started by threading and foreign threads that called
threading.current_thread() (`_DummyThread`, 'Dummy-N') are all there; threads started with
_thread directly, and threads that have not started or have ended, are not.

It needs the heap (a full-memory dump, or one with private read-write memory): a
MiniDumpNormal dump gives an empty result, a dump missing some pages a partial one. Never
raises on dump data; every loop is bounded (objects.py).

Wiring (for the engine's Python phase, `dumpkit/analysis/pyread.py`, beside the stack reader
and with the same arguments)::

    from dumpkit.cpython.thread_names import read_thread_names

    exports = export_lookup(interp.module.base, image.exports())   # as read_python already does
    state = read_python_state(target, exports, interp)
    names = read_thread_names(target, exports, interp)             # ThreadNames
    names.names.get(thread.tid)                                    # 'ingest', or None

`names.problem` says in one line why nothing was read (no exports, memory not in the dump),
for a report that wants to say it; `thread_names(...)` is the bare dict. Threads of
subinterpreters are included; where two interpreters name one thread, the main
interpreter's name wins. The result may name threads the dump's thread list lacks (a dump
written from a list of threads); a report shows names for the threads it has."""

from __future__ import annotations

from typing import Dict, Optional

from dumpkit.cpython.interpreter import Interpreter, find_interpreter
from dumpkit.cpython.objects import ExportAddress, Objects, open_objects
from dumpkit.records import record
from dumpkit.target import Target

MAX_THREADS = 4096  # threads named at most
MAX_TID = 0xFFFFFFFF  # a Windows thread id is a DWORD


@record
class ThreadNames:
    """OS thread id -> threading.Thread name; `problem`: why none could be read (one line),
    None when the reading got as far as threading._active."""

    names: Dict[int, str]
    problem: Optional[str] = None


def _active_names(objects: Objects, interp: int, into: Dict[int, str]) -> Optional[str]:
    """Adds the names of one interpreter's threading._active to `into`; a problem, if any."""
    globals_ = objects.module_dict(interp, "threading")
    if globals_ is None:
        modules = objects.pointer(interp + objects.layout.interp_modules)
        if not modules or objects.dict_items(modules) is None:
            return "sys.modules is not in the dump (the heap: a full-memory dump has it)"
        return "threading is not among sys.modules (not imported, or the heap is not in the dump)"
    active = objects.dict_get(globals_, "_active")
    if active is None:
        return "threading._active is not readable"
    items = objects.dict_items(active)
    if items is None:
        return "threading._active is not readable"
    for key, thread in items[:MAX_THREADS]:
        ident = objects.small_int(key)
        if ident is None or not 0 < ident <= MAX_TID:
            continue
        name_object = objects.attribute(thread, "_name")
        name = objects.text(name_object) if name_object else None
        if name is not None:
            into[ident] = name
    return None


def read_thread_names(
    target: Target, export_address: Optional[ExportAddress], interpreter: Optional[Interpreter] = None
) -> ThreadNames:
    """The threading.Thread name of every thread the process's interpreters know.
    `export_address` and `interpreter` are what read_python_state takes (python3X.dll's
    exports; the interpreter found among the modules)."""
    interp = interpreter or find_interpreter(target.modules)
    if interp is None:
        return ThreadNames({}, "no CPython interpreter in this process")
    if export_address is None:
        return ThreadNames({}, f"{interp.module.name}'s exports are not known: _PyRuntime cannot be located")
    objects = open_objects(target, export_address, interp)
    if objects is None:
        runtime = export_address("_PyRuntime")
        if runtime is not None and not target.read_available(runtime, 8):
            return ThreadNames({}, f"_PyRuntime of {interp.module.name} is not in the dump (a full-memory dump has it)")
        return ThreadNames({}, f"the objects of CPython {interp.version_text} ({interp.module.name}) are not known")
    interpreters = objects.interpreters()
    if not interpreters:
        return ThreadNames({}, "the interpreter's state is not in the dump (a full-memory dump has it)")
    names: Dict[int, str] = {}
    problem: Optional[str] = None
    for state in interpreters:  # newest first: the main interpreter, last, has the last word
        found = _active_names(objects, state, names)
        problem = problem or found
    return ThreadNames(names, None if names else problem)


def thread_names(
    target: Target, export_address: Optional[ExportAddress], interpreter: Optional[Interpreter] = None
) -> Dict[int, str]:
    """OS thread id -> threading.Thread name ({} when the dump does not hold them)."""
    return read_thread_names(target, export_address, interpreter).names
