"""`dumpkit capture --attach PID --now` for real: genuine Windows CPythons under Wine, a
program that is hung (sample_dumps/hangs/src/lock_deadlock.py: two threads deadlocked over
two locks, the main thread in join()) or one that keeps running, dumped as it runs by
dumpkit capture run by the same interpreter. The program runs on afterwards; the dump has
no exception and every thread's Python stack equals what the program printed of itself
(its MARKER line, from sys._current_frames() once it hung).

Run with: python -m pytest -q tests/capture_lane"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import List

import pytest

from tests.capture_lane.test_capture_under_wine import (
    KEEPS_RUNNING,
    _analyse,
    _end,
    _last_status,
    _python_stacks,
    _wait_for,
)
from tests.support.samples import SAMPLES
from tests.support.wine import windows_path

DEADLOCK = SAMPLES / "hangs" / "src" / "lock_deadlock.py"
WINE_DLLS = Path("/usr/lib/x86_64-linux-gnu/wine/x86_64-windows")
SAID = re.compile(
    r"dumpkit capture: process (\d+) \(python\.exe\) dumped as it runs: (.+\.dmp) \(([^)]*)\); "
    r"suspended for \d+\.\d s, running again"
)


class _Output:
    """A started program's stdout, read line by line as it comes."""

    def __init__(self, program: subprocess.Popen):
        self.lines: List[str] = []
        threading.Thread(target=lambda: self.lines.extend(program.stdout or ()), daemon=True).start()

    def marker(self) -> dict:
        line = _wait_for("the MARKER line", lambda: next((x for x in self.lines if x.startswith("MARKER ")), None), 90)
        return json.loads(line[7:])


def _now(capture_lane, version: str, pid: int, out: Path, *args: str):
    return capture_lane.dumpkit(version, ["capture", "--attach", str(pid), "--now", "-o", windows_path(out), *args])


@pytest.mark.parametrize("version", ("3.8", "3.12", "3.13"))
def test_a_hung_program_is_dumped_at_once_with_its_python_stacks_and_left_running(capture_lane, tmp_path, version):
    script = tmp_path / DEADLOCK.name
    shutil.copy(DEADLOCK, script)
    target = capture_lane.start(version, [windows_path(script)])
    try:
        marker = _Output(target).marker()
        time.sleep(1)  # the thread that printed it ends
        done = _now(capture_lane, version, marker["pid"], tmp_path / "out")
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
        said = SAID.fullmatch(done.stderr.strip())
        assert said and int(said.group(1)) == marker["pid"], done.stderr
        assert "3 threads, Python stacks of 3" in said.group(3)
        time.sleep(1)
        assert target.poll() is None  # still there, still hung
    finally:
        _end(target)
    dumps = sorted((tmp_path / "out").glob("*.dmp"))
    assert [d.name for d in dumps] == [said.group(2).rsplit("\\", 1)[-1]]
    report = _analyse(dumps[0], tmp_path, capture_lane.pythons[version])
    # a snapshot, and the deadlock: the dump holds both locks' objects and their types (3.8's
    # RLock type is static, in python38.dll's writable data: capture keeps its head)
    assert report.crash is None and report.verdict.kind == "deadlock", report.verdict.headline
    stacks = _python_stacks(report)
    assert set(stacks) == {t["native_id"] for t in marker["threads"]}
    for thread in marker["threads"]:
        assert stacks[thread["native_id"]] == [tuple(f) for f in thread["frames"]], thread["name"]
    # threading's names, from the few heap pages the capture recorded for them
    assert {t.thread_id: t.name for t in report.python.threads} == {
        t["native_id"]: t["name"] for t in marker["threads"]
    }
    assert report.process.command_line is not None and "lock_deadlock.py" in report.process.command_line
    # On a machine with none of the images (no Wine, no Python) the dump reads as it does with
    # them: the tables and code the capture kept of ntdll.dll, kernelbase.dll and python3X.dll
    # (capture/walkdata.py) name every wait, and what each thread waits on is the same.
    alone = _analyse_with(dumps[0])
    imaged = _analyse_with(dumps[0], WINE_DLLS, capture_lane.pythons[version])
    assert all(w.kind == "python_lock" and not w.unnamed_in for w in alone.waits), alone.waits
    assert [(w.tid, w.kind, w.what, w.obj, w.owner) for w in alone.waits] == [
        (w.tid, w.kind, w.what, w.obj, w.owner) for w in imaged.waits
    ]
    assert alone.verdict.headline == imaged.verdict.headline


def _analyse_with(dump: Path, *image_paths: Path):
    """With these images only: not the paths the dump recorded (Wine's own DLLs are there)."""
    from dumpkit.engine import Options, analyze
    from dumpkit.sources.minidump import open_dump

    target = open_dump(str(dump))
    try:
        options = Options(image_paths=[str(p) for p in image_paths], use_recorded_paths=False)
        return analyze(target, options, problems=target.soft_errors).report
    finally:
        target.close()


def test_a_running_program_runs_on_after_a_full_dump_and_is_never_debugged(capture_lane, tmp_path):
    """keeps_running.py says ten times a second that it runs and whether a debugger is
    attached: the snapshot suspends it, it never attaches."""
    status, stop, out = tmp_path / "status", tmp_path / "stop", tmp_path / "out"
    target = capture_lane.start("3.12", [windows_path(KEEPS_RUNNING), windows_path(status), windows_path(stop)])
    try:
        first = _wait_for("the program's first status line", lambda: _last_status(status), 60)
        done = _now(capture_lane, "3.12", first["pid"], out, "--full")
        assert done.returncode == 0, done.stderr[-2000:]
        said = SAID.fullmatch(done.stderr.strip())
        assert said and "full memory" in said.group(3), done.stderr
        beat = _last_status(status)["beat"]
        _wait_for("the program running on after the dump", lambda: _last_status(status)["beat"] >= beat + 5, 30)
        lines = [json.loads(line) for line in status.read_text().splitlines() if line.endswith("}")]
        assert not any(line["debugged"] for line in lines)
        stop.write_text("")
        assert target.wait(60) == 5  # it ended on its own
    finally:
        _end(target)
    (dump,) = out.glob("*.dmp")
    assert dump.stat().st_size > 50 << 20  # the whole address space
    report = _analyse(dump, capture_lane.pythons["3.12"])
    assert report.crash is None and report.verdict.kind == "no_exception"
    (frames,) = _python_stacks(report).values()  # its one thread, caught in its loop
    assert [f[0] for f in frames] == ["<module>", "serve"]


def test_a_process_that_is_not_there_is_said_in_one_line(capture_lane, tmp_path):
    done = _now(capture_lane, "3.12", 0x7FFFFFF0, tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"dumpkit: error: cannot open process {0x7FFFFFF0}: ")
    assert not list(tmp_path.glob("*.dmp"))
