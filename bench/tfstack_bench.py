"""`!tfstack` inside the debugger against `dumpkit analyze` on the million-frame sample
(issue #44 item 4), in one run.

    python bench/tfstack_bench.py [--runs N] [--dump PATH]

`deep_recursion_1m.dmp.xz` (1,048,444 frames) decompressed, with the sample binaries as
images, measured here:
- `dumpkit analyze DUMP --format json` as a process, N times: natively (this checkout,
  this Python), and under Wine by python.org's CPython 3.13 (the engine route's Python,
  tests/support/wine/pythons.py), so the interpreter and the OS layer match the debugger's;
- `!tfstack --json` typed into Microsoft's dbgeng (the pykd wheel's, in the debugger-host
  lane's cdb-like host under Wine, tests/windbg_host), one debugger process per Python:
  the first run (the Python started inside the debugger, dumpkit imported, the walk)
  and N more (what every later `!tfstack` costs), each as long as
  IDebugControl::Execute took; on the engine route in CPython 3.8 (the lane's, started
  through pykd.pyd), 3.12 and 3.13, and on the pykd route (`!py -g tfstack.py`, which
  takes no options: it prints DML) in 3.8.
Prints a Markdown table for bench/README.md and the ratio of each warm `!tfstack` to the
native and to the Wine `dumpkit analyze`. Needs what the Wine lanes need; says what is
missing otherwise.
"""

from __future__ import annotations

import argparse
import lzma
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from tests.support import wine as lane  # noqa: E402
from tests.support.samples import SAMPLE_BIN, SAMPLES  # noqa: E402
from tests.support.wine import pythons as engine_pythons  # noqa: E402
from tests.windbg_host import host as hostlib  # noqa: E402

W = lane.windows_path


def _decompressed(scratch: Path) -> Path:
    out = scratch / "deep_recursion_1m.dmp"
    with lzma.open(SAMPLES / "deep_recursion_1m.dmp.xz") as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


def _timed(argv: List[str], runs: int, **kw) -> List[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900, **kw)
        times.append(time.perf_counter() - started)
        if proc.returncode not in (0, 1) or '"verdict"' not in proc.stdout:
            raise SystemExit(f"{argv[:3]} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return times


def cli_native(dump: Path, runs: int, env: lane.Env) -> List[float]:
    argv = [sys.executable, "-m", "dumpkit", "analyze", str(dump), "--image-path", str(SAMPLE_BIN), "--format", "json"]
    return _timed(argv, runs, cwd=ROOT, env=dict(os.environ, WINEPREFIX=str(env.prefix)))


def cli_wine(dump: Path, runs: int, env: lane.Env, home: Path) -> List[float]:
    argv = ["timeout", "600", env.wine, "python.exe", "-m", "dumpkit", "analyze", W(dump), "--image-path"]
    argv += [W(SAMPLE_BIN), "--format", "json"]
    return _timed(argv, runs, cwd=home, env=env.environ())


def in_debugger(host: hostlib.Host, dump: Path, runs: int, command: str, environ: Dict[str, str], load: str) -> list:
    """Milliseconds of each run of `command` in one debugger process (the first is cold)."""
    commands = [f".exepath+ {W(SAMPLE_BIN)}", load] + [command] * (runs + 1)
    session = host.run(dump, commands, environ=environ, python="DUMPKIT_PYTHON" not in environ, timeout=1800)
    got = session.by_command(command)
    if not session.exited or len(got) != runs + 1:
        raise SystemExit(f"the debugger did not get through {command!r}: {session.stderr[-2000:]}")
    for c in got:
        if "1,048,440" not in c.output:
            raise SystemExit(f"{command!r} did not report the walk: {(c.output + c.errors)[-2000:]}")
    return [c.ms / 1000 for c in got]


def _fmt(seconds: List[float]) -> str:
    return f"{statistics.median(seconds):.2f} s" + (
        f" ({min(seconds):.2f}-{max(seconds):.2f})" if len(seconds) > 1 else ""
    )


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dump", type=Path, help="deep_recursion_1m.dmp already decompressed")
    args = ap.parse_args(argv)
    try:
        env = lane.build(log=lambda line: print(line, file=sys.stderr))
        host = hostlib.build(env)
        pythons = engine_pythons.build(env, log=lambda line: print(line, file=sys.stderr))
    except lane.Unavailable as e:
        print(f"tfstack bench unavailable: {e}")
        return 2
    env.serve()
    scratch = Path(tempfile.mkdtemp(prefix="tfstack-bench-", dir=env.root.parent))
    try:
        dump = args.dump or _decompressed(scratch)
        rows = []
        native = cli_native(dump, args.runs, env)
        rows.append(("`dumpkit analyze --format json`, native (this Python)", native, None))
        wine_cli = cli_wine(dump, args.runs, env, pythons["3.13"].home)
        rows.append(("`dumpkit analyze --format json`, CPython 3.13 under Wine", wine_cli, None))
        load = f".load {W(hostlib.TFSTACK_DLL)}"
        for version in ("3.8", "3.12", "3.13"):
            environ = {} if version == "3.8" else {"DUMPKIT_PYTHON": W(pythons[version].home)}
            ms = in_debugger(host, dump, args.runs, "!tfstack --json", environ, load)
            rows.append((f"`!tfstack --json`, engine route, CPython {version}", ms[1:], ms[0]))
        pyd = W(env.python_dir / "Lib" / "site-packages" / "pykd" / "pykd.pyd")
        on_path = {"WINEPATH": W(env.python_dir)}  # pykd.pyd finds its python38.dll on PATH
        ms = in_debugger(host, dump, args.runs, f"!py -g {W(hostlib.TFSTACK_PY)}", on_path, f".load {pyd}")
        rows.append(("`!py -g tfstack.py` (DML), pykd route, CPython 3.8", ms[1:], ms[0]))
    finally:
        env.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    base_native, base_wine = statistics.median(native), statistics.median(wine_cli)
    print(f"deep_recursion_1m (1,048,444 frames), {args.runs} runs each, {time.strftime('%Y-%m-%d')}\n")
    print("| what | first run in the debugger | time (median, min-max) | vs native analyze | vs analyze under Wine |")
    print("|---|---|---|---|---|")
    for what, times, first in rows:
        med = statistics.median(times)
        print(
            f"| {what} | {f'{first:.2f} s' if first is not None else ''} | {_fmt(times)} | "
            f"{med / base_native:.2f}x | {med / base_wine:.2f}x |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
