#!/usr/bin/env python3
"""Dump sizes of one crash three ways (issue #31 item 2): the TensorFlow scenario of
sample_dumps/pyversions/tf311 (CPython 3.11.9 + tensorflow-intel 2.18.0, tf.nest.flatten of a
list nested 100,000 deep: a stack overflow inside _pywrap_tensorflow_internal.pyd) run under
Wine and dumped as

  normal   sample_dumps/bin/dumper.exe OUT.dmp PROGRAM ARGS   (MiniDumpNormal, first chance)
  capture  dumpkit capture -o DIR -- PROGRAM ARGS             (the Python-aware minidump)
  full     dumpkit capture --full -o DIR -- PROGRAM ARGS      (MiniDumpWithFullMemory)

dumpkit capture is run by the capture lane's Windows CPython 3.11 (tests/capture_lane/lane.py),
in a Wine prefix of this script's own (OUT/wineprefix), so that nothing here touches the lane's
prefix. Each dump is then read on Linux (`dumpkit analyze --format json`, `dumpkit stack --all
--python --json`) and the Python stacks of each compared with those of the full-memory dump.

    python bench/capture_sizes.py                 # all three, about 11 minutes
    python bench/capture_sizes.py --only normal   # one
    python bench/capture_sizes.py --no-run        # the table from the dumps already in OUT

Run it with the checkout's venv (.venv/bin/python: the dumps are read with this checkout's
dumpkit). Needs Wine, the capture lane (tests/capture_lane/lane.py's lane() builds it on first
use) and the TF installation of sample_dumps/pyversions/tf311/build.sh
($TF311_CACHE/images/Python311).
Writes into OUT (default $TF311_CACHE/capture): the dumps, each run's output, results.json."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.capture_lane.lane import RUNNER, lane  # noqa: E402
from tests.support.wine import windows_path  # noqa: E402

CACHE = Path(os.environ.get("TF311_CACHE", "/work/tf311-cache"))
SCRIPT = ROOT / "sample_dumps" / "python" / "src" / "tf_nest_flatten.py"
DUMPER = ROOT / "sample_dumps" / "bin" / "dumper.exe"
CASES = ("normal", "capture", "full")
MB = 1_000_000


# ---- running under Wine ------------------------------------------------------------------


def timed(argv: List[str], env: Dict[str, str], cwd: Path, timeout: float) -> dict:
    """Run argv; every output line with its time (s since start), the exit code, the wall time."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    lines: Dict[str, List[Tuple[float, str]]] = {"stdout": [], "stderr": []}

    def pump(name, stream):
        for raw in stream:
            lines[name].append((round(time.perf_counter() - start, 2), raw.decode("utf-8", "replace").rstrip()))

    pumps = [threading.Thread(target=pump, args=(n, getattr(proc, n))) for n in lines]
    for t in pumps:
        t.start()
    try:
        rc = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
    for t in pumps:
        t.join()
    return {"argv": argv, "rc": rc, "wall": round(time.perf_counter() - start, 2), **lines}


def first(lines: List[Tuple[float, str]], pattern: str) -> Optional[Tuple[float, re.Match]]:
    for at, line in lines:
        m = re.search(pattern, line)
        if m:
            return at, m
    return None


