"""How a process ended itself (analysis/ending.py), from stacks as the real exit dumps show
them: Wine's abort() path (abort -> raise -> _Exit -> ExitProcess -> RtlExitUserProcess),
CPython's fatal-error path, a normal exit(), TerminateProcess, a fail-fast from abort(); and
the verdict and signature made of it. The real dumps themselves are in
tests/analysis/test_endings_dumps.py."""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

import pytest

from dumpkit.analysis.ending import as_exit_record, ending, exit_stop
from dumpkit.analysis.model import CrashInfo, EndingReason, EndingRoute, ReasonKind, VerdictKind
from dumpkit.analysis.signature import crash_signature
from dumpkit.analysis.verdict import Case, decide
from dumpkit.unwind.frames import Frame, Trust

ENTRY = 0x1_7003_1E90  # ntdll!RtlExitUserProcess in Wine's prefix


def _frames(*names: str) -> Tuple[Frame, ...]:
    """Frames named `module!function` (or `module+0x..` for an unnamed one), frame 0 at ENTRY."""
    out = []
    for i, name in enumerate(names):
        module = name.split("!")[0].split("+")[0]
        symbol = name if "!" in name else None
        rva = int(name.split("+")[1], 16) if "+" in name and "!" not in name else 0x1000 + i
        out.append(
            Frame(
                i,
                ENTRY if i == 0 else 0x7000_0000 + 0x100 * i,
                0x20F000 + 0x40 * i,
                module,
                rva,
                rva,
                symbol,
                0x40,
                Trust.CONTEXT if i == 0 else Trust.UNWIND_INFO,
            )
        )
    return tuple(out)


def _breakpoint(rcx: int = 3, rdx: int = 0, address: int = ENTRY) -> CrashInfo:
    return CrashInfo(
        0x80000003,
        "STATUS_BREAKPOINT",
        "a breakpoint",
        "0x80000003 breakpoint",
        264,
        address,
        (0,),
        registers=(("rcx", rcx), ("rdx", rdx), ("rip", address)),
    )


WINE_ABORT = (
    "ntdll.dll!RtlExitUserProcess",
    "kernel32.dll!ExitProcess",
    "ucrtbase.dll!_Exit",
    "ucrtbase.dll!_o_raise",
    "ucrtbase.dll!_o_abort",
)


def test_wines_abort_path_is_an_abort_with_its_exit_code_and_caller():
    frames = _frames(*WINE_ABORT, "python311.dll!func_20fe38", "python311.dll!PyObject_Vectorcall")
    end = ending(_breakpoint(3), frames)
    assert end is not None
    assert end.route is EndingRoute.ABORT and end.exit_code == 3 and end.stopped_at == "RtlExitUserProcess"
    assert end.calls == ("abort()", "raise()", "_exit()", "ExitProcess", "RtlExitUserProcess")
    assert (end.caller, end.caller_frame) == ("python311.dll!func_20fe38", 5)


def test_cpythons_fatal_error_path_is_a_fatal_python_error_called_by_the_failing_api():
    frames = _frames(
        *WINE_ABORT,
        "python311.dll!func_17910",  # fatal_error: static, unnamed without the PDB
        "python311.dll!_Py_FatalErrorFunc",
        "python311.dll!_Py_FatalError_TstateNULL",
        "python311.dll!PyThreadState_Get",
        "libffi-8.dll!func_4730",
    )
    end = ending(_breakpoint(3), frames)
    assert end is not None and end.route is EndingRoute.FATAL_PYTHON_ERROR
    assert end.calls[:2] == ("_Py_FatalError_TstateNULL", "_Py_FatalErrorFunc")
    assert (end.caller, end.fatal_module) == ("python311.dll!PyThreadState_Get", "python311.dll")


