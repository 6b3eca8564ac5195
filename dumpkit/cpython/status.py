"""How far the CPython reader got: a word of its own, light enough for the report's model
to carry without importing the reader (a crash with no Python in it never loads it)."""

from __future__ import annotations

from dumpkit.words import Word


class Status(Word):
    """How far the reader got (a str-valued `Word`: reports and JSON carry its value).
    `description` is what a report may say about it."""

    READ = "read"  # Python stacks read (individual frames may still carry problems)
    NO_PYTHON = "no_python"  # no python3X.dll among the modules
    UNSUPPORTED = "unsupported"  # a Python whose layout this reader does not know
    NO_RUNTIME = "no_runtime"  # _PyRuntime not found (export table unavailable)
    MEMORY_MISSING = "memory_missing"  # the dump does not hold the interpreter's memory
    DAMAGED = "damaged"  # the memory is there but does not hold together
    NO_THREADS = "no_threads"  # the runtime is readable but no thread runs Python

    @property
    def description(self) -> str:
        return _DESCRIPTIONS[self]


_DESCRIPTIONS = {
    Status.READ: "Python stacks read from the dump",
    Status.NO_PYTHON: "no CPython interpreter (python3X.dll) in this process",
    Status.UNSUPPORTED: "this CPython version's layout is not known to dumpkit",
    Status.NO_RUNTIME: "the interpreter's runtime state could not be located",
    Status.MEMORY_MISSING: "the dump does not hold the interpreter's memory",
    Status.DAMAGED: "the interpreter's memory in the dump does not hold together",
    Status.NO_THREADS: "no thread was running Python",
}
