"""`dumpkit capture` for real: each genuine Windows CPython 3.8-3.13 runs dumpkit capture under
Wine on scripts that crash for real (sample_dumps/pyversions/src: a native recursion through
ctypes, an access violation on a worker thread, Python recursion where the interpreter still
lets it overflow) and on one that handles its own access violation. The dumps are then
analysed here, on Linux: the verdict, and every thread's Python stack against what the
crashed script printed of itself just before (its MARKER line). `dumpkit wer` is run
against Wine's registry.

Run with: python -m pytest -q tests/capture_lane"""

from __future__ import annotations

import json
import re
import shutil
import signal
import struct
import subprocess
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, TypeVar

import pytest

from tests.capture_lane.lane import VERSIONS, dumpkit_args
from tests.support.samples import SAMPLES
from tests.support.wine import windows_path

SCRIPTS = SAMPLES / "pyversions" / "src"
NATIVELIB = SAMPLES / "pyversions" / "bin" / "nativelib.dll"
HANDLED = Path(__file__).resolve().parent / "scripts" / "handled.py"
ENDS_ITSELF = Path(__file__).resolve().parent / "scripts" / "ends_itself.py"
KEEPS_RUNNING = Path(__file__).resolve().parent / "scripts" / "keeps_running.py"
STACK_OVERFLOW, ACCESS_VIOLATION = 0xC00000FD, 0xC0000005
# Wine's own PE DLLs (Debian's wine64): ntdll, kernel32 and ucrtbase by name, as Microsoft's
# symbol server gives a Windows user theirs
WINE_DLLS = Path("/usr/lib/x86_64-linux-gnu/wine/x86_64-windows")
# Pure Python recursion nests the C stack up to 3.10 (from 3.11 on, Python calls do not
# recurse in C; 3.12+ also count C recursion): sample_dumps/pyversions/README.md
PY_RECURSION_VERSIONS = ("3.8", "3.9", "3.10")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """The crashing scripts and nativelib.dll in one folder, as a user would have them."""
    folder = tmp_path_factory.mktemp("capture-scripts")
    for script in ("ctypes_recursion.py", "thread_av.py", "py_recursion.py"):
        shutil.copy(SCRIPTS / script, folder)
    shutil.copy(NATIVELIB, folder)
    shutil.copy(HANDLED, folder)
    shutil.copy(ENDS_ITSELF, folder)
    return folder


def _capture(capture_lane, version: str, script: Path, out: Path, *args: str, script_args=()):
    out.mkdir(parents=True, exist_ok=True)
    done = capture_lane.dumpkit(
        version,
        [
            "capture",
            "-o",
            windows_path(out),
            *args,
            "--",
            capture_lane.python_exe(version),
            windows_path(script),
            *script_args,
        ],
    )
    marker = next((json.loads(line[7:]) for line in done.stdout.splitlines() if line.startswith("MARKER ")), None)
    return done, marker, sorted(out.glob("*.dmp"))


def _analyse(dump: Path, *image_paths: Path):
    """As a user on this machine would: the images at the paths the dump recorded (Wine
    maps Z: to /) and the folders given."""
    from dumpkit.engine import Options, analyze
    from dumpkit.sources.minidump import open_dump

    target = open_dump(str(dump))
    try:
        return analyze(target, Options(image_paths=[str(p) for p in image_paths]), problems=target.soft_errors).report
    finally:
        target.close()


def _python_stacks(report) -> Dict[int, List[tuple]]:
    """Thread id -> its Python frames outermost first, as the MARKER lists them."""
    assert report.python is not None and report.python.status == "read", report.python and report.python.message
    return {
        t.thread_id: [(f.function, f.filename, f.line) for f in reversed(t.frames)]
        for t in report.python.threads
        if t.frames
    }


def _said(done, code: int) -> str:
    """The capture's own lines on stderr (the program's output passes through stdout)."""
    lines = done.stderr
    assert f"crashed: {code:#010x}" in lines, lines[-3000:]
    assert re.search(r"  dump: .*\.dmp \(", lines), lines[-3000:]
    assert "Traceback" not in lines, lines[-3000:]
    return lines


