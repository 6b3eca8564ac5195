"""The exception directory of an x64 image: `.pdata` (RUNTIME_FUNCTION entries, sorted by
address) and the UNWIND_INFO records they point at in `.xdata`, including indirect entries
(unwind field with bit 0 set), chained infos (UNW_FLAG_CHAININFO) and handler data.

The table is never parsed whole: `lookup_function` binary-searches it in place, one 12-byte
entry per probe, so a 100 MB TensorFlow module costs about twenty reads. Decoded unwind infos
are cached per reader. Every count is bounded and chains are followed iteratively.

`UnwindReader` holds the decoding; `PEImage` (an image with headers) and `MemoryUnwindData`
(unwind data in process memory with no header: a dynamic function table) both read through it.
"""

from __future__ import annotations

import struct
from typing import Callable, Dict, List, Optional, Set, Tuple

from dumpkit.pe.backing import ReadVA
from dumpkit.pe.errors import PEError
from dumpkit.pe.winnt import (
    RUNTIME_FUNCTION,
    UNW_FLAG_CHAININFO,
    UNW_FLAG_EHANDLER,
    UNW_FLAG_UHANDLER,
    UWOP_ALLOC_LARGE,
    UWOP_ALLOC_SMALL,
    UWOP_EPILOG,
    UWOP_NAMES,
    UWOP_PUSH_MACHFRAME,
    UWOP_PUSH_NONVOL,
    UWOP_SAVE_NONVOL,
    UWOP_SAVE_NONVOL_FAR,
    UWOP_SAVE_XMM128,
    UWOP_SAVE_XMM128_FAR,
    UWOP_SET_FPREG,
    UWOP_SET_FPREG_LARGE,
    UWOP_SPARE_CODE,
)
from dumpkit.target import MemoryNotInDump
from dumpkit.records import record

__all__ = [
    "MemoryUnwindData",
    "RuntimeFunction",
    "UnwindInfo",
    "UnwindOp",
    "UnwindReader",
    "decode_unwind_codes",
    "search_runtime_functions",
    "MAX_CHAIN",
    "MAX_INDIRECT",
    "PDATA_ENTRY",
]

MAX_CHAIN = 32  # chained unwind infos followed by unwind_chain()
MAX_INDIRECT = 4  # RUNTIME_FUNCTION -> RUNTIME_FUNCTION hops
PDATA_ENTRY = RUNTIME_FUNCTION.size  # 12
UNWIND_CACHE = 4096  # decoded UNWIND_INFOs kept per reader


@record
class RuntimeFunction:
    """One RUNTIME_FUNCTION, image-relative. `unwind_rva` never has bit 0 set.

    When the .pdata entry that covered the looked-up address was indirect (its unwind
    field had bit 0 set and pointed at another RUNTIME_FUNCTION), `lookup_function`
    returns the entry it points to, as Windows does (its begin is the primary function's
    start, which is what prologue offsets are measured from), and keeps the covering
    entry in `indirect_from`."""

    begin_rva: int
    end_rva: int
    unwind_rva: int
    indirect_from: Optional["RuntimeFunction"] = None

    def contains(self, rva: int) -> bool:
        return self.begin_rva <= rva < self.end_rva


@record
class UnwindOp:
    """One decoded unwind operation.

    `operand` per op: PUSH_NONVOL: register number; ALLOC_LARGE / ALLOC_SMALL: bytes
    allocated; SET_FPREG: the frame offset in bytes (UNWIND_INFO.frame_offset, already
    scaled by 16); SAVE_NONVOL(_FAR): stack offset in bytes (register in op_info);
    SAVE_XMM128(_FAR): stack offset in bytes (xmm number in op_info); EPILOG (v2) and
    SPARE_CODE: the raw value of the extra slot(s); PUSH_MACHFRAME: op_info (1 = with
    error code); SET_FPREG_LARGE: the raw (unscaled) 32-bit value of its two extra slots.

    Slot counts follow Windows' own table (RtlpUnwindOpSlots): EPILOG takes 2 slots and
    SPARE_CODE 3 (binutils' objdump decodes v2 epilog codes as 1 slot; Windows does not)."""

    code_offset: int
    op: int
    op_info: int
    operand: int
    slots: int = 1  # how many 16-bit slots this operation used

    @property
    def name(self) -> str:
        return UWOP_NAMES.get(self.op, f"UWOP_{self.op}")


@record
class UnwindInfo:
    rva: int
    version: int
    flags: int
    size_of_prolog: int
    count_of_codes: int
    frame_register: int
    frame_offset: int  # bytes (the scaled field * 16)
    ops: Tuple[UnwindOp, ...]
    handler_rva: Optional[int] = None  # EHANDLER / UHANDLER
    handler_data_rva: Optional[int] = None  # language-specific data follows the handler
    chained: Optional[RuntimeFunction] = None  # CHAININFO

    @property
    def has_handler(self) -> bool:
        return self.handler_rva is not None

    @property
    def is_chained(self) -> bool:
        return self.chained is not None


