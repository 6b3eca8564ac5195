"""Stack budget of one thread: how much of its reserved stack was in use, and whether the
fault touched the guard region at the bottom.

Sources, best first (the one used is named in `StackBudget.source` and `note`):
1. "teb": the thread's TEB, when its memory is in the dump. x64 NT_TIB: StackBase at
   TEB+0x8, StackLimit (lowest committed address) at TEB+0x10; DeallocationStack (the
   lowest reserved address, the reservation's AllocationBase) at TEB+0x1478.
2. "memory-info": the MemoryInfoList regions sharing the AllocationBase of the region
   that holds SP (reserved part, PAGE_GUARD page, committed part).
3. "captured+fault": the captured stack's top as the base and, for a stack overflow
   (0xC00000FD), the touched address to place the bottom of the reservation (the fault is
   in the last pages above it; reservations are 64 KiB aligned). Threads created with
   their own stack size (TensorFlow's thread pools, Python's threading.stack_size) do
   not have the executable's SizeOfStackReserve, so this beats the header. The fault is
   then in the guard region by construction: `guard_hit` stays None (the note says
   "consistent with"); only sources 1 and 2 establish a guard hit.
4. "captured+image": the captured stack's top as the base and the executable's
   SizeOfStackReserve (passed in) as the reserve: an estimate, and said so.
5. "captured": the captured stack only; no reserve size.

Wine's Normal dumps hold neither TEB memory nor a MemoryInfoList, so they end in 3 or 4.
"""

from __future__ import annotations

import struct
from typing import List, Optional, Sequence, Tuple

from dumpkit.analysis.codes.model import STATUS_ACCESS_VIOLATION, STATUS_STACK_OVERFLOW
from dumpkit.analysis.model import StackBudget
from dumpkit.target import MemoryRegion, Target, Thread, significant_exception

__all__ = ["stack_budget", "guard_fault_address", "TEB_STACK_BASE", "TEB_STACK_LIMIT", "TEB_DEALLOCATION_STACK"]

PAGE = 0x1000
ALLOCATION_GRANULARITY = 0x10000

# x64 TEB offsets (NT_TIB at the start of the TEB)
TEB_STACK_BASE = 0x8
TEB_STACK_LIMIT = 0x10
TEB_DEALLOCATION_STACK = 0x1478

MEM_COMMIT = 0x1000
MEM_RESERVE = 0x2000
MEM_FREE = 0x10000
PAGE_GUARD = 0x100

# When only an estimate of the reserve is known, the guard region is taken to be the
# lowest allocation granule of the reservation (plus two pages of slack for the rounding
# of the estimate): the never-committed bottom page(s), the guard page and the stack
# guarantee all live there at the moment of an overflow.
_ESTIMATED_GUARD_SPAN = ALLOCATION_GRANULARITY + 2 * PAGE
_MAX_STACK = 1 << 34  # sanity bound for any stack reservation (16 GiB)


def _page_down(x: int) -> int:
    return x & ~(PAGE - 1)


def _align_down(x: int, a: int) -> int:
    return x - (x % a)


def _u64(target: Target, address: int) -> Optional[int]:
    try:
        raw = target.read(address, 8)
    except Exception:
        return None
    if len(raw) != 8:
        return None
    return struct.unpack("<Q", raw)[0]


def _hex(x: Optional[int]) -> str:
    return "?" if x is None else f"{x:#x}"


def _mib(x: int) -> str:
    return f"{x / (1 << 20):.2f} MiB" if x >= (1 << 20) else f"{x / 1024:.1f} KiB"


def _guard_hit(
    fault: Optional[int], reserve_low: Optional[int], limit: Optional[int], guard: Sequence[Tuple[int, int]] = ()
) -> Optional[bool]:
    """Fault inside [reserve_low, limit), within a page below limit, or in a PAGE_GUARD
    region; with no limit, inside the lowest granule of the reservation."""
    if fault is None:
        return None
    for lo, hi in guard:
        if lo <= fault < hi:
            return True
    if limit is not None:
        if reserve_low is not None and reserve_low <= fault < limit:
            return True
        return limit - PAGE <= fault < limit
    if reserve_low is not None:
        return reserve_low <= fault < reserve_low + _ESTIMATED_GUARD_SPAN
    return None


