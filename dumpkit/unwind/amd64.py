"""The x64 step: a frame's caller from Windows x64 unwind data, strategies tried in a
fixed order:

1. PE unwind data (.pdata/.xdata, or the dump's FunctionTable stream for JIT code, with
   indirect entries resolved), as Windows' RtlVirtualUnwind applies it: chained entries,
   machine frames, and an IP inside an epilogue (frame 0, or an IP a machine frame
   restored: other caller frames sit at a call site, never mid-epilogue) emulated to its
   RET;
2. for code with no unwind entry (libgcc's ___chkstk_ms, hand-written code): follow the
   code forward to its RET with capstone, or, where the image says the function has no
   entry, the leaf rule (return address at [rsp]), each checked at the call site;
3. the walker's stack scanning.

The per-function unwind recipe is compiled once; a return address whose recipe is only
pushes and allocations becomes a `FixedFrame` the walk loop follows without calling
back here.
"""

from __future__ import annotations

import struct
import weakref
from typing import Any, Dict, FrozenSet, List, Optional, Protocol, Sequence, Set, Tuple, cast

from dumpkit.pe import MemoryUnwindData, PEError, PEImage, RuntimeFunction, UnwindInfo
from dumpkit.target import GPR_NAMES, MemoryNotInDump, Registers, Thread
from dumpkit.unwind.disasm import epilogue_path, simulate_to_return
from dumpkit.unwind.frames import Trust
from dumpkit.function_tables import DynamicEntry
from dumpkit.unwind.places import Place
from dumpkit.unwind.walk import Caller, FixedFrame, ReadWord, Start, Walker

UWOP_PUSH_NONVOL, UWOP_ALLOC_LARGE, UWOP_ALLOC_SMALL, UWOP_SET_FPREG = 0, 1, 2, 3
UWOP_SAVE_NONVOL, UWOP_SAVE_NONVOL_FAR, UWOP_PUSH_MACHFRAME = 4, 5, 10

VOLATILE = frozenset(("rax", "rcx", "rdx", "r8", "r9", "r10", "r11"))  # a set: asked of every register of every frame
MAX_ADDRESS = (1 << 64) - 1
# A stack range the dump does not give (or gives absurdly) is taken as this much above SP.
ASSUMED_STACK = 0x100000
IMPLAUSIBLE_STACK = 1 << 40
RECIPE_CACHE_LIMIT = 200_000
# The 32 bytes every x64 caller reserves just above a callee's return address for the
# callee's four register arguments (Microsoft's x64 calling convention: "shadow store").
HOME_SPACE = 0x20


# Compiled unwind steps. One tuple per step: (kind, a, b)
_FRAME, _POP, _ADD, _SETFP, _LOAD, _MACH = range(6)
# (the middle field is a register name or a number, by kind: a compact tagged tuple)
RecipeStep = Tuple[int, Any, int]
Recipe = Tuple[RecipeStep, ...]
# What unwinding one frame gives: (caller ip, caller rsp, caller registers, interrupted)
Unwound = Tuple[int, int, Dict[str, int], bool]


class _UnwindReader(Protocol):
    """What the walker asks of unwind data in process memory (pe.MemoryUnwindData,
    which borrows PEImage's parser)."""

    def resolve_indirect(self, rf: RuntimeFunction) -> RuntimeFunction: ...

    def unwind_chain(self, unwind_rva: int) -> List[UnwindInfo]: ...