def test_a_normal_exit_and_os_exit_are_told_apart():
    normal = ending(
        _breakpoint(2),
        _frames(
            "ntdll.dll!RtlExitUserProcess", "kernel32.dll!ExitProcess", "ucrtbase.dll!exit", "python.exe!func_1124"
        ),
    )
    quick = ending(
        _breakpoint(5),
        _frames(
            "ntdll.dll!RtlExitUserProcess", "kernel32.dll!ExitProcess", "ucrtbase.dll!_exit", "python311.dll!func_1d00"
        ),
    )
    assert normal is not None and normal.route is EndingRoute.EXIT
    assert quick is not None and quick.route is EndingRoute.QUICK_EXIT and quick.exit_code == 5


def test_terminateprocess_on_itself_reads_the_code_from_the_second_argument():
    frames = _frames("ntdll.dll!NtTerminateProcess", "kernelbase.dll!TerminateProcess", "_ctypes.pyd!func_3b30")
    end = ending(_breakpoint(rcx=0xFFFFFFFFFFFFFFFF, rdx=0xE0000001), frames)
    assert end is not None and end.route is EndingRoute.TERMINATE_PROCESS and end.exit_code == 0xE0000001
    # another process's handle: this process did not end itself there
    assert ending(_breakpoint(rcx=0x1A4, rdx=3), frames) is None


def test_a_breakpoint_that_is_not_at_an_exit_is_not_an_ending():
    assert ending(_breakpoint(3), _frames("app.exe!debug_hook", "app.exe!main")) is None
    frames = _frames(*WINE_ABORT)
    assert ending(_breakpoint(3, address=ENTRY + 5), frames) is None  # not at the entry


def test_without_ntdlls_image_the_writers_comment_says_where_it_stopped():
    frames = _frames("ntdll.dll+0x31e90", "kernel32.dll+0x1aa1a", "ucrtbase.dll+0x4b28", "mylib.dll!shutdown_hard")
    comment = "dumpkit capture: the process ended itself: ntdll!RtlExitUserProcess was called with exit code 3 (0x3)"
    assert exit_stop(_breakpoint(3), frames, None) is None
    stop = exit_stop(_breakpoint(3), frames, comment)
    assert stop is not None and stop[:2] == ("RtlExitUserProcess", 3) and "comment" in stop[2]
    end = ending(_breakpoint(3), frames, comment)
    assert end is not None and end.route is EndingRoute.UNKNOWN
    assert end.caller == "mylib.dll!shutdown_hard"  # the unnamed system and runtime frames are the way out


def test_a_fail_fast_from_abort_is_an_ending_without_an_exit_code():
    crash = CrashInfo(
        0xC0000409,
        "STATUS_STACK_BUFFER_OVERRUN",
        "fail-fast",
        "h",
        7,
        0x1000,
        (7,),
        fastfail_code=7,
        fastfail_name="FAST_FAIL_FATAL_APP_EXIT",
    )
    end = ending(crash, _frames("ucrtbase.dll!abort", "tf.pyd!check_failed", "tf.pyd!compute"))
    assert end is not None and end.route is EndingRoute.ABORT and end.exit_code is None
    assert end.caller == "tf.pyd!check_failed"
    gs = CrashInfo(0xC0000409, "STATUS_STACK_BUFFER_OVERRUN", "", "", 7, 0x1000, (2,), fastfail_code=2)
    assert ending(gs, _frames("app.exe!f")) is None


def test_the_crash_record_of_an_exit_says_the_breakpoint_is_the_debuggers():
    end = ending(_breakpoint(3), _frames(*WINE_ABORT, "python311.dll!func_20fe38"))
    record = as_exit_record(_breakpoint(3), end)
    assert "ending itself with exit code 3" in record.summary and "not a crash" in record.summary
    assert as_exit_record(_breakpoint(3), None).summary == "a breakpoint"


def _case(crash: CrashInfo, frames: Sequence[Frame], reason: Optional[EndingReason] = None) -> Case:
    from dataclasses import replace

    end = ending(crash, frames)
    assert end is not None
    end = replace(end, reason=reason) if reason else end
    return Case(as_exit_record(crash, end), frames=frames, ending=end)


