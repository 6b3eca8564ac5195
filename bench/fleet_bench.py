"""Per-dump cost of `dumpkit triage` on a fleet-sized folder of small real dumps, against
rust-minidump walking the same dumps two at a time (issue #34 item 2).

    python bench/fleet_bench.py [--dumps 2000] [--jobs 2] [--from all|real|samples|public] [--keep DIR]
                                [--before REV] [--rounds N]

The folder holds `--dumps` files made from the small real dumps: the third-party dumps in
../shared/real_dumps and the plain sample dumps under 2 MB; or (`--from public`) the Unity
and Unreal crashes of 41-187 threads that bench/truth_corpus.py caches. Each copy is the original byte
for byte except the MINIDUMP_HEADER's CheckSum field (offset 16, which no reader checks),
set to the copy's number, so every file has its own content hash: a cache keyed by content
sees 2,000 dumps, not a few dozen. Then, in one run:
- rust-minidump's `minidump-stackwalk --json` on every file, two processes at a time;
- `dumpkit triage FOLDER --jobs N --format json` (no images given, like rust-minidump);
- the same with `--cache` twice: the cold run fills it, the warm one is all hits;
- with `--before REV`: that commit's `dumpkit triage` too (its dumpkit/ unpacked with `git
  archive`, as bench/startup_ab.py does), on the same folder in the same run.
`--rounds N` takes the first three N times in turn and keeps each one's best (the machine is
shared: a round that met other work is not the measure). Per-dump costs are wall time over
the number of dumps, and CPU time (user + system of every process) over it; the ratio is
dumpkit's wall time over rust-minidump's from the same run. dumpkit runs with a bytecode cache, as an installed copy
has one (run.py's `child_env`: this machine sets PYTHONDONTWRITEBYTECODE, and every worker
process would compile the modules it imports after the fork server's preload from source).
"""

from __future__ import annotations

import argparse
import compileall
import ctypes
import glob
import json
import math
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Optional, Tuple

from run import child_env

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
REAL = os.path.join(os.path.dirname(ROOT), "shared", "real_dumps")
PEER = os.path.expanduser("~/.cache/dumpkit-peers/minidump-stackwalk")
SMALL = 2 << 20
PUBLIC = os.path.expanduser("~/.cache/dumpkit-bench/truth")  # bench/truth_corpus.py's dumps
CHECKSUM_AT = 16
PR_SET_CHILD_SUBREAPER = 36  # prctl(2)
TIMEOUT = 600.0  # seconds a run may take before it is called hung (--timeout)


def originals(source: str = "all") -> List[str]:
    if source == "public":
        return sorted(glob.glob(os.path.join(PUBLIC, "*.dmp")))
    found = sorted(glob.glob(os.path.join(REAL, "*", "*.dmp"))) if source in ("all", "real") else []
    if source in ("all", "samples"):
        samples = glob.glob(os.path.join(ROOT, "sample_dumps", "*.dmp"))
        found += sorted(p for p in samples if os.path.getsize(p) < SMALL)
    return found


