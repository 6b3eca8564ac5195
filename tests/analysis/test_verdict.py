"""Verdicts for situations the sample dumps do not show, from the analyses' plain data."""

from __future__ import annotations


from dumpkit.analysis.pyentry import crash_entry
from dumpkit.analysis.model import CrashInfo, Cycle, Environment, StackBudget, ThreadReport
from dumpkit.analysis.verdict import Case
from dumpkit.analysis.verdict import decide as decide_case
from dumpkit.unwind.frames import Frame, StackWalk, StopReason


def decide(problems, crash, thread, walk, sizes, env):
    """The verdict for these facts, as the engine would ask for it (with how the top of the
    stack was entered from Python, which the engine works out from every frame)."""
    frames = walk.frames if walk else ()
    entry = crash_entry(frames, None) if frames else None
    return decide_case(Case(crash, thread, frames, None, sizes, env, tuple(problems), python_entry=entry))


def _target(errors=()):
    return list(errors)


def _overflow_case(functions, period, reps, size):
    frames = [
        Frame(
            i,
            0x7FF000001000 + i,
            0x1000 + i * size,
            functions[i % period].split("!")[0],
            0x1000,
            0x1000 + (i % period) * 0x100,
            functions[i % period],
            size,
            "unwind_info",
        )
        for i in range(period * reps)
    ]
    cyc = Cycle(
        tuple(functions),
        period,
        reps,
        size * period,
        0,
        period * reps - 1,
        size * period * reps,
        entry_path=("python.exe!pymain_run_python", "python.exe!Py_BytesMain"),
    )
    budget = StackBudget(1, 0x200000, None, 0, 2_000_000, size * period * reps, "teb")
    thread = ThreadReport(1, None, True, len(frames), (), 0, StopReason.END_OF_STACK, {}, (cyc,), budget)
    crash = CrashInfo(
        0xC00000FD, "STATUS_STACK_OVERFLOW", "out of stack", "0xC00000FD stack overflow", 1, 0x7FF000001000, (1, 0x1000)
    )
    return crash, thread, StackWalk(1, frames, StopReason.END_OF_STACK, [])


def test_recursion_made_of_interpreter_frames_is_called_python_recursion():
    fns = [
        "python310.dll!_PyEval_EvalFrameDefault",
        "python310.dll!_PyFunction_Vectorcall",
        "python310.dll!PyObject_Call",
        "python310.dll!method_vectorcall",
    ]
    crash, thread, walk = _overflow_case(fns, 4, 2000, 240)
    # (the engine's environment names the runtime a Python process loaded)
    v, findings = decide(_target(), crash, thread, walk, (), Environment(python="3.10", python_module="python310.dll"))
    assert v.kind == "recursion"
    assert (
        v.headline.startswith("Stack overflow: Python functions recursed about 2,000 calls deep")
        and "python310.dll" in v.headline
    )
    assert any("setrecursionlimit" in s for s in v.next_steps)
    assert any("faulthandler" in s for s in v.next_steps)


def test_native_recursion_keeps_the_native_advice():
    crash, thread, walk = _overflow_case(["opkernels.dll!visit"], 1, 5000, 96)
    v, _ = decide(_target(), crash, thread, walk, (), Environment())
    assert v.kind == "recursion" and "unbounded recursion opkernels.dll!visit" in v.headline
    assert not any("setrecursionlimit" in s for s in v.next_steps)
    # a native program sizes its threads' stacks without Python's threading module
    assert not any("threading" in s for s in v.next_steps)
    assert any("CreateThread" in s and "/STACK" in s for s in v.next_steps)
    # a C recursion inside a Python process: threading.stack_size() is the way there
    v, _ = decide(_target(), crash, thread, walk, (), Environment(python="3.8.1", python_module="python38.dll"))
    assert any("threading.stack_size()" in s for s in v.next_steps)


