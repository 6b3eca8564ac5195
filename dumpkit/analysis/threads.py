"""What each thread's walked stack says: how much of its stack it used (budget), the
recursion cycles in it (checked at their call sites and named by what their code does)
and, for the crashing thread, the frame sizes; and which threads share one stack.

The engine walks; this reads the walks. Pure over the Target and the Walker's code reads."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from dumpkit.analysis.budget import guard_fault_address, stack_budget
from dumpkit.analysis.codefacts import CodeFacts, code_facts, merged
from dumpkit.analysis.framesizes import frame_sizes
from dumpkit.analysis.model import Cycle, FrameSize, StackBudget
from dumpkit.analysis.recursion import find_cycles
from dumpkit.records import record, replace
from dumpkit.problems import Problems
from dumpkit.target import MemoryNotInDump, Target, Thread
from dumpkit.unwind.frames import Frame, StackWalk
from dumpkit.unwind.codemap import CodeMap

# A stack this long is a runaway, its own story: not compared with the others.
IDENTICAL_MAX_FRAMES = 10_000
# Below this many frames a thread other than the crashing one is not searched for cycles.
CYCLE_SEARCH_MIN_FRAMES = 64


@record
class ThreadFindings:
    cycles: Tuple[Cycle, ...] = ()
    budget: Optional[StackBudget] = None
    sizes: Tuple[FrameSize, ...] = ()  # the crashing thread's only


def analyse_thread(
    target: Target,
    code: CodeMap,
    thread: Thread,
    walk: Optional[StackWalk],
    is_crash: bool,
    oversized_threshold: int,
    exe_reserve: Optional[int],
    problems: Problems,
) -> ThreadFindings:
    """Budget, cycles and (crashing thread) frame sizes of one walked thread. What cannot be
    read is added to `problems` (with the walk's own), and that part is left out."""
    if walk is None or not walk.frames:
        return ThreadFindings()
    bits = code.bits
    budget: Optional[StackBudget] = None
    fault = guard_fault_address(target) if is_crash else None
    try:
        budget = stack_budget(target, thread, walk.frames[0].sp, fault_address=fault, exe_stack_reserve=exe_reserve)
    except (MemoryNotInDump, ValueError) as e:
        problems.add(f"thread {thread.tid}: stack budget unavailable ({e})")

    def read_pointer(address: int) -> Optional[int]:
        data = target.read_available(address, bits // 8)
        return int.from_bytes(data, "little") if len(data) == bits // 8 else None

    def module_base(name: str) -> Optional[int]:
        return next((m.base for m in target.modules if m.name == name), None)

    cycles: Tuple[Cycle, ...] = ()
    found = (
        find_cycles(walk.frames, used_stack=budget.used if budget is not None else None)
        if (is_crash or len(walk.frames) >= CYCLE_SEARCH_MIN_FRAMES)
        else []
    )
    if found:
        # a recursion's call sites and kind: their modules (~1 ms) only for a stack with one
        from dumpkit.analysis.callsites import cycle_call_edges
        from dumpkit.analysis.python import classify_recursion

        cycles = tuple(
            replace(
                c,
                call_edges=cycle_call_edges(
                    walk.frames, c, code.read_code, module_base, read_pointer=read_pointer, bits=bits
                ),
                kind=classify_recursion(c, cycle_code_facts(code, walk.frames, c) if bits == 64 else {}),
            )
            for c in found
        )
    sizes: Tuple[FrameSize, ...] = ()
    if is_crash:
        sizes = tuple(
            frame_sizes(
                walk.frames,
                code.read_code,
                module_base=module_base,
                threshold=oversized_threshold,
                name_at=lambda va: code.place(va).symbol,
            )
        )
    for p in walk.problems:
        problems.add(f"thread {thread.tid}: {p}")
    return ThreadFindings(cycles, budget, sizes)


def identical_stacks(walks: Dict[int, StackWalk]) -> Dict[int, Tuple[int, ...]]:
    """For each thread whose stack (its return addresses, frame for frame) another thread
    shares: those other threads' ids. A pool of idle workers reads as one stack."""
    groups: Dict[Tuple[int, ...], List[int]] = {}
    for tid, w in walks.items():
        if len(w.frames) > IDENTICAL_MAX_FRAMES:
            continue
        key = tuple(f.ip for f in w.frames)
        if key:
            groups.setdefault(key, []).append(tid)
    out: Dict[int, Tuple[int, ...]] = {}
    for tids in groups.values():
        if len(tids) > 1:
            for t in tids:
                out[t] = tuple(x for x in tids if x != t)
    return out


def cycle_code_facts(code: CodeMap, frames: Sequence[Frame], cycle: Cycle) -> Dict[str, CodeFacts]:
    """What the code of the cycle's unnamed members refers to (strings, callees): how an
    MSVC module's static functions are recognised without its PDB. A member split into
    chained fragments is read from its entry and in each fragment the stack is in (the
    call that recursed is often there, not in the primary part)."""
    from dumpkit.analysis.python import facts_needed

    wanted = set(facts_needed(cycle))
    parts: Dict[str, Dict[int, Optional[int]]] = {}  # name -> {part start VA: end VA}
    start = cycle.frames_above
    for f in frames[start : start + cycle.period]:
        name = f.function_name
        if name not in wanted or f.function_start is None or f.rva is None:
            continue
        base = f.ip - f.rva
        entry = base + f.function_start
        mine = parts.setdefault(name, {})
        if entry not in mine:
            primary = code.place(entry).function
            mine[entry] = base + primary.end_rva if primary is not None else None
        here = code.place(f.ip, f.index > 0)
        if here.in_fragment and here.function is not None:
            mine[base + here.function.begin_rva] = base + here.function.end_rva

    def name_at(va: int) -> Optional[str]:
        return code.place(va).symbol

    return {
        name: merged(code_facts(code.read_code, s, e, name_at) for s, e in ranges.items())
        for name, ranges in parts.items()
    }
