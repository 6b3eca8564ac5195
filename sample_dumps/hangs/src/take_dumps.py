"""Run one hang scenario under Wine and dump the hung process (MiniDumpNormal, then full
memory if asked for), as a user would with the process still running; then kill it.

    take_dumps.py --tool capture --python 3.12 --script S.py --normal N.dmp [--full F.dmp] --log L.log
    take_dumps.py --tool dumpnow --dumpnow dumpnow.exe --prefix PREFIX --python 3.12 ...

--tool capture: in the capture lane's Wine prefix (tests/capture_lane/lane.py: its genuine
CPythons, its server started and stopped by its own helpers), `dumpkit capture --attach PID
--now` (Python-aware) and `... --now --full`, run by the same Windows CPython as the script.
--tool dumpnow: in a prefix of our own (PREFIX, whose server this ends), dumpnow.exe (src/
dumpnow.c: MiniDumpWriteDump alone, as procdump or Task Manager write one).

The script is started with stdin /dev/null and two pipes (python.exe dies at start-up with a
file or a terminal as a standard handle); the dumps are taken a second after its MARKER line,
and the process must still be running after each. The log keeps what the program printed
(stdout, stderr), then under "== run" the run's facts and one `dump KIND {json}` line per dump: the tool, its exit code, what it
said, how long it took, and whether the process was still running afterwards."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

from tests.capture_lane.lane import lane  # noqa: E402
from tests.support.wine import windows_path  # noqa: E402

MARKER_WAIT = 90  # seconds for the scenario to hang and say so
SETTLE = 1.0  # after the MARKER: the thread that printed it ends


class Program:
    """A started Windows process whose output is read as it comes."""

    def __init__(self, popen: subprocess.Popen):
        self.popen = popen
        self.out: list = []
        self.err: list = []
        for stream, lines in ((popen.stdout, self.out), (popen.stderr, self.err)):
            threading.Thread(target=self._read, args=(stream, lines), daemon=True).start()

    @staticmethod
    def _read(stream, lines) -> None:
        for line in stream:
            lines.append(line)

    def marker(self) -> dict:
        deadline = time.monotonic() + MARKER_WAIT
        while time.monotonic() < deadline:
            found = next((line for line in list(self.out) if line.startswith("MARKER ")), None)
            if found:
                return json.loads(found[7:])
            if self.popen.poll() is not None:
                break
            time.sleep(0.1)
        raise SystemExit(f"no MARKER line (exit {self.popen.poll()}):\n{''.join(self.out)}{''.join(self.err)}")

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()  # the Linux process is the Windows one: wine execs into it
        self.popen.wait(60)
        time.sleep(0.5)  # the readers take the last lines


def _wine_env(prefix: Path) -> dict:
    env = dict(os.environ, WINEPREFIX=str(prefix), WINEDEBUG="-all")
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONHOME", None)
    return env


def _run(argv, timeout: float, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["timeout", "-k", "10", str(int(timeout)), *argv],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=timeout + 30,
        **kw,
    )


def main(argv) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", choices=("capture", "dumpnow"), required=True)
    ap.add_argument("--python", required=True)
    ap.add_argument("--script", required=True, type=Path)
    ap.add_argument("--normal", required=True, type=Path)
    ap.add_argument("--full", type=Path, help="also a full-memory dump, written here")
    ap.add_argument("--log", required=True, type=Path)
    ap.add_argument("--dumpnow", type=Path)
    ap.add_argument("--prefix", type=Path)
    args = ap.parse_args(argv)
    capture_lane = lane(log=lambda *_: None)
    python_dir = capture_lane.pythons[args.python]
    script = windows_path(args.script)
    if args.tool == "capture":
        capture_lane.env.serve()
        program = Program(capture_lane.start(args.python, [script]))
    else:
        env = _wine_env(args.prefix)
        popen = subprocess.Popen(
            [capture_lane.env.wine, "python.exe", script],
            cwd=python_dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
        )
        program = Program(popen)
    dumps = []
    started = time.monotonic()
    try:
        marker = program.marker()
        marker_seconds = time.monotonic() - started
        time.sleep(SETTLE)
        for kind, dest in (("normal", args.normal), ("full", args.full)):
            if dest is None:
                continue
            t0 = time.monotonic()
            if args.tool == "capture":
                folder = dest.parent / f".{dest.stem}.out"
                shutil.rmtree(folder, ignore_errors=True)
                folder.mkdir(parents=True)
                cmd = ["capture", "--attach", str(marker["pid"]), "--now", "-o", windows_path(folder)]
                done = capture_lane.dumpkit(args.python, cmd + (["--full"] if kind == "full" else []), timeout=600)
                written = sorted(folder.glob("*.dmp"))
                if len(written) == 1:
                    written[0].replace(dest)
                shutil.rmtree(folder, ignore_errors=True)
                said = done.stderr.strip()
            else:
                done = _run(
                    [capture_lane.env.wine, windows_path(args.dumpnow), str(marker["pid"]), windows_path(dest), kind],
                    600,
                    env=_wine_env(args.prefix),
                )
                said = (done.stdout + done.stderr).strip()
            seconds = time.monotonic() - t0
            alive = program.popen.poll() is None
            dumps.append(
                {
                    "kind": kind,
                    "tool": args.tool,
                    "file": dest.name,
                    "exit_code": done.returncode,
                    "said": said,
                    "seconds": round(seconds, 1),
                    "process_running_after": alive,
                    "written": dest.exists(),
                }
            )
            if done.returncode != 0 or not dest.exists() or not alive:
                raise SystemExit(f"{dest.name}: {args.tool} failed (exit {done.returncode}, alive {alive}): {said}")
    finally:
        program.kill()
        if args.tool == "capture":
            capture_lane.env.stop()
        else:
            server = shutil.which("wineserver") or "/usr/lib/wine/wineserver"
            _run([server, "-k"], 60, env=_wine_env(args.prefix))  # our own prefix: nothing else runs there
        with open(args.log, "w", encoding="utf-8") as log:
            log.write("== stdout\n" + "".join(program.out))
            log.write("== stderr\n" + "".join(program.err))
            log.write(f"== run\npython {args.python}\nscript {args.script.name}\ninterpreter {windows_path(python_dir)}\n")
            if "marker_seconds" in locals():
                log.write(f"marker_seconds {marker_seconds:.1f}\n")
            for d in dumps:
                log.write(f"dump {d['kind']} {json.dumps(d)}\n")
    for d in dumps:
        print(f"{d['file']}: {d['tool']} {d['kind']}, {d['seconds']} s: {d['said'][:240]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
