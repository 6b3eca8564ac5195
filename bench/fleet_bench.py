"""Per-dump cost of `dumpkit triage` on a fleet-sized folder of small real dumps, against
rust-minidump walking the same dumps two at a time (issue #34 item 2).

    python bench/fleet_bench.py [--dumps 2000] [--jobs 2] [--from all|real|samples] [--keep DIR]

The folder holds `--dumps` files made from the small real dumps: the third-party dumps in
../shared/real_dumps and the plain sample dumps under 2 MB. Each copy is the original byte
for byte except the MINIDUMP_HEADER's CheckSum field (offset 16, which no reader checks),
set to the copy's number, so every file has its own content hash: a cache keyed by content
sees 2,000 dumps, not a few dozen. Then, in one run:
- rust-minidump's `minidump-stackwalk --json` on every file, two processes at a time;
- `dumpkit triage FOLDER --jobs N --format json` (no images given, like rust-minidump);
- the same with `--cache` twice: the cold run fills it, the warm one is all hits.
Per-dump costs are wall time over the number of dumps; the ratio is dumpkit's over
rust-minidump's from the same run.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import List

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
REAL = os.path.join(os.path.dirname(ROOT), "shared", "real_dumps")
PEER = os.path.expanduser("~/.cache/dumpkit-peers/minidump-stackwalk")
SMALL = 2 << 20
CHECKSUM_AT = 16


def originals(source: str = "all") -> List[str]:
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


def timed(cmd: List[str]) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def peer_walks(paths: List[str], jobs: int) -> float:
    """Every file through minidump-stackwalk, `jobs` processes at a time."""
    started = time.perf_counter()
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(lambda p: subprocess.run([PEER, "--json", p], capture_output=True), paths))
    return time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dumps", type=int, default=2000)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--keep", help="build the folder here and keep it")
    ap.add_argument("--from", dest="source", choices=("all", "real", "samples"), default="all")
    a = ap.parse_args()
    if not originals(a.source):
        sys.exit("no dumps to copy: ../shared/real_dumps is missing")
    folder = a.keep or tempfile.mkdtemp(prefix="dumpkit-fleet-")
    os.makedirs(folder, exist_ok=True)
    paths = build(folder, a.dumps, a.source)
    n = len(paths)
    mib = sum(os.path.getsize(p) for p in paths) / (1 << 20)
    print(
        f"{n} dumps ({len(originals(a.source))} originals, {a.source}), {mib:.0f} MiB; jobs {a.jobs}; load {os.getloadavg()[0]:.2f}"
    )
    dk = [sys.executable, "-m", "dumpkit", "triage", folder, "--jobs", str(a.jobs), "--format", "json", "--no-progress"]
    rows = []
    if os.access(PEER, os.X_OK):
        rows.append(("rust-minidump, 2 at a time", peer_walks(paths, a.jobs)))
    out = os.path.join(folder, "triage.json")
    rows.append(("dumpkit triage", timed(dk + ["-o", out])))
    cache = os.path.join(folder, ".cache")
    rows.append(("dumpkit triage --cache (cold)", timed(dk + ["--cache", cache, "-o", out])))
    rows.append(("dumpkit triage --cache (warm)", timed(dk + ["--cache", cache, "-o", out])))
    with open(out, encoding="utf-8") as f:
        doc = json.load(f)
    hits = sum(1 for d in doc["dumps"] if d.get("cached"))
    analysed = sum(1 for d in doc["dumps"] if d["status"] == "analysed")
    peer = rows[0][1] if rows[0][0].startswith("rust") else None
    print("| run | wall | per dump | vs rust-minidump |")
    print("|---|---|---|---|")
    for name, wall in rows:
        ratio = f"{wall / peer:.2f}" if peer else "-"
        print(f"| {name} | {wall:.2f} s | {wall / n * 1000:.2f} ms | {ratio} |")
    print(f"warm run: {hits}/{n} from the cache, {analysed} analysed records in all")
    if not a.keep:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