def _estimated_guard(
    fault: Optional[int], base: int, reserve_low: Optional[int], source: str
) -> Tuple[Optional[bool], Optional[str]]:
    """guard_hit and a note when the stack's bottom is only estimated. A hit is never
    claimed: with "captured+fault" the bottom was placed from the fault itself (circular),
    with "captured+image" it comes from the executable's default reserve, which a thread
    created with its own stack size does not have. Only a fault that cannot be in any
    stack (at or above the base, or in the never-mapped first 64 KiB) is a clear miss."""
    if fault is None:
        return None, None
    if fault >= base or fault < ALLOCATION_GRANULARITY:
        return False, None
    if reserve_low is None or not _guard_hit(fault, reserve_low, None):
        return None, None
    span = f"the lowest {_ESTIMATED_GUARD_SPAN // 1024} KiB of the reserve"
    if source == "captured+fault":
        return None, (
            f"the fault at {fault:#x} is consistent with a guard-region hit; not independent "
            "evidence, since the reserve bottom was placed from that fault"
        )
    return None, (
        f"the fault at {fault:#x} lies in {span} as estimated from the executable's header: "
        "consistent with a guard-region hit, if this thread has the default reserve"
    )


def _from_teb(target: Target, thread: Thread, sp: int) -> Optional[Tuple[int, int, Optional[int], str]]:
    if not thread.teb:
        return None
    base = _u64(target, thread.teb + TEB_STACK_BASE)
    limit = _u64(target, thread.teb + TEB_STACK_LIMIT)
    if base is None or limit is None:
        return None
    if not (0 < limit < base) or base - limit > _MAX_STACK:
        return None
    dealloc = _u64(target, thread.teb + TEB_DEALLOCATION_STACK)
    note = f"from the TEB at {thread.teb:#x}: StackBase {base:#x}, StackLimit {limit:#x}"
    if dealloc is not None and 0 < dealloc <= limit and base - dealloc <= _MAX_STACK:
        note += f", DeallocationStack {dealloc:#x}"
    else:
        dealloc = None
        note += "; DeallocationStack (TEB+0x1478) not readable"
    if not (min(limit, dealloc or limit) - PAGE <= sp <= base):
        note += f"; SP {sp:#x} is outside the TEB's stack range"
    return base, limit, dealloc, note


def _from_memory_info(target: Target, sp: int):
    regions: List[MemoryRegion] = list(target.memory_regions)
    if not regions:
        return None
    holder = next((r for r in regions if r.base <= sp < r.end and r.state != MEM_FREE), None)
    if holder is None:
        return None
    alloc = holder.allocation_base
    group = [r for r in regions if r.allocation_base == alloc and r.state != MEM_FREE]
    if not group:
        return None
    base = max(r.end for r in group)
    reserve_low = min(min(r.base for r in group), alloc)
    guard = [(r.base, r.end) for r in group if r.state == MEM_COMMIT and r.protect & PAGE_GUARD]
    committed = [r for r in group if r.state == MEM_COMMIT and not r.protect & PAGE_GUARD]
    limit = min((r.base for r in committed), default=None)
    note = f"from the memory map: allocation {alloc:#x}..{base:#x}, lowest committed {_hex(limit)}, " + (
        f"guard page(s) {', '.join(f'{lo:#x}..{hi:#x}' for lo, hi in guard)}" if guard else "no guard page left"
    )
    return base, limit, reserve_low, guard, note