class Amd64Step:
    """x64 unwinding for one walker's target. Its caches (compiled recipes, resolved
    function-table entries) live as long as the walker."""

    word_size = 8
    # a return address's caller is scanned for at aligned slots only (`caller`: aligned=not exact)
    scans_aligned = True

    def __init__(self, walker: Walker):
        # a proxy: the walker holds its step, and a step holding its walker made a cycle
        # that kept every dump's walks, frames and target alive until a garbage collection
        self.walker = weakref.proxy(walker)
        self.target = walker.target
        self.problems = walker.problems  # the run's: unwind data that cannot be used
        self._recipes: Dict[Tuple[int, int], Optional[Recipe]] = {}
        self._dynamic_readers: Dict[int, _UnwindReader] = {}
        self._dynamic_functions: Dict[DynamicEntry, Optional[RuntimeFunction]] = {}
        # unwind-info addresses of JIT code (FunctionTable entries) the dump holds no memory
        # for, met since the walk loop last took them (`take_unsaved_unwind`)
        self._unsaved_unwind: Set[int] = set()

    def take_unsaved_unwind(self) -> FrozenSet[int]:
        """The JIT unwind data found missing since the last call: each address once, as the
        caches above are why it is met once."""
        found = frozenset(self._unsaved_unwind)
        self._unsaved_unwind.clear()
        return found

    def start(self, thread: Thread, context: Registers) -> Start:
        """RIP, RSP and the general-purpose registers; the thread's stack range, reaching
        down to RSP when an exception context sits below the captured range (the
        writer's own frames were cut), or the memory above RSP when it sits above it."""
        sp = context.sp
        lo, hi = thread.stack_start, thread.stack_end
        problems: List[str] = []
        owner = self._owner_of(thread, sp) if hi > lo and not lo <= sp < hi else None
        if owner is not None and self._raised_on(thread, context):
            # the exception record names this thread, but the exception ran on another
            # thread's stack (a crash reporter's record, seen in Unreal Engine's dumps):
            # its frames are there, bounded as that stack is
            problems.append(
                f"the exception context's SP {sp:#x} lies in thread {owner.tid}'s recorded stack "
                f"{owner.stack_start:#x}-{owner.stack_end:#x}, not in this thread's {lo:#x}-{hi:#x}; walked there"
            )
            lo, hi = owner.stack_start, owner.stack_end
        elif hi > lo and sp >= hi and owner is None:
            # above the recorded stack: the exception was raised on another stack (a crash
            # handler's, a fiber's); walk the memory at SP, as far as the dump holds it
            problems.append(
                f"SP {sp:#x} lies above the thread's recorded stack {lo:#x}-{hi:#x} (the exception ran on "
                "another stack); walking up to 1 MiB above SP"
            )
            lo, hi = sp, sp + ASSUMED_STACK
        elif not (lo <= sp < hi) and hi > lo:
            lo = min(lo, sp)
        if hi <= lo:
            lo, hi = sp, sp + ASSUMED_STACK
            problems.append("stack range unknown; assuming 1 MiB above SP")
        if hi - lo > IMPLAUSIBLE_STACK:
            problems.append(f"stack range {lo:#x}-{hi:#x} is implausible; walking up to 1 MiB above SP")
            lo, hi = sp, sp + ASSUMED_STACK
        if not self.target.read_available(sp, 8):
            problems.append(f"no stack memory at SP {sp:#x} in the dump")
        regs = {k: v for k, v in context.values.items() if k in GPR_NAMES}
        return Start(context.ip, sp, regs, lo, hi, problems)

    def _owner_of(self, thread: Thread, sp: int) -> Optional[Thread]:
        """Another thread whose recorded stack holds SP. A thread's own context there is
        one the dump writer parked (Wine's in-process dumps give the writer's thread the
        crash context): walking it would repeat the other thread's frames, so it is not
        walked there; the exception's context is (`_raised_on`)."""
        return next(
            (t for t in self.target.threads[:4096] if t.tid != thread.tid and t.stack_start <= sp < t.stack_end), None
        )

    def _raised_on(self, thread: Thread, context: Registers) -> bool:
        """Is `context` the exception's, walked for the thread the exception record names?"""
        ex = self.target.exception
        if ex is None or ex.context is None or ex.thread_id != thread.tid:
            return False
        return ex.context.sp == context.sp and ex.context.ip == context.ip

    # -- the fast path ---------------------------------------------------------------------
    def fixed_frame(self, return_address: int) -> Optional[FixedFrame]:
        """A return address whose function's unwind is only pushes and allocations (and
        no frame register) as a FixedFrame; None when the general path is needed."""
        place = self.walker.code.place(return_address, True)
        if place.function is None or place.module is None:
            return None
        recipe = self._recipe(place, return_address - 1)
        if recipe is None or not all(k in (_ADD, _POP) or (k == _FRAME and a is None) for k, a, _ in recipe):
            return None
        offset = 0
        saved = []
        for kind, a, _ in recipe:
            if kind == _ADD:
                offset += a
            elif kind == _POP:
                saved.append((a, offset))
                offset += 8
        return FixedFrame(place, offset, tuple(saved), place.module.name, place.function_start)

    def scans_for_caller(self, place: Place, exact: bool) -> bool:
        """A return address in code without unwind data (no .pdata entry, no FunctionTable
        entry): `caller` goes straight to the scan, as its last branch below shows."""
        return not exact and place.function is None and place.dynamic is None

    # -- the general path ------------------------------------------------------------------
    def caller(
        self,
        place: Place,
        ip: int,
        sp: int,
        regs: Dict[str, int],
        read_word: ReadWord,
        exact: bool,
        stack_hi: int,
        called_from_body: bool = False,
    ) -> Optional[Caller]:
        recipe = (
            self._recipe(place, ip if exact else ip - 1)
            if (place.function is not None or place.dynamic is not None)
            else None
        )
        walker = self.walker
        if recipe is not None:
            if exact:
                epi = self._epilogue(place, ip, sp, regs, read_word)
                if epi is not None:
                    return epi
            out = _run(recipe, sp, regs, read_word)
            if out is not None and (out[0] == 0 or walker.code.code_address(out[0])):
                return Caller(out[0], out[1], out[2], Trust.UNWIND_INFO, out[3])
        elif place.module is not None:
            # No unwind entry. Follow the code to its RET (hand-written probes such as
            # ___chkstk_ms push and pop around a loop), then the leaf rule.
            path = simulate_to_return(walker.code.read_code, read_word, ip, sp, regs) if exact else None
            if path is not None:
                ret = read_word(path.rsp)
                if ret is not None and walker.code.plausible_return(ret) is not None:
                    return Caller(ret, path.rsp + 8, _volatile_cleared(regs, path.restored), Trust.PROLOGUE, False)
            if place.image is not None and exact:
                ret = read_word(sp)
                if ret is not None and walker.code.plausible_return(ret) is Trust.SCAN_VALIDATED:
                    return Caller(ret, sp + 8, _volatile_cleared(regs, {}), Trust.PROLOGUE, False)
        found = walker.scan(sp + scan_skip(place, exact, called_from_body), read_word, stack_hi, 8, aligned=not exact)
        if found is None:
            return None
        at, value, trust = found
        return Caller(value, at + 8, _volatile_cleared(regs, {}), trust, False)

    # -- unwind data ----------------------------------------------------------------------
    def _recipe(self, place: Place, ip: int) -> Optional[Recipe]:
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
        except MemoryNotInDump as e:
            if image is None:
                # JIT code's unwind data lives in process memory the dump writer did not
                # save: a property of the dump (noted once), not damage met reading it.
                self._unsaved_unwind.add(base + unwind_rva)
            else:
                self.problems.add(f"unwind data at {base + unwind_rva:#x} unusable: {e}")
        except (PEError, struct.error) as e:
            self.problems.add(f"unwind data at {base + unwind_rva:#x} unusable: {e}")
        if len(self._recipes) > RECIPE_CACHE_LIMIT:
            self._recipes.clear()
        self._recipes[key] = recipe
        return recipe

    def _function_of(self, place: Place) -> Optional[Tuple[Optional[PEImage], int, RuntimeFunction]]:
        """(image or None, base, RUNTIME_FUNCTION relative to base) covering the place:
        its .pdata entry, else its FunctionTable entry (JIT code, image None), with an
        indirect entry (unwind field bit 0: it points at another RUNTIME_FUNCTION)
        resolved as for .pdata. None when there is neither or it cannot be resolved."""
        if place.function is not None and place.module is not None:
            return place.image, place.module.base, place.function
        if place.dynamic is None:
            return None
        d = place.dynamic
        if d in self._dynamic_functions:
            resolved = self._dynamic_functions[d]
        else:
            base = d[3]
            resolved = RuntimeFunction(d[0] - base, d[1] - base, d[2] - base)
            if resolved.unwind_rva & 1:
                try:
                    resolved = self._dynamic_reader(base).resolve_indirect(resolved)
                except MemoryNotInDump:
                    self._unsaved_unwind.add(d[2])
                    resolved = None
                except (PEError, struct.error) as e:
                    self.problems.add(f"function table entry at {d[0]:#x} unusable: {e}")
                    resolved = None
            self._dynamic_functions[d] = resolved
        return None if resolved is None else (None, d[3], resolved)

    def _dynamic_reader(self, base: int) -> _UnwindReader:
        mem = self._dynamic_readers.get(base)
        if mem is None:
            mem = self._dynamic_readers[base] = cast(_UnwindReader, MemoryUnwindData(self.target.read, base))
        return mem

    def _chain(self, image: Optional[PEImage], base: int, unwind_rva: int) -> List[UnwindInfo]:
        if image is not None:
            return image.unwind_chain(unwind_rva)
        # Dynamic function table (JIT code): the unwind info lives in process memory.
        return self._dynamic_reader(base).unwind_chain(unwind_rva)

    def _epilogue(self, place: Place, ip: int, sp: int, regs: Dict[str, int], read_word: ReadWord) -> Optional[Caller]:
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

        path = epilogue_path(self.walker.code.read_code, read_word, ip, sp, regs, frame_register, leaves_function)
        if path is None:
            return None
        ret = read_word(path.rsp)
        if ret is None:
            return None
        return Caller(ret, path.rsp + 8, _volatile_cleared(regs, path.restored), Trust.UNWIND_INFO, False)


