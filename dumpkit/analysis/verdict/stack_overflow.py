"""0xC00000FD: unbounded recursion, an oversized frame, or a stack that is simply deep."""

from __future__ import annotations

from typing import List, Optional, Tuple

from dumpkit.analysis.advice import PYTHON_THREAD_STACK, THREAD_STACK, THREAD_STACK_SIZE_ON_WINDOWS, Step
from dumpkit.analysis.model import (
    PYTHON_CALLS,
    Recursing,
    Confidence,
    CrashInfo,
    Cycle,
    FrameSize,
    PythonCycle,
    RecursionKind,
    StackBudget,
    VerdictKind,
)
from dumpkit.analysis.pyentry import (
    CTYPES,
    EXTENSION,
    NATIVE,
    PythonEntry,
    entry_path_words,
    python_entry,
    python_minor,
)
from dumpkit.analysis.pystack import cycle_text as python_cycle_text
from dumpkit.analysis.pystack import optional_line
from dumpkit.analysis.recursion import call_order, outside_entry_path
from dumpkit.analysis.verdict.case import Case, Decision, conclude
from dumpkit.words import human_bytes, listing, plural


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


def oversized_culprit(case: Case) -> Optional[FrameSize]:
    """The frame an oversized-frame verdict names: the one that died in its stack probe
    before its frame existed, else the largest at or above the threshold."""
    probe_victim = next((s for s in case.sizes if s.not_yet_allocated), None)
    return probe_victim or next((s for s in case.sizes if max(s.size, s.requested or 0) >= case.threshold), None)


def decide(case: Case, evidence: List[str], steps: List[Step]) -> Decision:
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
        return conclude(VerdictKind.STACK_OVERFLOW, headline, Confidence.MEDIUM, evidence, steps, crash.thread_id)
    thread = case.thread
    budget = thread.budget if thread else None
    reserve = budget.reserve_size if budget else None
    sizes = case.sizes
    probe_victim = next((s for s in sizes if s.not_yet_allocated), None)
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
    big = oversized_culprit(case)
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
        steps = [MOVE_THE_BUFFER.given(function=big.function), BIGGER_STACK_FOR_THE_FRAME]
        return conclude(VerdictKind.OVERSIZED_FRAME, headline, Confidence.HIGH, evidence, steps, crash.thread_id)
    blind = _cause_unseen(case)
    if blind is not None:
        headline = f"Stack overflow on thread {crash.thread_id}; the cause cannot be shown without images: {blind}"
        steps = [GIVE_THE_IMAGES]
        return conclude(VerdictKind.STACK_OVERFLOW, headline, Confidence.LOW, evidence, steps, crash.thread_id)
    headline = f"Stack overflow on thread {crash.thread_id}: no repeating cycle and no oversized frame found"
    if sizes:
        top = sizes[0]
        headline += f"; the largest frame is {top.function} ({human_bytes(max(top.size, top.requested or 0))})"
    steps = [NO_DOMINANT_CAUSE, CONFIRM_IT_IS_DEPTH]
    return conclude(VerdictKind.STACK_OVERFLOW, headline, Confidence.MEDIUM, evidence, steps, crash.thread_id)


def _cause_unseen(case: Case) -> Optional[str]:
    """Why no cycle and no big frame can be claimed absent: the stack was mostly guessed
    (found by scanning) or its modules' images are missing, so frame sizes are unknown."""
    cov = case.coverage
    if cov is None or not cov.frames:
        return None
    missing = [m for m in cov.missing if m.frames]
    if cov.unvalidated * 4 < cov.frames and not missing:
        return None
    parts = []
    if cov.scanned:
        parts.append(f"{cov.scanned:,} of {plural(cov.frames, 'frame')} were found by stack scanning")
    if missing:
        parts.append(f"no image of {listing([m.module for m in missing], 3)}")
    return "; ".join(parts) if parts else None