GIL = EndingReason(
    ReasonKind.FATAL_PYTHON_ERROR,
    "Fatal Python error: PyThreadState_Get: the function must be called with the GIL held, but the GIL is released "
    "(the current Python thread state is NULL)",
    "rbx of frame 6",
    function="PyThreadState_Get",
    message="the function must be called with the GIL held, but the GIL is released (the current Python thread "
    "state is NULL)",
    meaning="a Python C-API function was called by a thread that does not hold the GIL",
)
FATAL_FRAMES = (
    *WINE_ABORT,
    "python311.dll!func_17910",
    "python311.dll!_Py_FatalErrorFunc",
    "python311.dll!PyThreadState_Get",
    "app.pyd!worker",
)


def test_the_verdict_of_a_fatal_python_error_is_its_message_never_a_stray_breakpoint():
    verdict, findings = decide(_case(_breakpoint(3), _frames(*FATAL_FRAMES), GIL))
    assert verdict.kind is VerdictKind.FATAL_PYTHON_ERROR
    assert verdict.headline.startswith(
        "Fatal Python error: PyThreadState_Get: the function must be called with the GIL"
    )
    assert "breakpoint instruction" not in verdict.headline
    assert any("exit code 3" in e for e in verdict.evidence)
    assert any("GIL" in s for s in verdict.next_steps)


def test_one_verdict_whether_abort_fail_fasted_or_ended_with_exit_code_3():
    """On Windows abort() fail-fasts (0xC0000409/7); under Wine it ends with exit code 3."""
    windows = CrashInfo(
        0xC0000409,
        "STATUS_STACK_BUFFER_OVERRUN",
        "",
        "",
        264,
        0x1000,
        (7,),
        fastfail_code=7,
        fastfail_name="FAST_FAIL_FATAL_APP_EXIT",
    )
    on_windows = _frames("ucrtbase.dll!abort", *FATAL_FRAMES[5:])
    wine = decide(_case(_breakpoint(3), _frames(*FATAL_FRAMES), GIL))[0]
    win = decide(_case(windows, on_windows, GIL))[0]
    assert win.kind is wine.kind is VerdictKind.FATAL_PYTHON_ERROR
    assert win.headline == wine.headline
    assert any("fail-fast" in e for e in win.evidence) and any("exit code 3" in e for e in wine.evidence)
    sig_wine = crash_signature(wine_crash := _breakpoint(3), None, ending(wine_crash, _frames(*FATAL_FRAMES)))
    sig_win = crash_signature(windows, None, ending(windows, on_windows))
    assert sig_wine is not None and sig_win is not None and sig_wine.kind == sig_win.kind == "FATAL_PYTHON_ERROR"


def test_an_abort_with_a_reason_names_it_and_a_plain_exit_is_no_crash():
    check = EndingReason(ReasonKind.CHECK_FAILED, "Check failed: dims == 4 (3 vs. 4)", "heap at 0x1000")
    v = decide(_case(_breakpoint(3), _frames(*WINE_ABORT, "tf.pyd!ConvOp::Compute", "tf.pyd!Run"), check))[0]
    assert v.kind is VerdictKind.ABORT
    assert v.headline == (
        "The process ended itself with exit code 3, from abort() called by tf.pyd!ConvOp::Compute: "
        "Check failed: dims == 4 (3 vs. 4)"
    )
    plain = _frames("ntdll.dll!RtlExitUserProcess", "kernel32.dll!ExitProcess", "ucrtbase.dll!exit", "python.exe!main")
    v = decide(_case(_breakpoint(2), plain))[0]
    assert v.kind is VerdictKind.PROCESS_EXIT and v.headline.startswith("No crash: the program exited with exit code 2")


