"""Stack budget (dumpkit.analysis.budget): the real Wine dumps (no TEB memory, no memory
map: estimated from the captured stack) and synthetic targets with a TEB or a memory map."""

from __future__ import annotations

import struct
from typing import Dict, Optional, Sequence

from tests.support.samples import SAMPLE_BIN, sample_facts
from dumpkit.analysis.budget import TEB_DEALLOCATION_STACK, TEB_STACK_BASE, TEB_STACK_LIMIT, stack_budget
from dumpkit.target import ExceptionInfo, MemoryRegion, Registers, Thread
from tests.support.fakes.target import MemoryTarget

MIB = 1 << 20


def _exe_reserve() -> int:
    """tfhost.exe's SizeOfStackReserve (2 MiB with mingw's defaults)."""
    path = SAMPLE_BIN / "tfhost.exe"
    if path.exists():
        try:
            from dumpkit.pe import PEImage

            img = PEImage.from_file(str(path))
            try:
                return img.size_of_stack_reserve
            finally:
                img.close()
        except Exception:
            pass
    return 2 * MIB


def _budget(cw, **kw):
    ex = cw.exception
    fault = ex.parameters[1] if len(ex.parameters) > 1 else None
    return stack_budget(cw.target, cw.thread, ex.context.sp, fault_address=fault, **kw)


# ------------------------------------------------------------------ real sample dumps
def test_recursion_one_used_almost_all_of_its_1mib(crash_walk):
    facts = sample_facts("recursion_one.dmp")
    cw = crash_walk("recursion_one.dmp")
    b = _budget(cw, exe_stack_reserve=_exe_reserve())
    stack = facts["crash_thread_stack_in_dump"]
    assert b.base == stack["end"]
    assert b.used == stack["end"] - facts["rsp"]
    # the worker thread was created with its own 1 MiB reservation: the executable's
    # 2 MiB SizeOfStackReserve must not win over the overflow's own evidence
    assert b.reserve_size == facts["stack_reserve_requested"] == MIB
    assert 0.95 < b.used_fraction <= 1.0
    # the bottom was placed from the fault: a guard hit would be circular, so none is claimed
    assert b.guard_hit is None and "consistent with a guard-region hit; not independent evidence" in b.note
    assert b.source.startswith("captured")
    assert "estimated" in b.note and "TEB" in b.note


def test_recursion_one_without_header_reserve(crash_walk):
    cw = crash_walk("recursion_one.dmp")
    b = _budget(cw)
    assert b.reserve_size == MIB and b.guard_hit is None and b.used_fraction > 0.95


def test_big_frame_overflow_hits_guard_with_little_stack_used(crash_walk):
    sample_facts("big_frame.dmp")
    cw = crash_walk("big_frame.dmp")
    b = _budget(cw, exe_stack_reserve=_exe_reserve())
    assert b.guard_hit is None and "consistent with a guard-region hit" in b.note
    assert b.used < 4096  # the 4 MiB frame never existed
    assert b.reserve_size == MIB


def test_null_deref_small_usage(crash_walk):
    facts = sample_facts("null_deref.dmp")
    cw = crash_walk("null_deref.dmp")
    b = _budget(cw, exe_stack_reserve=_exe_reserve())
    assert b.used == facts["crash_thread_stack_in_dump"]["end"] - facts["rsp"]
    assert 0 < b.used < 4096
    assert b.guard_hit is False  # address 0x10 is nowhere near the stack
    assert b.source == "captured+image" and "estimated" in b.note
    assert b.reserve_size == _exe_reserve()
    assert b.used_fraction < 0.01


def test_idle_threads_have_sane_budgets(crash_walk):
    cw = crash_walk("null_deref.dmp")
    for t in cw.target.threads:
        if t.tid == cw.thread.tid or t.context is None:
            continue
        b = stack_budget(cw.target, t, t.context.sp, exe_stack_reserve=_exe_reserve())
        assert b.used is not None and 0 < b.used < 64 * 1024
        assert b.guard_hit is None


# ------------------------------------------------------------------ synthetic targets
def _target(memory: Dict[int, bytes], regions: Sequence[MemoryRegion] = (), exception: Optional[ExceptionInfo] = None):
    return MemoryTarget(memory.items(), memory_regions=regions, exception=exception)


