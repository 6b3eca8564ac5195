"""`dumpkit triage` over a folder of at least 200 dumps: throughput and peak memory per worker.

    python bench/triage_bench.py [--jobs N] [--copies K] [--keep DIR]

The folder (a temporary one unless --keep) holds the sample dumps (plain, .xz and the
Python samples' bundles), the real third-party dumps from ../shared/real_dumps, and K
copies of each of them (default: enough to pass 200 files) under other names in
sub-folders, the way a WER LocalDumps tree holds one crash many times. The 1M-frame
deep_recursion sample is taken once (it alone takes ~16 s; copies of it would measure
only it). Then `dumpkit triage FOLDER --jobs N --format json` runs as a child; while it
runs, every process under it is sampled every 0.1 s for its peak RSS (VmHWM in
/proc/PID/status, the kernel's own high-water mark, so no peak between samples is lost
while the process lives). A run with --cache over the same folder twice follows: the
second run is all cache hits.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SAMPLES = os.path.join(ROOT, "sample_dumps")
REAL = os.path.join(os.path.dirname(ROOT), "shared", "real_dumps")
ONCE = ("deep_recursion_1m.dmp.xz",)


def originals() -> List[str]:
    found = sorted(glob.glob(os.path.join(SAMPLES, "*.dmp")) + glob.glob(os.path.join(SAMPLES, "*.dmp.xz")))
    found += sorted(
        glob.glob(os.path.join(SAMPLES, "python", "*.dmp*")) + glob.glob(os.path.join(SAMPLES, "python", "*.dkb"))
    )
    found += sorted(glob.glob(os.path.join(REAL, "*", "*.dmp")))
    return found


def build(folder: str, copies: int) -> int:
    n = 0
    for i, src in enumerate(originals()):
        name = os.path.basename(src)
        shutil.copy(src, os.path.join(folder, f"{i:03d}-{name}"))
        n += 1
        if name in ONCE:
            continue
        for k in range(copies):
            sub = os.path.join(folder, f"machine{k:02d}", "CrashDumps")
            os.makedirs(sub, exist_ok=True)
            shutil.copy(src, os.path.join(sub, f"app.exe.{1000 + i * 7 + k}.{name}"))
            n += 1
    return n


def children(pid: int) -> List[int]:
    out = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.split("/")[2]))
    return out


def descendants(pid: int) -> List[int]:
    """Every process below `pid` (children, their children, ...), as /proc shows them now."""
    found, todo, seen = [], [pid], {pid}
    while todo:
        for child in children(todo.pop()):
            if child not in seen:
                seen.add(child)
                found.append(child)
                todo.append(child)
    return found


def status_bytes(pid: int, field: str = "VmHWM") -> int:
    """A memory line of /proc/PID/status in bytes (VmHWM: the peak RSS, VmRSS: now); 0
    once the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def measure(cmd: List[str]) -> Dict[str, object]:
    """Wall time, exit code, and the peak RSS of the main process and of each process
    below it (workers, the forkserver) while they lived."""
    peaks: Dict[int, int] = {}
    started = time.monotonic()
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            for pid in [child.pid] + descendants(child.pid):
                peaks[pid] = max(peaks.get(pid, 0), status_bytes(pid))
            time.sleep(0.1)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    out, err = child.communicate()
    done.set()
    t.join()
    wall = time.monotonic() - started
    main = peaks.pop(child.pid, 0)
    return {"wall": wall, "rc": child.returncode, "stdout": out, "stderr": err, "main_peak": main, "peaks": peaks}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--copies", type=int, default=0, help="copies of each dump (default: enough for 200+ files)")
    ap.add_argument("--keep", help="build the folder here and keep it")
    args = ap.parse_args()
    folder = args.keep or tempfile.mkdtemp(prefix="dumpkit-triage-bench-")
    os.makedirs(folder, exist_ok=True)
    base = len(originals())
    copies = args.copies or -(-(200 - base) // max(1, base - len(ONCE)))
    n = build(folder, copies)
    size = sum(
        os.path.getsize(p) for p in glob.glob(os.path.join(folder, "**", "*"), recursive=True) if os.path.isfile(p)
    )
    dumpkit = [sys.executable, "-m", "dumpkit", "triage", folder, "-i", os.path.join(SAMPLES, "bin"), "--no-progress"]
    run = measure(dumpkit + ["--jobs", str(args.jobs), "--format", "json"])
    doc = json.loads(run["stdout"])
    ok = sum(1 for d in doc["dumps"] if d["status"] == "analysed")
    analysis = sum(d["seconds"] for d in doc["dumps"])
    slowest = max(doc["dumps"], key=lambda d: d["seconds"])
    workers = sorted(run["peaks"].values(), reverse=True)  # type: ignore[union-attr]
    cache = os.path.join(folder, ".cache")
    cold = measure(dumpkit + ["--jobs", str(args.jobs), "--format", "json", "--cache", cache])
    warm = measure(dumpkit + ["--jobs", str(args.jobs), "--format", "json", "--cache", cache])
    warm_doc = json.loads(warm["stdout"])
    mib = 1 << 20
    print(
        f"machine: {platform.machine()} {os.cpu_count()} cores, {platform.python_implementation()} {platform.python_version()}, {platform.system()} {platform.release()}"
    )
    print(f"folder: {n} dumps ({base} distinct files, {copies} copies each but the 1M-frame one), {size / mib:.1f} MiB")
    print(f"triage --jobs {args.jobs}: {run['wall']:.1f} s wall, {n / run['wall']:.1f} dumps/s, exit {run['rc']}")  # type: ignore[operator]
    print(
        f"  analysed {ok}/{n}, {len(doc['groups'])} groups; sum of per-dump analysis time {analysis:.1f} s; slowest {slowest['seconds']:.1f} s ({os.path.basename(slowest['path'])})"
    )
    print(
        f"  peak RSS: main process {run['main_peak'] / mib:.0f} MiB; {len(workers)} processes below it, largest {', '.join(f'{w / mib:.0f}' for w in workers[:6])} MiB"
    )  # type: ignore[operator]
    print(
        f"--cache cold: {cold['wall']:.1f} s; warm: {warm['wall']:.1f} s, {sum(1 for d in warm_doc['dumps'] if d['cached'])}/{n} from the cache"
    )
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