def build(folder: str, count: int, source: str) -> List[str]:
    sources = [(p, open(p, "rb").read()) for p in originals(source)]
    paths = []
    for i in range(count):
        src, data = sources[i % len(sources)]
        body = bytearray(data)
        body[CHECKSUM_AT : CHECKSUM_AT + 4] = (i + 1).to_bytes(4, "little")
        path = os.path.join(folder, f"{i:05d}-{os.path.basename(src)}")
        with open(path, "wb") as f:
            f.write(body)
        paths.append(path)
    return paths


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def adopt_orphans() -> None:
    """Become the Linux child subreaper: triage's forkserver (and the workers it forked,
    which it reaps) outlives `dumpkit triage` and nobody waits for it, so its CPU time would
    be missing from RUSAGE_CHILDREN; adopted, it is waited for below and counted."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _reap() -> None:
    """Wait for every process a run left behind (with adopt_orphans: the forkserver, which
    ends when the triage that started it has ended)."""
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def timed(cmd: List[str], cwd: str = ROOT, timeout: float = TIMEOUT) -> Tuple[float, float]:
    """(wall, CPU) seconds of one run of `cmd`. Wall: until `cmd` ends; CPU: user + system
    of every process it started, its forkserver's workers too (adopt_orphans). A run
    still going after `timeout` seconds is killed and its wall time is infinite (hung)."""
    cpu, started = _cpu(), time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd, env=child_env(), start_new_session=True
    )
    try:
        proc.wait(timeout=timeout)
        wall = time.perf_counter() - started
    except subprocess.TimeoutExpired:  # a hung run: reported as such, not waited for
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        wall = math.inf
    _reap()
    return wall, _cpu() - cpu


def peer_walks(paths: List[str], jobs: int) -> Tuple[float, float]:
    """Every file through minidump-stackwalk, `jobs` processes at a time."""
    cpu, started = _cpu(), time.perf_counter()
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(lambda p: subprocess.run([PEER, "--json", p], capture_output=True), paths))
    return time.perf_counter() - started, _cpu() - cpu


def checkout(rev: str, into: str) -> str:
    """REV's dumpkit/ unpacked (and compiled) into `into`: where to run its `python -m dumpkit`."""
    archive = subprocess.run(["git", "archive", rev, "dumpkit"], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    compileall.compile_dir(os.path.join(into, "dumpkit"), quiet=1)
    return into


def best(a: Optional[Tuple[float, float]], b: Tuple[float, float]) -> Tuple[float, float]:
    return b if a is None else (min(a[0], b[0]), min(a[1], b[1]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dumps", type=int, default=2000)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--keep", help="build the folder here and keep it")
    ap.add_argument("--from", dest="source", choices=("all", "real", "samples", "public"), default="all")
    ap.add_argument("--before", help="also this commit's dumpkit triage, in the same run")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=TIMEOUT, help="seconds before a run is called hung and killed")
    a = ap.parse_args()
    adopt_orphans()
    if not originals(a.source):
        sys.exit("no dumps to copy: ../shared/real_dumps (or, for public, bench/truth_corpus.py's cache) is missing")
    folder = a.keep or tempfile.mkdtemp(prefix="dumpkit-fleet-")
    os.makedirs(folder, exist_ok=True)
    paths = build(folder, a.dumps, a.source)
    n = len(paths)
    mib = sum(os.path.getsize(p) for p in paths) / (1 << 20)
    print(
        f"{n} dumps ({len(originals(a.source))} originals, {a.source}), {mib:.0f} MiB; jobs {a.jobs}; load {os.getloadavg()[0]:.2f}"
    )
    dk = [sys.executable, "-m", "dumpkit", "triage", folder, "--jobs", str(a.jobs), "--format", "json", "--no-progress"]
    out = os.path.join(folder, "triage.json")
    sides = [("dumpkit triage", ROOT)]
    if a.before:
        sides.insert(
            0, (f"dumpkit triage at {a.before}", checkout(a.before, tempfile.mkdtemp(prefix="dumpkit-before-")))
        )
    for _, cwd in sides:  # fills the bytecode cache
        timed([sys.executable, "-m", "dumpkit", "triage", paths[0], "--jobs", "1", "--format", "json"], cwd)
    found: Dict[str, Tuple[float, float]] = {}
    hung: Dict[str, int] = {}

    def take(name: str, got: Tuple[float, float]) -> str:
        found[name] = best(found.get(name), got)
        hung[name] = hung.get(name, 0) + (got[0] == math.inf)
        return f"{name} {got[0]:.2f} s"

    for r in range(max(1, a.rounds)):
        line = []
        if os.access(PEER, os.X_OK):
            line.append(take("rust-minidump, 2 at a time", peer_walks(paths, a.jobs)))
        for name, cwd in sides:
            line.append(take(name, timed(dk + ["-o", out], cwd, a.timeout)))
        print(f"round {r + 1}, load {os.getloadavg()[0]:.2f}: " + "; ".join(line), flush=True)
    cache = os.path.join(folder, ".cache")
    take("dumpkit triage --cache (cold)", timed(dk + ["--cache", cache, "-o", out], ROOT, a.timeout))
    take("dumpkit triage --cache (warm)", timed(dk + ["--cache", cache, "-o", out], ROOT, a.timeout))
    for _, cwd in sides[:-1]:
        shutil.rmtree(cwd, ignore_errors=True)
    try:
        with open(out, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError):
        doc = {"dumps": []}  # the warm run hung
    hits = sum(1 for d in doc["dumps"] if d.get("cached"))
    analysed = sum(1 for d in doc["dumps"] if d["status"] == "analysed")
    peer = found.get("rust-minidump, 2 at a time")
    print(f"best of {max(1, a.rounds)}; load {os.getloadavg()[0]:.2f} at the end")
    print("| run | wall | per dump | CPU per dump | vs rust-minidump (wall) |")
    print("|---|---|---|---|---|")
    for name, (wall, cpu) in found.items():
        if wall == math.inf:
            print(f"| {name} | hung (killed after {a.timeout:g} s) | | | |")
            continue
        ratio = f"{wall / peer[0]:.2f}" if peer else "-"
        print(f"| {name} | {wall:.2f} s | {wall / n * 1000:.2f} ms | {cpu / n * 1000:.2f} ms | {ratio} |")
    for name, count in hung.items():
        if count:
            print(f"{name}: {count} run(s) hung and were killed after {a.timeout:g} s")
    print(f"warm run: {hits}/{n} from the cache, {analysed} analysed records in all")
    if not a.keep:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
