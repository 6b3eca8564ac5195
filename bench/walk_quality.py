"""How right a walk without the program's images is (issue #32 item 9): precision and
recall of the crashing thread's frames, dumpkit beside rust-minidump and Breakpad, and
whether item 9's targets hold on each dump.

    python bench/walk_quality.py [--samples-only | --public-only]

Two sets of dumps, each with its crashing thread's true stack:
- the sample dumps (sample_dumps/*.dmp and the CPython 3.8 ones in sample_dumps/python):
  truth = dumpkit's walk from the modules' own unwind data (`--image-path
  sample_dumps/bin`, the genuine CPython builds in ../shared/winpython, and for
  numpy_strided_av NumPy 1.24.4's cp38 win_amd64 wheel from PyPI, which this script
  downloads with pip into ~/.cache/dumpkit-bench/numpy the first time and unpacks to
  ~/.cache/dumpkit-bench/numpy/img). Every truth frame must come from the context or
  unwind data (trust context, unwind_info, or prologue: the function's own code read to its
  RET); a dump whose truth walk scanned is warned about, and its truth cut before the first
  scanned frame, with the frames below it left unscored (`*` in the table);
- public crash dumps whose crash handler wrote the true stack beside them (Unity and Unreal
  crash folders): truth = bench/truth/NAME.json, made by bench/truth_corpus.py, which also
  puts the dumps in ~/.cache/dumpkit-bench/truth/ (not committed: licences unknown). A dump
  absent from the cache is skipped with a note. Where the log begins below the exception
  IP (`gap_after_context`) a walker's frames between its frame 0 and its first frame that
  is a true one are not scored; where the log says its own walk stopped short
  (`incomplete_tail`) a walker's frames below its last true one are not scored.

Each walker gets the dump alone, as a user without the images would run it: dumpkit with no
image path and recorded paths off (it still uses what the dump holds: Wine's dbghelp copies
unwind data into the dump), rust-minidump `--json` and Breakpad's `minidump_stackwalk`,
neither with symbols.

A frame is its (module, offset of the return address or, for frame 0, of the IP); a frame
outside every module is ("?", address). rust-minidump writes a caller's offset one byte
before its return address (the call instruction), which is undone. Frames are compared as
multisets over the crashing thread's first 1,000 frames of each walk (a recursion's
repetitions would otherwise be the whole score): real = frames shown that are true,
precision = real / shown, recall = real / true frames, junk = shown - real.

"Shown" is the thread's stack, `frames`. dumpkit lists the scanned frames that nothing
confirms apart, after the stack (ThreadReport.possible_frames, under a heading that says
what they are); those are scored in their own column (real/junk: true frames not already
in the stack / the rest).

Item 9's targets, per dump: dumpkit's recall >= the best peer's, counting every frame the
report shows (the stack and the possible block: a true frame the user is shown under
"possible" is still found); and dumpkit's junk in the stack <= its real frames there (the
junk the target is about is what passes for the stack). The tables give the stack-only
recall too.
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
import zipfile
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from dumpkit.engine import Options, analyze  # noqa: E402
from dumpkit.problems import Problems  # noqa: E402
from dumpkit.sources.minidump import open_dump  # noqa: E402

PEERS = os.path.expanduser("~/.cache/dumpkit-peers")
RUST = os.path.join(PEERS, "minidump-stackwalk")
BREAKPAD = os.path.join(PEERS, "breakpad_minidump_stackwalk")
WINPYTHON = os.path.join(os.path.dirname(ROOT), "shared", "winpython")
BENCH_CACHE = os.path.expanduser("~/.cache/dumpkit-bench")
NUMPY = os.path.join(BENCH_CACHE, "numpy")
NUMPY_WHEEL = "numpy==1.24.4"
TRUTH_JSON = os.path.join(HERE, "truth")
TRUTH_DUMPS = os.path.join(BENCH_CACHE, "truth")
KEEP = 1000
# how a truth frame may have been found: from the context, from unwind data, or from the
# function's own code read to its RET (no unwind data: a leaf); never by scanning
TRUTH_TRUST = ("context", "unwind_info", "prologue")
WALKERS = ("dumpkit", "rust-minidump", "breakpad")
Frame = Tuple[str, int]


@dataclass
class Truth:
    frames: List[Frame]
    gap_after_context: bool = False  # real frames between frame 0 and frames[1] are unknown
    incomplete_tail: bool = False  # real frames below the last are unknown
    note: str = ""


@dataclass
class Walk:
    shown: List[Frame]
    possible: List[Frame]


def numpy_images() -> Optional[str]:
    """NumPy 1.24.4's cp38 win_amd64 images (numpy_strided_av's), fetched once with pip."""
    img = os.path.join(NUMPY, "img")
    if glob.glob(os.path.join(img, "numpy", "core", "_multiarray_umath*.pyd")):
        return img
    print(f"fetching {NUMPY_WHEEL} (cp38 win_amd64) into {NUMPY} for numpy_strided_av's truth", file=sys.stderr)
    os.makedirs(NUMPY, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--only-binary=:all:", "--platform", "win_amd64"]
    cmd += ["--python-version", "3.8", "--no-deps", "-d", NUMPY, NUMPY_WHEEL]
    if subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode != 0:
        print("warning: pip download failed; numpy_strided_av's truth will scan", file=sys.stderr)
        return None
    for wheel in glob.glob(os.path.join(NUMPY, "numpy-1.24.4-*.whl")):
        with zipfile.ZipFile(wheel) as z:
            for member in z.namelist():
                if member.lower().endswith((".pyd", ".dll")):
                    z.extract(member, img)
    return img


def sample_inputs() -> List[Tuple[str, List[str]]]:
    """(sample dump, image folders giving the truth)."""
    bins = os.path.join(ROOT, "sample_dumps", "bin")
    found = [(p, [bins]) for p in sorted(glob.glob(os.path.join(ROOT, "sample_dumps", "*.dmp")))]
    pythons = sorted(glob.glob(os.path.join(WINPYTHON, "cpython-*")))
    if pythons:
        images = [bins, os.path.join(ROOT, "sample_dumps", "python")] + pythons
        numpy = numpy_images()
        if numpy:
            images.append(numpy)
        py = sorted(glob.glob(os.path.join(ROOT, "sample_dumps", "python", "*.dmp*")))
        found += [(p, images) for p in py if "full" not in p]
    else:
        print(f"note: {WINPYTHON} absent: the Python sample dumps are left out", file=sys.stderr)
    return found


def plain(path: str, folder: str) -> str:
    if not path.endswith(".xz"):
        return path
    out = os.path.join(folder, os.path.basename(path)[:-3])
    with lzma.open(path) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


def _key(f) -> Frame:
    return ((f.module or "?").lower(), f.rva if f.rva is not None else f.ip)


def dumpkit_walk(dump: str, image_paths: Sequence[str], recorded: bool):
    """The crashing thread's ThreadReport, every frame kept (a report keeps the head and
    tail of a long stack)."""
    problems = Problems()
    target = open_dump(dump, problems)
    try:
        opts = Options(image_paths=list(image_paths), use_recorded_paths=recorded, keep_frames=None)  # type: ignore[arg-type]
        return next((t for t in analyze(target, opts, problems=problems).report.threads if t.is_crashing), None)
    finally:
        target.close()


def dumpkit_frames(dump: str) -> Walk:
    thread = dumpkit_walk(dump, [], recorded=False)
    if thread is None:
        return Walk([], [])
    # before dumpkit lists unconfirmed scanned frames apart, the field is absent
    possible = getattr(thread, "possible_frames", None) or ()
    return Walk([_key(f) for f in thread.frames[:KEEP]], [_key(f) for f in possible[:KEEP]])


def sample_truth(dump: str, images: List[str]) -> Truth:
    thread = dumpkit_walk(dump, images, recorded=True)
    if thread is None:
        return Truth([], note="no crashing thread")
    frames = list(thread.frames[:KEEP])
    bad = next((i for i, f in enumerate(frames) if f.trust.value not in TRUTH_TRUST), None)
    if bad is None:
        return Truth([_key(f) for f in frames])
    scanned = sum(1 for f in frames if f.trust.value not in TRUTH_TRUST)
    note = f"truth cut at frame {bad} ({frames[bad].trust.value}; {scanned} of its first {len(frames)} frames not from unwind data)"
    print(f"warning: {os.path.basename(dump)}: {note}", file=sys.stderr)
    return Truth([_key(f) for f in frames[:bad]], incomplete_tail=True, note=note)


def public_truths() -> List[Tuple[str, Optional[str], Truth]]:
    """(name, dump in the cache or None, truth) per bench/truth/*.json."""
    out = []
    for path in sorted(glob.glob(os.path.join(TRUTH_JSON, "*.json"))):
        name = os.path.basename(path)[:-5]
        with open(path) as f:
            t = json.load(f)
        gap, tail = bool(t.get("gap_after_context")), bool(t.get("incomplete_tail"))
        why = ["the log begins below the exception IP"] if gap else []
        why += ["the log's own walk stopped short"] if tail else []
        note = f"({t['source']['repo']}): " + "; ".join(why)
        truth = Truth(
            [(m.lower(), int(o, 0) if isinstance(o, str) else int(o)) for m, o in t["frames"]][:KEEP], gap, tail, note
        )
        dump = os.path.join(TRUTH_DUMPS, name + ".dmp")
        out.append((name, dump if os.path.exists(dump) else None, truth))
    return out


def rust_frames(dump: str) -> Optional[Walk]:
    if not os.access(RUST, os.X_OK):
        return None
    run = subprocess.run([RUST, "--json", dump], capture_output=True, text=True, timeout=300)
    try:
        frames = json.loads(run.stdout)["crashing_thread"]["frames"]
    except (ValueError, KeyError, TypeError):
        return Walk([], [])
    out = []
    for i, f in enumerate(frames[:KEEP]):
        offset = int(f.get("module_offset") or f.get("offset") or "0", 16)
        out.append(((f.get("module") or "?").lower(), offset + (1 if i and f.get("trust") != "context" else 0)))
    return Walk(out, [])


_BREAKPAD_FRAME = re.compile(r"^\s*\d+\s+(\S+?)(?:\s*\+\s*(0x[0-9a-f]+))?\s*$")


def breakpad_frames(dump: str) -> Optional[Walk]:
    if not os.access(BREAKPAD, os.X_OK):
        return None
    run = subprocess.run([BREAKPAD, dump], capture_output=True, text=True, timeout=300)
    lines = run.stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("Thread ") and "(crashed)" in line), None)
    if start is None:
        return Walk([], [])
    out: List[Frame] = []
    for line in lines[start + 1 :]:
        if line.startswith("Thread ") or len(out) >= KEEP:
            break
        m = _BREAKPAD_FRAME.match(line)
        if m and not line.strip().startswith(("r", "e", "Found")):
            if m.group(2) is None and m.group(1).startswith("0x"):
                out.append(("?", int(m.group(1), 16)))  # outside every module: the address
            else:
                out.append((m.group(1).lower(), int(m.group(2) or "0", 16)))
    return Walk(out, [])


def scored(found: List[Frame], truth: Truth) -> List[Frame]:
    """The frames of a walk that are scored: not those where the truth does not know the
    real stack (between the context frame and the log's first frame; below its last)."""
    true = set(truth.frames[1:])
    if truth.gap_after_context and len(found) > 1:
        first = next((i for i in range(1, len(found)) if found[i] in true), None)
        if first is not None:
            found = found[:1] + found[first:]
    if truth.incomplete_tail:
        every = set(truth.frames)
        last = next((i for i in range(len(found) - 1, -1, -1) if found[i] in every), None)
        found = found[: last + 1] if last is not None else found
    return found


def score(walk: Walk, truth: Truth) -> Tuple[int, int, int, int, int]:
    """(real shown, shown, true frames, real possible, possible)."""
    shown = scored(walk.shown, truth)
    left = collections.Counter(truth.frames)
    hit = collections.Counter(shown) & left
    maybe = collections.Counter(walk.possible) & (left - hit)
    return sum(hit.values()), len(shown), len(truth.frames), sum(maybe.values()), len(walk.possible)


def ratio(a: int, b: int) -> str:
    return f"{a / b:.3f}" if b else "-"


def main() -> None:
    ap = argparse.ArgumentParser()
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--samples-only", action="store_true", help="only the sample dumps")
    which.add_argument("--public-only", action="store_true", help="only the public dumps with a crash handler's stack")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="dumpkit-walk-quality-")
    cases: List[Tuple[str, str, str, Truth]] = []  # (set, label, dump, truth)
    skipped: List[str] = []
    try:
        if not a.public_only:
            for path, images in sample_inputs():
                dump = plain(path, work)
                label = os.path.relpath(path, os.path.join(ROOT, "sample_dumps"))
                cases.append(("samples", label, dump, sample_truth(dump, images)))
        if not a.samples_only:
            for name, dump, truth in public_truths():
                if dump is None:
                    skipped.append(name)
                else:
                    cases.append(("public", name, dump, truth))
        rows = []
        totals: Dict[Tuple[str, str], List[int]] = collections.defaultdict(lambda: [0, 0, 0, 0, 0])
        met: Dict[Tuple[str, str], List[int]] = collections.defaultdict(lambda: [0, 0, 0])
        for group, label, dump, truth in cases:
            walks = {
                "dumpkit": dumpkit_frames(dump),
                "rust-minidump": rust_frames(dump),
                "breakpad": breakpad_frames(dump),
            }
            s = {name: score(w, truth) for name, w in walks.items() if w is not None}
            for name, v in s.items():
                for t in (totals[(group, name)], totals[("all", name)]):
                    for i in range(5):
                        t[i] += v[i]
            hit, shown, real, maybe = s["dumpkit"][:4]
            peers = [s[p][0] / s[p][2] for p in ("rust-minidump", "breakpad") if p in s and s[p][2]]
            best = max(peers) if peers else None
            recall_ok = best is None or ((hit + maybe) / real if real else 0.0) >= best - 1e-9
            junk_ok = shown - hit <= hit
            for g in (group, "all"):
                m = met[(g, "dumpkit")]
                m[0], m[1], m[2] = m[0] + recall_ok, m[1] + junk_ok, m[2] + 1
            mark = "*" if truth.gap_after_context or truth.incomplete_tail else ""
            row = [f"{label}{mark}", str(real)]
            row.append(f"{hit}/{shown}")
            row.append(str(shown - hit))
            row.append(f"{s['dumpkit'][3]}/{s['dumpkit'][4] - s['dumpkit'][3]}" if s["dumpkit"][4] else "-")
            for p in ("rust-minidump", "breakpad"):
                row.append(f"{s[p][0]}/{s[p][1]}" if p in s else "-")
            both = f"{ratio(hit, real)} / {ratio(hit + maybe, real)}"
            row.append(f"{both} vs {best:.3f}" if best is not None else both)
            row.append("yes" if recall_ok else "**no**")
            row.append("yes" if junk_ok else "**no**")
            rows.append((group, row, truth.note if mark else ""))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    groups = [g for g in ("samples", "public") if any(r[0] == g for r in rows)]
    for g in groups:
        title = (
            "sample dumps (truth: unwind data)" if g == "samples" else "public dumps (truth: the crash handler's log)"
        )
        print(f"### {title}\n")
        print(
            "| dump | true frames | dumpkit real/shown | junk shown | possible real/junk "
            "| rust-minidump real/shown | Breakpad real/shown | recall: dumpkit stack / with possible vs best peer "
            "| recall >= best peer | junk <= real |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        notes = []
        for group, row, note in rows:
            if group == g:
                print("| " + " | ".join(row) + " |")
                if note:
                    notes.append(f"{row[0]} {note}")
        print()
        for n in notes:
            print(f"- {n}")
        if notes:
            print()
    if skipped:
        print(f"skipped (not in {TRUTH_DUMPS}; run bench/truth_corpus.py): {', '.join(skipped)}\n")
    print("### totals\n")
    print(f"crashing thread, first {KEEP} frames of each walk; `*`: part of the walk not scored (see above)\n")
    print(
        "| dumps | walker | precision | recall (stack) | recall (with possible) | junk / real shown | possible real/junk "
        "| dumps: recall >= best peer | dumps: junk <= real |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for g in groups + (["all"] if len(groups) > 1 else []):
        n = sum(1 for r in rows if g == "all" or r[0] == g)
        for name in WALKERS:
            if (g, name) not in totals:
                continue
            hit, shown, real, maybe, possible = totals[(g, name)]
            m = met.get((g, name))
            targets = [f"{m[0]}/{m[2]}", f"{m[1]}/{m[2]}"] if m else ["", ""]
            cells = [
                f"{g} ({n})",
                name,
                f"{ratio(hit, shown)} ({hit}/{shown})",
                f"{ratio(hit, real)} ({hit}/{real})",
                f"{ratio(hit + maybe, real)} ({hit + maybe}/{real})" if possible else "-",
                f"{shown - hit} / {hit}",
                f"{maybe}/{possible - maybe}" if possible else "-",
            ] + targets
            print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