@pytest.mark.parametrize("version", VERSIONS)
def test_a_native_recursion_through_ctypes(capture_lane, workdir, tmp_path, version):
    done, marker, dumps = _capture(capture_lane, version, workdir / "ctypes_recursion.py", tmp_path / "out")
    said = _said(done, STACK_OVERFLOW)
    assert done.returncode == STACK_OVERFLOW & 0xFF  # Wine hands Linux the low byte of the exit code
    assert marker is not None and len(dumps) == 1
    assert "first chance" in said and "through a ctypes call into nativelib.dll" in said
    interpreter_kib = int(re.search(r"\((\d[\d,]*) KiB of interpreter memory\)", said).group(1).replace(",", ""))
    assert interpreter_kib < 10 * 1024  # the bound: at most 10 MB over a plain minidump
    report = _analyse(dumps[0], workdir, capture_lane.pythons[version])
    headline = report.verdict.headline
    assert "nativelib.dll!walk_tree" in headline and "through a ctypes call into nativelib.dll" in headline
    innermost = marker["threads"][0]["frames"][-1]
    assert f"{innermost[0]} ({innermost[1]}:{innermost[2]})" in headline
    assert report.signature.text.endswith("| python(ctypes)")
    # Wine's dbghelp writes no TEB or PEB: capture added the bytes the command line needs
    assert report.process.command_line is not None, report.process.command_line_missing
    assert "python.exe" in report.process.command_line and "ctypes_recursion.py" in report.process.command_line
    stacks = _python_stacks(report)
    for thread in marker["threads"]:
        assert stacks[thread["native_id"]] == [tuple(f) for f in thread["frames"]]
    assert _memory_list_grown_in_place(dumps[0])


def _memory_list_grown_in_place(dump: Path) -> bool:
    """Whether range data follows the dump's memory list: Wine writes its list before the
    ranges, and capture's amend grows it there. A list written anew at the end of the file
    comes after all of them and leaves the writer's, 16 bytes a range, unused in the file
    (23 MB for a TensorFlow process)."""
    data = dump.read_bytes()
    _sig, _ver, count, dir_rva = struct.unpack_from("<4sIII", data, 0)
    for i in range(count):
        kind, _size, rva = struct.unpack_from("<III", data, dir_rva + 12 * i)
        if kind == 5:  # MemoryListStream: count, then (address, size, rva) descriptors
            (n,) = struct.unpack_from("<I", data, rva)
            return n > 0 and max(d[2] for d in struct.iter_unpack("<QII", data[rva + 4 : rva + 4 + 16 * n])) > rva
    return False


@pytest.mark.parametrize("version", VERSIONS)
def test_an_access_violation_on_a_worker_thread(capture_lane, workdir, tmp_path, version):
    done, marker, dumps = _capture(capture_lane, version, workdir / "thread_av.py", tmp_path / "out")
    said = _said(done, ACCESS_VIOLATION)
    assert "second chance" in said and done.returncode == ACCESS_VIOLATION & 0xFF
    report = _analyse(dumps[0], workdir, capture_lane.pythons[version])
    assert report.crash.thread_id == marker["crash_native_id"] != marker["main_native_id"]
    crashing = next(t for t in marker["threads"] if t["crashing"])
    innermost = crashing["frames"][-1]
    assert f"from Python code at {innermost[0]} ({innermost[1]}:{innermost[2]})" in report.verdict.headline
    assert report.blame is not None and report.blame.python_frame is not None
    stacks = _python_stacks(report)
    assert set(stacks) == {t["native_id"] for t in marker["threads"]}
    for thread in marker["threads"]:
        assert stacks[thread["native_id"]] == [tuple(f) for f in thread["frames"]]
    if all("name" in t for t in marker["threads"]):
        assert {t.thread_id: t.name for t in report.python.threads} == {
            t["native_id"]: t["name"] for t in marker["threads"]
        }