class Wine:
    def __init__(self, out: Path, tf_python: Path):
        self.capture_lane = lane()
        self.prefix = out / "wineprefix"
        env = self.capture_lane.env.environ()
        env["WINEPREFIX"] = str(self.prefix)
        # the bytecode of TF and of dumpkit goes here, the same for the three runs (warmed once)
        env["PYTHONPYCACHEPREFIX"] = windows_path(out / "pycache")
        self.env = env
        self.wine = self.capture_lane.env.wine
        self.tf_python = windows_path(tf_python / "python.exe")
        self.script = windows_path(SCRIPT)
        if not (self.prefix / "system.reg").is_file():
            subprocess.run(
                ["timeout", "300", self.wine, "wineboot", "-i"], env=env, stdin=subprocess.DEVNULL, capture_output=True
            )

    def stop(self) -> None:
        """End this prefix's wineserver (this script's own prefix only)."""
        server = os.path.join(os.path.dirname(self.wine), "wineserver")
        subprocess.run(["timeout", "60", server, "-k"], env=self.env, capture_output=True)

    def warm(self, timeout: float) -> dict:
        """import tensorflow once, so that the three runs find the same compiled bytecode."""
        return timed(
            [
                "timeout",
                "-k",
                "10",
                str(int(timeout)),
                self.wine,
                self.tf_python,
                "-c",
                "import time; t = time.perf_counter(); import tensorflow; print('import', time.perf_counter() - t)",
            ],
            self.env,
            CACHE,
            timeout + 30,
        )

    def normal(self, dump: Path, timeout: float) -> dict:
        argv = [self.wine, windows_path(DUMPER), windows_path(dump), self.tf_python, self.script]
        return timed(["timeout", "-k", "10", str(int(timeout)), *argv], self.env, dump.parent, timeout + 30)

    def capture(self, folder: Path, full: bool, timeout: float) -> dict:
        args = ["capture", "-o", windows_path(folder), *(["--full"] if full else []), "--", self.tf_python, self.script]
        lane_py = self.capture_lane.pythons["3.11"]
        argv = [self.wine, "python.exe", windows_path(RUNNER), windows_path(ROOT), *args]
        return timed(["timeout", "-k", "10", str(int(timeout)), *argv], self.env, lane_py, timeout + 30)


# ---- reading the dumps (a few struct reads, not dumpkit) -----------------------------------


def layout(path: Path) -> dict:
    """Streams, memory ranges and bytes, and what of the file no stream refers to."""
    data = path.read_bytes()
    _sig, _ver, count, dir_rva = struct.unpack_from("<4sIII", data, 0)
    streams = [struct.unpack_from("<III", data, dir_rva + 12 * i) for i in range(count)]
    out = {"bytes": len(data), "streams": {}, "ranges": 0, "range_bytes": 0, "list_bytes": 0}
    for kind, size, rva in streams:
        out["streams"][kind] = out["streams"].get(kind, 0) + size
        if kind == 5:  # MemoryListStream
            (n,) = struct.unpack_from("<I", data, rva)
            descriptors = list(struct.iter_unpack("<QII", data[rva + 4 : rva + 4 + 16 * n]))
            out["ranges"] += n
            out["list_bytes"] += size
            out["range_bytes"] += sum(d[1] for d in descriptors)
            # Wine writes its list before the range data; an amend that grew it in place
            # leaves it there, one that wrote it anew puts it after all of them
            out["list_before_data"] = bool(descriptors) and max(d[2] for d in descriptors) > rva
        elif kind == 9:  # Memory64ListStream
            n, base_rva = struct.unpack_from("<QQ", data, rva)
            out["ranges"] += n
            out["list_bytes"] += size
            out["range_bytes"] += sum(d[1] for d in struct.iter_unpack("<QQ", data[rva + 16 : rva + 16 + 16 * n]))
        elif kind == 3:  # ThreadListStream: the stacks, all a Windows MiniDumpNormal holds of memory
            (n,) = struct.unpack_from("<I", data, rva)
            out["stack_bytes"] = sum(struct.unpack_from("<I", data, rva + 4 + 48 * i + 32)[0] for i in range(n))
    referenced = 32 + 12 * count + sum(out["streams"].values()) + out["range_bytes"]
    out["unreferenced"] = len(data) - referenced  # <0 when ranges overlap in the file
    return out