def test_damaged_dump_without_exception_says_so():
    problem = "dump has no thread list"
    v = decide_case(Case(None, problems=(problem,), read_problems=(problem,)))[0]
    assert v.kind == "no_exception" and "damaged" in v.headline and v.confidence == "low"
    assert v.evidence == (problem,)
    v, _ = decide(_target(), None, None, None, (), Environment())
    assert "written on request" in v.headline


def test_a_walk_problem_does_not_make_a_snapshot_damaged():
    """A stack walk that stopped early (a module's image not here) is no sign that the dump
    lost an exception record: a snapshot stays a snapshot."""
    walk_problem = "thread 280: frame 10: caller SP 0x1631060 not above 0x1e4f320; stopped"
    v = decide_case(Case(None, problems=(walk_problem,), read_problems=()))[0]
    assert "damaged" not in v.headline and "written on request" in v.headline
    assert not any("Get the dump again" in s for s in v.next_steps)


def _heap_case(names):
    from dumpkit.analysis.raiser import raising_function  # what the engine uses to fill raised_by

    frames = [
        Frame(i, 0x7FF000001000 + i * 0x10, 0x1000 + i * 0x40, n.split("!")[0], 0x1000, 0x1000, n, 0x40, "unwind_info")
        for i, n in enumerate(names)
    ]
    crash = CrashInfo(
        0xC0000374,
        "STATUS_HEAP_CORRUPTION",
        "the heap is corrupted",
        "0xC0000374 heap corruption",
        1,
        frames[0].ip,
        (0,),
        raised_by=raising_function(frames, fallback=False),
    )
    return crash, StackWalk(1, frames, StopReason.END_OF_STACK, [])


def test_heap_corruption_names_the_caller_and_the_operation():
    # the shape of a real 0xC0000374 stack: the heap reports from inside RtlFreeHeap
    crash, walk = _heap_case(
        [
            "ntdll.dll!RtlReportFatalFailure",
            "ntdll.dll!RtlReportCriticalFailure",
            "ntdll.dll!RtlpHeapHandleError",
            "ntdll.dll!RtlpLogHeapFailure",
            "ntdll.dll!RtlFreeHeap",
            "ucrtbase.dll!_free_base",
            "my_ops.pyd!Tensor_release",
            "my_ops.pyd!run_kernel",
            "python310.dll!PyObject_Call",
        ]
    )
    v, findings = decide(_target(), crash, None, walk, (), Environment())
    assert v.kind == "heap_corruption" and v.confidence == "high"
    assert v.headline == (
        "Heap corruption (0xC0000374): the Windows heap found its structures damaged while freeing "
        "a block, called from my_ops.pyd!Tensor_release, from Python through the extension module my_ops.pyd"
    )
    assert "Tensor_release" in v.next_steps[0] and "gflags" in v.next_steps[0]
    assert findings[0].kind == "heap_corruption"


def test_page_heap_advice_names_the_process_that_crashed():
    crash, walk = _heap_case(["ntdll.dll!RtlReportCriticalFailure", "ntdll.dll!RtlFreeHeap", "tfhost.exe!release"])
    native = Case(crash, None, walk.frames, None, (), Environment(), (), executable="tfhost.exe")
    v, _ = decide_case(native)
    assert "gflags /p /enable tfhost.exe /full" in v.next_steps[0] and "python.exe" not in " ".join(v.next_steps)
    python = Case(crash, None, walk.frames, None, (), Environment(python="3.8.1"), (), executable="python.exe")
    assert "gflags /p /enable python.exe /full" in decide_case(python)[0].next_steps[0]


def test_heap_corruption_with_a_static_crt_skips_its_allocator():
    crash, walk = _heap_case(
        [
            "ntdll.dll!RtlReportCriticalFailure",
            "ntdll.dll!RtlAllocateHeap",
            "my_ops.pyd!_malloc_base",
            "my_ops.pyd!make_buffer",
        ]
    )
    v, _ = decide(_target(), crash, None, walk, (), Environment())
    assert "while allocating a block, called from my_ops.pyd!make_buffer" in v.headline