TEB = 0x7FFDF000
BASE = 0x200000
LIMIT = 0x1F0000
LOW = 0x100000


def _teb_bytes(dealloc: bool = True) -> bytes:
    raw = bytearray(0x1480 if dealloc else 0x20)
    struct.pack_into("<QQ", raw, TEB_STACK_BASE, BASE, LIMIT)
    if dealloc:
        struct.pack_into("<Q", raw, TEB_DEALLOCATION_STACK, LOW)
    return bytes(raw)


def _thread(sp: int) -> Thread:
    return Thread(tid=7, context=Registers({"rsp": sp}), stack_start=sp, stack_size=BASE - sp, teb=TEB)


def test_teb_offsets():
    assert (TEB_STACK_BASE, TEB_STACK_LIMIT, TEB_DEALLOCATION_STACK) == (0x8, 0x10, 0x1478)


def test_from_teb():
    sp = LIMIT + 0x80
    target = _target({TEB: _teb_bytes()})
    b = stack_budget(target, _thread(sp), sp, fault_address=LIMIT - 8, exe_stack_reserve=8 * MIB)
    assert b.source == "teb"
    assert (b.base, b.limit, b.reserve_low, b.reserve_size) == (BASE, LIMIT, LOW, BASE - LOW)
    assert b.used == BASE - sp
    assert b.guard_hit is True
    assert "TEB" in b.note
    b = stack_budget(target, _thread(sp), sp, fault_address=0x10)
    assert b.guard_hit is False
    b = stack_budget(target, _thread(sp), sp)
    assert b.guard_hit is None


def test_from_teb_without_deallocation_stack():
    sp = LIMIT + 0x80
    target = _target({TEB: _teb_bytes(dealloc=False)})
    b = stack_budget(target, _thread(sp), sp, fault_address=LIMIT - 0x10)
    assert b.source == "teb" and b.reserve_low is None and b.reserve_size is None
    assert b.limit == LIMIT and b.guard_hit is True  # within a page below the limit
    assert "DeallocationStack" in b.note


def test_from_memory_map():
    guard_lo = LIMIT - 0x1000
    regions = [
        MemoryRegion(LOW, LOW, 4, guard_lo - LOW, 0x2000, 0, 0x20000),  # reserved
        MemoryRegion(guard_lo, LOW, 4, 0x1000, 0x1000, 0x104, 0x20000),  # guard page
        MemoryRegion(LIMIT, LOW, 4, BASE - LIMIT, 0x1000, 0x4, 0x20000),  # committed
        MemoryRegion(BASE, BASE, 4, 0x10000, 0x1000, 0x4, 0x20000),  # something else
    ]
    sp = LIMIT + 0x100
    target = _target({}, regions)
    b = stack_budget(target, _thread(sp), sp, fault_address=guard_lo + 0x10)
    assert b.source == "memory-info"
    assert (b.base, b.limit, b.reserve_low, b.reserve_size) == (BASE, LIMIT, LOW, BASE - LOW)
    assert b.used == BASE - sp and b.guard_hit is True
    b = stack_budget(target, _thread(sp), sp, fault_address=BASE + 0x10)
    assert b.guard_hit is False


def test_captured_only():
    sp = BASE - 0x300
    b = stack_budget(_target({}), _thread(sp), sp)
    assert b.source == "captured" and b.used == 0x300 and b.reserve_size is None
    assert b.guard_hit is None


def test_fault_estimate_only_for_a_stack_overflow_on_this_thread():
    sp = LOW + 0x2100
    fault = LOW + 0x1FF8
    thread = _thread(sp)
    ex = ExceptionInfo(0xC0000005, 0, 0x1234, (1, fault), thread.tid, None)
    b = stack_budget(_target({}, exception=ex), thread, sp, fault_address=fault, exe_stack_reserve=4 * MIB)
    assert b.source == "captured+image" and b.reserve_size == 4 * MIB
    ex = ExceptionInfo(0xC00000FD, 0, 0x1234, (1, fault), thread.tid, None)
    b = stack_budget(_target({}, exception=ex), thread, sp, fault_address=fault, exe_stack_reserve=4 * MIB)
    assert b.source == "captured+fault"
    assert b.reserve_low == LOW and b.reserve_size == BASE - LOW and b.guard_hit is None
    assert "not independent evidence" in b.note
