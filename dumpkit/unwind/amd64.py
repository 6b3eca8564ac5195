"""x64 stack walking, strategies tried in a fixed order for each frame:

1. PE unwind data (.pdata/.xdata, or the dump's FunctionTable stream), as Windows'
   RtlVirtualUnwind applies it, including an IP inside an epilogue (frame 0, or an IP a
   machine frame restored: other caller frames sit at a call site, never mid-epilogue);
2. for code with no unwind entry (libgcc's ___chkstk_ms, hand-written code): follow the
   code forward to its RET with capstone, or, where the image says the function has no
   entry, the leaf rule (return address at [rsp]), each checked at the call site;
3. stack scanning: the first word above SP that points into module code, preferring
   ones that follow a CALL instruction (validated when the code bytes are available).

Iterative, bounded by a frame limit and by SP strictly increasing inside the stack; the
per-function unwind recipe is compiled once, so a million identical recursive frames
cost one dictionary lookup and a few reads each.
"""

from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from dumpkit.images import ImageProvider
from dumpkit.pe import MemoryUnwindData, PEError, PEImage, RuntimeFunction, UnwindInfo
from dumpkit.target import GPR_NAMES, MemoryNotInDump, Module, Registers, Target, Thread
from dumpkit.unwind.disasm import CALL_LOOKBACK, call_ends_at, epilogue_path, simulate_to_return
from dumpkit.unwind.frames import Frame, StackWalk, StopReason, Trust

DEFAULT_MAX_FRAMES = 2_000_000
# How far (in 8-byte words) to scan for a caller. Breakpad and rust-minidump use 40, which
# cuts walks short at the first large frame; much further mostly finds stale addresses.
DEFAULT_SCAN_WORDS = 256
# Most stack bytes copied up front for fast reads; words beyond are read one by one (a
# thread record can claim a 4 GiB stack, and a full-memory dump can back much of it).
MAX_STACK_BYTES = 64 << 20

UWOP_PUSH_NONVOL, UWOP_ALLOC_LARGE, UWOP_ALLOC_SMALL, UWOP_SET_FPREG = 0, 1, 2, 3
UWOP_SAVE_NONVOL, UWOP_SAVE_NONVOL_FAR, UWOP_PUSH_MACHFRAME = 4, 5, 10

VOLATILE = ("rax", "rcx", "rdx", "r8", "r9", "r10", "r11")
MAX_ADDRESS = (1 << 64) - 1

_MISSING = object()

# Compiled unwind steps. One tuple per step: (kind, a, b)
_FRAME, _POP, _ADD, _SETFP, _LOAD, _MACH = range(6)


@dataclass
class _Place:
    """Everything about one instruction pointer that does not depend on the stack."""

    module: Optional[Module]
    rva: Optional[int]
    image: Optional[PEImage]
    function: Optional[RuntimeFunction]  # covering .pdata entry (image-relative)
    dynamic: Optional[Tuple[int, int, int, int]]  # FunctionTable stream entry
    symbol: Optional[str]


RETURN_CACHE_LIMIT = 1 << 18


