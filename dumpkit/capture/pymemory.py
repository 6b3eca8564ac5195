"""The memory a dump needs for the Python stack of every thread, and for the command line,
found by reading it.

`dumpkit capture` asks the same reader `dumpkit analyze` uses (dumpkit.cpython) to read the
Python stacks out of the stopped process, and records every byte range it reads: the
interpreter DLL's header and export table (where _PyRuntime and the type objects are), the
runtime state in its data section, the interpreter and thread states, every frame, code
object, line table and the strings they name; then threading's thread names and the
imported packages' versions (sys.modules). A dump that holds those ranges gives the same
Python stacks, names and versions with no heap scan and no full-memory dump. What a later
reading of the dump needs is exactly what this reading needed, because it is the same code.
The command line is found the same way, by analysis.process's reader, and kept byte for
byte.

Pure: the process is anything with `read`/`read_available` and `modules`; a full-memory
dump stands in for a live process in the tests."""

from __future__ import annotations

from typing import List, Optional, Protocol, Sequence, Tuple, cast

from dumpkit.analysis.process import TEBS_TRIED, command_line
from dumpkit.cpython import PythonState, export_lookup, find_interpreter, read_python_state
from dumpkit.pe import PEError
from dumpkit.spans import merge
from dumpkit.pe.image import PEImage
from dumpkit.target import MemoryNotInDump, Module, Target, Thread
from dumpkit.records import record

PAGE = 0x1000
# The Python stacks of a process fit in this; a reading that asks for more (a damaged or
# hostile interpreter state) is cut there and the dump says so through the reader.
MAX_BYTES = 64 << 20


class Process(Protocol):
    """What the reader needs of a process: its memory and its modules."""

    @property
    def modules(self) -> List[Module]: ...

    def read(self, address: int, size: int) -> bytes: ...

    def read_available(self, address: int, size: int) -> bytes: ...


class _Recorder:
    """A process whose reads are written down (address, size read)."""

    def __init__(self, process: Process):
        self._process = process
        self.reads: List[Tuple[int, int]] = []
        self.total = 0

    @property
    def modules(self) -> List[Module]:
        return self._process.modules

    def _note(self, address: int, size: int) -> None:
        self.total += size
        if self.total > MAX_BYTES:
            raise MemoryNotInDump(address, size)  # the reader reports it as missing memory
        self.reads.append((address, size))

    def read(self, address: int, size: int) -> bytes:
        data = self._process.read(address, size)
        self._note(address, len(data))
        return data

    def read_available(self, address: int, size: int) -> bytes:
        data = self._process.read_available(address, size)
        if data:
            self._note(address, len(data))
        return data


@record
class PythonMemory:
    """The Python stacks as read from the process, and the ranges (address, size) the
    reading touched: page-aligned, merged, in address order."""

    state: PythonState
    ranges: Tuple[Tuple[int, int], ...]

    @property
    def size(self) -> int:
        return sum(s for _, s in self.ranges)


def _pages(reads: Sequence[Tuple[int, int]]) -> Tuple[Tuple[int, int], ...]:
    """The whole pages the reads touched, as (address, size), merged."""
    spans = merge((a & ~(PAGE - 1), (a + s + PAGE - 1) & ~(PAGE - 1)) for a, s in reads)
    return tuple((lo, hi - lo) for lo, hi in spans)


def python_memory(process: Process) -> Optional[PythonMemory]:
    """The Python stacks of `process` and the memory they were read from; None when the
    process runs no CPython (no python3X.dll among its modules)."""
    interp = find_interpreter(process.modules)
    if interp is None:
        return None
    recorder = _Recorder(process)
    exports = None
    try:
        image = PEImage.from_memory(recorder.read, interp.module.base)
        exports = export_lookup(interp.module.base, image.exports())
    except (PEError, MemoryNotInDump):
        pass  # read_python_state says the runtime could not be located
    state = read_python_state(cast(Target, recorder), exports, interp)
    if exports is not None:
        # what the analysis reads from the heap besides the stacks: the threads' names and
        # the imported packages' versions (looked up in sys.modules by hash: a few pages)
        from dumpkit.cpython.package_versions import REPORTED_PACKAGES, read_package_versions
        from dumpkit.cpython.thread_names import read_thread_names

        try:
            read_thread_names(cast(Target, recorder), exports, interp)
            read_package_versions(cast(Target, recorder), exports, interp, REPORTED_PACKAGES)
        except MemoryNotInDump:
            pass  # over MAX_BYTES: the stacks, read first, are in
    return PythonMemory(state, _pages(recorder.reads))


def command_line_memory(process: Process, threads: Sequence[Thread], wide: bool = True) -> Tuple[Tuple[int, int], ...]:
    """The bytes the process record's command line is read from (TEB -> PEB ->
    ProcessParameters -> CommandLine, by the analysis's own reader), as exact ranges in
    address order. Not whole pages: the environment block, secrets and all, often shares
    a page with the process parameters. `threads`: the dump's, whose TEB addresses the
    writer recorded (Wine's dbghelp records them but not their memory)."""
    recorder = _Recorder(process)
    command_line(cast(Target, recorder), tuple(threads[:TEBS_TRIED]), wide)
    return tuple((lo, hi - lo) for lo, hi in merge((a, a + s) for a, s in recorder.reads))


def page_bytes(process: Process, ranges: Sequence[Tuple[int, int]]) -> List[Tuple[int, bytes]]:
    """The bytes of each range, as far as the process still has them (page by page)."""
    out: List[Tuple[int, bytes]] = []
    for address, size in ranges:
        data = process.read_available(address, size)
        if data:
            out.append((address, data))
    return out
