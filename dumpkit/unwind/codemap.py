"""What the code of a target is, for every reader of it: the CodeMap.

Built once per target and handed to whoever needs it: the walker and its steps, and the
analyses that name frames and read code (analysis/threads.py, analysis/faultsite.py). It
answers, with bounded caches:

- places: module, RVA, unwind entry, function (a chained fragment's is its primary
  entry's) and name of an address;
- code bytes: the module image when we have it, else what the dump holds;
- call-site checks (`plausible_return`: does a CALL end at this address?), which stack
  scanning is built on;
- registered JIT code (the dump's FunctionTable stream);
- where a return address's frame ends by the code after it (`frame_end`), which refutes
  stale scanned words (unwind/refute.py).

Symbol lookup lives here, apart from walking, as rust-minidump and Breakpad keep it.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from dumpkit.function_tables import FunctionTable
from dumpkit.images import ImageProvider
from dumpkit.pe import PEError, PEImage
from dumpkit.target import MemoryNotInDump, Module, Target
from dumpkit.unwind.disasm import CALL_LOOKBACK, call_ends_at, simulate_to_return
from dumpkit.unwind.frames import Trust
from dumpkit.unwind.places import Place, symbol_for

# Scanning asks about the same stack words again and again (every thread of a process
# shares the same return sites); caches are bounded so a hostile dump cannot grow them.
RETURN_CACHE_LIMIT = 1 << 18
CODE_CACHE_LIMIT = 500_000
# Below this, a stack word is a small number, not a return address.
MIN_CODE_ADDRESS = 0x10000
_UNASKED: Any = object()  # not in plausible_return's cache (None is an answer there)
# Where `frame_end` starts its simulated stack: well away from 0 and 2**64 (the simulator
# only adds and subtracts; the words it pops are not looked at).
_SIMULATED_SP = 1 << 40
# Return addresses `frame_end` follows per target at most (each up to
# MAX_SIMULATED_INSTRUCTIONS decoded): a hostile stack of a million distinct words into
# code the dump holds must not cost minutes; real walks follow a few hundred.
FRAME_END_BUDGET = 20_000


class CodeMap:
    """Places, code bytes and call-site checks of one target. Keep one per target: its
    caches are the speed. `bits`: the CPU's mode, for decoding call sites (0x40-0x4F are
    not REX prefixes in 32-bit code)."""

    def __init__(self, target: Target, images: ImageProvider, bits: int = 64):
        self.target = target
        self.images = images
        self.bits = bits
        self._places: Dict[Tuple[int, bool], Place] = {}
        self._code: Dict[int, int] = {}  # address -> itself (interned) when plausible code, else 0
        self._returns: Dict[int, Optional[Trust]] = {}
        self._frame_ends: Dict[int, Optional[int]] = {}
        self._frame_end_budget = FRAME_END_BUDGET
        self._code_ranges: Optional[List[Tuple[int, int]]] = None  # the modules' [start, end)
        # JIT code's unwind entries (a Unity player's Mono: 62,000), decoded as looked up
        self.dynamic = FunctionTable.of(target.function_table_entries() or [])
        self.has_dynamic = bool(self.dynamic)  # asked per stack word: a plain attribute

    # -- memory --------------------------------------------------------------------------
    def read_code(self, address: int, size: int) -> bytes:
        """Code bytes from the module image when we have it, else from the dump."""
        module = self.target.module_at(address)
        if module is not None:
            image = self.images.image(module)
            if image is not None:
                try:
                    return image.read_rva(address - module.base, size)
                except (PEError, MemoryNotInDump):
                    pass
        return self.target.read_available(address, size)

    # -- places ---------------------------------------------------------------------------
    def place(self, ip: int, is_return: bool = False) -> Place:
        """What is known about `ip`. For a return address (`is_return`), the function is
        the one containing ip - 1: a call can be the last instruction of a function."""
        key = (ip, is_return)
        p = self._places.get(key)
        if p is None:
            p = self._places[key] = self._make_place(ip, ip - 1 if is_return else ip)
        return p

    def _make_place(self, ip: int, code_ip: int) -> Place:
        module = self.target.module_at(ip)
        rva = image = function = primary = dynamic = None
        if module is not None:
            rva = ip - module.base
            image = self.images.image(module)
            if image is not None:
                try:
                    function = image.lookup_function(code_ip - module.base)
                except (PEError, MemoryNotInDump):
                    function = None
                if function is not None:
                    try:
                        primary = image.primary_function(function)
                    except (PEError, MemoryNotInDump):
                        primary = None  # a broken chain: the step reports it when it unwinds
        if function is None and self.has_dynamic:
            dynamic = self.dynamic.entry_at(code_ip)
        named = self.target.symbol_at(ip)  # a debugger's own symbols come first (!tfstack)
        pdb = self.images.pdb_function(module, code_ip - module.base) if module is not None and not named else None
        symbol = symbol_for(named, module, rva, image, function, primary, pdb)
        line = self.images.pdb_line(module, code_ip - module.base) if module is not None and pdb is not None else None
        source = f"{line.file}:{line.line}" if line is not None else None
        return Place(module, rva, image, function, dynamic, symbol, primary, source)

    def code_address(self, ip: int) -> int:
        """Is ip plausible code: inside a module or a registered (JIT) function table?
        Answers with the first int object seen for this address (truthy) or 0: a deep
        recursion returns to the same address a million times, and the frames then share
        one int instead of holding a million copies."""
        known = self._code.get(ip)
        if known is not None:
            return known
        ok = self.target.module_at(ip) is not None or (self.has_dynamic and self.dynamic.entry_at(ip) is not None)
        if len(self._code) > CODE_CACHE_LIMIT:
            self._code.clear()
        self._code[ip] = ip if ok else 0
        return self._code[ip]

    # -- call sites and scanning ----------------------------------------------------------
    def plausible_return(self, address: int) -> Optional[Trust]:
        """SCAN_VALIDATED if a CALL ends at `address`, SCAN if it is in module code whose
        bytes are not available, None if it cannot be a return address."""
        kind = self._returns.get(address, _UNASKED)  # most words a scan asks about are new
        if kind is not _UNASKED:
            return kind
        if len(self._returns) >= RETURN_CACHE_LIMIT:
            self._returns.clear()
        kind = self._returns[address] = self._classify_return(address)
        return kind

    def _classify_return(self, addr: int) -> Optional[Trust]:
        module = self.target.module_at(addr)
        if module is None:
            if self.has_dynamic and self.dynamic.entry_at(addr) is not None:
                # JIT code registered with RtlAddFunctionTable: check the call site when
                # the dump holds the code, else take it as a plain scan.
                before = _code_before(self.target.read_available, addr)
                if before:
                    return Trust.SCAN_VALIDATED if call_ends_at(before, addr, self.bits) else None
                return Trust.SCAN
            return None
        if addr - module.base < 0x1000:
            return None  # the first page of an image is its headers, never code
        image = self.images.image(module)
        if image is not None and not image.is_code_rva(addr - module.base):
            return None
        # read_code's bytes without finding the module again: the CALL_LOOKBACK bytes before
        # addr are in this module too (addr is a page past its base, and a module based
        # among them would be the one module_at found for addr, whose first page is refused)
        before = _code_before(self._image_reader(module, image), addr)
        if before:
            return Trust.SCAN_VALIDATED if call_ends_at(before, addr, self.bits) else None
        return Trust.SCAN if image is None else None

    def _image_reader(self, module: Module, image: Optional[PEImage]) -> Callable[[int, int], bytes]:
        """`read_code` for addresses inside `module`, whose image (or None) is known."""
        if image is None:
            return self.target.read_available

        def read(address: int, size: int) -> bytes:
            try:
                return image.read_rva(address - module.base, size)
            except (PEError, MemoryNotInDump):
                return self.target.read_available(address, size)

        return read

    def frame_end(self, return_address: int) -> Optional[int]:
        """The offset from the SP of a frame returning to `return_address` to the slot of
        its caller's return address, by following the 64-bit code after it to a RET
        (`disasm.simulate_to_return`: conditional branches fall through, direct jumps are
        followed, an RSP write it does not model such as `mov rsp, rbp` ends it); None where
        the code is not at hand or cannot be followed, or ends in a tail jump, and once
        FRAME_END_BUDGET return addresses have been followed."""
        try:
            return self._frame_ends[return_address]
        except KeyError:
            pass
        if len(self._frame_ends) >= RETURN_CACHE_LIMIT:
            self._frame_ends.clear()
        end = None
        if self.bits == 64 and self._frame_end_budget > 0:
            self._frame_end_budget -= 1
            path = simulate_to_return(self.read_code, lambda _a: 0, return_address, _SIMULATED_SP, {})
            if path is not None and not path.tail_jump and path.rsp >= _SIMULATED_SP:
                end = path.rsp - _SIMULATED_SP
        self._frame_ends[return_address] = end
        return end

    def maybe_return(self, value: int) -> bool:
        """Would `scan` stop at a stack word holding `value`?"""
        return value > MIN_CODE_ADDRESS and self.plausible_return(value) is not None

    def no_code_in(self, lo: int, hi: int) -> bool:
        """No stack word with a value in [lo, hi] can be a return address: the range holds
        no module and no registered JIT code above MIN_CODE_ADDRESS."""
        lo = max(lo, MIN_CODE_ADDRESS + 1)
        if hi < lo:
            return True
        if self._code_ranges is None:
            self._code_ranges = [(m.base, m.base + m.size) for m in self.target.modules]
        if any(start <= hi and lo < end for start, end in self._code_ranges):
            return False
        # JIT code: a table per method, 62,000 entries in a Unity player's dump
        return not self.dynamic.reaches(lo, hi)


def _code_before(read: Callable[[int, int], bytes], addr: int) -> bytes:
    """The CALL_LOOKBACK bytes below a candidate return address, or b"" when they are
    not all readable."""
    before = read(addr - CALL_LOOKBACK, CALL_LOOKBACK)
    return before if len(before) == CALL_LOOKBACK else b""
