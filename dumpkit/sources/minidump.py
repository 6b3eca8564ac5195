"""Target over a .dmp file.

The file is mapped read-only and never written. Its streams are read into one record by
`sources/minidump_streams.py`; here is what the target makes of it: the memory served
(the ranges reconciled, thread stacks the memory list lacks added, a bundle's kept pieces)
and the module lookup, behind `dumpkit.target.Target` and its `DumpFile` capability.
"""

from __future__ import annotations

import mmap
import os
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

from dumpkit.function_tables import FunctionTable
from dumpkit.problems import Problems
from dumpkit.sources.memory import Buffer, CapturedMemory, MemoryNotInBundle, keep_only
from dumpkit.sources.minidump_streams import (
    MinidumpStreams,
    add_range,
    compressed_format,
    range_problem_lines,
    read_streams,
    stream_name,
)
from dumpkit.sources.pieced import PiecedFile
from dumpkit.target import (
    BundleManifest,
    DumpError,
    DumpInfo,
    ExceptionInfo,
    Handle,
    ImageStore,
    MemoryNotInDump,
    MemoryRegion,
    Module,
    ModuleMap,
    ProcessInfo,
    ProcessMemory,
    SystemInfo,
    SystemMemory,
    Thread,
    UnloadedModule,
)

__all__ = [
    "MinidumpTarget",
    "compressed_format",
    "open_dump",
    "open_dump_bytes",
    "open_dump_copy",
    "open_dump_pieces",
    "stream_name",
]


# Writers save some bytes twice (Wine: a stack and the memory around each pointer in it;
# dbghelp: a stack and the code around an IP). Overlaps are compared byte for byte, so
# agreeing copies pass silently and only different bytes for one address are a problem.
class MinidumpTarget:
    """A crash dump file as a `dumpkit.target.Target`."""

    def __init__(
        self,
        path: str,
        data: Optional[Buffer] = None,
        name: Optional[str] = None,
        kept: Optional[Sequence[Tuple[int, int]]] = None,
        problems: Optional[Problems] = None,
    ):
        """`data`: the dump's bytes already in memory (a bundle's member), `path` then only
        names it; `name`: what reports call the dump, when not `path` (a private copy);
        `kept`: the file ranges whose bytes are the dump's (a bundle that kept only the
        memory its analysis read): memory elsewhere is not served; `problems`: the run's
        collector, which what reading meets is added to (a new one when none is given)."""
        self.path = name or path
        self.kept = tuple(kept) if kept is not None else None
        self.soft_errors = problems if problems is not None else Problems()
        self.image_store: Optional[ImageStore] = None  # a bundle's (sources/bundle.py)
        self.bundle: Optional[BundleManifest] = None
        if data is not None:
            if not data:
                raise DumpError("file is empty, not a minidump")
            self._data: Buffer = data
            self._size = len(data)
            self._take(read_streams(self._data, self._size, self.path, self.soft_errors))
            return
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        except OSError as e:
            raise DumpError(f"cannot open: {e.strerror or e}") from None
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                raise DumpError("file is empty, not a minidump")
            try:
                self._data = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError) as e:
                raise DumpError(f"cannot map file: {e}") from None
        finally:
            os.close(fd)
        self._size = size
        self._take(read_streams(self._data, self._size, self.path, self.soft_errors))

    # -- Target API ---------------------------------------------------------------------
    def read(self, address: int, size: int) -> bytes:
        got = self._memory.read_available(address, size)
        if len(got) != size:
            if self._captured is not self._memory and self._captured.read_available(address + len(got), 1):
                raise MemoryNotInBundle(address, size)
            raise MemoryNotInDump(address, size)
        return got

    def read_available(self, address: int, size: int) -> bytes:
        return self._memory.read_available(address, size)

    def module_at(self, address: int) -> Optional[Module]:
        return self._module_map.find(address)

    def symbol_at(self, address: int) -> Optional[str]:
        return None  # a dump file carries no symbols; names come from PE exports

    def function_table_entries(self) -> FunctionTable:
        return self.function_tables

    def close(self) -> None:
        if isinstance(self._data, bytes):
            self._data = b""
            return
        try:
            self._data.close()
        except (BufferError, ValueError):
            pass

    def __enter__(self) -> "MinidumpTarget":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def dump_file(self) -> "MinidumpTarget":
        return self  # the file's bytes and memory ranges are read below (target.DumpFile)

    def file_chunks(self, chunk: int = 1 << 20) -> Iterator[bytes]:
        """The dump file's bytes in order, `chunk` at a time (what a bundle of it stores)."""
        for at in range(0, self._size, chunk):
            yield self._data[at : min(at + chunk, self._size)]

    def file_bytes(self, offset: int, size: int) -> bytes:
        """The dump file's bytes at [offset, offset + size), clipped to its end."""
        return bytes(self._data[offset : min(offset + size, self._size)])

    @property
    def file_size(self) -> int:
        return self._size

    @property
    def memory_range_count(self) -> int:
        return len(self._captured)

    def memory_ranges(self) -> List[Tuple[int, int]]:
        return list(zip(self._captured.starts, self._captured.ends))

    def memory_pieces(self) -> List[Tuple[int, int, int]]:
        """Every memory range the file holds: (address, size, file offset), sorted."""
        return self._mem_ranges

    def record_memory_reads(self) -> Set[int]:
        """From now on, the page numbers (address // MEMORY_PAGE) of every byte of memory
        read are added to the returned set."""
        pages: Set[int] = set()
        self._memory.pages = pages
        return pages

    # -- built from the streams ---------------------------------------------------------
    def _take(self, streams: MinidumpStreams) -> None:
        """The record's fields become the target's (Target), and its memory ranges the
        memory served."""
        self.dump: DumpInfo = streams.dump
        self.system: Optional[SystemInfo] = streams.system
        self.process: Optional[ProcessInfo] = streams.process
        self.build_string: Optional[str] = streams.build_string
        self.comment: Optional[str] = streams.comment
        self.handles: Tuple[Handle, ...] = streams.handles
        self.process_memory: Optional[ProcessMemory] = streams.process_memory
        self.system_memory: Optional[SystemMemory] = streams.system_memory
        self.xstate_enabled_features: Optional[int] = streams.xstate_enabled_features
        self.threads: List[Thread] = streams.threads
        self.modules: List[Module] = streams.modules
        self.unloaded_modules: List[UnloadedModule] = streams.unloaded_modules
        self.exception: Optional[ExceptionInfo] = streams.exception
        # the MemoryInfoList's regions by base, read when first asked for
        self.memory_regions: Sequence[MemoryRegion] = streams.memory_info
        self.function_tables: FunctionTable = streams.function_tables
        self._mem_ranges = streams.memory_ranges
        self._memory = CapturedMemory(self._data, self._mem_ranges)
        # Some writers put a thread's stack only in its thread record, not the memory list.
        missing = [r for r in streams.stack_ranges if not self._memory.read_available(r[0], 1)]
        stack_problems: Dict[Tuple[str, str], Tuple[int, int]] = {}
        if missing:
            for start, size, rva in missing:
                add_range(self._mem_ranges, stack_problems, self._size, start, size, rva, "thread stack", True)
            self._memory = CapturedMemory(self._data, self._mem_ranges)
        self._captured = self._memory  # what the file captured; what it serves may be less
        if self.kept is not None:
            # Overlapping copies are compared (problems) over what was captured: a bundle
            # keeps every byte of them, so the comparison says what it said on the original.
            self._memory = CapturedMemory(self._data, keep_only(self._mem_ranges, self.kept), budget=0)
        for problem in self._captured.problems():
            self.soft_errors.add(problem)
        for problem in streams.range_problems + tuple(range_problem_lines(stack_problems)) + streams.missing_lists:
            self.soft_errors.add(problem)
        self._module_map = ModuleMap(self.modules)


