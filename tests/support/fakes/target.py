"""One stand-in for the Target seam (dumpkit/target.py), for tests that need a process made
of a few byte ranges rather than a whole minidump (tests that need a dump's streams build one
with tests/support/synth_dump.py). Every attribute the protocol declares is present with the value
a dump without that stream would give, so an analysis that starts reading something new
fails here the way it would on such a dump, not with an AttributeError."""

from __future__ import annotations

import bisect
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

from dumpkit.target import (
    DumpInfo,
    ExceptionInfo,
    Handle,
    MemoryNotInDump,
    MemoryRegion,
    Module,
    ModuleMap,
    ProcessInfo,
    ProcessMemory,
    Problems,
    SystemInfo,
    SystemMemory,
    Thread,
    UnloadedModule,
)


class Memory:
    """Blocks of bytes by start address, found by bisection (a test process may hold 10^5
    objects). A read must fall inside one block, as a dump's read must fall inside captured
    memory; tests damage a process by patching or dropping blocks after it is built."""

    def __init__(self, blocks: Iterable[Tuple[int, bytes]] = ()) -> None:
        self.blocks: Dict[int, bytes] = {}
        self._starts: List[int] = []
        for address, data in blocks:
            self.put(address, data)

    def __len__(self) -> int:
        return len(self.blocks)

    def put(self, address: int, data: bytes) -> None:
        if address not in self.blocks:
            bisect.insort(self._starts, address)
        self.blocks[address] = bytes(data)

    def patch(self, address: int, data: bytes) -> None:
        """Overwrite bytes inside a block already written."""
        start = self._starts[bisect.bisect_right(self._starts, address) - 1]
        block = bytearray(self.blocks[start])
        block[address - start : address - start + len(data)] = data
        self.blocks[start] = bytes(block)

    def drop(self, address: int) -> None:
        del self.blocks[address]
        self._starts.remove(address)

    def _block(self, address: int) -> Optional[Tuple[int, bytes]]:
        i = bisect.bisect_right(self._starts, address) - 1
        if i < 0:
            return None
        start = self._starts[i]
        return start, self.blocks[start]

    def read(self, address: int, size: int) -> bytes:
        found = self._block(address)
        if found is not None and address + size <= found[0] + len(found[1]):
            start, data = found
            return data[address - start : address - start + size]
        raise MemoryNotInDump(address, size)

    def read_available(self, address: int, size: int) -> bytes:
        found = self._block(address)
        if found is not None and address < found[0] + len(found[1]):
            start, data = found
            return data[address - start : address - start + size]
        return b""


class MemoryTarget:
    """A Target over `memory` (a Memory, or (address, bytes) pairs), with the modules,
    threads and streams a test gives and nothing else."""

    def __init__(
        self,
        memory: Union[Memory, Iterable[Tuple[int, bytes]]] = (),
        modules: Sequence[Module] = (),
        *,
        system: Optional[SystemInfo] = None,
        threads: Sequence[Thread] = (),
        exception: Optional[ExceptionInfo] = None,
        memory_regions: Sequence[MemoryRegion] = (),
        dynamic: Sequence[Tuple[int, int, int, int]] = (),
        unloaded_modules: Sequence[UnloadedModule] = (),
        process: Optional[ProcessInfo] = None,
        build_string: Optional[str] = None,
        xstate_enabled_features: Optional[int] = None,
        comment: Optional[str] = None,
        handles: Sequence[Handle] = (),
        process_memory: Optional[ProcessMemory] = None,
        system_memory: Optional[SystemMemory] = None,
        name: str = "synthetic.dmp",
    ):
        self.memory = memory if isinstance(memory, Memory) else Memory(memory)
        self.modules: List[Module] = list(modules)
        self._map = ModuleMap(self.modules)
        self._dynamic = list(dynamic)
        self.dump = DumpInfo(name, 0)
        self.system = system
        self.process = process
        self.threads: List[Thread] = list(threads)
        self.unloaded_modules: List[UnloadedModule] = list(unloaded_modules)
        self.exception = exception
        self.memory_regions: List[MemoryRegion] = list(memory_regions)
        self.soft_errors = Problems()
        self.build_string = build_string
        self.image_store = None
        self.bundle = None
        self.dump_file = None  # no file behind it: nothing to bundle
        self.xstate_enabled_features = xstate_enabled_features
        self.comment = comment
        self.handles: Tuple[Handle, ...] = tuple(handles)
        self.process_memory = process_memory
        self.system_memory = system_memory

    @property
    def memory_range_count(self) -> Optional[int]:
        return len(self.memory)

    def read(self, address: int, size: int) -> bytes:
        return self.memory.read(address, size)

    def read_available(self, address: int, size: int) -> bytes:
        return self.memory.read_available(address, size)

    def module_at(self, address: int) -> Optional[Module]:
        return self._map.find(address)

    def symbol_at(self, address: int) -> Optional[str]:
        return None

    def function_table_entries(self) -> List[Tuple[int, int, int, int]]:
        return list(self._dynamic)
