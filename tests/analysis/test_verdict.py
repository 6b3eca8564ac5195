"""Verdicts for situations the sample dumps do not show, from the analyses' plain data."""
from __future__ import annotations

from types import SimpleNamespace

from dumpkit.analysis.model import CrashInfo, Cycle, Environment, StackBudget, ThreadReport
from dumpkit.analysis.verdict import decide
from dumpkit.target import SoftErrors
from dumpkit.unwind.frames import Frame, StackWalk


def _target(errors=()):
    se = SoftErrors()
    for e in errors:
        se.add(e)
    return SimpleNamespace(soft_errors=se)


def _overflow_case(functions, period, reps, size):
    frames = [Frame(i, 0x7FF000001000 + i, 0x1000 + i * size, functions[i % period].split("!")[0],
                    0x1000, 0x1000 + (i % period) * 0x100, functions[i % period], size, "unwind_info")
              for i in range(period * reps)]
    cyc = Cycle(tuple(functions), period, reps, size * period, 0, period * reps - 1, size * period * reps,
                entry_path=("python.exe!pymain_run_python", "python.exe!Py_BytesMain"))
    budget = StackBudget(1, 0x200000, None, 0, 2_000_000, size * period * reps, "teb")
    thread = ThreadReport(1, None, True, len(frames), (), 0, "end of stack", {}, (cyc,), budget)
    crash = CrashInfo(0xC00000FD, "STATUS_STACK_OVERFLOW", "out of stack", "0xC00000FD stack overflow", 1,
                      0x7FF000001000, (1, 0x1000))
    return crash, thread, StackWalk(1, frames, "end of stack", [])


def test_recursion_made_of_interpreter_frames_is_called_python_recursion():
    fns = ["python310.dll!_PyEval_EvalFrameDefault", "python310.dll!_PyFunction_Vectorcall",
           "python310.dll!PyObject_Call", "python310.dll!method_vectorcall"]
    crash, thread, walk = _overflow_case(fns, 4, 2000, 240)
    v, findings = decide(_target(), crash, thread, walk, (), Environment())
    assert v.kind == "recursion"
    assert v.headline.startswith("Stack overflow: Python code recursed") and "python310.dll" in v.headline
    assert any("setrecursionlimit" in s for s in v.next_steps)
    assert any("faulthandler" in s for s in v.next_steps)


def test_native_recursion_keeps_the_native_advice():
    crash, thread, walk = _overflow_case(["opkernels.dll!visit"], 1, 5000, 96)
    v, _ = decide(_target(), crash, thread, walk, (), Environment())
    assert v.kind == "recursion" and "unbounded recursion opkernels.dll!visit" in v.headline
    assert not any("setrecursionlimit" in s for s in v.next_steps)


def test_damaged_dump_without_exception_says_so():
    v, _ = decide(_target(["dump has no thread list"]), None, None, None, (), Environment())
    assert v.kind == "no_exception" and "damaged" in v.headline and v.confidence == "low"
    v, _ = decide(_target(), None, None, None, (), Environment())
    assert "written on request" in v.headline
