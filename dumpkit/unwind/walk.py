"""The one walk loop, and the services every CPU's step uses.

`Walker` walks the threads of one target with the step of its CPU (`unwind/amd64.py`,
`unwind/x86.py`; `unwind/cpus.py` says which is which). The loop here owns what does not
depend on the CPU:

- bounds: a frame limit, the caller's SP strictly above the callee's and inside the
  stack; the stack's bytes copied a window (MAX_STACK_BYTES) at a time for fast reads;
- places: module, RVA, unwind entry, function (a chained fragment's is its primary
  entry's) and name of each address (cached);
- call-site validation (`plausible_return`: does a CALL end at this address?) and stack
  scanning built on it, which steps fall back to;
- fixed frames: a caller frame whose return address and saved registers sit at fixed
  offsets from SP (most compiled code) is taken from a cached `FixedFrame` in the loop
  itself, with no call into the step; a million identical recursive frames then cost a
  dictionary lookup and a few reads each;
- the stop reasons;
- other threads as evidence: a walk with scanned frames is checked against the walks of
  the process's other threads (`unwind/evidence.py`), which can prove a scanned frame
  stale.

A step answers, for one frame, where its caller is (`Step.caller`), and may describe a
return address's frame as a `FixedFrame`. Iterative throughout: nothing here recurses on
the stack's depth.
"""

from __future__ import annotations

import bisect
import struct
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Protocol, Sequence, Set, Tuple

from dumpkit.limits import MAX_FRAMES
from dumpkit.images import ImageProvider
from dumpkit.pe import PEError
from dumpkit.target import MemoryNotInDump, Registers, Target, Thread
from dumpkit.unwind import bulk
from dumpkit.unwind.confirm import confirmed
from dumpkit.unwind.disasm import CALL_LOOKBACK, call_ends_at
from dumpkit.unwind.evidence import Witnessed, checked, witness
from dumpkit.unwind.frames import SCANNED, Frame, StackWalk, StopReason, Trust
from dumpkit.unwind.places import DynamicEntry, Place, symbol_for

DEFAULT_MAX_FRAMES = MAX_FRAMES
# How far (in stack words) to scan for a caller: 64 KiB. Breakpad and rust-minidump use 40
# words, which cuts walks short at the first large frame; a crash handler's text buffers
# make frames of 36 KiB (Unreal Engine's ensure handler). What a long scan finds is
# confirmed or not like any scanned frame (unwind/confirm.py): unconfirmed, it is shown as
# a possible frame, not as the stack. A scan never reads past the stack's top, and the
# walk ends at the first one that finds nothing, so the cost stays linear in the stack.
DEFAULT_SCAN_WORDS = 8192
# Stack bytes copied at a time for fast reads: a window from SP, moved on when the walk
# reads past it (a thread record can claim a 4 GiB stack, and a full-memory dump can back
# much of it; an 88 MiB recursion read word by word past a single copy took seconds).
MAX_STACK_BYTES = 16 << 20
# Scanning asks about the same stack words again and again (every thread of a process
# shares the same return sites); caches are bounded so a hostile dump cannot grow them.
RETURN_CACHE_LIMIT = 1 << 18
CODE_CACHE_LIMIT = 500_000
FIXED_CACHE_LIMIT = 500_000
# Other threads walked as evidence against a walk's scanned frames: at most this many
# threads, each for at most this many frames (their outermost frames matter most; a
# thread cut by the limit still shows its frames' sizes).
EVIDENCE_THREADS = 64
EVIDENCE_FRAMES = 4096
# Below this, a stack word is a small number, not a return address.
MIN_CODE_ADDRESS = 0x10000

_MISSING: Any = object()

ReadWord = Callable[[int], Optional[int]]  # a stack word at an address, None when unreadable


class Start(NamedTuple):
    """Where a thread's walk begins, as its CPU's step reads the context."""

    ip: int
    sp: int
    regs: Dict[str, int]  # the registers the step tracks, by lowercase name
    stack_lo: int
    stack_hi: int
    problems: List[str]


class Caller(NamedTuple):
    """The caller a step found for a frame."""

    ip: int
    sp: int
    regs: Dict[str, int]
    trust: Trust
    exact: bool  # ip is where execution stopped (a machine frame saved it), not a return address