def _per_level(main: Cycle, reserve: Optional[int], per_repetition: int = 1) -> str:
    """'528 bytes of C stack each, so the 1.9 MiB stack holds about 3,800 of them', for
    each of the `per_repetition` levels (Python calls) one repetition of the cycle makes."""
    each = main.bytes_per_repetition // max(1, per_repetition)
    fits = f", so the {human_bytes(reserve)} stack holds about {reserve // each:,} of them" if reserve and each else ""
    return f"{each:,} bytes of C stack each{fits}"


_BIGGER_STACK = (
    "If the depth is real, run the work on a thread with a bigger stack: threading.stack_size(N) before "
    f"starting the thread ({THREAD_STACK_SIZE_ON_WINDOWS})."
)
_BY_FAULTHANDLER = (
    "Find the recursive Python function: a full-memory dump (procdump -ma, or WER LocalDumps with "
    "DumpType=2) lets dumpkit show the Python stack; `python -X faulthandler` prints it at the crash."
)
_THE_FUNCTIONS = (
    "The recursing Python functions are {functions}: find why they do not stop "
    "(a missing base case, a cyclic structure, input deeper than expected)."
)
# e.g. "A Python __repr__ method calling repr()": the C protocol in the cycle says which
_THE_PROTOCOL = (
    "{What} on the next object, level after level: find the object structure that nests this deep or "
    "refers back to itself, and stop the method there. "
)

