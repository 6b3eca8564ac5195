"""0xC00000FD: unbounded recursion, an oversized frame, or a stack that is simply deep."""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

from dumpkit.analysis.callsites import call_summary
from dumpkit.analysis.model import CrashInfo, Cycle, Finding, StackBudget, Verdict
from dumpkit.analysis.recursion import call_order, outside_entry_path
from dumpkit.analysis.verdict.case import Case, conclude
from dumpkit.words import human_bytes, plural

_PYTHON_DLL = re.compile(r"^python3\d*(_d)?\.dll$", re.I)


def python_interpreter_module(c: Cycle) -> Optional[str]:
    """The pythonXY.dll every member of the cycle belongs to, if they all do."""
    modules = {fn.split("!", 1)[0] if "!" in fn else fn.split("+", 1)[0] for fn in c.functions}
    if len(modules) == 1:
        (m,) = modules
        if _PYTHON_DLL.match(m):
            return m
    return None


def cycle_text(c: Cycle) -> str:
    return " -> ".join(call_order(c))


def guard_evidence(budget: Optional[StackBudget], crash: CrashInfo) -> Optional[str]:
    """The guard-region fact, claimed only from independent stack bounds."""
    if budget is None or crash.access_address is None:
        return None
    if budget.guard_hit:
        return (
            f"the fault at {crash.access_address:#x} is in the stack's guard region (bounds from the "
            f"{'TEB' if budget.source == 'teb' else 'memory map'})"
        )
    # Bounds estimated from the fault itself prove nothing about it: the budget's note says
    # so where the budget is shown; the evidence list keeps only facts that carry weight.
    return None


def decide(case: Case, evidence: List[str], steps: List[str]) -> Tuple[Verdict, List[Finding]]:
    crash = case.crash
    assert crash is not None
    if not case.frames:
        headline = (
            f"Stack overflow on thread {crash.thread_id}; its stack could not be walked, so the "
            "recursion and frame-size analyses have nothing to work on"
        )
        evidence.append(
            "no frames: " + ("; ".join(case.problems[:2]) if case.problems else "the thread's stack is not in the dump")
        )
        return conclude("stack_overflow", headline, "medium", evidence, steps, crash.thread_id)
    thread = case.thread
    budget = thread.budget if thread else None
    reserve = budget.reserve_size if budget else None
    sizes = case.sizes
    probe_victim = next((s for s in sizes if s.not_yet_allocated), None)
    oversized = [s for s in sizes if max(s.size, s.requested or 0) >= case.threshold]
    if budget is not None and budget.used is not None:
        evidence.append(f"stack used {human_bytes(budget.used)} of {human_bytes(reserve)} reserved ({budget.source})")
    guard = guard_evidence(budget, crash)
    if guard:
        evidence.append(guard)
    limit = case.frame_limit
    evidence.append(
        f"{plural(len(case.frames), 'frame')} on the crashing thread"
        + (f" (the walk stopped at its frame limit, {limit:,}: --max-frames)" if limit else "")
    )
    main = thread.cycles[0] if thread and thread.cycles else None
    if main is not None and (probe_victim is None or main.repetitions >= 8):
        return _recursion(case, main, budget, evidence)
    big = probe_victim or (oversized[0] if oversized else None)
    if big is not None:
        asked = big.requested or big.size
        how = f" ({big.prologue_text})" if big.prologue_text else ""
        died = " and died in the stack probe before its frame existed" if big.not_yet_allocated else ""
        headline = (
            f"Stack overflow: {big.function} asked for {human_bytes(asked)} of stack{how}"
            f"{died}, on a {human_bytes(reserve)} stack"
        )
        evidence.append(
            f"frame {big.frame_index}: {big.function} requests {asked:,} bytes"
            + (" via the stack probe" if big.via_probe else "")
        )
        steps = [
            f"Move the large local buffer in {big.function} to the heap (malloc/new/std::vector) or a static.",
            "Or give the thread a bigger stack (CreateThread / std::thread stack size, /STACK linker option).",
        ]
        return conclude("oversized_frame", headline, "high", evidence, steps, crash.thread_id)
    headline = f"Stack overflow on thread {crash.thread_id}: no repeating cycle and no oversized frame found"
    if sizes:
        top = sizes[0]
        headline += f"; the largest frame is {top.function} ({human_bytes(max(top.size, top.requested or 0))})"
    steps = [
        "The stack is deep without one dominant cause: look at the frame sizes and the entry path.",
        "Run the work on a thread with a bigger stack to confirm it is depth, not corruption.",
    ]
    return conclude("stack_overflow", headline, "medium", evidence, steps, crash.thread_id)