@pytest.mark.parametrize(
    "reason, kind",
    [
        (
            EndingReason(
                ReasonKind.OPENMP,
                "OMP: Error #15: Initializing libiomp5md.dll, but found libiomp5md.dll already initialized.",
                "x",
            ),
            "ABORT(OMP: Error #15)",
        ),
        (
            EndingReason(ReasonKind.CHECK_FAILED, "Check failed: dims == 4 (3 vs. 4)", "x"),
            "ABORT(Check failed: dims == N (N vs. N))",
        ),
        (GIL, "ABORT(PyThreadState_Get)"),
    ],
)
def test_signatures_name_the_reason_and_keep_an_openmp_error_whole(reason, kind):
    from dataclasses import replace

    frames = _frames(*WINE_ABORT, "libiomp5md.dll!func_71c00", "libiomp5md.dll!func_6a500")
    end = replace(ending(_breakpoint(3), frames), reason=reason)
    if reason.kind is ReasonKind.FATAL_PYTHON_ERROR:
        end = replace(end, route=EndingRoute.FATAL_PYTHON_ERROR)
        kind = "FATAL_PYTHON_ERROR(PyThreadState_Get)"
    sig = crash_signature(_breakpoint(3), None, end)
    assert sig is not None and sig.kind == kind
    if reason.kind is ReasonKind.OPENMP:
        assert sig.frames == () and sig.text == kind  # two programs that load two runtimes: one group


# --------------------------------------------------------------------------- collisions
from dumpkit.analysis.model import (  # noqa: E402
    CollidingModule,
    CollisionKind,
    Confidence,
    Environment,
    RuntimeCollision,
)
from dumpkit.analysis.reasons import inferred_from_collisions  # noqa: E402

OMP = RuntimeCollision(
    CollisionKind.OPENMP,
    Confidence.HIGH,
    "Two copies of Intel's OpenMP runtime are loaded",
    (
        CollidingModule("libiomp5md.dll", "C:\\Python311\\Library\\bin\\libiomp5md.dll", "5.0", "intel-openmp", "a"),
        CollidingModule("libiomp5md.dll", "C:\\site-packages\\ctranslate2\\libiomp5md.dll", "5.0", "ctranslate2", "b"),
    ),
    "the second copy stops the process with exit code 3",
    ("Load one OpenMP runtime.",),
)
OMP_EXIT = (
    "ntdll.dll!RtlExitUserProcess",
    "kernel32.dll!ExitProcess",
    "ucrtbase.dll!_Exit",
    "ucrtbase.dll!_o_raise",
    "libiomp5md.dll!func_71c00",
    "libiomp5md.dll!func_6a500",
)


def test_openmp_ending_itself_beside_a_second_copy_is_error_15_inferred_and_said_so():
    frames = _frames(*OMP_EXIT)
    end = inferred_from_collisions(ending(_breakpoint(3), frames), frames, (OMP,))
    assert end is not None and end.reason is not None and end.reason.kind is ReasonKind.OPENMP
    assert "inferred" in end.reason.text and end.reason.source.startswith("inferred, not read")
    sig = crash_signature(_breakpoint(3), None, end)
    assert sig is not None and sig.text == "ABORT(OMP: Error #15)"
    # an exit elsewhere is not OpenMP's, collision or not
    other = _frames(*WINE_ABORT, "python311.dll!func_20fe38")
    assert inferred_from_collisions(ending(_breakpoint(3), other), other, (OMP,)).reason is None


def test_the_verdict_says_the_collision_where_it_strikes_and_leaves_it_out_elsewhere():
    frames = _frames(*OMP_EXIT)
    end = inferred_from_collisions(ending(_breakpoint(3), frames), frames, (OMP,))
    case = Case(
        as_exit_record(_breakpoint(3), end),
        frames=frames,
        ending=end,
        environment=Environment(runtime_collisions=(OMP,)),
    )
    verdict = decide(case)[0]
    assert verdict.headline.endswith(": Two copies of Intel's OpenMP runtime are loaded")
    assert verdict.next_steps[0] == "Load one OpenMP runtime."
    elsewhere = _frames(*WINE_ABORT, "python311.dll!func_20fe38")
    end = ending(_breakpoint(3), elsewhere)
    case = Case(
        as_exit_record(_breakpoint(3), end),
        frames=elsewhere,
        ending=end,
        environment=Environment(runtime_collisions=(OMP,)),
    )
    assert "OpenMP" not in decide(case)[0].headline
