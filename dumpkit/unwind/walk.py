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
  itself, with no call into the step: a dictionary lookup and a few reads a frame, and a
  recursion of them is verified in bulk (below);
- the stop reasons;
- other threads as evidence: a walk with scanned frames is checked against the walks of
  the process's other threads (`unwind/evidence.py`), which can prove a scanned frame
  stale. Each thread is walked from its own registers once: the walk serves as evidence
  and as that thread's stack (`unwind/loopwalks.py`).

A step answers, for one frame, where its caller is (`Step.caller`), and may describe a
return address's frame as a `FixedFrame`. Iterative throughout: nothing here recurses on
the stack's depth.

The loop (`Walker._walk`) keeps a walk's state in a `_Walk` and takes frames three ways:
`_fixed_frames` follows cached FixedFrames for as long as they come, `_scanned_frames`
follows the scans through code without unwind data (most frames of a dump walked without
its images), and `_step_frame` asks the step for one frame's caller and checks it. After
`bulk.MIN_RUN` frames in a row found by unwind data or by scanning alone, `_splice_fixed`
or `_splice_scanned` hands the rest of a recursion to unwind/bulk.py, which verifies it
against the `StackWindow`'s words; the run it gives back is spliced into the frames
walked so far (`bulk.Walked`) and the walk goes on after it.
"""

from __future__ import annotations

import struct
from typing import Any, Callable, Dict, FrozenSet, List, NamedTuple, Optional, Protocol, Tuple

from dumpkit.limits import MAX_FRAMES
from dumpkit.images import ImageProvider
from dumpkit.problems import Problems
from dumpkit.records import replace
from dumpkit.target import MemoryNotInDump, Registers, Target, Thread
from dumpkit.unwind import bulk
from dumpkit.unwind.codemap import MIN_CODE_ADDRESS, CodeMap
from dumpkit.unwind.confirm import confirmed
from dumpkit.unwind.evidence import MIN_WITNESSES, Witnessed, checked, witness
from dumpkit.unwind.frames import SCANNED, Frame, StackWalk, StopReason, Trust
from dumpkit.unwind.loopwalks import KeptWalks, LoopWalk
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
    # Whether the scan `caller` makes for a frame at a return address takes module
    # addresses only at aligned slots (`Walker.scan`'s `aligned`).
    scans_aligned: bool

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
        its SP alone (once the frame was itself found by scanning: no home space is
        skipped then), clearing the volatile registers and nothing else: then a recursion
        through it repeats the same steps and can be verified in bulk, and the loop takes
        such frames itself (`Walker._scanned_frames`)."""
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
    in the stack, moves the window there (forward only: the walk goes up the stack).
    `view()`: the copy as words of the stack's size, which a scan reads without a call per
    word."""

    __slots__ = ("target", "stack_hi", "word", "format", "data", "lo", "hi", "words", "_as_words", "_view")

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
        self._view: Optional[memoryview] = None

    def view(self) -> memoryview:
        """The copy's words (word i at lo + i * word), made when first asked for."""
        if self._view is None:
            self._view = memoryview(self.data)[: len(self.data) & -self.word].cast("Q" if self.word == 8 else "I")
        return self._view

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


class _Walk:
    """A thread's walk under way, the state `Walker._walk`'s helpers share: the frame it is
    at (`ip`, `sp`, the registers `regs` the step tracks, found as `trust` says), the
    frames walked so far (`walked`), the stack it reads (`window`), at most `limit` frames."""

    __slots__ = (
        "ip",
        "sp",
        "regs",
        "trust",
        "exact",
        "callee_exact",
        "scan_streak",
        "scanned",
        "walked",
        "window",
        "read_word",
        "limit",
        "problems",
    )

    def __init__(self, start: Start, window: StackWindow, limit: int):
        self.ip, self.sp, self.regs, self.trust = start.ip, start.sp, start.regs, Trust.CONTEXT
        # ip is where execution stopped (frame 0, or the interrupted IP a machine frame
        # saved), not a return address: looked up as is, and it may be mid-epilogue
        self.exact = True
        self.callee_exact = False  # whether the frame below this one was exact
        self.scan_streak = 0  # frames in a row whose caller was found by scanning alone
        self.scanned = False  # whether a caller was found by scanning
        self.walked = bulk.Walked()
        self.window = window
        self.read_word = window.read
        self.limit = limit
        self.problems = start.problems  # what went wrong on the way, in words


StepFactory = Callable[["Walker"], Step]
_FixedTuple = Tuple[Place, int, Tuple[Tuple[str, int], ...], str, Optional[int]]  # a FixedFrame's fields