class FixedFrame(NamedTuple):
    """A return address's frame whose caller needs nothing but fixed offsets from SP:
    the return address at sp + return_offset, each saved register at sp + offset."""

    place: Place
    return_offset: int
    saved: Tuple[Tuple[str, int], ...]
    module: str
    function_start: Optional[int]


class Step(Protocol):
    """One CPU's unwinding rules."""

    word_size: int  # bytes in a stack word (a return address, a push)

    def start(self, thread: Thread, context: Registers) -> Start:
        """The first frame's registers and the stack range to walk in."""
        ...

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
        """The caller of the frame at (ip, sp), or None. `exact`: ip is where execution
        stopped (frame 0, or a machine frame's IP), not a return address.
        `called_from_body`: this frame was found by more than a scan and the frame below it
        was not exact, so its call came from its body, after its prologue had allocated
        the callee's home space (a call from the prologue, as to __chkstk, comes before)."""
        ...

    def fixed_frame(self, return_address: int) -> Optional[FixedFrame]:
        """The frame of `return_address` as a FixedFrame, or None when the general path
        (`caller`) is needed."""
        ...

    def scans_for_caller(self, place: Place, exact: bool) -> bool:
        """Whether `caller` finds the caller of a frame at this place by `Walker.scan` from
        its SP alone, clearing the volatile registers and nothing else: then a recursion
        through it repeats the same steps and can be verified in bulk."""
        ...


StepFactory = Callable[["Walker"], Step]
_FixedTuple = Tuple[Place, int, Tuple[Tuple[str, int], ...], str, Optional[int]]  # a FixedFrame's fields


