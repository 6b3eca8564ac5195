"""The Python phase: each thread's Python stack, when the process runs CPython and the dump
holds its memory (`cpython/`), read through the interpreter's exports; from a dump with the
heap also the threads' names and the imported packages' versions."""

from __future__ import annotations

from typing import Optional

from dumpkit.analysis.model import PythonReport
from dumpkit.analysis.pystack import KEEP_FRAMES, python_report
from dumpkit.cpython.interpreter import find_interpreter
from dumpkit.images import ImageProvider
from dumpkit.pe import PEError
from dumpkit.pe.image import PEImage
from dumpkit.problems import Problems
from dumpkit.records import replace
from dumpkit.target import MemoryNotInDump, Target


def read_python(
    target: Target, images: ImageProvider, problems: Problems, keep: Optional[int] = KEEP_FRAMES
) -> Optional[PythonReport]:
    """Each thread's Python stack (else a status saying what is missing), `keep` frames of
    each; None: the process does not run CPython."""
    interp = find_interpreter(target.modules)
    if interp is None:
        return None
    from dumpkit.cpython.stacks import export_lookup, read_python_state  # the reader: only for a CPython process

    image = images.image(interp.module)
    if image is None:
        # no usable image (its unwind data is not in the dump, no file here): the export
        # table alone is enough to find the interpreter, and a full-memory dump or one
        # written by `dumpkit capture` holds it
        try:
            image = PEImage.from_memory(target.read, interp.module.base)
        except (PEError, MemoryNotInDump):
            image = None
    exports = None
    if image is not None:
        try:
            exports = export_lookup(interp.module.base, image.exports())
        except (PEError, MemoryNotInDump) as e:
            problems.add(f"{interp.module.name}: export table unreadable ({e})")
    report = python_report(read_python_state(target, exports, interp), keep=keep)
    if report is None:
        return None
    from dumpkit.cpython.package_versions import REPORTED_PACKAGES, read_package_versions

    versions = read_package_versions(target, exports, interp, REPORTED_PACKAGES).versions  # a full dump's heap
    if versions:
        report = replace(report, package_versions=versions)
    if not report.threads:
        return report
    from dumpkit.cpython.thread_names import thread_names

    names = thread_names(target, exports, interp)  # threading.Thread names: a full dump's heap
    if not names:
        return report
    threads = tuple(replace(t, name=names.get(t.thread_id)) for t in report.threads)
    return replace(report, threads=threads)
