"""`dumpkit capture` (cli.py parses its arguments): run or attach to a program under
dumpkit's debug loop and, on a crash, say what was written and what killed it; or, with
--attach PID --now, dump a running process at once and say in one line what was written.

Windows only; elsewhere it says so in one line, with what to use instead."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Optional, Sequence

from dumpkit.commands.exits import EXIT_OK, fail

if TYPE_CHECKING:
    from dumpkit.capture.snapshot import Snapshot

NOT_WINDOWS_CAPTURE = (
    "dumpkit capture runs on Windows (it debugs the program through the Win32 debugging API); "
    "on Linux, enable core dumps (ulimit -c unlimited, or systemd-coredump's coredumpctl) and run Python with "
    "-X faulthandler; dumpkit analyze reads Windows dumps on any machine"
)
DETACHED = 130  # as Ctrl-C ends a command
DETACH_FAILED = 1


def _say(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _size(n: int) -> str:
    from dumpkit.words import human_bytes

    return human_bytes(n)


def _verdict(path: str) -> str:
    """The one-line verdict of the dump just written (images from the recorded paths: this
    is the machine that crashed)."""
    try:
        from dumpkit.engine import Options, analyze
        from dumpkit.problems import Problems
        from dumpkit.sources.minidump import open_dump

        problems = Problems()
        target = open_dump(path, problems)
        try:
            verdict = analyze(target, Options(all_threads=True), problems=problems).report.verdict
        finally:
            target.close()
    except Exception as e:  # the dump is written whatever its analysis meets; say what it met
        return f"(not analysed here: {type(e).__name__}: {e}; run dumpkit analyze on it)"
    return verdict.headline if verdict is not None else "(no verdict)"


def _report(dumped) -> None:
    from dumpkit.analysis.codes import lookup_status

    if dumped.exit_code is not None:
        _say(
            f"dumpkit capture: process {dumped.pid} ended itself with exit code {dumped.exit_code} "
            f"({dumped.exit_code:#x}) on thread {dumped.thread_id} (stopped at ntdll!{dumped.exit_function})"
        )
    else:
        name = lookup_status(dumped.code).name or ""
        chance = "first" if dumped.first_chance else "second"
        _say(
            f"dumpkit capture: process {dumped.pid} crashed: {dumped.code:#010x} {name} on thread "
            f"{dumped.thread_id} ({chance} chance)"
        )
    size = os.path.getsize(dumped.path) if os.path.exists(dumped.path) else 0
    py = dumped.python
    if py is None:
        extra = ""
    elif py.state.status.value == "read":
        stacks = sum(1 for t in py.state.threads if t.frames)
        extra = f"; Python stacks of {stacks} thread(s) in it ({_size(py.size)} of interpreter memory)"
    else:
        extra = f"; no Python stack: {py.state.message}"
    if dumped.pointed:
        extra += f"; {_size(dumped.pointed)} of memory its stack points to"
    _say(f"  dump: {dumped.path} ({_size(size)}, written in {dumped.seconds:.1f} s{extra})")
    _say(f"  verdict: {_verdict(dumped.path)}")


def detach_failed(pid: int, error: str, ended: bool, exit_code: Optional[int]) -> str:
    """The line for a Ctrl-C whose DebugActiveProcessStop failed: why, and what became of
    the process (running on: every debug event was continued and kill-on-exit is off, so
    Windows lets it go as dumpkit exits)."""
    if not ended:
        fate = "it keeps running (dumpkit exits without ending it)"
    elif exit_code is None:
        fate = "it had already exited"
    else:
        fate = f"it had already exited with code {exit_code}"
    return f"dumpkit capture: could not detach from process {pid}: {error}; {fate}"


def snapshot_line(taken: "Snapshot", size: int) -> str:
    """The one line `--attach PID --now` says: what was written, and that the process runs
    on (or, should Windows refuse to resume it, that it does not)."""
    held = [_size(size), "full memory" if taken.full else "", f"{taken.threads} threads"]
    if taken.python is not None:
        n = taken.python_threads
        held.append(f"Python stacks of {n}" if n else f"no Python stack: {taken.python.state.message}")
    fate = (
        f"suspended for {taken.suspended_seconds:.1f} s, running again"
        if taken.resume_error is None
        else f"it could not be resumed ({taken.resume_error}) and stays suspended"
    )
    return (
        f"dumpkit capture: process {taken.pid} ({taken.image}) dumped as it runs: {taken.path} "
        f"({', '.join(h for h in held if h)}); {fate}"
    )


NOW_WITHOUT_ATTACH = (
    "--now dumps a process that is already running: give its id with --attach PID (dumpkit capture --attach 4242 --now)"
)
EXIT_CHOICES = ("abnormal", "nonzero", "never")


def run_capture(
    program: Sequence[str], output: str, full: bool, attach: Optional[int], on_exit: str = "abnormal", now: bool = False
) -> int:
    if on_exit not in EXIT_CHOICES:
        raise fail(f"--on-exit {on_exit}: give one of {', '.join(EXIT_CHOICES)}")
    if now and (attach is None or program):
        raise fail(NOW_WITHOUT_ATTACH)
    if now and on_exit != "abnormal":
        raise fail("--on-exit is for a program capture watches; --now writes one dump at once")
    if sys.platform != "win32":
        raise fail(NOT_WINDOWS_CAPTURE)
    if attach is None and not program:
        raise fail("give the program to run after --, e.g. dumpkit capture -- python train.py; or --attach PID")
    if attach is not None and program:
        raise fail("give a program to run or --attach PID, not both")
    try:
        os.makedirs(output, exist_ok=True)
    except OSError as e:
        raise fail(f"{output}: cannot create the dump folder: {e.strerror or e}") from None
    if now:
        assert attach is not None
        return _now(attach, os.path.abspath(output), full)
    from dumpkit.capture.debugger import CaptureError, run
    from dumpkit.capture.policy import ExitDumps

    try:
        outcome = run(
            list(program) if program else None, attach, os.path.abspath(output), full, _report, ExitDumps(on_exit)
        )
    except CaptureError as e:
        raise fail(str(e)) from None
    if outcome.detach_failed is not None:
        assert attach is not None
        _say(detach_failed(attach, outcome.detach_failed, outcome.ended, outcome.exit_code))
        return DETACH_FAILED
    if outcome.detached:
        _say(f"dumpkit capture: detached from process {attach}; it keeps running")
        return DETACHED
    if not outcome.dumps:
        _say(
            f"dumpkit capture: the program exited with code {outcome.exit_code} and did not crash; no dump written"
            + (" (--on-exit nonzero dumps every nonzero exit)" if outcome.exit_code and on_exit == "abnormal" else "")
        )
    code = outcome.exit_code if outcome.exit_code is not None else EXIT_OK
    # Windows exit codes are 32-bit; Python's sys.exit takes a C long, so 0xC00000FD goes as
    # -1073741571, which the parent sees as 0xC00000FD again
    return code - (1 << 32) if code > 0x7FFFFFFF else code


def _now(pid: int, output: str, full: bool) -> int:
    """`--attach PID --now`: 0 once the dump is written and the process runs again."""
    if pid == os.getpid():
        raise fail(f"--attach {pid} is dumpkit itself")
    from dumpkit.capture.debugger import CaptureError, snapshot

    try:
        taken = snapshot(pid, output, full)
    except CaptureError as e:
        raise fail(str(e)) from None
    _say(snapshot_line(taken, os.path.getsize(taken.path) if os.path.exists(taken.path) else 0))
    return EXIT_OK if taken.resume_error is None else DETACH_FAILED