def memory_list(path: Path) -> Dict[int, Tuple[int, int]]:
    """address -> (size, rva) of the MemoryListStream's ranges (the first of each address)."""
    data = path.read_bytes()
    _sig, _ver, count, dir_rva = struct.unpack_from("<4sIII", data, 0)
    for i in range(count):
        kind, size, rva = struct.unpack_from("<III", data, dir_rva + 12 * i)
        if kind == 5:
            (n,) = struct.unpack_from("<I", data, rva)
            out: Dict[int, Tuple[int, int]] = {}
            for address, length, at in struct.iter_unpack("<QII", data[rva + 4 : rva + 4 + 16 * n]):
                out.setdefault(address, (length, at))
            return out
    return {}


def amend_alone(normal: Path, captured: Path, out: Path) -> dict:
    """dumpkit.capture.amend.add_memory on Linux, timed: the plain dump (a) given the ranges
    that dumpkit capture added to its own writer's dump (b) (those (b) holds and (a) does not)."""
    from dumpkit.capture.amend import add_memory

    held, added = memory_list(normal), memory_list(captured)
    raw = captured.read_bytes()
    pieces = [(a, raw[at : at + n]) for a, (n, at) in sorted(added.items()) if a not in held]
    copy = out / "normal+python.dmp"
    shutil.copyfile(normal, copy)
    t = time.perf_counter()
    done = add_memory(str(copy), pieces)
    seconds = time.perf_counter() - t
    result = {
        "pieces": len(pieces),
        "piece_bytes": sum(len(p) for _, p in pieces),
        "ranges_added": done.ranges_added,
        "bytes_added": done.bytes_added,
        "seconds": round(seconds, 2),
        "bytes": copy.stat().st_size,
    }
    copy.unlink()
    return result


# ---- reading them on Linux ----------------------------------------------------------------


def read_on_linux(dump: Path, images: Path, prefix: Path) -> dict:
    """`dumpkit analyze --format json` and `dumpkit stack --all --python --json`, timed, as a
    user on the machine that crashed: the recorded paths (Wine's Z: is /, C: is the prefix's
    drive_c, through WINEPREFIX) and the TF installation as --image-path."""
    env = dict(os.environ, WINEPREFIX=str(prefix))
    dumpkit = [sys.executable, "-m", "dumpkit"]
    out: dict = {}
    for name, args in (
        ("analyze", ["analyze", str(dump), "--image-path", str(images), "--format", "json"]),
        ("stack", ["stack", str(dump), "--all", "--python", "--json", "--image-path", str(images)]),
        ("analyze_text", ["analyze", str(dump), "--image-path", str(images)]),
    ):
        t = time.perf_counter()
        done = subprocess.run(dumpkit + args, env=env, cwd=ROOT, capture_output=True, text=True)
        out[name + "_s"] = round(time.perf_counter() - t, 2)
        suffix = ".txt" if name.endswith("text") else ".json"
        (dump.parent / f"{name}{suffix}").write_text(done.stdout + done.stderr)
        if name == "analyze_text":
            continue
        report = json.loads(done.stdout)
        py = report.get("python") or {}
        stacks = {
            str(t["thread_id"]): [f"{f['function']} ({f['filename']}:{f['line']})" for f in reversed(t["frames"])]
            for t in py.get("threads") or []
            if t.get("frames")
        }
        crashing = next((t for t in report.get("threads") or [] if t.get("is_crashing")), None)
        out[name] = {
            "python_status": py.get("status"),
            "python_message": py.get("message"),
            "python_stacks": stacks,  # thread id -> frames, outermost first
            "python_problems": py.get("problems"),
            "threads": len(report.get("threads") or []),
            "crash_frames": crashing.get("frame_count") if crashing else None,
            "soft_errors": report.get("soft_errors"),
        }
        if name == "analyze":
            out[name]["verdict"] = (report.get("verdict") or {}).get("headline")
    return out


# ---- the runs ----------------------------------------------------------------------------