@pytest.mark.parametrize("version", PY_RECURSION_VERSIONS)
def test_python_recursion_where_it_still_overflows_the_c_stack(capture_lane, workdir, tmp_path, version):
    done, marker, dumps = _capture(capture_lane, version, workdir / "py_recursion.py", tmp_path / "out")
    _said(done, STACK_OVERFLOW)
    report = _analyse(dumps[0], workdir, capture_lane.pythons[version])
    assert report.verdict.kind == "recursion" and "Python functions recursed" in report.verdict.headline
    stack = _python_stacks(report)[marker["crash_native_id"]]
    assert stack[: len(marker["stack_at_entry"])] == [tuple(f) for f in marker["stack_at_entry"]]
    recursing = {f[0] for f in stack[len(marker["stack_at_entry"]) :]}
    assert recursing == set(marker["cycle"])


@pytest.mark.parametrize("version", VERSIONS)
def test_an_exception_the_program_handles_is_not_dumped(capture_lane, workdir, tmp_path, version):
    done, _, dumps = _capture(capture_lane, version, workdir / "handled.py", tmp_path / "out")
    assert dumps == [] and done.returncode == 7, done.stderr[-2000:]
    assert "handled: exception: access violation" in done.stdout  # the program's output passes through
    assert "did not crash; no dump written" in done.stderr


def test_a_full_memory_dump_on_request(capture_lane, workdir, tmp_path):
    done, marker, dumps = _capture(capture_lane, "3.12", workdir / "thread_av.py", tmp_path / "out", "--full")
    _said(done, ACCESS_VIOLATION)
    report = _analyse(dumps[0], workdir, capture_lane.pythons["3.12"])
    assert dumps[0].stat().st_size > 50 << 20  # the whole address space, not just the stacks
    assert set(_python_stacks(report)) == {t["native_id"] for t in marker["threads"]}


def _last_status(path: Path) -> Optional[dict]:
    """keeps_running.py's last whole status line."""
    try:
        lines = [line for line in path.read_text().splitlines(keepends=True) if line.endswith("\n")]
    except FileNotFoundError:
        return None
    return json.loads(lines[-1]) if lines else None


T = TypeVar("T")


def _wait_for(what: str, probe: Callable[[], Optional[T]], seconds: float) -> T:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = probe()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {seconds:.0f} s")


def _attached(capture_lane, version: str, tmp_path: Path):
    """keeps_running.py started, then `dumpkit capture --attach` to it, once it says it is
    debugged: (the program, the capture, its pid, its status file, its STOP file, the
    dump folder). Both are ended if it fails on the way."""
    status, stop, out = tmp_path / "status", tmp_path / "stop", tmp_path / "out"
    target = capture_lane.start(version, [windows_path(KEEPS_RUNNING), windows_path(status), windows_path(stop)])
    capture = None
    try:
        pid = _wait_for("the program's first status line", lambda: _last_status(status), 60)["pid"]
        capture = capture_lane.start(version, dumpkit_args(["capture", "--attach", str(pid), "-o", windows_path(out)]))
        _wait_for("IsDebuggerPresent in the program", lambda: (_last_status(status) or {}).get("debugged"), 60)
        assert capture.poll() is None
    except BaseException:
        _end(capture, target)
        raise
    return target, capture, pid, status, stop, out


def _end(*processes: Optional[subprocess.Popen]) -> None:
    for process in processes:
        if process is not None and process.poll() is None:
            process.kill()
        if process is not None:
            process.communicate()


