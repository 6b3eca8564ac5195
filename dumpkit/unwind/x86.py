"""The 32-bit x86 step: the EBP frame chain, then the walker's validated scanning.

x86 Windows code has no .pdata; its unwind data (FPO records) lives in PDBs. What a dump
alone supports is what Breakpad and rust-minidump do without symbols: follow the saved
EBP chain (caller EIP at [ebp+4], caller ESP = ebp+8, caller EBP at [ebp]) while it stays
on the stack and points into module code, and scan for a return address when it does
not. Frames are named by the walker like any other (exports / COFF symbols when the
image is found).
"""

from __future__ import annotations

from typing import Dict, List, Optional

from dumpkit.target import Registers, Thread
from dumpkit.unwind.frames import Trust
from dumpkit.unwind.places import Place
from dumpkit.unwind.walk import Caller, ReadWord, Start, Walker

# With no usable stack range, the walk assumes this much stack above ESP.
ASSUMED_STACK = 0x100000


class X86Step:
    """x86 unwinding: frame pointers and scanning; only EBP is tracked."""

    word_size = 4

    def __init__(self, walker: Walker):
        self.walker = walker

    def start(self, thread: Thread, context: Registers) -> Start:
        values = context.values
        eip, esp, ebp = values.get("eip", 0), values.get("esp", 0), values.get("ebp", 0)
        lo, hi = thread.stack_start, thread.stack_end
        problems: List[str] = []
        if hi <= lo or not (lo <= esp <= hi):
            lo, hi = esp, esp + ASSUMED_STACK
            problems.append("stack range does not contain ESP; assuming 1 MiB above it")
        return Start(eip, esp, {"ebp": ebp}, lo, hi, problems)

    def fixed_frame(self, return_address: int) -> None:
        """Without unwind data no x86 frame has a fixed layout."""
        return None

    def caller(
        self, place: Place, ip: int, sp: int, regs: Dict[str, int], read_word: ReadWord, exact: bool, stack_hi: int
    ) -> Optional[Caller]:
        walker = self.walker
        ebp = regs.get("ebp", 0)
        # Frame pointer: only while EBP lies on the stack above ESP.
        if sp <= ebp < stack_hi:
            ret, saved = read_word(ebp + 4), read_word(ebp)
            if ret and walker.plausible_return(ret) is not None and (saved is None or saved == 0 or saved > ebp):
                return Caller(ret, ebp + 8, {"ebp": saved or 0}, Trust.FRAME_POINTER, False)
        found = walker.scan(sp, read_word, stack_hi, 4)
        if found is None:
            return None
        at, value, trust = found
        # the callee's EBP is unknown; keep the one we have while it is still above
        return Caller(value, at + 4, {"ebp": ebp if ebp > at else 0}, trust, False)