def stack_budget(
    target: Target,
    thread: Thread,
    sp: int,
    *,
    fault_address: Optional[int] = None,
    exe_stack_reserve: Optional[int] = None,
) -> StackBudget:
    """Used versus reserved stack for `thread` at stack pointer `sp` (the exception
    context's RSP for the crashing thread). `fault_address` is the address the faulting
    access touched (for 0xC00000FD, the second exception parameter);
    `exe_stack_reserve` the executable's SizeOfStackReserve, for the estimate."""
    tid = thread.tid

    teb = _from_teb(target, thread, sp)
    if teb is not None:
        base, limit, dealloc, note = teb
        guard_hit = _guard_hit(fault_address, dealloc, limit)
        return StackBudget(
            thread_id=tid,
            base=base,
            limit=limit,
            reserve_low=dealloc,
            reserve_size=(base - dealloc) if dealloc is not None else None,
            used=base - sp,
            source="teb",
            guard_hit=guard_hit,
            note=note,
        )

    mem = _from_memory_info(target, sp)
    if mem is not None:
        base, limit, reserve_low, guard, note = mem
        if thread.teb:
            note = f"TEB at {thread.teb:#x} not in the dump; " + note
        guard_hit = _guard_hit(fault_address, reserve_low, limit, guard)
        return StackBudget(
            thread_id=tid,
            base=base,
            limit=limit,
            reserve_low=reserve_low,
            reserve_size=base - reserve_low,
            used=base - sp,
            source="memory-info",
            guard_hit=guard_hit,
            note=note,
        )

    # -- estimates from the captured stack -----------------------------------------------
    notes: List[str] = []
    if thread.teb:
        notes.append(f"TEB at {thread.teb:#x} not in the dump and no memory map")
    else:
        notes.append("no TEB address and no memory map")
    top = thread.stack_end if thread.stack_size else None
    if top is None or not (thread.stack_start <= sp <= top + PAGE):
        if top is not None:
            notes.append(f"SP {sp:#x} is outside the captured stack {thread.stack_start:#x}..{top:#x}")
        return StackBudget(
            thread_id=tid,
            base=top,
            limit=None,
            reserve_low=None,
            reserve_size=None,
            used=None,
            source="captured",
            guard_hit=None,
            note="; ".join(notes),
        )
    base = top
    notes.append(f"base {base:#x} is the top of the captured stack")
    if base % PAGE:
        notes.append("(not page aligned: the capture may not reach the real base)")
    used = base - sp

    image_low = None
    if exe_stack_reserve and 0 < exe_stack_reserve <= _MAX_STACK:
        image_low = base - _align_down(exe_stack_reserve + ALLOCATION_GRANULARITY - 1, ALLOCATION_GRANULARITY)

    fault_low = None
    exc = target.exception
    if (
        fault_address is not None
        and exc is not None
        and exc.code == STATUS_STACK_OVERFLOW
        and exc.thread_id == tid
        and fault_address < base
        and base - fault_address <= _MAX_STACK
    ):
        # The overflow fault is in the last pages above the reservation's bottom, and
        # reservations are allocation-granularity aligned.
        fault_low = _align_down(max(_page_down(fault_address) - PAGE, 0), ALLOCATION_GRANULARITY)

    if fault_low is not None:
        reserve_low = fault_low
        source = "captured+fault"
        notes.append(
            f"reserve bottom {fault_low:#x} estimated from the stack-overflow "
            f"fault at {fault_address:#x} ({_mib(base - fault_low)} reserved)"
        )
        if image_low is not None:
            if image_low == fault_low:
                notes.append(f"agrees with the executable's SizeOfStackReserve ({_mib(exe_stack_reserve or 0)})")
            else:
                notes.append(
                    f"the executable's SizeOfStackReserve says "
                    f"{_mib(exe_stack_reserve or 0)}: this thread was created with "
                    f"its own stack size"
                )
    elif image_low is not None:
        reserve_low = image_low
        source = "captured+image"
        notes.append(
            f"reserve estimated from the executable's SizeOfStackReserve "
            f"({_mib(exe_stack_reserve or 0)}); a thread created with its own stack "
            f"size has a different one"
        )
    else:
        reserve_low = None
        source = "captured"
        notes.append("reserve size unknown (no TEB, no memory map, no SizeOfStackReserve)")

    if reserve_low is not None and sp < reserve_low:
        notes.append(f"SP {sp:#x} is below the estimated reserve bottom {reserve_low:#x}: the estimate is wrong")
    guard_hit, guard_note = _estimated_guard(fault_address, base, reserve_low, source)
    if guard_note:
        notes.append(guard_note)
    return StackBudget(
        thread_id=tid,
        base=base,
        limit=None,
        reserve_low=reserve_low,
        reserve_size=(base - reserve_low) if reserve_low is not None else None,
        used=used,
        source=source,
        guard_hit=guard_hit,
        note="; ".join(notes),
    )


def guard_fault_address(target: Target) -> Optional[int]:
    """The address to check against the crashing thread's guard region: a stack
    overflow's, and an access violation's too (running off the stack past the guard page,
    e.g. a big frame allocated without the probe, is an access violation). Not a #GP's
    all-ones placeholder: a guard page faults as a page fault, with its real address."""
    ex = target.exception
    if ex is None or ex.code not in (STATUS_STACK_OVERFLOW, STATUS_ACCESS_VIOLATION) or len(ex.parameters) < 2:
        return None
    address = significant_exception(ex, target.system)[1][1]
    return None if address in (0xFFFFFFFFFFFFFFFF, 0xFFFFFFFF) else address