@pytest.mark.parametrize("version", VERSIONS)
def test_ctrl_c_detaches_from_an_attached_program_and_leaves_it_running(capture_lane, tmp_path, version):
    """`dumpkit capture --attach PID`, then Ctrl-C. Under Wine a SIGINT to a Windows process is
    its Ctrl-C: Wine's ntdll starts kernelbase's CtrlRoutine in it, which calls the console
    control handlers (the C runtime's, which CPython's SIGINT handler sits behind), as a Ctrl-C
    in its console does on Windows. Each version: its signal handling and ctypes calls differ."""
    target = capture = None
    try:
        target, capture, pid, status, stop, out = _attached(capture_lane, version, tmp_path)
        beat = _last_status(status)["beat"]
        _wait_for("the program running on while attached", lambda: _last_status(status)["beat"] >= beat + 5, 30)

        capture.send_signal(signal.SIGINT)
        _, said = capture.communicate(timeout=60)
        assert capture.returncode == 130, said[-2000:]
        assert said.splitlines()[-1] == f"dumpkit capture: detached from process {pid}; it keeps running", said
        assert "Traceback" not in said and not list(out.glob("*.dmp"))

        assert target.poll() is None

        def detached() -> Optional[dict]:
            now = _last_status(status)
            return now if now is not None and not now["debugged"] else None

        beat = _wait_for("the program no longer debugged", detached, 30)["beat"]
        _wait_for("the program running on after the detach", lambda: _last_status(status)["beat"] >= beat + 5, 30)
        stop.write_text("")
        assert target.wait(60) == 5  # it ended on its own, not killed by the capture's exit
    finally:
        _end(capture, target)


@pytest.mark.parametrize("version", ("3.8", "3.13"))
def test_ctrl_c_when_the_detach_fails_says_why_and_what_became_of_the_program(capture_lane, tmp_path, version):
    """DebugActiveProcessStop failing for real: the program has detached its debugger itself
    (NtRemoveProcessDebug on its own debug object, as programs resisting debuggers do), so
    the capture's detach is refused (Wine: access denied). Capture says so in one line, with
    the Win32 error and the program's fate, and exits 1; the program runs on."""
    target = capture = None
    try:
        target, capture, pid, status, stop, out = _attached(capture_lane, version, tmp_path)
        Path(f"{stop}.detach").write_text("")
        gone = _wait_for("the program's own detach", lambda: (_last_status(status) or {}).get("self_detach"), 30)
        assert gone == [0, 0]  # both NTSTATUS: STATUS_SUCCESS
        assert not _last_status(status)["debugged"]

        capture.send_signal(signal.SIGINT)
        _, said = capture.communicate(timeout=60)
        assert capture.returncode == 1, said[-2000:]
        assert said.count("\n") == 1 and "Traceback" not in said, said
        assert re.fullmatch(
            rf"dumpkit capture: could not detach from process {pid}: [^;\n]+ \(error \d+\); "
            r"it keeps running \(dumpkit exits without ending it\)\n",
            said,
        ), said
        assert not list(out.glob("*.dmp"))

        assert target.poll() is None
        beat = _last_status(status)["beat"]
        _wait_for("the program running on after the capture", lambda: _last_status(status)["beat"] >= beat + 5, 30)
        stop.write_text("")
        assert target.wait(60) == 5  # it ended on its own
    finally:
        _end(capture, target)


@pytest.mark.parametrize("version", ("3.8", "3.13"))
def test_ctrl_c_while_an_attached_programs_dump_is_written_finishes_it(capture_lane, tmp_path, version):
    """--attach, the program crashes (an access violation on its main thread), and Ctrl-C
    comes as soon as the dump file exists, while the writer works. The dump is finished,
    Python stack and all; then the program is ended with its crash code as Windows would end
    it (a crashed process cannot be detached and left running), and capture exits with it."""
    target = capture = None
    try:
        target, capture, pid, status, stop, out = _attached(capture_lane, version, tmp_path)
        Path(f"{stop}.crash").write_text("")
        _wait_for("the dump file", lambda: list(out.glob("*.dmp")), 120)
        capture.send_signal(signal.SIGINT)
        printed, said = capture.communicate(timeout=240)
        target.wait(60)
    finally:
        _end(capture, target)
    done = subprocess.CompletedProcess(capture.args, capture.returncode, printed, said)
    _said(done, ACCESS_VIOLATION)
    assert f"process {pid} crashed" in said and "second chance" in said
    assert "Exception ignored" not in said and "interrupted" not in said and "detach" not in said, said
    assert said.splitlines()[-1].startswith("  verdict: Access violation"), said
    assert done.returncode == ACCESS_VIOLATION & 0xFF
    dumps = sorted(out.glob("*.dmp"))
    assert len(dumps) == 1
    report = _analyse(dumps[0], capture_lane.pythons[version])
    stacks = _python_stacks(report)
    assert [f[0] for f in stacks[report.crash.thread_id]] == ["<module>", "serve", "handle_request", "crash_now"]
    assert report.process.command_line is not None  # the amend ran to its end


