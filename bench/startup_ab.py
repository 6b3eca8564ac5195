"""Start-up of two commits side by side (issue #34 item 1): `explain` and small `analyze`
runs of BEFORE and AFTER, taken in turn so that both see the same machine load.

    python bench/startup_ab.py BEFORE [AFTER] [--runs 11] [--walks]

`--walks` adds the runs where the walk and the analyses are the cost, not start-up (an
architecture change must not make them slower, issue #33 item 7): the 1M-frame overflow
(`analyze` and `stack --json`), the mingw recursion, the CPython recursion walked without
python38.dll (every frame scanned, verified in bulk), `info --json` of a real dump, the
TensorFlow bundles (`analyze`), `stack --all` of the 19-thread real dump and of the Python
recursion, and (issue #45) `analyze` of a Unity player's 47-thread crash without its images,
from bench/truth_corpus.py's cache when it is there.

Each commit's `dumpkit/` is unpacked with `git archive` into a temporary folder and
compiled to bytecode; the commands run as `python -m dumpkit ...` from that folder (the
current directory comes first on sys.path), with this interpreter and its packages. The
real third-party dump comes from ../shared/real_dumps (its rows are left out without it);
rust-minidump's and the bare interpreter's times are measured in the same run.
"""

from __future__ import annotations

import argparse
import compileall
import lzma
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SMALL = os.path.join(ROOT, "sample_dumps", "null_deref.dmp")
IMAGES = os.path.join(ROOT, "sample_dumps", "bin")
REAL = os.path.join(os.path.dirname(ROOT), "shared", "real_dumps", "breakpad", "ascii_read_av.dmp")
RUST = os.path.expanduser("~/.cache/dumpkit-peers/minidump-stackwalk")
# a Unity player's crash (47 threads, no images at hand): bench/truth_corpus.py puts it here
UNITY = os.path.expanduser("~/.cache/dumpkit-bench/truth/unity_ksp_2018.dmp")


def unpack(rev: str, into: str) -> None:
    archive = subprocess.run(["git", "archive", rev, "dumpkit"], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    compileall.compile_dir(os.path.join(into, "dumpkit"), quiet=1)


def timed(cmd: List[str], cwd: str) -> Tuple[float, float]:
    """Wall time and CPU time (user + system) of one run of `cmd`: on a shared machine the
    CPU time moves less with the others' load than the wall time does."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the bytecode is compiled above
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def walk_cases(work: str) -> Dict[str, List[str]]:
    """The walk-heavy cases, their xz'd dumps unpacked into `work`."""
    samples = os.path.join(ROOT, "sample_dumps")

    def plain(path: str) -> str:
        out = os.path.join(work, os.path.basename(path)[:-3])
        with lzma.open(path) as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst)
        return out

    deep = plain(os.path.join(samples, "deep_recursion_1m.dmp.xz"))
    scanned = plain(os.path.join(samples, "python", "thread_stack_size.dmp.xz"))
    cases = {
        "analyze 1M-frame overflow, JSON": ["analyze", deep, "--image-path", IMAGES, "--format", "json"],
        "stack --json 1M-frame overflow": ["stack", deep, "--image-path", IMAGES, "--json"],
        "analyze recursion_cycle3, JSON": [
            "analyze",
            os.path.join(samples, "recursion_cycle3.dmp"),
            "--image-path",
            IMAGES,
            "--format",
            "json",
        ],
        "analyze CPython recursion without its DLL, JSON": ["analyze", scanned, "--format", "json"],
    }
    for bundle in ("python/tf_nest_flatten.dkb", "pyversions/tf311/tf_nest_flatten_py311.dkb"):
        if os.path.exists(os.path.join(samples, bundle)):
            cases[f"analyze TensorFlow bundle {os.path.basename(bundle)}, JSON"] = [
                "analyze",
                os.path.join(samples, bundle),
                "--format",
                "json",
            ]
    cases["stack --all CPython recursion without its DLL"] = ["stack", scanned, "--all"]
    big = os.path.join(os.path.dirname(ROOT), "shared", "real_dumps", "rust-minidump", "stability-report.dmp")
    if os.path.exists(big):
        cases["info --json real dump"] = ["info", big, "--json"]
        cases["stack --all real 19-thread dump"] = ["stack", big, "--all"]
    if os.path.exists(UNITY):
        cases["analyze Unity 47-thread dump, text"] = ["analyze", UNITY]
        cases["analyze Unity 47-thread dump, JSON"] = ["analyze", UNITY, "--format", "json"]
    return cases


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("before")
    ap.add_argument("after", nargs="?", default="HEAD")
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--walks", action="store_true", help="also the walk-heavy runs (see the docstring)")
    a = ap.parse_args()
    cases: Dict[str, List[str]] = {
        "explain 0xC00000FD": ["explain", "0xC00000FD"],
        "analyze small sample, JSON": ["analyze", SMALL, "--image-path", IMAGES, "--format", "json"],
        "analyze small sample, text": ["analyze", SMALL, "--image-path", IMAGES],
    }
    if os.path.exists(REAL):
        cases["analyze real third-party dump, JSON"] = ["analyze", REAL, "--format", "json"]
        cases["analyze real third-party dump, text"] = ["analyze", REAL]
    work = tempfile.mkdtemp(prefix="dumpkit-startup-")
    if a.walks:
        cases.update(walk_cases(work))
    try:
        sides = {}
        for name, rev in (("before", a.before), ("after", a.after)):
            sides[name] = os.path.join(work, name)
            os.makedirs(sides[name])
            unpack(rev, sides[name])
        times: Dict[Tuple[str, str], List[Tuple[float, float]]] = {}
        for case, args in cases.items():
            for side in sides.values():  # warm the page cache
                timed([sys.executable, "-m", "dumpkit", *args], side)
            for _ in range(a.runs):
                for name, side in sides.items():
                    times.setdefault((case, name), []).append(timed([sys.executable, "-m", "dumpkit", *args], side))
        for _ in range(a.runs):
            times.setdefault(("python -c pass", ""), []).append(timed([sys.executable, "-c", "pass"], work))
            if os.access(RUST, os.X_OK):
                times.setdefault(("rust-minidump --json, small sample", ""), []).append(
                    timed([RUST, "--json", SMALL], work)
                )
                if os.path.exists(REAL):
                    times.setdefault(("rust-minidump --json, real dump", ""), []).append(
                        timed([RUST, "--json", REAL], work)
                    )
                if a.walks and os.path.exists(UNITY):
                    times.setdefault(("rust-minidump --json, Unity 47-thread dump", ""), []).append(
                        timed([RUST, "--json", UNITY], work)
                    )
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def cell(key: Tuple[str, str]) -> str:
        runs = times.get(key)
        if not runs:
            return ""
        wall, cpu = [r[0] for r in runs], [r[1] for r in runs]
        return (
            f"{statistics.median(wall) * 1000:.0f} ms ({min(wall) * 1000:.0f}), CPU {statistics.median(cpu) * 1000:.0f}"
        )

    print(f"{a.before} -> {a.after}; wall median (best) and CPU median of {a.runs}; load {os.getloadavg()[0]:.2f}")
    print(f"| command | {a.before} | {a.after} |")
    print("|---|---|---|")
    for case in cases:
        print(f"| {case} | {cell((case, 'before'))} | {cell((case, 'after'))} |")
    for key in sorted(k for k in times if k[1] == ""):
        print(f"| {key[0]} | {cell(key)} | |")


if __name__ == "__main__":
    main()