# The next steps of a stack overflow, by what overflowed it.
MOVE_THE_BUFFER = Step(
    "oversized_frame.move_the_buffer",
    "Move the large local buffer in {function} to the heap (malloc/new/std::vector) or a static.",
)
BIGGER_STACK_FOR_THE_FRAME = Step(
    "oversized_frame.bigger_stack",
    "Or give the thread a bigger stack (CreateThread / std::thread stack size, /STACK linker option).",
)
GIVE_THE_IMAGES = Step(
    "stack_overflow.give_the_images",
    "Give dumpkit the missing images (see Missing images: the option for each) and analyse again; "
    "recursion cycles and frame sizes are measured from them.",
)
NO_DOMINANT_CAUSE = Step(
    "stack_overflow.no_dominant_cause",
    "The stack is deep without one dominant cause: look at the frame sizes and the entry path.",
)
CONFIRM_IT_IS_DEPTH = Step(
    "stack_overflow.confirm_it_is_depth",
    "Run the work on a thread with a bigger stack to confirm it is depth, not corruption.",
)
PYTHON_LIMIT_RAISED = Step(
    "recursion.python_limit_raised",
    "Python code recursed {depth} calls deep at {per_level}: the recursion limit was "
    "raised (sys.setrecursionlimit, by your code or a library) above what the thread's C stack holds; "
    "with CPython's default limit of 1000 a RecursionError would have stopped it.",
)
THE_PYTHON_FUNCTIONS = Step("recursion.python_functions", _THE_FUNCTIONS)
FIND_THE_PYTHON_RECURSION = Step("recursion.find_python_function", _BY_FAULTHANDLER)
THE_PROTOCOL_FUNCTIONS = Step("recursion.protocol_functions", _THE_PROTOCOL + _THE_FUNCTIONS)
FIND_THE_PROTOCOL_RECURSION = Step("recursion.find_protocol_recursion", _THE_PROTOCOL + _BY_FAULTHANDLER)
MAKE_IT_ITERATIVE = Step(
    "recursion.make_it_iterative",
    "Make it iterative, or lower the recursion limit so a RecursionError stops it. " + _BIGGER_STACK,
)
NESTED_DATA = Step(
    "recursion.nested_data",
    "The data given to {what} is nested {depth} levels deep (one repetition of the cycle per level, "
    "at {per_level}); look for a runaway or accidental nesting (a list that contains "
    "itself through a copy, a tree built one level per item).",
)
C_LIMIT_RAISED = Step(
    "recursion.c_limit_raised",
    "CPython's C code checks the recursion limit at each level and raises RecursionError; the limit was "
    "raised (sys.setrecursionlimit) above what the stack holds: keep it near its default so the error is "
    "raised instead of the process dying.",
)
TELL_WHICH_RECURSED = Step(
    "recursion.tell_which_recursed",
    "Give dumpkit {module}'s image (--image-path a copy of the Python installation, or --fetch-images for a "
    "python.org build): its exports name the eval loop, which tells Python functions recursing from C code "
    "recursing on nested data, and with it the Python stack can be read from a dump that holds the memory. "
    "Or rerun with faulthandler enabled (python -X faulthandler): its traceback at the overflow shows the "
    "Python functions.",
)
FLATTEN_THE_STRUCTURE = Step(
    "recursion.flatten_the_structure", "Flatten the structure or process it iteratively. " + _BIGGER_STACK
)
IN_A_LIBRARY = Step(
    "recursion.in_a_library",
    "{what} recursed {depth} levels (one repetition of the cycle per level, at {per_level}): {advice}",
)
LIMIT_CHECKED_ON_THE_WAY_DOWN = Step(
    "recursion.limit_checked_on_the_way_down",
    "Python's recursion limit is checked on the way down (CPython's C code and TensorFlow's nest functions "
    "raise RecursionError at it): no error was raised, so the limit was set above what the stack holds; "
    "keep it near its default.",
)
BOUND_THE_NESTING = Step(
    "recursion.bound_the_nesting", "Flatten or bound the nesting before the call. " + _BIGGER_STACK
)
WHY_IT_DOES_NOT_END = Step(
    "recursion.why_it_does_not_end",
    "Find why the recursion in {function} does not terminate (a cyclic structure, a missing base case, "
    "input deeper than expected).",
)
ITERATIVE_OR_BIGGER_STACK = Step(
    "recursion.iterative_or_bigger_stack",
    "If the depth is legitimate, make it iterative, or run the work on a thread with a bigger stack ({thread_stack}).",
    ((THREAD_STACK, PYTHON_THREAD_STACK),),
)
CTYPES_CALLER = Step(
    "recursion.ctypes_caller",
    "Python code{where} called {module} through ctypes with data or arguments that make it "
    "recurse this deep: check what the Python side passes (a cyclic or very deep structure, a wrong length "
    "or count).",
)
PYTHON_CALLER = Step("recursion.python_caller", "Python code{where} called into {module}: check what it passes.")
IN_NATIVE_CODE_ON_312 = Step(
    "recursion.in_native_code_on_312",
    "Python 3.{minor} counts C recursion as well as Python calls and raises RecursionError before the "
    "stack runs out, so pure Python recursion (or repr/pickle of nested data) cannot overflow it there: "
    "this overflow is in native code, {native}; look there, not for a raised recursion limit.",
)
CHECK_BY_HAND = Step(
    "recursion.check_by_hand",
    "The code contradicts these frames: check the stack by hand in a debugger "
    "(`kf` and `ub <return address>`) before trusting this verdict.",
)


def _python_evidence(case: Case, kind: RecursionKind) -> Tuple[List[str], Optional[PythonCycle]]:
    """What the Python stack read from the dump adds (the recursing Python functions, the
    Python code that called into C), or why there is none; and its main cycle."""
    py = case.python
    thread = case.python_thread
    if py is None:
        return [], None
    if thread is None:
        why = (
            py.message
            if py.status != "read"
            else f"thread {case.crash.thread_id if case.crash else '?'} runs no Python"
        )
        return [f"Python stack: not available ({why})"], None
    lines = []
    cycle = thread.cycles[0] if thread.cycles else None
    if kind.kind is Recursing.PYTHON and cycle is not None:
        lines.append(
            f"Python stack ({thread.depth:,} frames, read from the dump): {python_cycle_text(cycle)} repeats "
            f"{cycle.repetitions:,} times"
            + (f"; entered from {' <- '.join(cycle.entry_path[:4])}" if cycle.entry_path else "")
        )
    else:
        called = [x for x in (optional_line(f) for f in thread.frames[:3]) if x]
        if called:
            lines.append(f"called from Python ({thread.depth:,} frames, read from the dump): " + " <- ".join(called))
    if not py.layout_verified:
        lines.append(
            f"the {py.dll} {py.version} Python stack: "
            + (py.layout_note or "structure layout from CPython's headers, not verified on a real dump")
        )
    return lines, cycle