@pytest.mark.parametrize("version", ("3.8", "3.13"))
def test_ctrl_c_while_the_dump_is_written_does_not_cut_it_short(capture_lane, workdir, tmp_path, version):
    """A capture looks hung while it writes the dump (minutes for a TensorFlow process), so a
    Ctrl-C then is likely. Sent as soon as the dump file exists, it lands in the writer or the
    amend (seconds here). The dump is finished, Python stacks and all, and capture ends as it
    would have: its lines said, with the crash code. (The started program would get the Ctrl-C
    too on Windows; stopped at its crash, it could not act on it.)"""
    out = tmp_path / "out"
    program = [capture_lane.python_exe(version), windows_path(workdir / "thread_av.py")]
    capture = capture_lane.start(version, dumpkit_args(["capture", "-o", windows_path(out), "--", *program]))
    try:
        _wait_for("the dump file", lambda: list(out.glob("*.dmp")), 120)
        capture.send_signal(signal.SIGINT)
        printed, said = capture.communicate(timeout=240)
    finally:
        if capture.poll() is None:
            capture.kill()
            capture.communicate()
    done = subprocess.CompletedProcess(capture.args, capture.returncode, printed, said)
    _said(done, ACCESS_VIOLATION)
    assert "Exception ignored" not in said and "interrupted" not in said, said
    assert said.splitlines()[-1].startswith("  verdict: Access violation"), said
    assert done.returncode == ACCESS_VIOLATION & 0xFF
    marker = next(json.loads(line[7:]) for line in printed.splitlines() if line.startswith("MARKER "))
    dumps = sorted(out.glob("*.dmp"))
    report = _analyse(dumps[0], workdir, capture_lane.pythons[version])
    stacks = _python_stacks(report)
    assert set(stacks) == {t["native_id"] for t in marker["threads"]}
    assert report.process.command_line is not None  # the amend ran to its end


def test_wer_sets_shows_and_removes_one_executables_key(capture_lane):
    key = r"HKLM\SOFTWARE\Microsoft\Windows\Windows Error Reporting\LocalDumps"
    capture_lane.wine(["reg", "add", key + r"\other.exe", "/v", "DumpType", "/t", "REG_DWORD", "/d", "1", "/f"])
    try:
        enabled = capture_lane.dumpkit("3.12", ["wer", "enable", "python.exe", "--folder", r"C:\dumps", "--count", "3"])
        assert enabled.returncode == 0, enabled.stderr
        shown = capture_lane.wine(["reg", "query", key + r"\python.exe"]).stdout
        assert re.search(r"DumpFolder\s+REG_EXPAND_SZ\s+C:\\dumps", shown), shown
        assert re.search(r"DumpType\s+REG_DWORD\s+0x2", shown) and re.search(r"DumpCount\s+REG_DWORD\s+0x3", shown)
        status = capture_lane.dumpkit("3.12", ["wer", "status", "python.exe"])
        assert status.returncode == 0 and "DumpType:   full (2)" in status.stdout
        assert "other.exe" in status.stdout and "python.exe" in status.stdout
        disabled = capture_lane.dumpkit("3.12", ["wer", "disable", "python.exe"])
        assert disabled.returncode == 0 and "removed" in disabled.stdout
        assert capture_lane.wine(["reg", "query", key + r"\python.exe"]).returncode != 0
        other = capture_lane.wine(["reg", "query", key + r"\other.exe"]).stdout
        assert re.search(r"DumpType\s+REG_DWORD\s+0x1", other), other  # untouched
    finally:
        capture_lane.wine(["reg", "delete", key + r"\other.exe", "/f"])
        capture_lane.wine(["reg", "delete", key + r"\python.exe", "/f"])


