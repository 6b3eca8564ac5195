"""How right a walk without the program's images is (issue #32 item 9): precision and
recall of the crashing thread's frames, dumpkit beside rust-minidump and Breakpad.

    python bench/walk_quality.py [--show]

Truth: the sample dumps' stacks as dumpkit walks them from the modules' own unwind data
(`--image-path sample_dumps/bin`, and for the Python samples the genuine CPython builds in
../shared/winpython): the walk the manifests' facts and the goldens hold, every frame
from .pdata/.xdata. Then each walker gets the dump alone, as a user without the images
would run it: dumpkit with no image path and recorded paths off (it still uses what the
dump holds: Wine's dbghelp copies unwind data into the dump), rust-minidump `--json` and
Breakpad's `minidump_stackwalk`, neither with symbols.

A frame is its (module, offset of the return address or, for frame 0, of the IP); rust-
minidump writes a caller's offset one byte before its return address (the call
instruction), which is undone. Frames are compared as multisets over the crashing
thread: precision = real frames reported / frames reported, recall = real frames
reported / true frames. Stacks are cut at the first 1,000 frames of each walker (a
recursion's repetitions would otherwise be the whole score).
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import lzma
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from dumpkit.engine import Options, analyze  # noqa: E402
from dumpkit.sources.minidump import open_dump  # noqa: E402

PEERS = os.path.expanduser("~/.cache/dumpkit-peers")
RUST = os.path.join(PEERS, "minidump-stackwalk")
BREAKPAD = os.path.join(PEERS, "breakpad_minidump_stackwalk")
WINPYTHON = os.path.join(os.path.dirname(ROOT), "shared", "winpython")
KEEP = 1000
Frame = Tuple[str, int]


def inputs() -> List[Tuple[str, List[str]]]:
    """(dump, image folders giving the truth)."""
    bins = os.path.join(ROOT, "sample_dumps", "bin")
    found = [(p, [bins]) for p in sorted(glob.glob(os.path.join(ROOT, "sample_dumps", "*.dmp")))]
    pythons = sorted(glob.glob(os.path.join(WINPYTHON, "cpython-*")))
    if pythons:
        py = sorted(glob.glob(os.path.join(ROOT, "sample_dumps", "python", "*.dmp*")))
        found += [(p, [bins, os.path.join(ROOT, "sample_dumps", "python")] + pythons) for p in py if "full" not in p]
    return found


def plain(path: str, folder: str) -> str:
    if not path.endswith(".xz"):
        return path
    out = os.path.join(folder, os.path.basename(path)[:-3])
    with lzma.open(path) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


def dumpkit_frames(dump: str, image_paths: List[str], recorded: bool) -> List[Frame]:
    target = open_dump(dump)
    try:
        # every frame kept (a report keeps the head and tail of a long stack), the first KEEP compared
        opts = Options(image_paths=image_paths, use_recorded_paths=recorded, keep_frames=None)  # type: ignore[arg-type]
        thread = next((t for t in analyze(target, opts).report.threads if t.is_crashing), None)
        if thread is None:
            return []
        return [((f.module or "?").lower(), f.rva or f.ip) for f in thread.frames[:KEEP]]
    finally:
        target.close()


def rust_frames(dump: str) -> Optional[List[Frame]]:
    if not os.access(RUST, os.X_OK):
        return None
    run = subprocess.run([RUST, "--json", dump], capture_output=True, text=True, timeout=300)
    try:
        frames = json.loads(run.stdout)["crashing_thread"]["frames"]
    except (ValueError, KeyError, TypeError):
        return []
    out = []
    for i, f in enumerate(frames[:KEEP]):
        offset = int(f.get("module_offset") or f.get("offset") or "0", 16)
        out.append(((f.get("module") or "?").lower(), offset + (1 if i and f.get("trust") != "context" else 0)))
    return out


_BREAKPAD_FRAME = re.compile(r"^\s*\d+\s+(\S+?)(?:\s*\+\s*(0x[0-9a-f]+))?\s*$")


def breakpad_frames(dump: str) -> Optional[List[Frame]]:
    if not os.access(BREAKPAD, os.X_OK):
        return None
    run = subprocess.run([BREAKPAD, dump], capture_output=True, text=True, timeout=300)
    lines = run.stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("Thread ") and "(crashed)" in line), None)
    if start is None:
        return []
    out: List[Frame] = []
    for line in lines[start + 1 :]:
        if line.startswith("Thread ") or len(out) >= KEEP:
            break
        m = _BREAKPAD_FRAME.match(line)
        if m and not line.strip().startswith(("r", "e", "Found")):
            out.append((m.group(1).lower(), int(m.group(2) or "0", 16)))
    return out


def score(found: List[Frame], truth: List[Frame]) -> Tuple[int, int, int]:
    """(real frames reported, frames reported, true frames)."""
    hit = sum((collections.Counter(found) & collections.Counter(truth)).values()) if found else 0
    return hit, len(found), len(truth)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--show", action="store_true", help="each dump's figures, not only the totals")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="dumpkit-walk-quality-")
    totals: Dict[str, List[int]] = collections.defaultdict(lambda: [0, 0, 0])
    rows = []
    try:
        for path, images in inputs():
            dump = plain(path, work)
            truth = dumpkit_frames(dump, images, recorded=True)
            walkers = {
                "dumpkit": dumpkit_frames(dump, [], recorded=False),
                "rust-minidump": rust_frames(dump),
                "breakpad": breakpad_frames(dump),
            }
            row = [os.path.relpath(path, os.path.join(ROOT, "sample_dumps")), str(len(truth))]
            for name, found in walkers.items():
                if found is None:
                    row.append("-")
                    continue
                hit, reported, real = score(found, truth)
                t = totals[name]
                t[0], t[1], t[2] = t[0] + hit, t[1] + reported, t[2] + real
                row.append(f"{hit}/{reported}")
            rows.append(row)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if a.show:
        print("| dump | true frames | dumpkit (real/reported) | rust-minidump | Breakpad |")
        print("|---|---|---|---|---|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
        print()
    print(f"{len(rows)} sample dumps, crashing thread, first {KEEP} frames of each walk")
    print("| walker | precision | recall | junk frames / real frames shown |")
    print("|---|---|---|---|")
    for name, (hit, reported, real) in totals.items():
        precision = hit / reported if reported else 0.0
        recall = hit / real if real else 0.0
        junk = reported - hit
        print(f"| {name} | {precision:.3f} ({hit}/{reported}) | {recall:.3f} ({hit}/{real}) | {junk}/{hit} |")


if __name__ == "__main__":
    main()