def _in_python_terms(
    case: Case, kind: RecursionKind, main: Cycle, cost: str, reserve: Optional[int]
) -> Tuple[str, List[str], List[Step]]:
    """Headline, evidence and next steps for a recursion of Python code, of the
    interpreter's C code, or inside an extension module."""
    depth = f"about {kind.depth:,}" if kind.depth else "many"
    evidence, py_cycle = _python_evidence(case, kind)
    if kind.kind is Recursing.PYTHON:
        thread = case.python_thread
        protocol = kind.protocol is not None
        if py_cycle is not None and thread is not None:
            depth = f"{thread.depth:,}"
            who = f" ({python_cycle_text(py_cycle)}, {py_cycle.repetitions:,} times)"
            find = (THE_PROTOCOL_FUNCTIONS if protocol else THE_PYTHON_FUNCTIONS).given(
                functions=python_cycle_text(py_cycle)
            )
        else:
            who = ""
            find = FIND_THE_PROTOCOL_RECURSION if protocol else FIND_THE_PYTHON_RECURSION
        who_recursed = "Python functions recursed"
        if kind.library is not None and not protocol:  # through an extension: "through NumPy's ..."
            who_recursed = f"Python functions recursed{kind.what[len(PYTHON_CALLS) :]}"
        if protocol:
            who_recursed = f"{kind.what} recursed"
            find = find.given(What=kind.what[0].upper() + kind.what[1:])
        headline = (
            f"Stack overflow: {who_recursed} {depth} calls deep{who} until the C stack ran out "
            f"({kind.module or 'interpreter'} eval-loop frames, {cost})"
        )
        calls = kind.depth // main.repetitions if kind.depth and main.repetitions else 1
        steps = [
            PYTHON_LIMIT_RAISED.given(depth=depth, per_level=_per_level(main, reserve, calls)),
            find,
            MAKE_IT_ITERATIVE,
        ]
        return headline, evidence, steps
    if kind.kind is Recursing.INTERPRETER:
        headline = (
            f"Stack overflow: recursion inside {kind.module}, {depth} levels ({cost}): Python functions calling "
            f"each other or the interpreter's own C code (repr, json, pickle of nested data); without "
            f"{kind.module}'s image the two cannot be told apart"
        )
        steps = [TELL_WHICH_RECURSED.given(module=kind.module or "python3X.dll"), C_LIMIT_RAISED, FLATTEN_THE_STRUCTURE]
        return headline, evidence, steps
    if kind.kind is Recursing.C_PROTOCOL:
        through = f" through {kind.what}" if kind.protocol else ""
        headline = (
            f"Stack overflow: C recursion inside {kind.module}{through}, {depth} levels of nesting "
            f"({cost}); not Python functions calling each other"
        )
        what = kind.what if kind.protocol else f"the C code of {kind.module}"
        steps = [
            NESTED_DATA.given(what=what, depth=depth, per_level=_per_level(main, reserve)),
            C_LIMIT_RAISED,
            FLATTEN_THE_STRUCTURE,
        ]
        return headline, evidence, steps
    library = kind.library or kind.module or "an extension module"
    headline = f"Stack overflow: recursion inside {library}: {kind.what}, {depth} levels deep ({cost})"
    steps = [
        IN_A_LIBRARY.given(
            what=kind.what,
            depth=depth,
            per_level=_per_level(main, reserve),
            advice=_LIBRARY_ADVICE.get(
                library, "the input is nested that deep; find where the structure gets so deep."
            ),
        ),
        LIMIT_CHECKED_ON_THE_WAY_DOWN,
        BOUND_THE_NESTING,
    ]
    return headline, evidence, steps