class Walker:
    """Walks threads of one target. Keep one per target: its caches are the speed.

    `step` builds the CPU's step from this walker (see `unwind/cpus.py`); without one
    the walker still serves places, code bytes and call-site checks, but walks nothing."""

    def __init__(
        self,
        target: Target,
        images: ImageProvider,
        step: Optional[StepFactory] = None,
        max_frames: int = DEFAULT_MAX_FRAMES,
        scan_words: int = DEFAULT_SCAN_WORDS,
        cross_check: bool = True,
        use_bulk: bool = True,
    ):
        self.target = target
        # Recursions verified in bulk (unwind/bulk.py); off, every frame is stepped (the
        # reference the bulk path is tested against).
        self.use_bulk = use_bulk
        self.images = images
        self.max_frames = max_frames
        self.scan_words = scan_words
        self.cross_check = cross_check  # check scanned frames against other threads' walks
        self._witnessed: Optional[Witnessed] = None
        self._places: Dict[Tuple[int, bool], Place] = {}
        self._fixed: Dict[int, Optional[_FixedTuple]] = {}
        self._code: Dict[int, int] = {}  # address -> itself (interned) when plausible code, else 0
        self._returns: Dict[int, Optional[Trust]] = {}
        self._code_ranges: Optional[List[Tuple[int, int]]] = None  # modules' and JIT code's [start, end)
        self.dynamic: List[DynamicEntry] = sorted(target.function_table_entries() or [])
        self._dynamic_starts = [d[0] for d in self.dynamic]
        # unwind-info addresses of JIT code (FunctionTable entries) the dump holds no memory for
        self.unsaved_jit_unwind: Set[int] = set()
        self.step: Optional[Step] = step(self) if step is not None else None
        # Call sites are decoded in the CPU's mode (0x40-0x4F are not REX in 32-bit code).
        self.bits = self.step.word_size * 8 if self.step is not None else 64

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
        if function is None and self.dynamic:
            dynamic = self.dynamic_entry(code_ip)
        named = self.target.symbol_at(ip)  # a debugger's own symbols come first (!tfstack)
        pdb = self.images.pdb_function(module, code_ip - module.base) if module is not None and not named else None
        symbol = symbol_for(named, module, rva, image, function, primary, pdb)
        line = self.images.pdb_line(module, code_ip - module.base) if module is not None and pdb is not None else None
        source = f"{line.file}:{line.line}" if line is not None else None
        return Place(module, rva, image, function, dynamic, symbol, primary, source)

    def dynamic_entry(self, ip: int) -> Optional[DynamicEntry]:
        """The FunctionTable stream entry (registered JIT code) covering ip, if any."""
        i = bisect.bisect_right(self._dynamic_starts, ip) - 1
        if i >= 0 and self.dynamic[i][0] <= ip < self.dynamic[i][1]:
            return self.dynamic[i]
        return None

    def code_address(self, ip: int) -> int:
        """Is ip plausible code: inside a module or a registered (JIT) function table?
        Answers with the first int object seen for this address (truthy) or 0: a deep
        recursion returns to the same address a million times, and the frames then share
        one int instead of holding a million copies."""
        known = self._code.get(ip)
        if known is not None:
            return known
        ok = self.target.module_at(ip) is not None or (bool(self.dynamic) and self.dynamic_entry(ip) is not None)
        if len(self._code) > CODE_CACHE_LIMIT:
            self._code.clear()
        self._code[ip] = ip if ok else 0
        return self._code[ip]

    # -- call sites and scanning ----------------------------------------------------------
    def plausible_return(self, address: int) -> Optional[Trust]:
        """SCAN_VALIDATED if a CALL ends at `address`, SCAN if it is in module code whose
        bytes are not available, None if it cannot be a return address."""
        try:
            return self._returns[address]
        except KeyError:
            pass
        if len(self._returns) >= RETURN_CACHE_LIMIT:
            self._returns.clear()
        kind = self._returns[address] = self._classify_return(address)
        return kind

    def _classify_return(self, addr: int) -> Optional[Trust]:
        module = self.target.module_at(addr)
        if module is None:
            if self.dynamic and self.dynamic_entry(addr) is not None:
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

    def _maybe_return(self, value: int) -> bool:
        """Would `scan` stop at a stack word holding `value`?"""
        return value > MIN_CODE_ADDRESS and self.plausible_return(value) is not None

    def _no_code_in(self, lo: int, hi: int) -> bool:
        """No stack word with a value in [lo, hi] can be a return address: the range holds
        no module and no registered JIT code above MIN_CODE_ADDRESS."""
        lo = max(lo, MIN_CODE_ADDRESS + 1)
        if hi < lo:
            return True
        if self._code_ranges is None:
            ranges = [(m.base, m.base + m.size) for m in self.target.modules]
            ranges += [(d[0], d[1]) for d in self.dynamic]
            self._code_ranges = ranges
        return not any(start <= hi and lo < end for start, end in self._code_ranges)

    def scan(
        self, sp: int, read_word: ReadWord, stack_hi: int, word_size: int, aligned: bool = False
    ) -> Optional[Tuple[int, int, Trust]]:
        """(address, value, trust) of the first word at or above sp that can be a return
        address (a CALL ends there when the code is available; else it points into module
        code, as the peers take), looking at most `scan_words` words.

        `aligned`: a return address into a module sits 8 bytes above a 16-byte boundary
        (the x64 calling convention: RSP is 16-byte aligned at every call compiled code
        makes outside its prologue), so module addresses in other words are passed over.
        JIT code keeps no such promise and is taken anywhere."""
        addr = sp
        module_at = self.target.module_at
        for _ in range(self.scan_words):
            if addr + word_size > stack_hi:
                break
            val = read_word(addr)
            if val is None:
                break
            kind = self.plausible_return(val) if val > MIN_CODE_ADDRESS else None
            if kind is not None and not (aligned and addr & 15 != 8 and module_at(val) is not None):
                return addr, val, kind
            addr += word_size
        return None

    # -- walking --------------------------------------------------------------------------
    def _fixed_frame(self, step: Step, ip: int) -> Optional[_FixedTuple]:
        """The step's FixedFrame for ip, cached as a plain tuple: the loop unpacks one per
        frame, and unpacking a NamedTuple (a tuple subclass) takes CPython's slow path."""
        fixed = step.fixed_frame(ip)
        plain: Optional[_FixedTuple] = None
        if fixed is not None:
            plain = (fixed.place, fixed.return_offset, fixed.saved, fixed.module, fixed.function_start)
        if len(self._fixed) > FIXED_CACHE_LIMIT:
            self._fixed.clear()
        self._fixed[ip] = plain
        return plain

    def walk(self, thread: Thread, context: Optional[Registers] = None, max_frames: Optional[int] = None) -> StackWalk:
        """Walk `thread` from `context` (default: its own) for at most `max_frames`
        frames (default: the walker's limit). Scanned frames that the other threads'
        walks prove stale are left out (`unwind/evidence.py`)."""
        result, scanned = self._walk(thread, context, max_frames)
        if scanned and self.cross_check:
            result = checked(result, thread.tid, thread.stack_end, self.witnessed())
        if scanned:
            result = confirmed(result, self.read_code, self.bits)
        return result

    def witnessed(self) -> Witnessed:
        """What the walks of the target's threads (from their own contexts, bounded by
        EVIDENCE_THREADS and EVIDENCE_FRAMES) show, made once per walker."""
        if self._witnessed is None:
            walks = []
            for t in self.target.threads[:EVIDENCE_THREADS]:
                if t.context is not None:
                    walks.append((t.tid, t.stack_end, self._walk(t, None, EVIDENCE_FRAMES)[0]))
            self._witnessed = witness(walks)
        return self._witnessed

    def _walk(self, thread: Thread, context: Optional[Registers], max_frames: Optional[int]) -> Tuple[StackWalk, bool]:
        """One thread's walk as its step and scanning find it, and whether a caller was
        found by scanning (noted as found: a pass over a million frames to ask would cost
        more than the check)."""
        ctx = context or thread.context
        if ctx is None:
            return StackWalk(thread.tid, [], StopReason.NO_CONTEXT, ["thread has no register context"]), False
        step = self.step
        if step is None:
            raise ValueError("this walker has no step for the target's CPU")
        limit = self.max_frames if max_frames is None else max_frames
        ip, sp, regs, stack_lo, stack_hi, problems = step.start(thread, ctx)
        word = step.word_size
        word_format = "<Q" if word == 8 else "<I"
        window_lo = max(stack_lo, min(sp, stack_hi) & -word)
        stack = self.target.read_available(window_lo, min(stack_hi - window_lo, MAX_STACK_BYTES))
        s_lo, s_hi = window_lo, window_lo + len(stack)
        unpack = struct.unpack_from
        target = self.target
        # the window as 64-bit words, for verifying recursions in bulk
        words = memoryview(stack)[: len(stack) & -8].cast("Q") if self.use_bulk and word == 8 else None

        def read_word(addr: int) -> Optional[int]:
            nonlocal stack, s_lo, s_hi, words
            if s_lo <= addr and addr + word <= s_hi:
                return unpack(word_format, stack, addr - s_lo)[0]
            if s_hi <= addr < stack_hi:
                # past the copied window, still in the stack: the next window (forward only)
                lo = addr & -word
                stack = target.read_available(lo, min(stack_hi - lo, MAX_STACK_BYTES))
                s_lo, s_hi = lo, lo + len(stack)
                words = memoryview(stack)[: len(stack) & -8].cast("Q") if words is not None else None
                if s_lo <= addr and addr + word <= s_hi:
                    return unpack(word_format, stack, addr - s_lo)[0]
            try:
                return unpack(word_format, target.read(addr, word))[0]
            except MemoryNotInDump:
                return None

        frames: List[Frame] = []
        append = frames.append
        # Verified recursion runs (unwind/bulk.py) end the explicit list before them:
        # `parts` holds the lists and runs so far, `done` their frame count.
        parts: List[bulk.Part] = []
        done = 0
        streak = 0  # fast frames in a row at the end of `frames`
        scan_streak = 0  # frames in a row whose caller was found by scanning alone
        fixed_frames = self._fixed
        code = self._code
        places = self._places
        trust = Trust.CONTEXT
        unwind_info = Trust.UNWIND_INFO
        stop = StopReason.END_OF_STACK
        scanned = False
        # `exact`: ip is where execution stopped (frame 0, or the interrupted IP a machine
        # frame saved), not a return address: look it up as is, and it may be mid-epilogue.
        exact = True
        callee_exact = False  # whether the frame below the current one was exact
        while True:
            n = done + len(frames)
            if n >= limit:
                stop = StopReason.FRAME_LIMIT
                break
            if not exact:
                # Fast path: a caller frame whose unwind is fixed offsets from SP (most
                # compiled code): one cached tuple, a few reads.
                fast = fixed_frames.get(ip, _MISSING)
                if fast is _MISSING:
                    fast = self._fixed_frame(step, ip)
                if fast is not None:
                    place, delta, saved, modname, fstart = fast
                    ra = sp + delta
                    if s_lo <= ra and ra + word <= s_hi:
                        cip = unpack(word_format, stack, ra - s_lo)[0]
                    else:
                        cip = read_word(ra)
                    known = code.get(cip) if cip else None
                    if known is None and cip:
                        known = self.code_address(cip)
                    if cip is not None and (cip == 0 or known):
                        if known:
                            cip = known  # the shared int object (see code_address)
                        frame = Frame(n, ip, sp, modname, place.rva, fstart, place.symbol, None, trust, place.source)
                        append(frame)
                        for reg, off in saved:
                            v = read_word(sp + off)
                            if v is not None:
                                regs[reg] = v
                        if cip == 0:
                            stop = StopReason.RETURN_ADDRESS_ZERO
                            break
                        csp = ra + word
                        if csp > stack_hi + word:
                            stop = StopReason.END_OF_STACK
                            break
                        frame.size = csp - sp
                        streak = streak + 1 if trust is unwind_info else 0
                        ip, sp, trust = cip, csp, unwind_info
                        callee_exact = False
                        if words is not None and streak >= bulk.MIN_RUN:
                            streak = 0
                            found = bulk.follow(
                                frames,
                                ip,
                                sp,
                                self._cached_fixed,
                                words,
                                s_lo,
                                min(s_hi, stack_hi + word),
                                limit - n - 1,
                                n + 1,
                            )
                            if found is not None:
                                run, last = found
                                parts += [frames, run]
                                frames = []
                                append = frames.append
                                done = run.first + len(run)
                                for at, saved_regs in last:
                                    for reg, off in saved_regs:
                                        v = read_word(at + off)
                                        if v is not None:
                                            regs[reg] = v
                                sp = run.sp + run.repetitions * run.span
                        continue
            streak = 0
            place = places.get((ip, not exact)) or self.place(ip, not exact)
            mod = place.module
            frame = Frame(
                n,
                ip,
                sp,
                mod.name if mod else None,
                place.rva,
                place.function_start,
                place.symbol,
                None,
                trust,
                place.source,
            )
            append(frame)
            nxt = step.caller(
                place, ip, sp, regs, read_word, exact, stack_hi, not callee_exact and trust not in SCANNED
            )
            if nxt is None:
                stop = StopReason.NO_CALLER
                break
            callee_exact = exact
            cip, csp, cregs, ctrust, exact = nxt
            if ctrust in SCANNED:
                scanned = True
            if cip == 0:
                stop = StopReason.RETURN_ADDRESS_ZERO
                break
            if csp <= sp:
                problems.append(f"frame {n}: caller SP {csp:#x} not above {sp:#x}; stopped")
                stop = StopReason.SP_NOT_INCREASING
                break
            if csp > stack_hi + word:
                stop = StopReason.END_OF_STACK
                break
            frame.size = csp - sp
            scan_streak = scan_streak + 1 if ctrust in SCANNED and step.scans_for_caller(place, exact) else 0
            ip, sp, regs, trust = cip, csp, dict(cregs), ctrust
            if words is not None and scan_streak >= bulk.MIN_RUN:
                # a recursion through code without unwind data, each caller found by
                # scanning: verified in bulk as fixed frames are (unwind/bulk.py)
                scan_streak = 0
                scanned_run = bulk.follow_scanned(
                    frames,
                    ip,
                    sp,
                    words,
                    s_lo,
                    min(s_hi, stack_hi),
                    limit - n - 1,
                    n + 1,
                    self._maybe_return,
                    self._no_code_in,
                    aligned=word == 8 and not self.dynamic,
                )
                if scanned_run is not None:
                    parts += [frames, scanned_run]
                    frames = []
                    append = frames.append
                    done = scanned_run.first + len(scanned_run)
                    sp = scanned_run.sp + scanned_run.repetitions * scanned_run.span
        walked: Sequence[Frame] = bulk.Frames(parts + [frames]) if parts else frames
        return StackWalk(thread.tid, walked, stop, problems, limit if stop is StopReason.FRAME_LIMIT else None), scanned

    def _cached_fixed(self, ip: int) -> Optional[_FixedTuple]:
        found = self._fixed.get(ip, _MISSING)
        return self._fixed_frame(self.step, ip) if found is _MISSING and self.step is not None else found


def walk_thread(
    walker: Walker, thread: Thread, context: Optional[Registers] = None, max_frames: Optional[int] = None
) -> StackWalk:
    """Walk `thread` with `walker` (see `Walker.walk`)."""
    return walker.walk(thread, context, max_frames)


def _code_before(read: Callable[[int, int], bytes], addr: int) -> bytes:
    """The CALL_LOOKBACK bytes below a candidate return address, or b"" when they are
    not all readable."""
    before = read(addr - CALL_LOOKBACK, CALL_LOOKBACK)
    return before if len(before) == CALL_LOOKBACK else b""