def run_case(wine: Wine, case: str, out: Path, timeout: float) -> dict:
    folder = out / case
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    if case == "normal":
        done = wine.normal(folder / "normal.dmp", timeout)
    else:
        done = wine.capture(folder, case == "full", timeout)
    wine.stop()
    dumps = sorted(folder.glob("*.dmp"))
    marker = first(done["stdout"], r"^MARKER ")
    result = {
        "case": case,
        "rc": done["rc"],
        "wall_s": done["wall"],
        "marker_at_s": marker[0] if marker else None,
        "dump": str(dumps[0]) if dumps else None,
    }
    if case == "normal":
        said = first(done["stdout"] + done["stderr"], r"dumper: .*dump written")
        result["dumper_line"] = said[1].string if said else None
    else:
        crashed = first(done["stderr"], r"dumpkit capture: process \d+ crashed")
        dumped = first(done["stderr"], r"  dump: .* \((.*), written in ([\d.]+) s(.*)\)$")
        verdict = first(done["stderr"], r"  verdict: (.*)")
        result["crashed_line_at_s"] = crashed[0] if crashed else None
        result["written_in_s"] = float(dumped[1].group(2)) if dumped else None
        result["dump_line"] = dumped[1].string if dumped else None
        kib = re.search(r"\(([\d,]+) KiB of interpreter memory\)", dumped[1].string) if dumped else None
        result["interpreter_kib"] = int(kib.group(1).replace(",", "")) if kib else None
        result["verdict_line_at_s"] = verdict[0] if verdict else None
        result["verdict"] = verdict[1].group(1) if verdict else None
    (folder / "run.json").write_text(json.dumps({**result, "output": done}, indent=1))
    if dumps:
        result["layout"] = layout(dumps[0])
    return result


