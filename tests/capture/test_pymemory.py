"""The memory `dumpkit capture` adds for the Python stacks is enough: on every committed
full-memory dump of a real Python process (standing in for the stopped process), the
Python stacks read from only the ranges pymemory recorded equal those read from the whole
dump, thread by thread and frame by frame, and so do the threads' names and the imported
packages' versions."""

from __future__ import annotations

from pathlib import Path
from typing import List, Sequence, Tuple

import pytest

from dumpkit.capture.pymemory import PAGE, python_memory
from dumpkit.cpython import Status
from dumpkit.sources.minidump import open_dump
from dumpkit.target import MemoryNotInDump
from dumpkit.cpython.package_versions import REPORTED_PACKAGES, read_package_versions
from dumpkit.cpython.thread_names import read_thread_names
from tests.support.samples import SAMPLES, interpreter_exports, python_manifest

FULL = sorted(SAMPLES.glob("python/*_full*.dmp.xz")) + sorted(SAMPLES.glob("pyversions/*full*.dmp.xz"))


class OnlyRanges:
    """The process, with nothing but `ranges` readable."""

    def __init__(self, process, ranges: Sequence[Tuple[int, int]]):
        self._process = process
        self._ranges = ranges
        self.modules = process.modules

    def _held(self, address: int, size: int) -> bool:
        return any(lo <= address and address + size <= lo + n for lo, n in self._ranges)

    def read(self, address: int, size: int) -> bytes:
        if not self._held(address, size):
            raise MemoryNotInDump(address, size)
        return self._process.read(address, size)

    def read_available(self, address: int, size: int) -> bytes:
        out = b""
        while size > 0:
            chunk = min(size, PAGE - (address & (PAGE - 1)))
            if not self._held(address, chunk):
                break
            out += self._process.read(address, chunk)
            address, size = address + chunk, size - chunk
        return out


def _stacks(state) -> List[tuple]:
    return [(t.thread_id, [(f.function, f.filename, f.line) for f in t.frames]) for t in state.threads]


@pytest.mark.slow  # 12 full dumps read twice: the full run's, not the py38 lane's budget
@pytest.mark.parametrize("dump", FULL, ids=lambda p: p.name)
def test_the_recorded_ranges_hold_every_threads_python_stack(dump: Path, plain):
    target = open_dump(str(plain(dump)))
    try:
        found = python_memory(target)
        assert found is not None and found.state.status is Status.READ, found and found.state.message
        assert any(t.frames for t in found.state.threads)
        assert all(lo % PAGE == 0 and n % PAGE == 0 for lo, n in found.ranges)
        assert found.size < 8 << 20  # interpreter memory, not the heap
        held = OnlyRanges(target, found.ranges)
        again = python_memory(held)
        assert again is not None and _stacks(again.state) == _stacks(found.state)
        exports, interp = interpreter_exports(target, [])
        whole = read_package_versions(target, exports, interp, REPORTED_PACKAGES)
        assert read_package_versions(held, exports, interp, REPORTED_PACKAGES) == whole  # type: ignore[arg-type]
        names = read_thread_names(target, exports, interp)
        assert read_thread_names(held, exports, interp) == names  # type: ignore[arg-type]
    finally:
        target.close()


@pytest.mark.slow  # a 77 MB full dump read as the stopped process
def test_a_captured_numpy_process_keeps_the_numpy_version(plain):
    """The full-memory NumPy crash as the stopped process: the ranges name the NumPy its
    program printed (the manifest's MARKER)."""
    facts = next((f for f in python_manifest() if f["dump_type"] == "full" and f["marker"].get("numpy")), None)
    if facts is None:
        pytest.skip("no full-memory NumPy sample here")
    target = open_dump(str(plain(SAMPLES / "python" / facts["file"])))
    try:
        found = python_memory(target)
        assert found is not None
        exports, interp = interpreter_exports(target, [])
        held = OnlyRanges(target, found.ranges)
        versions = read_package_versions(held, exports, interp, REPORTED_PACKAGES)  # type: ignore[arg-type]
        assert versions.versions == {"numpy": facts["marker"]["numpy"]}
    finally:
        target.close()


def test_a_process_without_python_needs_no_memory(plain):
    target = open_dump(str(SAMPLES / "recursion_one.dmp"))
    try:
        assert python_memory(target) is None
    finally:
        target.close()
