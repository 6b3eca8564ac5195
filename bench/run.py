"""dumpkit benchmarks against rust-minidump's and Breakpad's stack walkers.

    python bench/run.py [--runs N] [--only NAME ...] [--no-build] [--timeout S] [--no-peers]
    python bench/run.py --startup [--runs N]     # the start-up cases alone (seconds)

Builds the inputs into bench/out/ (bench/build_inputs.py; reused once built), then runs
every tool on every input N times (default 3) as a child process and prints one table:
best wall time, peak RSS of the child (GNU time's %M for that child alone), the
frames each tool walked on the crashing thread, and dumpkit/peer time ratios measured
in the same run. Results also go to bench/out/results.json and bench/out/results.md.

Peers (installed by /work/shared/tools/get-peers.sh into ~/.cache/dumpkit-peers; a
missing peer is skipped): `minidump-stackwalk --json DUMP` (rust-minidump) and
`minidump_stackwalk DUMP` (Breakpad), both with no symbol files: they cannot use PE
images, so they walk with the dump's contents only (frame pointers / stack scanning).
dumpkit gets `--image-path` (the PE images, for .pdata/.xdata).
"""

import argparse
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import threading
from typing import Optional
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "out")
SAMPLES = os.path.join(ROOT, "sample_dumps")
PEER_DIR = os.environ.get("DUMPKIT_PEERS", os.path.expanduser("~/.cache/dumpkit-peers"))
GET_PEERS = "/work/shared/tools/get-peers.sh"

sys.path.insert(0, HERE)
import build_inputs  # noqa: E402

# a Unity player's 47-thread crash, from bench/truth_corpus.py's cache
UNITY = os.path.expanduser("~/.cache/dumpkit-bench/truth/unity_ksp_2018.dmp")
# Wine 8.0's own ntdll/kernel32 (xz), kept by the project next to the sample binaries
WINE_IMAGES = os.path.join(SAMPLES, "bin", "wine")
# name -> (dump, image dir(s) for --image-path, what it is)
INPUTS = {
    "deep1m": (
        os.path.join(OUT, "deep_recursion_1m.dmp"),
        os.path.join(SAMPLES, "bin"),
        "1,048,444-frame stack overflow (64 MiB)",
    ),
    "deep1400k": (
        os.path.join(OUT, "deep1400k", "deep1400k.dmp"),
        [os.path.join(OUT, "deep1400k", "images"), WINE_IMAGES],
        "1,441,660-frame stack overflow (88 MiB)",
    ),
    # the same dump read without any image, as on a machine without the crash's binaries:
    # the recursion has no unwind data, and every caller is found by scanning
    "deep1400k-noimg": (
        os.path.join(OUT, "deep1400k", "deep1400k.dmp"),
        [],
        "deep1400k read without images (no --image-path)",
    ),
    "threads200": (
        os.path.join(OUT, "threads200", "threads200.dmp"),
        [os.path.join(OUT, "threads200", "images"), WINE_IMAGES],
        "201 threads (200 blocked + crash)",
    ),
    "sparse4g": (os.path.join(OUT, "sparse_4g.dmp"), os.path.join(SAMPLES, "bin"), "4 GiB sparse, 8,192+7,257 ranges"),
    "full4g": (
        os.path.join(OUT, "full4g", "full4g.dmp"),
        [os.path.join(OUT, "full4g", "images"), WINE_IMAGES],
        "4 GiB MiniDumpWithFullMemory, stack overflow",
    ),
    "pyfull4g": (
        os.path.join(OUT, "pyfull4g", "pyfull4g.dmp"),
        [os.path.join(OUT, "pyfull4g", "images"), WINE_IMAGES],
        "4.4 GB full-memory dump of python.exe, Python recursion",
    ),
    "bigpdata": (
        os.path.join(OUT, "bigpdata", "bigpdata.dmp"),
        [os.path.join(OUT, "bigpdata", "images"), WINE_IMAGES],
        "AV 17 frames deep in a 1,000,002-entry .pdata DLL",
    ),
    "small": (os.path.join(SAMPLES, "null_deref.dmp"), os.path.join(SAMPLES, "bin"), "null_deref.dmp (209 KiB)"),
}
BUILT = {"deep1m", "deep1400k", "threads200", "sparse4g", "full4g", "pyfull4g", "bigpdata"}
BUILT_AS = {"deep1400k-noimg": "deep1400k"}  # inputs that reuse another's dump