def scan_skip(place: Place, exact: bool, called_from_body: bool) -> int:
    """Bytes above SP a scan for this frame's return address passes over: the home space
    (HOME_SPACE) the function allocated for the callee below it, which that callee may
    have filled with its register arguments (pointers into modules among them), and
    which never holds the function's own return address. Only for a frame known to have
    called from its body (see `Step.caller`), never for frame 0 (`exact`), and not for
    JIT code (no module), which keeps no calling convention we can count on. A frame that
    was itself only scanned may be a stale word, whose "home space" would hide the real
    return address: no skip after one."""
    return HOME_SPACE if called_from_body and not exact and place.module is not None else 0


def _volatile_cleared(regs: Dict[str, int], restored: Dict[str, int]) -> Dict[str, int]:
    # past the first scanned frame the registers hold no volatile one: a copy in C will do
    out = {k: v for k, v in regs.items() if k not in VOLATILE} if not VOLATILE.isdisjoint(regs) else dict(regs)
    out.update(restored)
    return out


def _compile(chain: Sequence[UnwindInfo], offset: int) -> Recipe:
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
    steps: List[RecipeStep] = [(_FRAME, GPR_NAMES[first.frame_register] if uses_fp else None, first.frame_offset)]
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


def _run(steps: Recipe, rsp: int, regs: Dict[str, int], read_u64: ReadWord) -> Optional[Unwound]:
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