def search_runtime_functions(
    entry: Callable[[int], RuntimeFunction], count: int, rva: int
) -> Optional[RuntimeFunction]:
    """The last of `count` sorted entries whose begin is at or below `rva`, if it covers
    `rva` (indirect entries NOT resolved). `entry(i)` reads one entry: one read per probe."""
    lo, hi = 0, count
    found: Optional[RuntimeFunction] = None
    while lo < hi:
        mid = (lo + hi) // 2
        ent = entry(mid)
        if ent.begin_rva <= rva:
            found = ent
            lo = mid + 1
        else:
            hi = mid
    if found is None or not (found.begin_rva <= rva < found.end_rva):
        return None
    return found


def decode_unwind_codes(codes: bytes, count: int, version: int, frame_offset: int, where: int) -> List[UnwindOp]:
    """The `count` 16-bit unwind code slots of the UNWIND_INFO at `where`, as operations."""
    ops: List[UnwindOp] = []
    i = 0
    while i < count:
        code_offset = codes[2 * i]
        op = codes[2 * i + 1] & 0xF
        info = codes[2 * i + 1] >> 4

        def slot(k: int, i: int = i, op: int = op) -> int:
            if i + k >= count:
                raise PEError(
                    f"UNWIND_INFO at {where:#x}: {UWOP_NAMES.get(op, op)} at slot {i} runs past "
                    f"the {count} unwind codes"
                )
            return struct.unpack_from("<H", codes, 2 * (i + k))[0]

        if op == UWOP_PUSH_NONVOL:
            n, operand = 1, info
        elif op == UWOP_ALLOC_LARGE:
            if info == 0:
                n, operand = 2, slot(1) * 8
            elif info == 1:
                n, operand = 3, slot(1) | (slot(2) << 16)
            else:
                raise PEError(f"UNWIND_INFO at {where:#x}: ALLOC_LARGE with op info {info}")
        elif op == UWOP_ALLOC_SMALL:
            n, operand = 1, info * 8 + 8
        elif op == UWOP_SET_FPREG:
            n, operand = 1, frame_offset
        elif op == UWOP_SAVE_NONVOL:
            n, operand = 2, slot(1) * 8
        elif op == UWOP_SAVE_NONVOL_FAR:
            n, operand = 3, slot(1) | (slot(2) << 16)
        elif op == UWOP_EPILOG:
            # v2: epilog descriptor; v1: the old UWOP_SAVE_XMM. Two slots either way, as
            # Windows' own unwinder counts it. Keep the raw value.
            n, operand = 2, slot(1)
        elif op == UWOP_SPARE_CODE:
            n, operand = 3, slot(1) | (slot(2) << 16)
        elif op == UWOP_SAVE_XMM128:
            n, operand = 2, slot(1) * 16
        elif op == UWOP_SAVE_XMM128_FAR:
            n, operand = 3, slot(1) | (slot(2) << 16)
        elif op == UWOP_PUSH_MACHFRAME:
            if info > 1:
                raise PEError(f"UNWIND_INFO at {where:#x}: PUSH_MACHFRAME with op info {info}")
            n, operand = 1, info
        elif op == UWOP_SET_FPREG_LARGE:
            n, operand = 3, slot(1) | (slot(2) << 16)
        else:
            raise PEError(f"UNWIND_INFO at {where:#x}: unknown unwind op {op}")
        ops.append(UnwindOp(code_offset, op, info, operand, n))
        i += n
    return ops


