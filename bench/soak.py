"""A triage soak (issue #34 item 5): 10,000 distinct dumps with the cache, on 2 worker
processes and on a 2-worker Dask LocalCluster; throughput and memory over the run.

    python bench/soak.py [--dumps 10000] [--keep DIR] [--no-dask | --no-processes]

The dumps are made as in fleet_bench.py (real small dumps, each copy's header CheckSum set
to its number: every file its own content hash). Each run is sampled every 0.5 s: the
number of cache entries written so far (throughput as the run goes, not only its average)
and VmRSS of the triage process and of every process below it (workers; for Dask, the
nannies' workers, found below this script). The table gives, per tenth of the run, the
dumps done per second and the largest RSS seen in the parent and in any one worker:
memory that grows with the number of dumps shows as a rising column.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from fleet_bench import build  # noqa: E402  (bench scripts are run from anywhere)
from triage_bench import descendants, status_bytes  # noqa: E402

Sample = Tuple[float, int, int, int]  # (seconds, cache entries, parent RSS, largest worker RSS)


def _entries(cache: str) -> int:
    return sum(len(files) for _, _, files in os.walk(cache))


def watched(cmd: List[str], cache: str, parent_of_workers: int = 0) -> Tuple[float, List[Sample], int]:
    """Run `cmd`, sampling as the module says. Workers are the processes below the child,
    or below `parent_of_workers` (this script, for a LocalCluster) when given."""
    samples: List[Sample] = []
    started = time.monotonic()
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            workers = descendants(parent_of_workers or child.pid)
            workers = [w for w in workers if w != child.pid]
            worst = max((status_bytes(w, "VmRSS") for w in workers), default=0)
            samples.append((time.monotonic() - started, _entries(cache), status_bytes(child.pid, "VmRSS"), worst))
            time.sleep(0.5)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    _, err = child.communicate()
    done.set()
    t.join()
    if child.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd[:4])}... exited {child.returncode}: {err.decode(errors='replace')[-2000:]}")
    return time.monotonic() - started, samples, child.returncode


def table(name: str, wall: float, samples: List[Sample], n: int) -> None:
    mib = 1 << 20
    print(f"\n{name}: {n} dumps in {wall:.1f} s, {n / wall:.0f} dumps/s on average")
    print("| part of the run | dumps/s | parent RSS (max) | largest worker RSS (max) |")
    print("|---|---|---|---|")
    tenths: Dict[int, List[Sample]] = {}
    for s in samples:
        tenths.setdefault(min(9, int(10 * s[0] / wall)), []).append(s)
    previous = (0.0, 0)
    for k in sorted(tenths):
        part = tenths[k]
        last = part[-1]
        rate = (last[1] - previous[1]) / max(1e-9, last[0] - previous[0])
        previous = (last[0], last[1])
        print(
            f"| {10 * k}-{10 * k + 10}% | {rate:.0f} | {max(s[2] for s in part) / mib:.0f} MiB "
            f"| {max(s[3] for s in part) / mib:.0f} MiB |"
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dumps", type=int, default=10_000)
    ap.add_argument("--keep", help="build the folder here and keep it")
    ap.add_argument("--no-dask", action="store_true")
    ap.add_argument("--no-processes", action="store_true", help="only the Dask run")
    a = ap.parse_args()
    folder = a.keep or tempfile.mkdtemp(prefix="dumpkit-soak-")
    dumps = os.path.join(folder, "dumps")
    os.makedirs(dumps, exist_ok=True)
    n = len(build(dumps, a.dumps, "all"))
    print(f"{n} dumps, load {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores")
    dk = [sys.executable, "-m", "dumpkit", "triage", dumps, "--format", "json", "--no-progress"]
    out = os.path.join(folder, "out.json")
    if not a.no_processes:
        cache = os.path.join(folder, "cache-processes")
        wall, samples, _ = watched(dk + ["--jobs", "2", "--cache", cache, "-o", out], cache)
        table("triage --jobs 2 --cache (cold)", wall, samples, n)
    if not a.no_dask:
        from distributed import LocalCluster

        cache = os.path.join(folder, "cache-dask")
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
            cmd = dk + ["--scheduler", cluster.scheduler_address, "--cache", cache, "-o", out]
            wall, samples, _ = watched(cmd, cache, parent_of_workers=os.getpid())
        table("triage on a 2-worker Dask LocalCluster --cache (cold)", wall, samples, n)
    if not a.keep:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