def table(results: dict) -> str:
    """The markdown table and the targets."""
    rows = []
    normal = results.get("normal", {}).get("layout")
    full_stacks = (results.get("full", {}).get("linux", {}).get("stack") or {}).get("python_stacks")
    for case, what in (
        ("normal", "(a) `dumper.exe` MiniDumpNormal"),
        ("capture", "(b) `dumpkit capture`"),
        ("full", "(c) `dumpkit capture --full`"),
    ):
        r = results.get(case)
        if not r or not r.get("layout"):
            continue
        lay, linux = r["layout"], r.get("linux", {})
        stack = linux.get("stack") or {}
        stacks = stack.get("python_stacks") or {}
        if stacks:
            shown = ", ".join(f"thread {t}: {len(f)} frames" for t, f in stacks.items())
            if full_stacks is not None and case != "full":
                same = sorted(stacks.values()) == sorted(full_stacks.values())  # thread ids differ by run
                shown += " (= the full dump's)" if same else " (NOT the full dump's)"
        else:
            shown = f"none ({stack.get('python_status')}: {(stack.get('python_message') or '').split(';')[0]})"
        vs = f"+{(lay['bytes'] - normal['bytes']) / MB:,.1f} MB" if normal and case != "normal" else ""
        written = f"{r['written_in_s']:.1f}" if r.get("written_in_s") is not None else "-"
        after = f"{r['wall_s'] - r['marker_at_s']:.1f}" if r.get("marker_at_s") is not None else "-"
        rows.append(
            f"| {what} | {lay['bytes']:,} | {lay['bytes'] / MB:,.1f} | {vs} | {lay['ranges']:,} | "
            f"{lay['range_bytes'] / MB:,.1f} | {r['wall_s']:.1f} | {after} | {written} | "
            f"{linux.get('analyze_s', '-')} | {shown} |"
        )
    head = (
        "| dump | bytes | MB | over (a) | memory ranges | range bytes (MB) | run, s | after MARKER, s "
        "| written in, s | `analyze` on Linux, s | Python stacks (`stack --all --python`) |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [head, *rows]
    a, b, c = (results.get(k, {}).get("layout") for k in CASES)
    if a and b:
        delta = b["bytes"] - a["bytes"]
        lines.append(
            f"\n(b) - (a) = {delta:,} bytes ({delta / MB:.1f} MB): target at most 10 MB: "
            f"{'met' if delta <= 10 * MB else 'NOT met'}"
        )
        if b["unreferenced"] > 0:
            what = (
                "the old place of the range data moved to the end so that the writer's memory list could grow "
                "where it is"
                if b.get("list_before_data")
                else "the writer's memory list, replaced by one written anew at the end"
            )
            lines.append(
                f"  of which {b['unreferenced']:,} bytes no stream refers to ({what}); "
                f"without them: {(delta - b['unreferenced']) / MB:.1f} MB"
            )
    amend = results.get("amend_alone")
    if amend and a:
        lines.append(
            f"  amend alone on Linux ((a) + the {amend['pieces']} ranges (b) added, "
            f"{amend['piece_bytes']:,} bytes): {amend['bytes'] - a['bytes']:,} bytes more than (a), "
            f"{amend['seconds']} s" + (f"; (b) is {b['bytes'] - amend['bytes']:+,} bytes from that" if b else "")
        )
    if b and c:
        lines.append(
            f"(c) / (b) = {c['bytes'] / b['bytes']:.1f}x: target at least 50x: "
            f"{'met' if c['bytes'] >= 50 * b['bytes'] else 'NOT met'}"
        )
    if a and b and c and a.get("stack_bytes"):
        # a Windows MiniDumpNormal holds the thread stacks, not Wine's unwind-info ranges
        windows = a["stack_bytes"] + (b["bytes"] - b["unreferenced"] - a["bytes"])
        lines.append(
            f"  estimate for Windows: (a)'s thread stacks ({a['stack_bytes']:,} bytes) + what (b) adds "
            f"without the bytes no stream refers to = {windows / MB:.2f} MB of memory and descriptors, plus the "
            f"small streams; (c) / that = {c['bytes'] / windows:,.0f}x"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=CACHE / "capture")
    ap.add_argument("--tf-python", type=Path, default=CACHE / "images" / "Python311")
    ap.add_argument("--only", nargs="+", choices=CASES, default=list(CASES))
    ap.add_argument("--no-run", action="store_true", help="only read the dumps already in --out")
    ap.add_argument("--timeout", type=float, default=1800)
    args = ap.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "results.json"
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    if not args.no_run:
        if not (args.tf_python / "python.exe").is_file():
            print(f"no TF installation at {args.tf_python} (sample_dumps/pyversions/tf311/build.sh)", file=sys.stderr)
            return 2
        wine = Wine(out, args.tf_python.resolve())
        warm = wine.warm(600)
        wine.stop()
        results["warm"] = {"rc": warm["rc"], "wall_s": warm["wall"], "stdout": warm["stdout"][-3:]}
        print(f"warm-up (import tensorflow): {warm['wall']} s, {warm['stdout'][-1:]}", flush=True)
        for case in args.only:
            print(f"== {case}", flush=True)
            results[case] = run_case(wine, case, out, args.timeout)
            print(json.dumps({k: v for k, v in results[case].items() if k != "layout"}), flush=True)
            results_path.write_text(json.dumps(results, indent=1))
    prefix = out / "wineprefix"
    for case in CASES:
        r = results.get(case)
        if r and r.get("dump") and Path(r["dump"]).is_file():
            print(f"reading {case} on Linux", flush=True)
            r["layout"] = layout(Path(r["dump"]))
            r["linux"] = read_on_linux(Path(r["dump"]), args.tf_python.resolve(), prefix)
    if all(results.get(k, {}).get("dump") for k in ("normal", "capture")):
        results["amend_alone"] = amend_alone(Path(results["normal"]["dump"]), Path(results["capture"]["dump"]), out)
    results_path.write_text(json.dumps(results, indent=1))
    text = table(results)
    (out / "results.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