class Walker:
    """Walks threads of one target. Keep one per target: its caches are the speed."""

    def __init__(
        self,
        target: Target,
        images: ImageProvider,
        max_frames: int = DEFAULT_MAX_FRAMES,
        scan_words: int = DEFAULT_SCAN_WORDS,
    ):
        self.target = target
        self.images = images
        self.max_frames = max_frames
        self.scan_words = scan_words
        self._places: Dict[Tuple[int, bool], _Place] = {}
        self._recipes: Dict[Tuple[int, int], Optional[tuple]] = {}
        self._fast: Dict[int, Optional[tuple]] = {}
        self._dynamic_readers: Dict[int, MemoryUnwindData] = {}
        self._dynamic_functions: Dict[tuple, Optional[RuntimeFunction]] = {}
        self._in_module: Dict[int, int] = {}  # address -> itself (interned) when plausible code, else 0
        # Scanning asks about the same stack words again and again (every thread of a
        # process shares the same return sites); bounded so a hostile dump cannot grow it.
        self._returns: Dict[int, Optional[Trust]] = {}
        self._dynamic = sorted(target.function_table_entries() or [])
        # 32-bit dumps decode call sites in 32-bit mode (0x40-0x4F are not REX there).
        self.bits = 32 if target.system is not None and target.system.processor_architecture == 0 else 64
        self._dynamic_starts = [d[0] for d in self._dynamic]

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
    def place(self, ip: int, is_return: bool = False) -> _Place:
        """What is known about `ip`. For a return address (`is_return`), the function is
        the one containing ip - 1: a call can be the last instruction of a function."""
        key = (ip, is_return)
        p = self._places.get(key)
        if p is None:
            p = self._places[key] = self._make_place(ip, ip - 1 if is_return else ip)
        return p

    def _make_place(self, ip: int, code_ip: int) -> _Place:
        module = self.target.module_at(ip)
        rva = image = function = dynamic = None
        if module is not None:
            rva = ip - module.base
            image = self.images.image(module)
            if image is not None:
                try:
                    function = image.lookup_function(code_ip - module.base)
                except (PEError, MemoryNotInDump):
                    function = None
        if function is None and self._dynamic:
            i = bisect.bisect_right(self._dynamic_starts, code_ip) - 1
            if i >= 0 and self._dynamic[i][0] <= code_ip < self._dynamic[i][1]:
                dynamic = self._dynamic[i]
        symbol = self._symbol(ip, module, rva, image, function)
        return _Place(module, rva, image, function, dynamic, symbol)

    def _symbol(self, ip, module, rva, image, function) -> Optional[str]:
        debugger = self.target.symbol_at(ip)
        if debugger:
            return debugger
        if module is None:
            return None
        start = function.begin_rva if function is not None else None
        if image is not None:
            near = self._nearest_name(image, rva, start)
            if near is not None:
                name, at = near
                return f"{module.name}!{name}" + (f"+{rva - at:#x}" if rva != at else "")
        if start is not None:
            return f"{module.name}!func_{start:x}" + (f"+{rva - start:#x}" if rva != start else "")
        return None

    @staticmethod
    def _nearest_name(image: PEImage, rva: int, start: Optional[int]) -> Optional[Tuple[str, int]]:
        """(name, rva) of the nearest-lower export or COFF function symbol (mingw keeps
        them) that can name code at `rva`: not below the function's own start (a name
        from an earlier function would mislabel this one), and, with no .pdata entry
        covering `rva`, not a function whose entry ends before it. An export at the
        function's start is taken as is: the COFF table, at the end of the file (the
        whole of a compressed image away), is read only when exports do not name it."""
        best = None
        for lookup in (image.nearest_export, image.nearest_function_symbol):
            try:
                near = lookup(rva)
            except (PEError, MemoryNotInDump):
                near = None
            if near is None or (start is not None and near[1] < start):
                continue
            if start is None and _ends_before(image, near[1], rva):
                continue
            if best is None or near[1] > best[1]:
                best = near
            if start is not None and best[1] == start:
                break
        return best

    # -- unwind recipes -------------------------------------------------------------------
    def _recipe(self, place: _Place, ip: int) -> Optional[tuple]:
        """Compiled unwind steps for `ip` in its function, memoised by (unwind info,
        prolog offset); None when the unwind data is unreadable."""
        found = self._function_of(place)
        if found is None:
            return None
        image, base, function = found
        begin, unwind_rva = function.begin_rva, function.unwind_rva
        offset = (ip - base) - begin
        key = (base + unwind_rva, offset)
        if key in self._recipes:
            return self._recipes[key]
        recipe = None
        try:
            chain = self._chain(image, base, unwind_rva)
            recipe = _compile(chain, offset)
        except (PEError, MemoryNotInDump, struct.error) as e:
            self.target.soft_errors.add(f"unwind data at {base + unwind_rva:#x} unusable: {e}")
        if len(self._recipes) > 200_000:
            self._recipes.clear()
        self._recipes[key] = recipe
        return recipe

    def _function_of(self, place: _Place) -> Optional[Tuple[Optional[PEImage], int, RuntimeFunction]]:
        """(image or None, base, RUNTIME_FUNCTION relative to base) covering the place:
        its .pdata entry, else its FunctionTable entry (JIT code, image None), with an
        indirect entry (unwind field bit 0: it points at another RUNTIME_FUNCTION)
        resolved as for .pdata. None when there is neither or it cannot be resolved."""
        if place.function is not None:
            return place.image, place.module.base, place.function
        if place.dynamic is None:
            return None
        d = place.dynamic
        resolved = self._dynamic_functions.get(d, _MISSING)
        if resolved is _MISSING:
            base = d[3]
            resolved = RuntimeFunction(d[0] - base, d[1] - base, d[2] - base)
            if resolved.unwind_rva & 1:
                try:
                    resolved = self._dynamic_reader(base).resolve_indirect(resolved)
                except (PEError, MemoryNotInDump, struct.error) as e:
                    self.target.soft_errors.add(f"function table entry at {d[0]:#x} unusable: {e}")
                    resolved = None
            self._dynamic_functions[d] = resolved
        return None if resolved is None else (None, d[3], resolved)

    def _dynamic_reader(self, base: int) -> MemoryUnwindData:
        mem = self._dynamic_readers.get(base)
        if mem is None:
            mem = self._dynamic_readers[base] = MemoryUnwindData(self.target.read, base)
        return mem

    def _chain(self, image: Optional[PEImage], base: int, unwind_rva: int) -> List[UnwindInfo]:
        if image is not None:
            return image.unwind_chain(unwind_rva)
        # Dynamic function table (JIT code): the unwind info lives in process memory.
        return self._dynamic_reader(base).unwind_chain(unwind_rva)

    # -- walking --------------------------------------------------------------------------
    def walk(
        self, thread_id: int, context: Registers, stack_lo: int, stack_hi: int, max_frames: Optional[int] = None
    ) -> StackWalk:
        limit = self.max_frames if max_frames is None else max_frames
        problems: List[str] = []
        if stack_hi <= stack_lo:
            stack_lo, stack_hi = context.sp, context.sp + 0x100000
            problems.append("stack range unknown; assuming 1 MiB above SP")
        if stack_hi - stack_lo > 1 << 40:
            problems.append(f"stack range {stack_lo:#x}-{stack_hi:#x} is implausible; walking up to 1 MiB above SP")
            stack_lo, stack_hi = context.sp, context.sp + 0x100000
        window_lo = max(stack_lo, min(context.sp, stack_hi) & ~7)
        stack = self.target.read_available(window_lo, min(stack_hi - window_lo, MAX_STACK_BYTES))
        s_lo, s_hi = window_lo, window_lo + len(stack)
        if not self.target.read_available(context.sp, 8):
            problems.append(f"no stack memory at SP {context.sp:#x} in the dump")
        unpack = struct.unpack_from

        def read_u64(addr: int) -> Optional[int]:
            if s_lo <= addr and addr + 8 <= s_hi:
                return unpack("<Q", stack, addr - s_lo)[0]
            try:
                return unpack("<Q", self.target.read(addr, 8))[0]
            except MemoryNotInDump:
                return None

        regs = {k: v for k, v in context.values.items() if k in GPR_NAMES}
        ip, sp = context.ip, context.sp
        frames: List[Frame] = []
        append = frames.append
        fast_steps = self._fast
        in_module = self._in_module
        trust = Trust.CONTEXT
        stop = StopReason.END_OF_STACK
        # `exact`: ip is where execution stopped (frame 0, or the interrupted IP a machine
        # frame saved), not a return address: look it up as is, and it may be mid-epilogue.
        exact = True
        while True:
            n = len(frames)
            if n >= limit:
                stop = StopReason.FRAME_LIMIT
                break
            if not exact:
                # Fast path: a caller frame whose unwind is pure pushes and allocations
                # (most compiled code): one cached tuple, a few reads.
                fast = fast_steps.get(ip, _MISSING)
                if fast is _MISSING:
                    fast = self._fast_step(ip)
                if fast is not None:
                    place, delta, pops, modname, fstart = fast
                    ra = sp + delta
                    if s_lo <= ra and ra + 8 <= s_hi:
                        cip = unpack("<Q", stack, ra - s_lo)[0]
                    else:
                        cip = read_u64(ra)
                    known = in_module.get(cip) if cip else None
                    if known is None and cip:
                        known = self._note_module(cip)
                    ok = cip is not None and (cip == 0 or bool(known))
                    if ok:
                        if known:
                            cip = known  # the shared int object (see _note_module)
                        frame = Frame(n, ip, sp, modname, place.rva, fstart, place.symbol, None, trust)
                        append(frame)
                        for reg, off in pops:
                            v = read_u64(sp + off)
                            if v is not None:
                                regs[reg] = v
                        if cip == 0:
                            stop = StopReason.RETURN_ADDRESS_ZERO
                            break
                        csp = ra + 8
                        if csp > stack_hi + 8:
                            stop = StopReason.END_OF_STACK
                            break
                        frame.size = csp - sp
                        ip, sp, trust = cip, csp, Trust.UNWIND_INFO
                        continue
            place = self._places.get((ip, not exact)) or self.place(ip, not exact)
            mod = place.module
            frames.append(
                Frame(
                    n,
                    ip,
                    sp,
                    mod.name if mod else None,
                    place.rva,
                    place.function.begin_rva if place.function is not None else None,
                    place.symbol,
                    None,
                    trust,
                )
            )
            nxt = self._caller(place, ip, sp, regs, read_u64, exact, stack_hi)
            if nxt is None:
                stop = StopReason.NO_CALLER
                break
            cip, csp, cregs, ctrust, exact = nxt
            if cip == 0:
                stop = StopReason.RETURN_ADDRESS_ZERO
                break
            if csp <= sp:
                problems.append(f"frame {len(frames) - 1}: caller SP {csp:#x} not above {sp:#x}; stopped")
                stop = StopReason.SP_NOT_INCREASING
                break
            if csp > stack_hi + 8:
                stop = StopReason.END_OF_STACK
                break
            frames[-1].size = csp - sp
            ip, sp, regs, trust = cip, csp, dict(cregs), ctrust
        return StackWalk(thread_id, frames, stop, problems, limit if stop is StopReason.FRAME_LIMIT else None)

    def _in_dynamic_table(self, ip: int) -> bool:
        i = bisect.bisect_right(self._dynamic_starts, ip) - 1
        return i >= 0 and self._dynamic[i][0] <= ip < self._dynamic[i][1]

    def _note_module(self, ip: int) -> int:
        """Is ip plausible code: inside a module or a registered (JIT) function table?
        Answers with the first int object seen for this address (truthy) or 0: a deep
        recursion returns to the same address a million times, and the frames then share
        one int instead of holding a million copies."""
        ok = self.target.module_at(ip) is not None or (bool(self._dynamic) and self._in_dynamic_table(ip))
        if len(self._in_module) > 500_000:
            self._in_module.clear()
        self._in_module[ip] = ip if ok else 0
        return self._in_module[ip]

    def _fast_step(self, ip: int):
        """(place, offset of the return address, [(reg, offset)], module name, function
        start) for a return address whose function's unwind is only pushes and
        allocations; None when the general path is needed."""
        place = self.place(ip, True)
        result = None
        if place.function is not None and place.module is not None:
            recipe = self._recipe(place, ip - 1)
            if recipe is not None and all(k in (_ADD, _POP) or (k == _FRAME and a is None) for k, a, _ in recipe):
                off = 0
                pops = []
                for kind, a, _ in recipe:
                    if kind == _ADD:
                        off += a
                    elif kind == _POP:
                        pops.append((a, off))
                        off += 8
                result = (place, off, tuple(pops), place.module.name, place.function.begin_rva)
        if len(self._fast) > 500_000:
            self._fast.clear()
        self._fast[ip] = result
        return result

    def _caller(self, place: _Place, ip: int, sp: int, regs: Dict[str, int], read_u64, exact: bool, stack_hi: int):
        """(caller ip, caller sp, caller regs, trust, caller ip is exact) or None. `exact`:
        `ip` is where execution stopped, not a return address."""
        recipe = (
            self._recipe(place, ip if exact else ip - 1)
            if (place.function is not None or place.dynamic is not None)
            else None
        )
        if recipe is not None:
            if exact:
                epi = self._epilogue(place, ip, sp, regs, read_u64)
                if epi is not None:
                    return epi
            out = _run(recipe, sp, regs, read_u64)
            if out is not None and (out[0] == 0 or self._in_module.get(out[0]) or self._note_module(out[0])):
                return out[0], out[1], out[2], Trust.UNWIND_INFO, out[3]
        elif place.module is not None:
            # No unwind entry. Follow the code to its RET (hand-written probes such as
            # ___chkstk_ms push and pop around a loop), then the leaf rule.
            path = simulate_to_return(self.read_code, read_u64, ip, sp, regs) if exact else None
            if path is not None:
                ret = read_u64(path.rsp)
                if ret is not None and self._plausible_return(ret) is not None:
                    new = _volatile_cleared(regs, path.restored)
                    return ret, path.rsp + 8, new, Trust.PROLOGUE, False
            if place.image is not None and exact:
                ret = read_u64(sp)
                if ret is not None and self._plausible_return(ret) is Trust.SCAN_VALIDATED:
                    return ret, sp + 8, _volatile_cleared(regs, {}), Trust.PROLOGUE, False
        return self._scan(sp, regs, read_u64, stack_hi)

    def _epilogue(self, place: _Place, ip: int, sp: int, regs, read_u64):
        """Unwind an IP inside an epilogue by emulating the rest of it (the unwind codes
        describe the body, whose frame the epilogue has partly torn down already)."""
        found = self._function_of(place)
        if found is None:
            return None
        image, base, function = found
        begin, end, unwind_rva = function.begin_rva, function.end_rva, function.unwind_rva
        try:
            chain = self._chain(image, base, unwind_rva)
        except (PEError, MemoryNotInDump, struct.error):
            return None
        if ip - base - begin < chain[0].size_of_prolog:
            return None
        frame_register = next((GPR_NAMES[i.frame_register] for i in chain if i.frame_register), None)
        primary = chain[-1].rva
        chained = len(chain) > 1

        def leaves_function(target: int) -> bool:
            """A direct JMP is a tail call when it leaves the function (another part of
            the same function, sharing its primary unwind info, does not count) or
            enters it again at its start (a recursive tail call)."""
            if base + begin <= target < base + end:
                return target == base + begin and not chained
            if image is None:
                return True
            try:
                other = image.lookup_function(target - base)
                if other is None:
                    return True
                other_chain = self._chain(image, base, other.unwind_rva)
            except (PEError, MemoryNotInDump, struct.error):
                return True
            if other_chain[-1].rva != primary:
                return True
            # the same function: only its primary entry's start is a tail call
            return len(other_chain) == 1 and target - base == other.begin_rva

        path = epilogue_path(self.read_code, read_u64, ip, sp, regs, frame_register, leaves_function)
        if path is None:
            return None
        ret = read_u64(path.rsp)
        if ret is None:
            return None
        return ret, path.rsp + 8, _volatile_cleared(regs, path.restored), Trust.UNWIND_INFO, False

    def _plausible_return(self, addr: int) -> Optional[Trust]:
        """'scan_validated' if a CALL ends at addr, 'scan' if addr is in module code but
        the code bytes are not available, None if it cannot be a return address."""
        try:
            return self._returns[addr]
        except KeyError:
            pass
        if len(self._returns) >= RETURN_CACHE_LIMIT:
            self._returns.clear()
        kind = self._returns[addr] = self._classify_return(addr)
        return kind

    def _classify_return(self, addr: int) -> Optional[Trust]:
        module = self.target.module_at(addr)
        if module is None:
            if self._dynamic and self._in_dynamic_table(addr):
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
        before = _code_before(self.read_code, addr)
        if before:
            return Trust.SCAN_VALIDATED if call_ends_at(before, addr, self.bits) else None
        return Trust.SCAN if image is None else None

    def _scan(self, sp: int, regs, read_u64, stack_hi: int):
        """The first word at or above sp that can be a return address (a CALL ends there
        when the code is available; else it points into module code, as the peers take)."""
        addr = sp
        for _ in range(self.scan_words):
            if addr + 8 > stack_hi:
                break
            val = read_u64(addr)
            if val is None:
                break
            kind = self._plausible_return(val) if val > 0x10000 else None
            if kind is not None:
                return val, addr + 8, _volatile_cleared(regs, {}), kind, False
            addr += 8
        return None


