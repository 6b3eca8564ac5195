"""CPython objects laid out in synthetic memory by the readers' own layouts (objects.py):
what the tests of the readers that follow pointers build, where the real dumps do not show
a case. The offsets themselves are checked against CPython's headers and on real dumps
(tests/cpython/test_thread_names.py)."""

from __future__ import annotations

import struct
from typing import Dict, List, Optional, Tuple

from dumpkit.cpython.objects import TPFLAGS_HEAPTYPE, ObjectLayout, Objects
from tests.support.fakes.target import MemoryTarget

STR_TYPE, DICT_TYPE, INT_TYPE, THREAD_TYPE, MODULE_TYPE = 0x10000, 0x11000, 0x12000, 0x13000, 0x14000
HEAP = 0x100000


class Heap:
    """Objects laid out by the reader's own layout (what is checked with them is the logic
    that follows the pointers)."""

    def __init__(self, layout: ObjectLayout):
        self.layout = layout
        self.blocks: List[Tuple[int, bytes]] = []
        self.next = HEAP

    def put(self, data: bytes, before: int = 0) -> int:
        at = self.next + before
        self.blocks.append((self.next, bytes(data)))
        self.next += (len(data) + 15) // 16 * 16 + 64
        return at

    def string(self, text: str) -> int:
        lay = self.layout
        head = bytearray(lay.unicode_ascii_size)
        struct.pack_into("<qQqq", head, 0, 1, STR_TYPE, len(text), -1)
        struct.pack_into("<I", head, lay.unicode_state, (1 << 2) | (1 << 5) | (1 << 6))  # kind 1, compact, ascii
        return self.put(bytes(head) + text.encode("ascii") + b"\0")

    def keys(self, names: List[str], values: Optional[List[int]]) -> int:
        """A keys object of str keys (unicode kind; 3.8-3.10 keep a hash in each entry)."""
        lay = self.layout
        assert len(names) <= 10, "16 slots hold 10 entries"
        head = bytearray(lay.keys_indices + 16)  # 16 slots of 1-byte indices
        struct.pack_into("<q", head, 0, 1)
        if lay.keys_log2:
            head[lay.keys_size], head[lay.keys_index_bytes], head[lay.keys_kind] = 4, 4, 1  # type: ignore[index]
        else:
            struct.pack_into("<q", head, lay.keys_size, 16)
        struct.pack_into("<q", head, lay.keys_nentries, len(names))
        entries = b""
        for i, name in enumerate(names):
            value = values[i] if values is not None else 0
            pair = struct.pack("<QQ", self.string(name), value)
            entries += pair if lay.keys_log2 else struct.pack("<q", 1234) + pair
        return self.put(bytes(head) + entries)

    def dict(self, items: Dict[str, int]) -> int:
        keys = self.keys(list(items), list(items.values()))
        lay = self.layout
        raw = bytearray(max(lay.dict_keys, lay.dict_values) + 8)
        struct.pack_into("<qQ", raw, 0, 1, DICT_TYPE)
        struct.pack_into("<Q", raw, lay.dict_keys, keys)
        return self.put(bytes(raw))

    def thread_type(self, flags: int, dictoffset: int, cached_keys: int = 0) -> int:
        lay = self.layout
        raw = bytearray(lay.heap_cached_keys + 8)
        struct.pack_into("<qQ", raw, 0, 1, 0)
        struct.pack_into("<I", raw, lay.type_flags, flags | TPFLAGS_HEAPTYPE)
        struct.pack_into("<q", raw, lay.type_basicsize, 16 if dictoffset <= 0 else 32)
        struct.pack_into("<q", raw, lay.type_dictoffset, dictoffset)
        struct.pack_into("<Q", raw, lay.heap_cached_keys, cached_keys)
        self.blocks.append((THREAD_TYPE, bytes(raw)))
        return THREAD_TYPE

    def instance(self, preheader: bytes, after: bytes = b"") -> int:
        """An object of THREAD_TYPE with `preheader` (what sits before it) and `after`."""
        return self.put(preheader + struct.pack("<qQ", 1, THREAD_TYPE) + after, before=len(preheader))

    def objects(self, target: Optional[MemoryTarget] = None) -> Objects:
        """A reader (with caches of its own) over these objects, or over `target`."""
        types = {"str": STR_TYPE, "dict": DICT_TYPE, "int": INT_TYPE}
        return Objects(target or MemoryTarget(self.blocks), self.layout, runtime=0, types=types)

    def module(self, globals_: Dict[str, int], type_: int = MODULE_TYPE) -> int:
        """A module object whose md_dict holds `globals_`."""
        raw = bytearray(self.layout.module_dict + 8)
        struct.pack_into("<qQ", raw, 0, 1, type_)
        struct.pack_into("<Q", raw, self.layout.module_dict, self.dict(globals_))
        return self.put(bytes(raw))

    def process(self, modules: Dict[str, int]) -> Objects:
        """A reader over a runtime with one interpreter whose sys.modules is `modules`."""
        lay = self.layout
        interp = bytearray(max(lay.interp_next, lay.interp_modules) + 8)
        struct.pack_into("<Q", interp, lay.interp_modules, self.dict(modules))
        runtime = bytearray(lay.runtime_interpreters_head + 8)
        struct.pack_into("<Q", runtime, lay.runtime_interpreters_head, self.put(bytes(interp)))
        at = self.put(bytes(runtime))  # before the memory is made of the blocks
        types = {"str": STR_TYPE, "dict": DICT_TYPE, "int": INT_TYPE, "module": MODULE_TYPE}
        return Objects(MemoryTarget(self.blocks), lay, at, types)