# What each library's recursion means for the data it was given.
_LIBRARY_ADVICE = {
    "NumPy": (
        "NumPy recurses once per level of object arrays nested inside object arrays (dtype=object elements "
        "that are themselves arrays), e.g. when comparing or converting them; build regular numeric arrays, or "
        "walk the nesting iteratively."
    ),
    "TensorFlow": (
        "tf.nest functions recurse once per level of the nested structure (lists, tuples, dicts, namedtuples); "
        "find where the structure gets so deep (a container that holds itself, a tree built one level per item)."
    ),
}


def _recursion(case: Case, main: Cycle, budget: Optional[StackBudget], evidence: List[str]) -> Decision:
    """The overflow is a recursion: the cycle, its cost, where it was entered, its calls checked."""
    from dumpkit.analysis.callsites import call_summary  # (as analysis/threads.py imports them: with a cycle)
    from dumpkit.analysis.python import classify_recursion

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
    kind = main.kind or classify_recursion(main, {})
    from_python = python_entry(case.frames, main.last_frame + 1, case.python_thread)
    # the Python frames below a recursion of Python code are its own (the Python stack
    # evidence names its entry); below native code, they are the caller
    entry = entry_path_words(
        outside_entry_path(main), from_python, case.python_thread if kind.kind is not Recursing.PYTHON else None
    )
    if entry:
        evidence.append("entered from: " + " <- ".join(entry[:5]))
    calls_text, calls_contradict = call_summary(main.call_edges)
    if calls_text:
        evidence.append(calls_text)
    cost = f"{reps}{share_txt} a {human_bytes(reserve)} stack"
    if kind.kind is Recursing.NATIVE:
        steps = [WHY_IT_DOES_NOT_END.given(function=call_order(main)[0]), ITERATIVE_OR_BIGGER_STACK]
        if from_python is not None and from_python.via in (CTYPES, EXTENSION, NATIVE):
            headline += f", called {from_python.words}"
            steps.insert(1, _native_from_python_step(from_python))
    else:
        headline, more, steps = _in_python_terms(case, kind, main, cost, reserve)
        evidence.extend(kind.evidence)
        evidence.extend(more)
    no_python_overflow = _no_pure_python_overflow(case, kind, main)
    if no_python_overflow is not None:
        steps.insert(0, no_python_overflow)
    if calls_contradict:
        steps.insert(0, CHECK_BY_HAND)
    confidence = Confidence.MEDIUM if calls_contradict or limit else Confidence.HIGH
    return conclude(VerdictKind.RECURSION, headline, confidence, evidence, steps, case.crash.thread_id)


def _native_from_python_step(entry: PythonEntry) -> Step:
    """What to look at on the Python side of a native recursion Python code called."""
    where = f" ({entry.python_frame})" if entry.python_frame else ""
    if entry.via == CTYPES:
        return CTYPES_CALLER.given(where=where, module=entry.module or "the DLL")
    return PYTHON_CALLER.given(where=where, module=entry.module or "native code")


def _no_pure_python_overflow(case: Case, kind: RecursionKind, main: Cycle) -> Optional[Step]:
    """On CPython 3.12+ the interpreter counts C recursion too, so an overflow cannot come
    from Python functions (or repr/pickle of nested data) alone: say so, and name the
    native code that did recurse."""
    minor = python_minor(case.environment.python_module or (case.python.dll if case.python else None))
    if minor is None or minor < 12:
        return None
    native = kind.module or (call_order(main)[0] if main.functions else "native code")
    return IN_NATIVE_CODE_ON_312.given(minor=str(minor), native=native)