def _code_before(read, addr: int) -> bytes:
    """The CALL_LOOKBACK bytes below a candidate return address, or b"" when they are
    not all readable."""
    before = read(addr - CALL_LOOKBACK, CALL_LOOKBACK)
    return before if len(before) == CALL_LOOKBACK else b""


def _ends_before(image: PEImage, name_rva: int, rva: int) -> bool:
    """Does the function at `name_rva` have a .pdata entry that ends at or before `rva`?
    Then `rva` (covered by no entry) is code after it, such as a hand-written
    ___chkstk_ms, and must not borrow its name."""
    try:
        rf = image.lookup_function(name_rva)
    except (PEError, MemoryNotInDump):
        return False
    if rf is None:
        return False
    covering = rf.indirect_from or rf
    return covering.end_rva <= rva


def _volatile_cleared(regs: Dict[str, int], restored: Dict[str, int]) -> Dict[str, int]:
    out = {k: v for k, v in regs.items() if k not in VOLATILE}
    out.update(restored)
    return out


def _compile(chain: Sequence[UnwindInfo], offset: int) -> tuple:
    """Unwind steps for an IP `offset` bytes into the primary function, in the order
    Windows' RtlVirtualUnwind applies them. Operations whose prologue instruction has not
    run yet (code_offset > offset) are skipped in the primary entry; chained entries
    describe a prologue that has fully run.

    The first step fixes the establisher frame that SAVE_NONVOL offsets are taken from,
    once for the whole chain: the frame register minus its offset when the function has
    one and it is set up (always, for a chained entry), else RSP as it is."""
    first = chain[0]
    uses_fp = first.frame_register != 0 and (
        len(chain) > 1 or any(op.op == UWOP_SET_FPREG and op.code_offset <= offset for op in first.ops)
    )
    steps = [(_FRAME, GPR_NAMES[first.frame_register] if uses_fp else None, first.frame_offset)]
    for depth, info in enumerate(chain):
        for op in info.ops:
            if depth == 0 and op.code_offset > offset:
                continue
            if op.op == UWOP_PUSH_NONVOL:
                steps.append((_POP, GPR_NAMES[op.op_info], 0))
            elif op.op in (UWOP_ALLOC_LARGE, UWOP_ALLOC_SMALL):
                steps.append((_ADD, op.operand, 0))
            elif op.op == UWOP_SET_FPREG:
                steps.append((_SETFP, GPR_NAMES[info.frame_register], info.frame_offset))
            elif op.op in (UWOP_SAVE_NONVOL, UWOP_SAVE_NONVOL_FAR):
                steps.append((_LOAD, GPR_NAMES[op.op_info], op.operand))
            elif op.op == UWOP_PUSH_MACHFRAME:
                steps.append((_MACH, 8 if op.op_info else 0, 0))
            # XMM saves and v2 epilog descriptors do not move RSP or restore GPRs.
    return tuple(steps)