def test_heap_corruption_seen_only_inside_the_heap_is_medium():
    crash, walk = _heap_case(["ntdll.dll!RtlReportCriticalFailure", "ntdll.dll!RtlFreeHeap"])
    assert crash.raised_by is None  # no frame outside the machinery: none is blamed
    v, _ = decide(_target(), crash, None, walk, (), Environment())
    assert v.kind == "heap_corruption" and v.confidence == "medium"
    assert v.headline.endswith("while freeing a block in ntdll.dll!RtlReportCriticalFailure")


def _fastfail_case(subcode, names, trust="scan"):
    from dumpkit.analysis.raiser import raising_function

    frames = [
        Frame(
            i,
            0x7FF000001000 + i * 0x10,
            0x1000 + i * 0x40,
            n.split("!")[0].split("+")[0],
            0x1000 + i * 0x10,
            0x1000 if "!" in n else None,
            n if "!" in n else None,
            0x40,
            trust,
        )
        for i, n in enumerate(names)
    ]
    crash = CrashInfo(
        0xC0000409,
        "STATUS_STACK_BUFFER_OVERRUN",
        "fail-fast",
        "0xC0000409 fail-fast",
        1,
        frames[0].ip,
        (subcode,),
        fastfail_code=subcode,
        fastfail_name={2: "FAST_FAIL_STACK_COOKIE_CHECK_FAILURE"}.get(subcode, "FAST_FAIL_FATAL_APP_EXIT"),
        raised_by=raising_function(frames),
    )
    return crash, StackWalk(1, frames, StopReason.END_OF_STACK, [])


def test_gs_failure_without_symbols_names_no_smashed_function():
    # a static CRT: __report_gsfailure is an unnamed frame 0 inside the module itself
    crash, walk = _fastfail_case(2, ["app.exe", "app.exe", "ntdll.dll", "app.exe"], trust="unwind_info")
    v, _ = decide(_target(), crash, None, walk, (), Environment())
    assert v.confidence == "medium"
    assert "raised inside app.exe+0x1000, called from app.exe+0x1010" in v.headline
    # a caller found only by scanning is evidence (with how it was found), never the headline's "called from"
    crash, walk = _fastfail_case(2, ["app.exe", "app.exe", "ntdll.dll", "app.exe"])
    v, _ = decide(_target(), crash, None, walk, (), Environment())
    assert "raised inside app.exe+0x1000;" in v.headline and "called from" not in v.headline
    assert any("app.exe+0x1010 (found by scan)" in e for e in v.evidence), v.evidence
    assert "may be the C runtime's __report_gsfailure itself" in v.headline
    assert not any(e.startswith("the function whose cookie check failed") for e in v.evidence)
    assert any("cannot be told which frame" in e for e in v.evidence)
    assert not any(s.startswith("Look for writes past a local array in app.exe") for s in v.next_steps)


def test_unnamed_raiser_below_a_named_runtime_frame_is_the_caller():
    # ucrtbase!abort on top: the unnamed frame below it is the caller, not the CRT
    crash, walk = _fastfail_case(7, ["ucrtbase.dll!abort", "app.exe", "app.exe"])
    v, _ = decide(_target(), crash, None, walk, (), Environment())
    assert v.confidence == "high" and v.headline.endswith("raised by app.exe+0x1010")


