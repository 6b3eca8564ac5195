"""32-bit x86 stack walking: the EBP frame chain, then validated scanning.

x86 Windows code has no .pdata; its unwind data (FPO records) lives in PDBs. What a dump
alone supports is what Breakpad and rust-minidump do without symbols: follow the saved
EBP chain (caller EIP at [ebp+4], caller ESP = ebp+8, caller EBP at [ebp]) while it stays
on the stack and points into module code, and scan for a return address when it does
not. Iterative and bounded like the x64 walker; frames are named through the same
Walker (exports / COFF symbols when the image is found).
"""

from __future__ import annotations

import struct
from typing import List, Optional

from dumpkit.target import MemoryNotInDump, Registers, Thread
from dumpkit.unwind.amd64 import Walker
from dumpkit.unwind.frames import Frame, StackWalk, StopReason, Trust

MAX_STACK_BYTES = 64 << 20


def walk_x86(
    walker: Walker, thread: Thread, context: Optional[Registers] = None, max_frames: Optional[int] = None
) -> StackWalk:
    ctx = context or thread.context
    if ctx is None:
        return StackWalk(thread.tid, [], StopReason.NO_CONTEXT, ["thread has no register context"])
    limit = walker.max_frames if max_frames is None else max_frames
    target = walker.target
    eip, esp, ebp = ctx.values.get("eip", 0), ctx.values.get("esp", 0), ctx.values.get("ebp", 0)
    lo, hi = thread.stack_start, thread.stack_end
    problems: List[str] = []
    if hi <= lo or not (lo <= esp <= hi):
        lo, hi = esp, esp + 0x100000
        problems.append("stack range does not contain ESP; assuming 1 MiB above it")
    stack = target.read_available(esp, min(hi - esp, MAX_STACK_BYTES))
    s_lo, s_hi = esp, esp + len(stack)

    def u32(addr: int) -> Optional[int]:
        if s_lo <= addr and addr + 4 <= s_hi:
            return struct.unpack_from("<I", stack, addr - s_lo)[0]
        try:
            return struct.unpack("<I", target.read(addr, 4))[0]
        except MemoryNotInDump:
            return None

    def code_ok(addr: int) -> bool:
        return walker._plausible_return(addr) is not None

    frames: List[Frame] = []
    trust = Trust.CONTEXT
    stop = StopReason.END_OF_STACK
    first = True
    while True:
        if len(frames) >= limit:
            stop = StopReason.FRAME_LIMIT
            break
        place = walker.place(eip, not first)
        mod = place.module
        frames.append(
            Frame(len(frames), eip, esp, mod.name if mod else None, place.rva, None, place.symbol, None, trust)
        )
        first = False
        nxt = None
        # Frame pointer: only while EBP lies on the stack above ESP.
        if esp <= ebp < hi:
            ret, saved = u32(ebp + 4), u32(ebp)
            if ret and code_ok(ret) and (saved is None or saved == 0 or saved > ebp):
                nxt = (ret, ebp + 8, saved or 0, Trust.FRAME_POINTER)
        if nxt is None:
            addr = esp
            for _ in range(walker.scan_words):
                if addr + 4 > hi:
                    break
                val = u32(addr)
                if val is None:
                    break
                kind = walker._plausible_return(val) if val > 0x10000 else None
                if kind is not None:
                    # the callee's EBP is unknown; keep the one we have if still above
                    nxt = (val, addr + 4, ebp if ebp > addr else 0, kind)
                    break
                addr += 4
        if nxt is None:
            stop = StopReason.NO_CALLER
            break
        ceip, cesp, cebp, ctrust = nxt
        if cesp <= esp:
            stop = StopReason.SP_NOT_INCREASING
            break
        if cesp > hi + 4:
            break
        frames[-1].size = cesp - esp
        eip, esp, ebp, trust = ceip, cesp, cebp, ctrust
    return StackWalk(thread.tid, frames, stop, problems, limit if stop is StopReason.FRAME_LIMIT else None)
