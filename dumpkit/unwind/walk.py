"""The one walk loop.

`Walker` walks the threads of one target with the step of its CPU (`unwind/amd64.py`,
`unwind/x86.py`; `unwind/cpus.py` says which is which). What the code is (places, code
bytes, call-site checks) is its CodeMap (`unwind/codemap.py`), shared with the analyses.
The loop here owns what does not depend on the CPU:

- bounds: a frame limit, the caller's SP strictly above the callee's and inside the
  stack; the stack's bytes copied a window (MAX_STACK_BYTES) at a time for fast reads;
- stack scanning, built on the CodeMap's call-site checks, which steps fall back to;
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

import struct
from dataclasses import replace
from typing import Any, Callable, Dict, FrozenSet, List, NamedTuple, Optional, Protocol, Tuple

from dumpkit.limits import MAX_FRAMES
from dumpkit.images import ImageProvider
from dumpkit.target import MemoryNotInDump, Registers, SoftErrors, Target, Thread
from dumpkit.unwind import bulk
from dumpkit.unwind.codemap import MIN_CODE_ADDRESS, CodeMap
from dumpkit.unwind.confirm import confirmed
from dumpkit.unwind.evidence import Witnessed, checked, witness
from dumpkit.unwind.frames import SCANNED, Frame, StackWalk, StopReason, Trust
from dumpkit.unwind.refute import refuted, stack_word_reader
from dumpkit.unwind.places import Place

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
# Fixed frames are cached per return address; bounded so a hostile dump cannot grow them.
FIXED_CACHE_LIMIT = 500_000
# Other threads walked as evidence against a walk's scanned frames: at most this many
# threads, each for at most this many frames (their outermost frames matter most; a
# thread cut by the limit still shows its frames' sizes).
EVIDENCE_THREADS = 64
EVIDENCE_FRAMES = 4096

_MISSING: Any = object()
_unpack = struct.unpack_from

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

    def take_unsaved_unwind(self) -> FrozenSet[int]:
        """What the step found since the walk loop last asked: the unwind-info addresses of
        JIT code whose unwind data the dump did not save. The loop puts them in the walk's
        result (`StackWalk.unsaved_jit_unwind`)."""
        ...


class StackWindow:
    """A thread's stack as the walk reads it: `data`, the bytes from `lo` to `hi` copied
    at once (at most MAX_STACK_BYTES from SP, never past the stack's end `stack_hi`), and
    `words`, the same as 64-bit words when the walk verifies recursions in bulk (else
    None; unwind/bulk.py reads them). `read` gives a stack word; one past the window, still
    in the stack, moves the window there (forward only: the walk goes up the stack)."""

    __slots__ = ("target", "stack_hi", "word", "format", "data", "lo", "hi", "words", "_as_words")

    def __init__(self, target: Target, sp: int, stack_lo: int, stack_hi: int, word: int, as_words: bool):
        self.target = target
        self.stack_hi = stack_hi
        self.word = word
        self.format = "<Q" if word == 8 else "<I"
        self._as_words = as_words
        self._copy(max(stack_lo, min(sp, stack_hi) & -word))

    def _copy(self, lo: int) -> None:
        data = self.target.read_available(lo, min(self.stack_hi - lo, MAX_STACK_BYTES))
        self.data, self.lo, self.hi = data, lo, lo + len(data)
        self.words: Optional[memoryview] = memoryview(data)[: len(data) & -8].cast("Q") if self._as_words else None

    def read(self, addr: int) -> Optional[int]:
        """The stack word at `addr` (a `ReadWord`), None when the dump does not hold it."""
        if self.lo <= addr and addr + self.word <= self.hi:
            return _unpack(self.format, self.data, addr - self.lo)[0]
        if self.hi <= addr < self.stack_hi:
            self._copy(addr & -self.word)
            if self.lo <= addr and addr + self.word <= self.hi:
                return _unpack(self.format, self.data, addr - self.lo)[0]
        try:
            return _unpack(self.format, self.target.read(addr, self.word))[0]
        except MemoryNotInDump:
            return None


StepFactory = Callable[["Walker"], Step]
_FixedTuple = Tuple[Place, int, Tuple[Tuple[str, int], ...], str, Optional[int]]  # a FixedFrame's fields


class Walker:
    """Walks threads of one target. Keep one per target: its caches are the speed.

    What the code is (places, code bytes, call-site checks) is the walker's `code`, a
    CodeMap the analyses share; the walker itself only walks. `step` builds the CPU's step
    from this walker (see `unwind/cpus.py`); without one nothing is walked. `problems`: the
    run's collector, where the step adds unwind data it cannot use (a tool or test walking
    alone: the target's)."""

    def __init__(
        self,
        target: Target,
        images: ImageProvider,
        step: Optional[StepFactory] = None,
        max_frames: int = DEFAULT_MAX_FRAMES,
        scan_words: int = DEFAULT_SCAN_WORDS,
        cross_check: bool = True,
        use_bulk: bool = True,
        problems: Optional[SoftErrors] = None,
    ):
        self.target = target
        self.problems = problems if problems is not None else target.soft_errors
        self.code = CodeMap(target, images)
        # Recursions verified in bulk (unwind/bulk.py); off, every frame is stepped (the
        # reference the bulk path is tested against).
        self.use_bulk = use_bulk
        self.max_frames = max_frames
        self.scan_words = scan_words
        self.cross_check = cross_check  # check scanned frames against other threads' walks
        self._witnessed: Optional[Witnessed] = None
        self._fixed: Dict[int, Optional[_FixedTuple]] = {}
        self.step: Optional[Step] = step(self) if step is not None else None
        # Call sites are decoded in the CPU's mode (0x40-0x4F are not REX in 32-bit code).
        self.code.bits = self.step.word_size * 8 if self.step is not None else 64

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
        plausible = self.code.plausible_return
        for _ in range(self.scan_words):
            if addr + word_size > stack_hi:
                break
            val = read_word(addr)
            if val is None:
                break
            kind = plausible(val) if val > MIN_CODE_ADDRESS else None
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
        walks prove stale are left out (`unwind/evidence.py`). What the step found on the way
        (and on the other threads' walks made to check this one) is in the result."""
        result, scanned = self._walk(thread, context, max_frames)
        if scanned and self.code.bits == 64:
            read_word = stack_word_reader(self.target.read_available)
            result = refuted(result, self.code.frame_end, read_word, self.code.maybe_return)
        if scanned and self.cross_check:
            result = checked(result, thread.tid, thread.stack_end, self.witnessed())
        if scanned:
            result = confirmed(result, self.code.read_code, self.code.bits)
        unsaved = self.step.take_unsaved_unwind() if self.step is not None else frozenset()
        return replace(result, unsaved_jit_unwind=unsaved) if unsaved else result

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
        # the window as 64-bit words too, for verifying recursions in bulk
        window = StackWindow(self.target, sp, stack_lo, stack_hi, word, self.use_bulk and word == 8)
        read_word = window.read
        unpack = _unpack
        in_bulk = window.words is not None
        # frames and verified recursion runs (unwind/bulk.py) so far
        walked = bulk.Walked()
        frames = walked.frames
        append = frames.append
        streak = 0  # fast frames in a row at the end of `frames`
        scan_streak = 0  # frames in a row whose caller was found by scanning alone
        fixed_frames = self._fixed
        code_map = self.code
        code = code_map._code
        places = code_map._places
        trust = Trust.CONTEXT
        unwind_info = Trust.UNWIND_INFO
        stop = StopReason.END_OF_STACK
        scanned = False
        # `exact`: ip is where execution stopped (frame 0, or the interrupted IP a machine
        # frame saved), not a return address: look it up as is, and it may be mid-epilogue.
        exact = True
        callee_exact = False  # whether the frame below the current one was exact
        while True:
            n = walked.before + len(frames)
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
                    if window.lo <= ra and ra + word <= window.hi:
                        cip = unpack(word_format, window.data, ra - window.lo)[0]
                    else:
                        cip = read_word(ra)
                    known = code.get(cip) if cip else None
                    if known is None and cip:
                        known = code_map.code_address(cip)
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
                        if in_bulk and streak >= bulk.MIN_RUN:
                            streak = 0
                            found = bulk.follow(walked, ip, sp, self._cached_fixed, window, limit)
                            if found is not None:
                                run, last = found
                                walked.splice(run)
                                for at, saved_regs in last:
                                    for reg, off in saved_regs:
                                        v = read_word(at + off)
                                        if v is not None:
                                            regs[reg] = v
                                sp = run.end
                        continue
            streak = 0
            place = places.get((ip, not exact)) or code_map.place(ip, not exact)
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
            if in_bulk and scan_streak >= bulk.MIN_RUN:
                # a recursion through code without unwind data, each caller found by
                # scanning: verified in bulk as fixed frames are (unwind/bulk.py)
                scan_streak = 0
                scanned_run = bulk.follow_scanned(
                    walked,
                    ip,
                    sp,
                    window,
                    limit,
                    code_map.maybe_return,
                    code_map.no_code_in,
                    aligned=not code_map.dynamic,
                )
                if scanned_run is not None:
                    walked.splice(scanned_run)
                    sp = scanned_run.end
        stopped_at = limit if stop is StopReason.FRAME_LIMIT else None
        return StackWalk(thread.tid, walked.walk(), stop, problems, stopped_at), scanned

    def _cached_fixed(self, ip: int) -> Optional[_FixedTuple]:
        found = self._fixed.get(ip, _MISSING)
        return self._fixed_frame(self.step, ip) if found is _MISSING and self.step is not None else found


def walk_thread(
    walker: Walker, thread: Thread, context: Optional[Registers] = None, max_frames: Optional[int] = None
) -> StackWalk:
    """Walk `thread` with `walker` (see `Walker.walk`)."""
    return walker.walk(thread, context, max_frames)
