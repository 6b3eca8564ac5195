"""Next steps as data (issue #33): a `Step` is an id, saying which advice it is, and a
template whose named fields are filled when the step is written out.

The code table (codes/notes.py) and each crash kind's verdict module choose steps; the
rules that fit advice to the process (verdict/__init__.py: no Python runtime loaded, no
TensorFlow, the process's own executable) select steps by id and fill their fields, never
search the words: a name written into a step (a function `absl::...`, a frame in a module
called faulthandler) cannot set off a rule meant for the advice itself. Templates are
constant text; whatever comes from the dump goes in as a field's value, so braces in a
C++ name are never read as a template's."""

from __future__ import annotations

from typing import List, Sequence, Tuple

from dumpkit.records import record

# The fields the process rules fill. A template's default reads for a Python process.
EXE = "exe"  # the process's executable, in a command that names it (gflags /p /enable python.exe)
THREAD_STACK = "thread_stack"  # how the work gets a thread with a bigger stack
PYTHON_THREAD_STACK = "threading.stack_size(), or a larger /STACK reserve"
NATIVE_THREAD_STACK = "the stack size passed to CreateThread or _beginthreadex, or a larger /STACK reserve"
# What threading.stack_size does on Windows, said once (explain's notes and the verdicts):
# CPython hands the size to _beginthreadex, which passes it to CreateThread as the stack's
# commit size (no STACK_SIZE_PARAM_IS_A_RESERVATION), so Windows commits all of it when
# the thread starts and grows the reserve to fit (sample_dumps/python: thread_stack_size).
THREAD_STACK_SIZE_ON_WINDOWS = (
    "on Windows the whole size is committed when the thread starts, not just reserved (CPython passes it to "
    "_beginthreadex as the commit size), so it counts against the commit limit; python.exe's main thread "
    "keeps its fixed 2 MB"
)

# How to give dumpkit the system's own DLLs (ntdll.dll, kernelbase.dll...), whose names a
# wait or an exit stop is read from: Windows' come from Microsoft's symbol server, Wine's
# from its installation.
WINDOWS_IMAGES = (
    "--fetch-images takes Windows' own DLLs from Microsoft's symbol server (or --image-path a copy of "
    "C:\\Windows\\System32 from the machine that wrote the dump)"
)
WINE_PE_FOLDER = "/usr/lib/x86_64-linux-gnu/wine/x86_64-windows"  # Debian's wine64
WINE_IMAGES = (
    f"Wine's own DLLs are in the Wine installation's PE DLL folder: --image-path it (Debian: {WINE_PE_FOLDER})"
)


def system_images(wine: bool) -> str:
    return WINE_IMAGES if wine else WINDOWS_IMAGES


@record
class Step:
    """One next step. `values`: (field, value) pairs; a later pair overrides an earlier
    one, so a template's defaults come first and `given` adds what the case knows."""

    id: str
    template: str
    values: Tuple[Tuple[str, str], ...] = ()

    def given(self, **values: str) -> Step:
        return Step(self.id, self.template, self.values + tuple(values.items()))

    @property
    def text(self) -> str:
        return self.template.format_map(dict(self.values))


def texts(steps: Sequence[Step]) -> Tuple[str, ...]:
    """The steps written out, each once (two steps may read the same once filled)."""
    out: List[str] = []
    for step in steps:
        text = step.text
        if text not in out:
            out.append(text)
    return tuple(out)