class Walker:
    """Walks threads of one target. Keep one per target: its caches are the speed.

    What the code is (places, code bytes, call-site checks) is the walker's `code`, a
    CodeMap the analyses share; the walker itself only walks. `step` builds the CPU's step
    from this walker (see `unwind/cpus.py`); without one nothing is walked. `problems`: the
    run's collector, where the step adds unwind data it cannot use (required: a tool or
    test walking alone passes the target's own, `target.soft_errors`)."""

    def __init__(
        self,
        target: Target,
        images: ImageProvider,
        step: Optional[StepFactory] = None,
        max_frames: int = DEFAULT_MAX_FRAMES,
        scan_words: int = DEFAULT_SCAN_WORDS,
        cross_check: bool = True,
        use_bulk: bool = True,
        reuse_walks: bool = True,
        scan_runs: bool = True,
        *,
        problems: Problems,
    ):
        self.target = target
        self.problems = problems
        self.code = CodeMap(target, images)
        # Recursions verified in bulk (unwind/bulk.py); off, every frame is stepped (the
        # reference the bulk path is tested against).
        self.use_bulk = use_bulk
        self.max_frames = max_frames
        self.scan_words = scan_words
        self.cross_check = cross_check  # check scanned frames against other threads' walks
        # A thread's walk from its own registers serves as its stack and as evidence for the
        # others (unwind/loopwalks.py); off, each is walked apart (the reference the reuse
        # is tested against).
        self.reuse_walks = reuse_walks
        # Frames found by scanning in code without unwind data are taken by the loop
        # (`_scanned_frames`); off, each goes through the step (the reference it is tested
        # against).
        self.scan_runs = scan_runs
        self._kept = KeptWalks()
        self._witnessed: Optional[Witnessed] = None
        self._witnesses: Optional[Tuple[FrozenSet[int], FrozenSet[int]]] = None  # (ids, id()s of the Threads)
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
        JIT code keeps no such promise and is taken anywhere.

        A walk's reader is its StackWindow's `read`: the words the window holds are read
        from its copy in one loop (most scans pass over dozens of words), the others one
        by one through `read_word`. With `aligned` and no JIT code in the process, a word
        off the aligned slots is no code or a module address passed over either way, so
        that loop asks about the slots alone."""
        addr = sp
        left = self.scan_words
        module_at = self.target.module_at
        plausible = self.code.plausible_return
        known = self.code._returns.get  # plausible_return's answers so far
        window = getattr(read_word, "__self__", None)
        if type(window) is not StackWindow or window.word != word_size:
            window = None
        slots_only = aligned and word_size == 8 and not self.code.has_dynamic
        while left > 0 and addr + word_size <= stack_hi:
            if (
                window is not None
                and window.lo <= addr
                and addr + word_size <= window.hi
                and not (addr - window.lo) % word_size
            ):
                i = (addr - window.lo) // word_size
                n = min(left, (min(window.hi, stack_hi) - addr) // word_size)
                first, stride = 0, 1
                if slots_only:
                    # every other word from the first 8 above a 16-byte boundary (none is
                    # when addr itself is not a multiple of 8: start past the window's words)
                    first, stride = ((0 if addr & 15 == 8 else 1), 2) if not addr & 7 else (n, 1)
                for k, word in enumerate(window.view()[i + first : i + n : stride]):
                    if word > MIN_CODE_ADDRESS:
                        kind = known(word, _MISSING)
                        if kind is _MISSING:
                            kind = plausible(word)
                        if kind is not None:
                            at = addr + (first + stride * k) * word_size
                            if not (aligned and at & 15 != 8 and module_at(word) is not None):
                                return at, word, kind
                addr += n * word_size
                left -= n
                continue
            val = read_word(addr)
            if val is None:
                break
            kind = plausible(val) if val > MIN_CODE_ADDRESS else None
            if kind is not None and not (aligned and addr & 15 != 8 and module_at(val) is not None):
                return addr, val, kind
            addr += word_size
            left -= 1
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
        loop = self._loop_walk(thread, context, self.max_frames if max_frames is None else max_frames)
        result, scanned = loop.walk, loop.scanned
        if scanned and self.code.bits == 64:
            read_word = stack_word_reader(self.target.read_available)
            result = refuted(result, self.code.frame_end, read_word, self.code.maybe_return)
        if scanned and self.cross_check and (not self.reuse_walks or self._may_witness(thread.tid)):
            result = checked(result, thread.tid, thread.stack_end, self.witnessed())
        if scanned:
            result = confirmed(result, self.code.read_code, self.code.bits)
        unsaved = self.step.take_unsaved_unwind() if self.step is not None else frozenset()
        return replace(result, unsaved_jit_unwind=unsaved) if unsaved else result

    def frame_registers(
        self, thread: Thread, context: Optional[Registers] = None, count: int = 32
    ) -> List[Tuple[int, int, Dict[str, int]]]:
        """(ip, sp, registers) of the top `count` frames of `thread`, stepped one by one
        from `context` (default: its own): each frame's registers are those its callees'
        unwinding restored (the non-volatile ones beyond frame 0), which is where a
        function keeps its arguments across the calls it makes. The walk itself keeps
        only the registers it needs to go on; this is for analyses that read a frame's
        arguments (the message a fatal-error function was given). Bounded by `count`."""
        ctx = context or thread.context
        step = self.step
        if ctx is None or step is None:
            return []
        start = step.start(thread, ctx)
        window = StackWindow(self.target, start.sp, start.stack_lo, start.stack_hi, step.word_size, False)
        ip, sp, regs, exact = start.ip, start.sp, dict(start.regs), True
        out: List[Tuple[int, int, Dict[str, int]]] = []
        for _ in range(count):
            out.append((ip, sp, dict(regs)))
            place = self.code.place(ip, not exact)
            nxt = step.caller(place, ip, sp, regs, window.read, exact, start.stack_hi)
            if nxt is None or nxt.ip == 0 or nxt.sp <= sp or nxt.sp > start.stack_hi + step.word_size:
                break
            ip, sp, regs, exact = nxt.ip, nxt.sp, dict(nxt.regs), nxt.exact
        return out

    def witnessed(self) -> Witnessed:
        """What the walks of the target's threads (from their own contexts, bounded by
        EVIDENCE_THREADS and EVIDENCE_FRAMES) show, made once per walker. A thread walked
        already is not walked again here, nor one walked here again for its own stack
        (`_loop_walk`)."""
        if self._witnessed is None:
            walks = []
            kept = self._kept
            for t in self.target.threads[:EVIDENCE_THREADS]:
                if t.context is None:
                    continue
                w = kept.for_evidence(t, EVIDENCE_FRAMES) if self.reuse_walks else None
                if w is None:
                    w, scanned = self._walk(t, None, EVIDENCE_FRAMES)
                    if self.reuse_walks:
                        kept.keep(t, LoopWalk(w, scanned, EVIDENCE_FRAMES), evidence=False, untaken=True)
                walks.append((t.tid, t.stack_end, w))
            self._witnessed = witness(walks)
            kept.evidence.clear()  # made once: no later walk is evidence
        return self._witnessed

    def _witness_threads(self) -> Tuple[FrozenSet[int], FrozenSet[int]]:
        """(the thread ids, the id()s of the Thread records) the evidence is made from."""
        if self._witnesses is None:
            threads = [t for t in self.target.threads[:EVIDENCE_THREADS] if t.context is not None]
            self._witnesses = frozenset(t.tid for t in threads), frozenset(id(t) for t in threads)
        return self._witnesses

    def _may_witness(self, tid: int) -> bool:
        """Can the other threads' walks establish anything against thread `tid`'s? Not with
        fewer than MIN_WITNESSES of them (evidence.py): then none is walked for it."""
        return len(self._witness_threads()[0] - {tid}) >= MIN_WITNESSES

    def _loop_walk(self, thread: Thread, context: Optional[Registers], limit: int) -> LoopWalk:
        """`thread`'s walk as the loop finds it from `context` (None: its own), at most
        `limit` frames: a kept walk from its own registers when that is the same walk
        (unwind/loopwalks.py), else walked, and kept while the evidence may still need it."""
        own = self.reuse_walks and thread.context is not None and (context is None or context == thread.context)
        if own:
            kept = self._kept.take(thread, limit)
            if kept is not None:
                return kept
        walk, scanned = self._walk(thread, context, limit)
        loop = LoopWalk(walk, scanned, limit)
        if own and self._witnessed is None and id(thread) in self._witness_threads()[1]:
            self._kept.keep(thread, loop, evidence=True, untaken=False)
        return loop

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
        start = step.start(thread, ctx)
        word = step.word_size
        window = StackWindow(self.target, start.sp, start.stack_lo, start.stack_hi, word, self.use_bulk and word == 8)
        walk = _Walk(start, window, limit)
        fixed = self._fixed
        stop = None
        while stop is None:
            if not walk.exact and fixed.get(walk.ip, _MISSING) is not None:
                # a return address with a FixedFrame, or not asked about yet
                stop = self._fixed_frames(step, walk)
                if stop is not None:
                    break
            stop = self._step_frame(step, walk)
            if stop is None and walk.trust in SCANNED and not walk.exact and self.scan_runs:
                stop = self._scanned_frames(step, walk)
        frame_limit = limit if stop is StopReason.FRAME_LIMIT else None
        return StackWalk(thread.tid, walk.walked.walk(), stop, start.problems, frame_limit), walk.scanned

    def _fixed_frames(self, step: Step, walk: _Walk) -> Optional[StopReason]:
        """Take the frames at return addresses with a FixedFrame (the caller's return
        address and the saved registers at fixed offsets from SP: most compiled code) for
        as long as they come, with no call into the step: a cached tuple and a few reads a
        frame. After MIN_RUN of them in a row found by unwind data, the rest of a recursion
        is verified in bulk (`_splice_fixed`). Why the walk stopped, or None when the frame
        it is at needs the step."""
        fixed_frames = self._fixed
        code = self.code._code  # address -> itself when plausible code (see code_address)
        code_address = self.code.code_address
        window = walk.window
        read_word = window.read
        word, stack_hi = window.word, window.stack_hi
        append = walk.walked.frames.append
        regs = walk.regs
        limit = walk.limit
        in_bulk = window.words is not None
        unwind_info = Trust.UNWIND_INFO
        ip, sp, trust = walk.ip, walk.sp, walk.trust
        n = first = len(walk.walked)
        streak = 0  # frames in a row found by unwind data
        stop = None
        while True:
            if n >= limit:
                stop = StopReason.FRAME_LIMIT
                break
            fixed = fixed_frames.get(ip, _MISSING)
            if fixed is _MISSING:
                fixed = self._fixed_frame(step, ip)
            if fixed is None:
                break
            place, delta, saved, modname, fstart = fixed
            ra = sp + delta
            cip = read_word(ra)
            known = code.get(cip) if cip else None
            if known is None and cip:
                known = code_address(cip)
            if cip is None or not (cip == 0 or known):
                break  # a return address the cache cannot vouch for: the step decides
            if known:
                cip = known  # the shared int object (see code_address)
            frame = Frame(n, ip, sp, modname, place.rva, fstart, place.symbol, None, trust, place.source)
            append(frame)
            n += 1
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
            if in_bulk and streak >= bulk.MIN_RUN:
                streak = 0
                walk.ip, walk.sp = ip, sp
                self._splice_fixed(walk)
                sp, n = walk.sp, len(walk.walked)
        if n > first:
            walk.callee_exact = False
        walk.ip, walk.sp, walk.trust = ip, sp, trust
        return stop

    def _step_frame(self, step: Step, walk: _Walk) -> Optional[StopReason]:
        """Take the frame the walk is at and its caller as the step finds it (unwind data,
        a frame chain, a scan), checked: not 0, its SP above the frame's and inside the
        stack. After MIN_RUN frames in a row whose caller was found by scanning alone, the
        rest of a recursion of them is verified in bulk (`_splice_scanned`). Why the walk
        stopped, or None when it goes on."""
        walked = walk.walked
        n = walked.before + len(walked.frames)  # len(walked), without the call
        if n >= walk.limit:
            return StopReason.FRAME_LIMIT
        ip, sp, trust, exact = walk.ip, walk.sp, walk.trust, walk.exact
        code_map = self.code
        place = code_map._places.get((ip, not exact)) or code_map.place(ip, not exact)
        mod = place.module
        name = mod.name if mod else None
        frame = Frame(n, ip, sp, name, place.rva, place.function_start, place.symbol, None, trust, place.source)
        walked.frames.append(frame)
        window = walk.window
        stack_hi = window.stack_hi
        called_from_body = not walk.callee_exact and trust not in SCANNED
        nxt = step.caller(place, ip, sp, walk.regs, walk.read_word, exact, stack_hi, called_from_body)
        if nxt is None:
            return StopReason.NO_CALLER
        cip, csp, cregs, ctrust, cexact = nxt
        if ctrust in SCANNED:
            walk.scanned = True
        if cip == 0:
            return StopReason.RETURN_ADDRESS_ZERO
        if csp <= sp:
            walk.problems.append(f"frame {n}: caller SP {csp:#x} not above {sp:#x}; stopped")
            return StopReason.SP_NOT_INCREASING
        if csp > stack_hi + window.word:
            return StopReason.END_OF_STACK
        frame.size = csp - sp
        walk.ip, walk.sp, walk.regs, walk.trust = cip, csp, dict(cregs), ctrust
        walk.exact, walk.callee_exact = cexact, exact
        if ctrust in SCANNED and step.scans_for_caller(place, cexact):
            walk.scan_streak += 1
            if walk.scan_streak >= bulk.MIN_RUN and window.words is not None:
                walk.scan_streak = 0
                self._splice_scanned(walk)
        else:
            walk.scan_streak = 0
        return None

    def _scanned_frames(self, step: Step, walk: _Walk) -> Optional[StopReason]:
        """Take the frames found by scanning whose callers are found by scanning alone
        (`Step.scans_for_caller`: code without unwind data) for as long as they come, with
        no call into the step: the caller is the first word at or above the frame's SP that
        can be a return address, and the registers stay as they are (the scan that found
        the frame cleared their volatile values already). The same frames, counts and
        stops as `_step_frame` one at a time. Why the walk stopped, or None when the frame
        it is at needs the step."""
        code_map = self.code
        places = code_map._places
        window = walk.window
        read_word, word, stack_hi = walk.read_word, window.word, window.stack_hi
        walked = walk.walked
        append = walked.frames.append  # the same list after a splice (bulk.Walked.splice)
        scan = self.scan
        aligned = step.scans_aligned
        in_bulk = window.words is not None
        ip, sp, trust = walk.ip, walk.sp, walk.trust
        took = False
        stop = None
        while True:
            n = walked.before + len(walked.frames)
            if n >= walk.limit:
                stop = StopReason.FRAME_LIMIT
                break
            place = places.get((ip, True)) or code_map.place(ip, True)
            if not step.scans_for_caller(place, False):
                break
            name = place.module.name if place.module else None
            frame = Frame(n, ip, sp, name, place.rva, place.function_start, place.symbol, None, trust, place.source)
            append(frame)
            took = True
            found = scan(sp, read_word, stack_hi, word, aligned)
            if found is None:
                stop = StopReason.NO_CALLER
                break
            # a scan's word is above MIN_CODE_ADDRESS and its slot inside the stack: the
            # caller is not 0, its SP is above this frame's and not past the stack's end
            at, ip, trust = found
            csp = at + word
            frame.size = csp - sp
            sp = csp
            walk.scan_streak += 1
            if walk.scan_streak >= bulk.MIN_RUN and in_bulk:
                walk.scan_streak = 0
                walk.ip, walk.sp, walk.trust = ip, sp, trust
                self._splice_scanned(walk)
                sp = walk.sp
        if took:
            walk.ip, walk.sp, walk.trust = ip, sp, trust
            walk.callee_exact = False  # the frame taken last was a return address's
        return stop

    def _splice_fixed(self, walk: _Walk) -> None:
        """The rest of the recursion of fixed frames the walk is in, verified against the
        stack's words in bulk (`bulk.follow`), spliced in as one run: the walk goes on
        after it with the registers its last repetition saved. Nothing when there is none."""
        found = bulk.follow(walk.walked, walk.ip, walk.sp, self._cached_fixed, walk.window, walk.limit)
        if found is None:
            return
        run, last = found
        walk.walked.splice(run)
        read_word = walk.window.read
        regs = walk.regs
        for at, saved in last:
            for reg, off in saved:
                v = read_word(at + off)
                if v is not None:
                    regs[reg] = v
        walk.sp = run.end

    def _splice_scanned(self, walk: _Walk) -> None:
        """`_splice_fixed` for a recursion through code without unwind data, each caller
        found by scanning (`bulk.follow_scanned`); the registers are what the scans left."""
        code = self.code
        # no JIT code: the scans took return addresses only at aligned slots (Walker.scan)
        window, aligned = walk.window, not code.has_dynamic
        run = bulk.follow_scanned(
            walk.walked, walk.ip, walk.sp, window, walk.limit, code.maybe_return, code.no_code_in, aligned=aligned
        )
        if run is not None:
            walk.walked.splice(run)
            walk.sp = run.end

    def _cached_fixed(self, ip: int) -> Optional[_FixedTuple]:
        found = self._fixed.get(ip, _MISSING)
        return self._fixed_frame(self.step, ip) if found is _MISSING and self.step is not None else found


def walk_thread(
    walker: Walker, thread: Thread, context: Optional[Registers] = None, max_frames: Optional[int] = None
) -> StackWalk:
    """Walk `thread` with `walker` (see `Walker.walk`)."""
    return walker.walk(thread, context, max_frames)
