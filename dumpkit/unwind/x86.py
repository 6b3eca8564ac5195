"""The 32-bit x86 step: the EBP frame chain, then the walker's validated scanning.

x86 Windows code has no .pdata; its unwind data (FPO records) lives in PDBs. What a dump
alone supports is what Breakpad and rust-minidump do without symbols: follow the saved
EBP chain (caller EIP at [ebp+4], caller ESP = ebp+8, caller EBP at [ebp]) while it stays
on the stack and points into module code, and scan for a return address when it does
not. Frames are named by the walker like any other (exports / COFF symbols when the
image is found).
"""

from __future__ import annotations

import weakref
from typing import Dict, FrozenSet, List, Optional

from dumpkit.target import Registers, Thread
from dumpkit.unwind.frames import Trust
from dumpkit.unwind.places import Place
from dumpkit.unwind.walk import Caller, ReadWord, Start, Walker

# With no usable stack range, the walk assumes this much stack above ESP.
ASSUMED_STACK = 0x100000
# Farthest a saved EBP recovered after a scan may point above its slot: larger frames are
# rare (rust-minidump measured 99.5% of x86 frames under 128 KiB), stale words are not.
MAX_FRAME_GAP = 128 << 10


class X86Step:
    """x86 unwinding: frame pointers and scanning; only EBP is tracked."""

    word_size = 4
    scans_aligned = False  # never asked: `scans_for_caller` is never true here

    def __init__(self, walker: Walker):
        self.walker = weakref.proxy(walker)  # not a cycle with the walker (as Amd64Step's)

    def start(self, thread: Thread, context: Registers) -> Start:
        values = context.values
        eip, esp, ebp = values.get("eip", 0), values.get("esp", 0), values.get("ebp", 0)
        lo, hi = thread.stack_start, thread.stack_end
        problems: List[str] = []
        if hi <= lo or not (lo <= esp <= hi):
            lo, hi = esp, esp + ASSUMED_STACK
            problems.append("stack range does not contain ESP; assuming 1 MiB above it")
        return Start(eip, esp, {"ebp": ebp}, lo, hi, problems)

    def take_unsaved_unwind(self) -> FrozenSet[int]:
        """x86 code has no unwind data to miss."""
        return frozenset()

    def fixed_frame(self, return_address: int) -> None:
        """Without unwind data no x86 frame has a fixed layout."""
        return None

    def scans_for_caller(self, place: Place, exact: bool) -> bool:
        """Never alone: the EBP chain comes first, and the scan sets EBP from what it finds."""
        return False

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
        # 32-bit code has no home space and only 4-byte stack alignment: every word is scanned
        walker = self.walker
        ebp = regs.get("ebp", 0)
        # Frame pointer: only while EBP lies on the stack above ESP.
        if sp <= ebp < stack_hi:
            ret, saved = read_word(ebp + 4), read_word(ebp)
            if ret == 0 and saved == 0:
                # The chain's outermost link: a thread's first frame saves EBP 0 and sits
                # on a zero return slot. Nothing above it is a caller; scanning on would
                # report the start routine's argument and the SEH handler as frames.
                return Caller(0, ebp + 8, {"ebp": 0}, Trust.FRAME_POINTER, False)
            if ret and walker.code.plausible_return(ret) is not None and (saved is None or saved == 0 or saved > ebp):
                return Caller(ret, ebp + 8, {"ebp": saved or 0}, Trust.FRAME_POINTER, False)
        found = walker.scan(sp, read_word, stack_hi, 4)
        if found is None:
            return None
        at, value, trust = found
        return Caller(value, at + 4, {"ebp": _ebp_after_scan(walker, at, sp, ebp, read_word, stack_hi)}, trust, False)


def _ebp_after_scan(walker: Walker, at: int, sp: int, ebp: int, read_word: ReadWord, stack_hi: int) -> int:
    """The caller's EBP after a return address was found by scanning at `at`.

    A callee with the usual prologue (push ebp; mov ebp, esp) saved its caller's EBP in
    the word just below its return address. When that word points a little further up
    the stack at what looks like a frame (a saved EBP above it, or 0, and a return
    address), it is the frame-pointer chain, and the walk goes back to following it (as
    Breakpad and rust-minidump do; they check only the distance, which lets a stale
    pointer into zeroed locals pass for a chain's end). The word is the callee's only
    when it lies in the frame being scanned (at > sp). Otherwise the EBP we have stands
    while it is above the slot: a function that does not use EBP leaves its caller's."""
    if at > sp:
        saved = read_word(at - 4)
        if saved is not None and at < saved < stack_hi and saved - at <= MAX_FRAME_GAP and saved % 4 == 0:
            link, ret = read_word(saved), read_word(saved + 4)
            if (
                link is not None
                and (link == 0 or saved < link < stack_hi)
                and ret
                and walker.code.plausible_return(ret) is not None
            ):
                return saved
    return ebp if ebp > at else 0
