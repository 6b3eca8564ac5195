"""--fetch-images: what a run costs with the images at hand, with them fetched into a cold
cache, and again on the warm cache (issue #42: warm <= 1.5x at hand).

The real dumps (sample_dumps/python/numpy_strided_av.dmp; the dump inside
tf_nest_flatten.dkb) are analysed `--no-recorded-paths`, the way a colleague reads them:
  at hand: `--image-path` a folder holding the wheel's files (unzipped here);
  cold:    `--fetch-images` from a local index (tests/support/index_server.py: the JSON
           simple API with ranges) serving the real wheels, into an empty DUMPKIT_CACHE;
  warm:    the same command again.
Best wall time of --runs for "at hand" and "warm"; "cold" is one run. Wheels come from
tests/support/index_wheels.py's cache (pip downloads them once).

    python bench/fetch_bench.py [--runs 5] [--only numpy tf]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.index_server import IndexServer  # noqa: E402
from tests.support.index_wheels import wheel  # noqa: E402

CASES = {
    "numpy": ("sample_dumps/python/numpy_strided_av.dmp", [("numpy", "2023-06-26T13:29:58Z")], "numpy"),
    "tf": ("sample_dumps/python/tf_nest_flatten.dkb", [("tensorflow", None), ("tensorflow-intel", None)], "tensorflow"),
}


def _run(dump: Path, args, env) -> float:
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "dumpkit", "analyze", str(dump), "--no-recorded-paths", "--format", "json", *args],
        capture_output=True,
        env=env,
        timeout=1800,
    )
    took = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(proc.stderr.decode(errors="replace")[-2000:])
    return took


def bench(name: str, runs: int, work: Path) -> dict:
    dump_rel, projects, folder = CASES[name]
    dump = ROOT / dump_rel
    if dump.suffix == ".dkb":  # the bundle's dump alone, without its images
        with zipfile.ZipFile(dump) as zf:
            zf.extract("dump.dmp", work)
        dump = work / "dump.dmp"
    wheels = [(p, wheel(p), t) for p, t in projects]
    site = work / "site-packages"
    for _, whl, _ in wheels:
        with zipfile.ZipFile(whl) as zf:
            zf.extractall(site)
    base = dict(os.environ, PIP_CONFIG_FILE=os.devnull)
    base.pop("PIP_EXTRA_INDEX_URL", None)
    at_hand = min(_run(dump, ["--image-path", str(site / folder)], base) for _ in range(runs))
    with IndexServer() as srv:
        for project, whl, uploaded in wheels:
            srv.add_wheel(project, whl.name, whl, uploaded)
        cache = work / "cache"
        env = dict(base, DUMPKIT_CACHE=str(cache), PIP_INDEX_URL=srv.url + "/simple")
        env["DUMPKIT_PYTHON_ORG_URL"] = srv.url + "/ftp/python"
        cold = _run(dump, ["--fetch-images"], env)
        received = sum(
            int(r[1].split("=")[1].split("-")[1]) - int(r[1].split("=")[1].split("-")[0]) + 1
            for r in srv.log
            if r[1] and not r[1].startswith("bytes=-")
        )
        warm = min(_run(dump, ["--fetch-images"], env) for _ in range(runs))
    wheel_bytes = sum(w.stat().st_size for _, w, _ in wheels)
    return {"case": name, "at_hand": at_hand, "cold": cold, "warm": warm, "ranged": received, "wheels": wheel_bytes}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", nargs="*", default=list(CASES))
    a = ap.parse_args()
    print("| case | at hand (best) | cold fetch | warm (best) | warm / at hand | bytes asked by range | wheels' size |")
    print("|---|---|---|---|---|---|---|")
    for name in a.only:
        work = Path(tempfile.mkdtemp(prefix=f"dumpkit-fetch-bench-{name}-"))
        try:
            r = bench(name, max(1, a.runs), work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print(
            f"| {name} | {r['at_hand']:.2f} s | {r['cold']:.2f} s | {r['warm']:.2f} s | "
            f"{r['warm'] / r['at_hand']:.2f}x | {r['ranged'] / 1e6:,.1f} MB | {r['wheels'] / 1e6:,.1f} MB |"
        )


if __name__ == "__main__":
    main()