def find_peers(install: bool) -> dict:
    peers = {
        "rust-minidump": os.path.join(PEER_DIR, "minidump-stackwalk"),
        "breakpad": os.path.join(PEER_DIR, "breakpad_minidump_stackwalk"),
    }
    if install and not all(os.access(p, os.X_OK) for p in peers.values()) and os.path.exists(GET_PEERS):
        subprocess.run(
            ["timeout", "600", "bash", GET_PEERS, PEER_DIR], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
    found = {}
    for name, path in peers.items():
        if os.access(path, os.X_OK):
            found[name] = path
        else:
            print(f"[bench] peer {name} not found at {path}: skipped", file=sys.stderr)
    return found


def command(tool: str, path: str, dump: str, images) -> list:
    if tool == "dumpkit":
        dirs = [d for d in ([images] if isinstance(images, str) else images) if os.path.isdir(d)]
        return (
            [sys.executable, "-m", "dumpkit", "analyze", dump]
            + [x for d in dirs for x in ("--image-path", d)]
            + ["--format", "json"]
        )
    if tool == "rust-minidump":
        return [path, "--json", dump]
    if tool == "breakpad":
        return [path, dump]
    raise ValueError(tool)


TIME = "/usr/bin/time"


def child_env() -> dict:
    """dumpkit from this checkout, with a bytecode cache as an installed package has one.
    (This machine sets PYTHONDONTWRITEBYTECODE=1, which would make every run compile
    dumpkit from source: ~100+ ms that no user pays. The cache goes to bench/out/pycache,
    not into the source tree.)"""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = os.path.join(OUT, "pycache")
    return env


def measure(cmd: list, out_file: str, timeout: float) -> dict:
    """Run once: wall seconds, the child's peak RSS (KiB), exit status.

    Peak RSS comes from GNU time's %M when /usr/bin/time exists, else from os.wait4's
    ru_maxrss. (Linux carries the forking process's RSS high-water mark over into a
    vfork+exec'd child's ru_maxrss, so measuring straight from this script would report
    at least this script's own peak; /usr/bin/time is a 2 MB parent.)"""
    env = child_env()
    rss_file = out_file + ".rss"
    use_time = os.access(TIME, os.X_OK)
    full = [TIME, "-f", "%M %U %S", "-o", rss_file] + cmd if use_time else cmd
    with open(out_file, "wb") as fo, open(out_file + ".err", "wb") as fe:
        t0 = time.perf_counter()
        # Own process group: on timeout the tool dies with /usr/bin/time, instead of
        # running on as an orphan that skews the runs after it.
        p = subprocess.Popen(full, stdout=fo, stderr=fe, cwd=ROOT, env=env, start_new_session=True)
        timer = threading.Timer(timeout, lambda: _kill_group(p.pid))
        timer.start()
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        timer.cancel()
        p.returncode = os.waitstatus_to_exitcode(status)
    rss = ru.ru_maxrss
    cpu = ru.ru_utime + ru.ru_stime
    if use_time:
        try:
            with open(rss_file) as f:
                fields = f.read().split()
            rss, cpu = int(fields[-3]), float(fields[-2]) + float(fields[-1])
        except (OSError, ValueError, IndexError):
            rss = None
    return {
        "wall": wall,
        "cpu": cpu,
        "rss_kib": rss,
        "rc": p.returncode,
        "timed_out": wall >= timeout and p.returncode < 0,
    }


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def frames_walked(tool: str, out_file: str):
    """Frames the tool reports for the crashing thread (None when it cannot be read)."""
    try:
        if tool == "dumpkit":
            with open(out_file) as f:
                d = json.load(f)
            for t in d.get("threads") or []:
                if t.get("is_crashing"):
                    return t.get("frame_count")
        elif tool == "rust-minidump":
            # its JSON for 1M frames is ~500 MB: read the count from the head only
            with open(out_file) as f:
                head = f.read(1 << 16)
            m = re.search(r'"crashing_thread":\{"frame_count":(\d+)', head)
            return int(m.group(1)) if m else None
        elif tool == "breakpad":
            n, inside = 0, False
            with open(out_file, errors="replace") as f:
                for line in f:
                    if re.match(r"^Thread \d+ \(crashed\)", line):
                        inside = True
                        continue
                    if inside:
                        if line.startswith(("Thread ", "Loaded modules")):
                            break
                        if re.match(r"^\s*\d+\s+\S", line):
                            n += 1
            return n if inside else None
    except (OSError, ValueError):
        return None
    return None


def fmt_rss(kib) -> str:
    return "-" if kib is None else f"{kib / 1024:.0f} MB"


def fmt_t(s) -> str:
    return "-" if s is None else (f"{s * 1000:.0f} ms" if s < 1 else f"{s:.2f} s")


def startup_cases(peers: Optional[dict] = None) -> list:
    """(name, command) of the start-up budget (issue #34 item 1: `explain` < 40 ms, a small
    `analyze` < 0.1 s): commands whose time is mostly the interpreter and imports, beside
    the bare interpreter and, when installed, rust-minidump's whole run on the same dump."""
    small, images = INPUTS["small"][0], INPUTS["small"][1]
    dk = [sys.executable, "-m", "dumpkit"]
    cases = [
        ("explain 0xC00000FD", dk + ["explain", "0xC00000FD"]),
        ("analyze small (text)", dk + ["analyze", small, "--image-path", images]),
        ("analyze small (json)", dk + ["analyze", small, "--image-path", images, "--format", "json"]),
        ("python -c pass", [sys.executable, "-c", "pass"]),
    ]
    if peers and "rust-minidump" in peers:
        cases.append(("rust-minidump small (json)", [peers["rust-minidump"], "--json", small]))
    # issue #45 item 3: a ~50-thread third-party crash without its images, under 100 ms
    # (bench/truth_corpus.py --only unity_ksp_2018 fetches it; left out when it is not there)
    if os.path.exists(UNITY):
        cases.append(("analyze 47-thread Unity crash (text)", dk + ["analyze", UNITY]))
        cases.append(("analyze 47-thread Unity crash (json)", dk + ["analyze", UNITY, "--format", "json"]))
        if peers and "rust-minidump" in peers:
            cases.append(("rust-minidump 47-thread Unity crash (json)", [peers["rust-minidump"], "--json", UNITY]))
    return cases


def run_extra(runs: int, timeout: float, peers: Optional[dict] = None) -> dict:
    """The start-up cases: best and median wall, median CPU (user+sys: on a shared
    machine the wall time moves with the load, the CPU time much less)."""
    res = {}
    for name, cmd in startup_cases(peers):
        ms = [measure(cmd, os.path.join(OUT, "results", f"extra.{i}.out"), timeout) for i in range(runs)]
        best = dict(min(ms, key=lambda m: m["wall"]))
        best["median_wall"] = statistics.median(m["wall"] for m in ms)
        best["median_cpu"] = statistics.median(m["cpu"] for m in ms)
        best["rss_kib"] = max((m["rss_kib"] or 0) for m in ms) or None
        res[name] = best
    return res


def startup_only(runs: int, timeout: float, peers: dict) -> None:
    """`run.py --startup`: the start-up cases alone, each run `runs` times."""
    os.makedirs(os.path.join(OUT, "results"), exist_ok=True)
    load0 = os.getloadavg()[0]
    measure(startup_cases()[1][1], os.path.join(OUT, "results", "warmup.out"), timeout)  # fills the bytecode cache
    res = run_extra(runs, timeout, peers)
    print(f"{runs} runs each; 1-min load average {load0:.2f} at start, {os.getloadavg()[0]:.2f} at end")
    print("| command | median wall | best wall | median CPU (user+sys) | peak RSS |")
    print("|---|---|---|---|---|")
    for name, m in res.items():
        rc = "" if m["rc"] == 0 else f" rc={m['rc']}"
        print(
            f"| `{name}` | {fmt_t(m['median_wall'])} | {fmt_t(m['wall'])} | {fmt_t(m['median_cpu'])} "
            f"| {fmt_rss(m['rss_kib'])}{rc} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description="dumpkit vs rust-minidump vs Breakpad")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", nargs="*", default=None, help=" ".join(INPUTS))
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument(
        "--no-install-peers",
        action="store_true",
        help="do not run get-peers.sh when a peer is missing (skip it instead)",
    )
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--functions", type=int, default=1_000_000, help="functions in bigpdata.dll")
    ap.add_argument("--startup", action="store_true", help="only the start-up cases (explain, small analyze)")
    a = ap.parse_args()
    if a.startup:
        startup_only(a.runs, a.timeout, {} if a.no_peers else find_peers(install=not a.no_install_peers))
        return
    names = a.only or list(INPUTS)
    bad = [n for n in names if n not in INPUTS]
    if bad:
        ap.error(f"unknown input(s) {', '.join(bad)}; choose from {', '.join(INPUTS)}")
    os.makedirs(os.path.join(OUT, "results"), exist_ok=True)
    if not a.no_build:
        build_inputs.build(sorted({BUILT_AS.get(n, n) for n in names} & BUILT), functions=a.functions)
    peers = {} if a.no_peers else find_peers(install=not a.no_install_peers)
    tools = ["dumpkit"] + list(peers)

    load0 = os.getloadavg()[0]
    # warm-up (not timed): fills the bytecode cache and the page cache
    measure(
        command("dumpkit", "", INPUTS["small"][0], INPUTS["small"][1]),
        os.path.join(OUT, "results", "warmup.out"),
        a.timeout,
    )
    rows = []
    for name in names:
        dump, images, what = INPUTS[name]
        if not os.path.exists(dump):
            print(f"[bench] {name}: {dump} missing (build failed?): skipped", file=sys.stderr)
            continue
        row = {
            "input": name,
            "what": what,
            "dump_bytes": os.path.getsize(dump),
            "dump_disk_bytes": os.stat(dump).st_blocks * 512,
            "tools": {},
        }
        for tool in tools:
            cmd = command(tool, peers.get(tool, ""), dump, images)
            out_file = os.path.join(OUT, "results", f"{name}.{tool}.out")
            runs = []
            for _ in range(a.runs):
                m = measure(cmd, out_file, a.timeout)
                runs.append(m)
                print(
                    f"[bench] {name:10s} {tool:14s} {fmt_t(m['wall']):>9s} {fmt_rss(m['rss_kib']):>7s} rc={m['rc']}",
                    file=sys.stderr,
                    flush=True,
                )
                if m["timed_out"]:
                    break
            best = min(runs, key=lambda m: m["wall"])
            row["tools"][tool] = {
                "best_wall": best["wall"],
                "walls": [m["wall"] for m in runs],
                "peak_rss_kib": max((m["rss_kib"] or 0) for m in runs) or None,
                "rc": best["rc"],
                "timed_out": any(m["timed_out"] for m in runs),
                "frames": frames_walked(tool, out_file),
                "cmd": cmd,
            }
        rows.append(row)

    extra = run_extra(a.runs, a.timeout, peers)
    checks = run_checks(names, a.timeout)
    # ------------------------------------------------------------------- table
    head = ["input", "what", "dumpkit (PE images)", "frames"]
    for p in peers:
        head += [f"{p} (no symbols)", "frames", f"dumpkit/{p}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        dk = r["tools"]["dumpkit"]

        def cell(t):
            s = f"{fmt_t(t['best_wall'])}, {fmt_rss(t['peak_rss_kib'])}"
            if t["timed_out"]:
                s += " TIMEOUT"
            elif t["rc"] != 0:
                s += f" rc={t['rc']}"
            return s

        cells = [r["input"], r["what"], cell(dk), str(dk["frames"])]
        for p in peers:
            t = r["tools"][p]
            cells += [cell(t), str(t["frames"]), f"{dk['best_wall'] / t['best_wall']:.2f}x"]
        lines.append("| " + " | ".join(cells) + " |")
    for k, m in extra.items():
        lines.append(f"| {k} | (no dump) | {cell_extra(m)} | " + " | ".join([""] * (len(head) - 3)) + "|")
    machine = (
        f"{platform.node()}: {os.cpu_count()} cores, {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}, best of {a.runs} runs (wall), peak RSS = max over runs; "
        f"1-min load average {load0:.2f} at start, {os.getloadavg()[0]:.2f} at end"
    )
    table = "\n".join(lines)
    notes = "\n".join(f"- {c}" for c in checks)
    print(f"\n{machine}\n\n{table}\n\n{notes}\n")
    with open(os.path.join(OUT, "results.md"), "w") as f:
        f.write(f"{machine}\n\n{table}\n\n{notes}\n")
    with open(os.path.join(OUT, "results.json"), "w") as f:
        json.dump({"machine": machine, "rows": rows, "extra": extra, "checks": checks}, f, indent=1)


def run_checks(names, timeout) -> list:
    """Sanity checks printed under the table."""
    out = []
    if "sparse4g" in names and os.path.exists(os.path.join(OUT, "results", "sparse4g.dumpkit.out")):
        # the sparse dump must analyse exactly like the dump it was made from
        src = os.path.join(SAMPLES, "recursion_cycle3.dmp")
        ref = os.path.join(OUT, "results", "sparse4g-source.dumpkit.out")
        measure(command("dumpkit", "", src, os.path.join(SAMPLES, "bin")), ref, timeout)
        try:
            with open(ref) as f:
                a = json.load(f)
            with open(os.path.join(OUT, "results", "sparse4g.dumpkit.out")) as f:
                b = json.load(f)
            ra, rb = a.pop("dump"), b.pop("dump")
            same = "identical" if a == b else "DIFFERENT"
            out.append(
                f"sparse4g vs recursion_cycle3.dmp: dumpkit report {same} apart from the "
                f"`dump` block (memory ranges {ra.get('memory_ranges')} -> {rb.get('memory_ranges')}, "
                f"file {ra.get('file_size'):,} -> {rb.get('file_size'):,} bytes)"
            )
        except (OSError, ValueError, AttributeError) as e:
            out.append(f"sparse4g comparison failed: {e}")
    dll = os.path.join(OUT, "bigpdata", "images", "bigpdata.dll")
    if "bigpdata" in names and os.path.exists(dll):
        p = subprocess.run(
            [sys.executable, os.path.join(HERE, "pdata_lookup.py"), dll, "--lookups", "20000"],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        out += [f"pdata_lookup: {line}" for line in (p.stdout or p.stderr).strip().splitlines()]
    return out


def cell_extra(m) -> str:
    return (
        f"{fmt_t(m['wall'])} (median {fmt_t(m['median_wall'])}, CPU {fmt_t(m['median_cpu'])}), "
        f"{fmt_rss(m['rss_kib'])}" + ("" if m["rc"] == 0 else f" rc={m['rc']}")
    )


if __name__ == "__main__":
    main()