def open_dump(path: str, problems: Optional[Problems] = None) -> MinidumpTarget:
    """Open a minidump read-only; what reading it meets goes to `problems` (the run's
    collector; a new one when none is given). Raises DumpError (one line) when it cannot
    be used."""
    return MinidumpTarget(path, problems=problems)


def open_dump_bytes(
    data: bytes, name: str, kept: Optional[Sequence[Tuple[int, int]]] = None, problems: Optional[Problems] = None
) -> MinidumpTarget:
    """A minidump held in memory (a bundle's member), named `name` in reports; `kept` and
    `problems`: see MinidumpTarget."""
    return MinidumpTarget(name, data, kept=kept, problems=problems)


def open_dump_pieces(
    size: int,
    kept: Sequence[Tuple[int, int]],
    data: Union[bytes, mmap.mmap],
    name: str,
    problems: Optional[Problems] = None,
) -> MinidumpTarget:
    """A minidump of `size` bytes of which only the `kept` file ranges are held, back to
    back in `data` (a bundle written with --only-used-memory), named `name` in reports.
    Raises DumpError when the pieces do not fit the size."""
    try:
        pieces = PiecedFile(size, kept, data)
    except ValueError as e:
        raise DumpError(f"the dump's kept pieces do not fit it ({e})") from None
    return MinidumpTarget(name, pieces, kept=kept, problems=problems)


def open_dump_copy(
    path: str, name: str, kept: Optional[Sequence[Tuple[int, int]]] = None, problems: Optional[Problems] = None
) -> MinidumpTarget:
    """A private copy of a minidump (a bundle's member too big to hold in memory), named
    `name` in reports."""
    return MinidumpTarget(path, name=name, kept=kept, problems=problems)