# ----------------------------------------------------------------------------- endings
def _ended(done, code: int) -> str:
    lines = done.stderr
    assert f"ended itself with exit code {code} " in lines, lines[-3000:]
    assert "stopped at ntdll!" in lines and "Traceback" not in lines, lines[-3000:]
    return lines


@pytest.mark.parametrize("version", VERSIONS)
def test_a_fatal_python_error_is_dumped_at_its_exit_and_said_in_its_own_words(capture_lane, workdir, tmp_path, version):
    """Under Wine Py_FatalError ends through abort() -> _exit(3) with no exception: capture
    stops it at ntdll!RtlExitUserProcess, and the verdict is the message the interpreter
    printed, read back from the dump (issue #41 items 1, 2)."""
    done, marker, dumps = _capture(
        capture_lane, version, workdir / "ends_itself.py", tmp_path / "out", script_args=("gil",)
    )
    _ended(done, 3)
    assert done.returncode == 3 and len(dumps) == 1
    printed = next(line for line in (done.stdout + done.stderr).splitlines() if line.startswith("Fatal Python error:"))
    report = _analyse(dumps[0], workdir, capture_lane.pythons[version])
    verdict = report.verdict
    assert verdict.kind == "fatal_python_error"
    assert verdict.headline.startswith(printed.strip().rstrip(".")), (verdict.headline, printed)
    assert "PyThreadState_Get" in verdict.headline and "through a ctypes call into python3" in verdict.headline
    assert "end (" in verdict.headline and "ends_itself.py" in verdict.headline  # the user's line
    assert report.ending is not None and report.ending.exit_code == 3
    assert report.ending.stopped_at == "RtlExitUserProcess"
    assert report.signature.kind == "FATAL_PYTHON_ERROR(PyThreadState_Get)"


@pytest.mark.parametrize("version", ("3.8", "3.11", "3.13"))
def test_os_abort_is_dumped_as_an_abort_with_exit_code_3(capture_lane, workdir, tmp_path, version):
    done, marker, dumps = _capture(
        capture_lane, version, workdir / "ends_itself.py", tmp_path / "out", script_args=("abort",)
    )
    _ended(done, 3)
    report = _analyse(dumps[0], workdir, capture_lane.pythons[version], WINE_DLLS)
    assert report.verdict.kind == "abort"
    assert report.verdict.headline.startswith("The process ended itself with exit code 3, from abort() called by")
    assert report.crash.thread_id == marker["native_id"]
    assert "breakpoint instruction" not in report.verdict.headline


def test_a_normal_nonzero_exit_is_dumped_only_when_asked(capture_lane, workdir, tmp_path):
    done, _, dumps = _capture(capture_lane, "3.12", workdir / "ends_itself.py", tmp_path / "a", script_args=("exit",))
    assert dumps == [] and done.returncode == 4, done.stderr[-2000:]
    assert "--on-exit nonzero" in done.stderr
    done, _, dumps = _capture(
        capture_lane, "3.12", workdir / "ends_itself.py", tmp_path / "b", "--on-exit", "nonzero", script_args=("exit",)
    )
    _ended(done, 4)
    report = _analyse(dumps[0], workdir, capture_lane.pythons["3.12"], WINE_DLLS)
    assert report.verdict.kind == "process_exit" and report.verdict.headline.startswith("No crash:")


def test_terminateprocess_on_itself_is_dumped_with_its_code(capture_lane, workdir, tmp_path):
    done, _, dumps = _capture(
        capture_lane, "3.10", workdir / "ends_itself.py", tmp_path / "out", script_args=("terminate",)
    )
    _ended(done, 0xE0000001)
    report = _analyse(dumps[0], workdir, capture_lane.pythons["3.10"])
    assert report.ending is not None and report.ending.exit_code == 0xE0000001
    assert report.ending.stopped_at == "NtTerminateProcess" and report.verdict.kind == "process_exit"