def _recursion(
    case: Case, main: Cycle, budget: Optional[StackBudget], evidence: List[str]
) -> Tuple[Verdict, List[Finding]]:
    """The overflow is a recursion: the cycle, its cost, where it was entered, its calls checked."""
    assert case.crash is not None
    reserve = budget.reserve_size if budget else None
    used = budget.used if budget is not None else None
    limit = case.frame_limit
    if limit:
        # the walked frames are a prefix: the stack used, not the cycle's bytes, is the share
        share = used / reserve if used and reserve else None
        reps = (
            f"at least {main.repetitions:,} repetitions x {main.bytes_per_repetition:,} bytes "
            f"(walk stopped at --max-frames {limit:,})"
        )
        share_txt = f"; {human_bytes(used)} used = {share:.0%} of" if share is not None else "; on"
    else:
        share = main.total_bytes / reserve if reserve else main.stack_share
        reps = f"{main.repetitions:,} repetitions x {main.bytes_per_repetition:,} bytes"
        share_txt = f" = {share:.0%} of" if share is not None else " on"
    headline = (
        f"Stack overflow: unbounded recursion {cycle_text(main)}, {reps}{share_txt} a {human_bytes(reserve)} stack"
    )
    evidence.append(
        f"cycle of period {main.period}: {cycle_text(main)} "
        f"(frames {main.first_frame}-{main.last_frame}, {main.total_bytes:,} bytes)"
    )
    if limit and main.last_frame >= len(case.frames) - 1:
        evidence.append(
            f"the cycle runs to the last walked frame: it goes on below frame {main.last_frame:,}, so "
            "its full depth and the code that entered it are not known; rerun with a larger --max-frames"
        )
    elif limit:
        evidence.append(
            "the frames below the walked ones were not walked (frame limit): rerun with a larger "
            "--max-frames to see the whole stack"
        )
    entry = outside_entry_path(main)
    if entry:
        evidence.append("entered from: " + " <- ".join(entry[:5]))
    calls_text, calls_contradict = call_summary(main.call_edges)
    if calls_text:
        evidence.append(calls_text)
    interpreter = python_interpreter_module(main)
    if interpreter is not None:
        # Every member is the interpreter's own C code: the recursion is in Python.
        headline = (
            f"Stack overflow: Python code recursed until the C stack ran out "
            f"({interpreter} interpreter frames, {reps}{share_txt} a {human_bytes(reserve)} stack)"
        )
        evidence.append(f"every function in the cycle is in {interpreter}: each repetition is one Python-level call")
        steps = [
            "A Python function recursed deeper than the thread's C stack holds: sys.setrecursionlimit() was "
            "raised (by your code or a library) above what the stack can take (python.exe's main thread "
            "reserves about 2 MB on Windows, other threads 1 MB, against 8 MB on Linux).",
            "Find the recursive Python function: run with `python -X faulthandler` (it prints the Python stack "
            "on a stack overflow) or `py-spy dump --native` on the live process.",
            "Make it iterative, or run it in a threading.Thread started after threading.stack_size(128 * 1024 * 1024).",
        ]
    else:
        steps = [
            f"Find why the recursion in {call_order(main)[0]} does not terminate (a cyclic structure, a missing base case, input deeper than expected).",
            "If the depth is legitimate, make it iterative, or run the work on a thread with a bigger stack (threading.stack_size(), or a larger /STACK reserve).",
        ]
    if calls_contradict:
        steps.insert(
            0,
            "The code contradicts these frames: check the stack by hand in a debugger "
            "(`kf` and `ub <return address>`) before trusting this verdict.",
        )
    confidence = "medium" if calls_contradict or limit else "high"
    return conclude("recursion", headline, confidence, evidence, steps, case.crash.thread_id)