def _run(steps: tuple, rsp: int, regs: Dict[str, int], read_u64):
    """Apply compiled steps: (caller ip, caller rsp, caller regs, interrupted) or None.
    `interrupted`: a machine frame gave the caller's IP, which is where an interrupt or
    exception stopped it, not a return address."""
    cur = dict(regs)
    restored = set()
    frame = rsp
    ip = None
    for kind, a, b in steps:
        if kind == _ADD:
            rsp += a
        elif kind == _POP:
            v = read_u64(rsp)
            if v is None:
                return None
            cur[a] = v
            restored.add(a)
            rsp += 8
        elif kind == _FRAME:
            if a is not None:
                base = cur.get(a)
                if base is None:
                    return None
                frame = (base - b) & MAX_ADDRESS
        elif kind == _SETFP:
            base = cur.get(a)
            if base is None:
                return None
            rsp = (base - b) & MAX_ADDRESS
        elif kind == _LOAD:
            v = read_u64(frame + b)
            if v is None:
                return None
            cur[a] = v
            restored.add(a)
        elif kind == _MACH:
            ip = read_u64(rsp + a)
            nsp = read_u64(rsp + a + 24)
            if ip is None or nsp is None:
                return None
            rsp = nsp
    new = {k: v for k, v in cur.items() if k not in VOLATILE or k in restored}
    if ip is not None:
        return ip, rsp, new, True
    ip = read_u64(rsp)
    if ip is None:
        return None
    return ip, rsp + 8, new, False


def walk_thread(
    walker: Walker, thread: Thread, context: Optional[Registers] = None, max_frames: Optional[int] = None
) -> StackWalk:
    ctx = context or thread.context
    if ctx is None:
        return StackWalk(thread.tid, [], StopReason.NO_CONTEXT, ["thread has no register context"])
    lo, hi = thread.stack_start, thread.stack_end
    if not (lo <= ctx.sp < hi) and hi > lo:
        # Exception contexts can sit below the captured range (the writer's own frames
        # were cut); read from SP up to the recorded top.
        lo = min(lo, ctx.sp)
    return walker.walk(thread.tid, ctx, lo, hi, max_frames)