class UnwindReader:
    """RUNTIME_FUNCTION and UNWIND_INFO decoding over `read_rva`, which subclasses provide
    (PEError outside the image, MemoryNotInDump for bytes a dump lacks)."""

    _unwind_cache: Dict[int, UnwindInfo]

    def read_rva(self, rva: int, size: int) -> bytes:
        raise NotImplementedError

    def _read_runtime_function(self, rva: int) -> RuntimeFunction:
        return RuntimeFunction(*RUNTIME_FUNCTION.unpack(self.read_rva(rva, PDATA_ENTRY)))

    def resolve_indirect(self, entry: RuntimeFunction) -> RuntimeFunction:
        """Follow bit 0 of the unwind field (an entry that points at another entry)."""
        cur = entry
        for _ in range(MAX_INDIRECT):
            if not cur.unwind_rva & 1:
                if cur is entry:
                    return entry
                return RuntimeFunction(cur.begin_rva, cur.end_rva, cur.unwind_rva, indirect_from=entry)
            cur = self._read_runtime_function(cur.unwind_rva & ~1)
        raise PEError(f"indirect RUNTIME_FUNCTION chain too long at {entry.begin_rva:#x}")

    def unwind_info(self, unwind_rva: int) -> UnwindInfo:
        """Parse the UNWIND_INFO at `unwind_rva` (PEError when malformed or truncated)."""
        cached = self._unwind_cache.get(unwind_rva)
        if cached is not None:
            return cached
        try:
            head = self.read_rva(unwind_rva, 4)
        except PEError:
            raise PEError(f"UNWIND_INFO at {unwind_rva:#x} is outside the image") from None
        version = head[0] & 7
        flags = head[0] >> 3
        prolog = head[1]
        count = head[2]
        frame_register = head[3] & 0xF
        frame_offset = (head[3] >> 4) * 16
        if version not in (1, 2):
            raise PEError(f"UNWIND_INFO at {unwind_rva:#x}: unsupported version {version}")
        try:
            codes = self.read_rva(unwind_rva + 4, 2 * count) if count else b""
        except PEError:
            raise PEError(f"UNWIND_INFO at {unwind_rva:#x}: unwind codes truncated") from None
        ops = decode_unwind_codes(codes, count, version, frame_offset, unwind_rva)

        tail = unwind_rva + 4 + 2 * ((count + 1) & ~1)
        handler = handler_data = None
        chained = None
        try:
            if flags & UNW_FLAG_CHAININFO:
                chained = self._read_runtime_function(tail)
            elif flags & (UNW_FLAG_EHANDLER | UNW_FLAG_UHANDLER):
                handler = struct.unpack("<I", self.read_rva(tail, 4))[0]
                handler_data = tail + 4
        except PEError:
            raise PEError(f"UNWIND_INFO at {unwind_rva:#x}: handler/chain data truncated") from None
        info = UnwindInfo(
            rva=unwind_rva,
            version=version,
            flags=flags,
            size_of_prolog=prolog,
            count_of_codes=count,
            frame_register=frame_register,
            frame_offset=frame_offset,
            ops=tuple(ops),
            handler_rva=handler,
            handler_data_rva=handler_data,
            chained=chained,
        )
        if len(self._unwind_cache) >= UNWIND_CACHE:
            self._unwind_cache.clear()
        self._unwind_cache[unwind_rva] = info
        return info

    def primary_function(self, entry: RuntimeFunction) -> RuntimeFunction:
        """The primary entry of the function `entry` belongs to: `entry` itself, or, when
        its unwind info chains (UNW_FLAG_CHAININFO: MSVC's separated fragments of one
        function), the RUNTIME_FUNCTION at the end of the chain, whose begin is the
        function's entry point. Bounded as `unwind_chain`; PEError on a loop."""
        cur = entry
        seen: Set[int] = set()
        for _ in range(MAX_CHAIN):
            if cur.unwind_rva in seen:
                break
            seen.add(cur.unwind_rva)
            chained = self.unwind_info(cur.unwind_rva).chained
            if chained is None:
                return cur
            cur = self.resolve_indirect(chained)
        raise PEError(f"unwind chain loops or is longer than {MAX_CHAIN} at {entry.begin_rva:#x}")

    def unwind_chain(self, unwind_rva: int) -> List[UnwindInfo]:
        """The UNWIND_INFO at `unwind_rva` followed by its chained infos, in order.
        Iterative and bounded; a loop or an over-long chain is a PEError."""
        out: List[UnwindInfo] = []
        seen: Set[int] = set()
        rva = unwind_rva
        while True:
            if rva in seen:
                raise PEError(f"unwind chain loops at UNWIND_INFO {rva:#x}")
            if len(out) >= MAX_CHAIN:
                raise PEError(f"unwind chain longer than {MAX_CHAIN} at {unwind_rva:#x}")
            seen.add(rva)
            info = self.unwind_info(rva)
            out.append(info)
            if info.chained is None:
                return out
            rva = self.resolve_indirect(info.chained).unwind_rva


class MemoryUnwindData(UnwindReader):
    """UNWIND_INFO read straight from process memory at `base + rva`, with no PE header:
    what a dynamic function table (the FunctionTable stream: JIT code registered with
    RtlAddFunctionTable) points at. Decodes exactly as PEImage does."""

    def __init__(self, read_va: ReadVA, base: int):
        self._read_va = read_va
        self.base = base
        self._unwind_cache = {}

    def read_rva(self, rva: int, size: int) -> bytes:
        data = self._read_va(self.base + rva, size)
        if len(data) != size:
            raise MemoryNotInDump(self.base + rva, size)
        return data