def test_access_violation_in_the_guard_region_is_a_stack_overflow():
    # TEB bounds: StackLimit 0x7000, reserve from 0x0; the write lands a page below the limit
    budget = StackBudget(1, 0x100000, 0x7000, 0x1000, 0xFF000, 0xF8F00, "teb", guard_hit=True)
    thread = ThreadReport(1, None, True, 1, (), 0, StopReason.END_OF_STACK, {}, (), budget)
    crash = CrashInfo(
        0xC0000005,
        "STATUS_ACCESS_VIOLATION",
        "av",
        "0xC0000005 access violation: write to 0x6ff8",
        1,
        0x7FF000001000,
        (1, 0x6FF8),
        access_kind="write",
        access_address=0x6FF8,
    )
    v, _ = decide(_target(), crash, thread, None, (), Environment())
    assert v.kind == "access_violation"
    assert v.headline.startswith(
        "Stack overflow seen as an access violation: write at 0x6ff8, in thread 1's stack guard region"
    )
    assert "the fault at 0x6ff8 is in the stack's guard region (bounds from the TEB)" in v.evidence
    assert v.next_steps[0].startswith("Treat it as a stack overflow")
    # the same fault with bounds that are only an estimate claims nothing
    estimated = ThreadReport(
        1,
        None,
        True,
        1,
        (),
        0,
        StopReason.END_OF_STACK,
        {},
        (),
        StackBudget(1, 0x100000, None, 0, 0x100000, 0xF8F00, "captured+image"),
    )
    v, _ = decide(_target(), crash, estimated, None, (), Environment())
    assert not v.headline.startswith("Stack overflow")


def test_unhandled_cxx_exception_names_the_type_and_the_thrower():
    """No sample dump has an MSVC throw (mingw's g++ does not raise 0xE06D7363): ThrowInfo is
    laid out in memory as MSVC emits it, read by the same thrown_types() the engine uses,
    and the frames are those of a real throw (RaiseException <- _CxxThrowException <- thrower)."""
    import struct
    from dumpkit.analysis.cxx import thrown_types

    base = 0x7FF700000000
    mem = {}
    for va, data in (
        (base + 0x1000, struct.pack("<IiiI", 0, 0, 0, 0x1100)),
        (base + 0x1100, struct.pack("<iII", 2, 0x1200, 0x1300)),
        (base + 0x1200, struct.pack("<II", 0, 0x2000)),
        (base + 0x1300, struct.pack("<II", 0, 0x2100)),
        (base + 0x2010, b".?AVbad_alloc@std@@\0"),
        (base + 0x2110, b".?AVexception@std@@\0"),
    ):
        mem.update({va + i: b for i, b in enumerate(data)})

    def read(va, n):
        return bytes(mem[a] for a in range(va, va + n) if a in mem)

    params = (0x19930520, 0x2A0000, base + 0x1000, base)
    names = [
        "KERNELBASE.dll!RaiseException",
        "VCRUNTIME140.dll!_CxxThrowException",
        "my_ops.pyd!make_tensor",
        "my_ops.pyd!run_kernel",
        "python310.dll!PyObject_Call",
    ]
    frames = [
        Frame(i, 0x7FF000001000 + i * 0x10, 0x1000 + i * 0x40, n.split("!")[0], 0x1000, 0x1000, n, 0x40, "unwind_info")
        for i, n in enumerate(names)
    ]
    crash = CrashInfo(
        0xE06D7363,
        "CPP_EH_EXCEPTION",
        "C++ exception",
        "0xE06D7363 C++ exception",
        1,
        frames[0].ip,
        params,
        cxx_types=tuple(thrown_types(params, read)),
    )
    v, findings = decide(_target(), crash, None, StackWalk(1, frames, StopReason.END_OF_STACK, []), (), Environment())
    assert v.kind == "cxx_exception" and v.confidence == "high" and findings[0].kind == "cxx_exception"
    assert v.headline == (
        "Unhandled C++ exception std::bad_alloc thrown from my_ops.pyd!make_tensor, "
        "from Python through the extension module my_ops.pyd"
    )
    assert "catchable as: std::bad_alloc, std::exception" in v.evidence
    assert v.next_steps[0].startswith("Find why my_ops.pyd!make_tensor throws std::bad_alloc")
    assert any("sxe eh" in s for s in v.next_steps)
    assert not any("dumpkit analyze" in s for s in v.next_steps)


def test_one_frame_is_one_frame():
    crash, thread, walk = _overflow_case(["opkernels.dll!visit"], 1, 1, 96)
    thread = ThreadReport(1, None, True, 1, (), 0, StopReason.END_OF_STACK, {}, (), thread.budget)
    v, _ = decide(_target(), crash, thread, walk, (), Environment())
    assert "1 frame on the crashing thread" in v.evidence
