"""Public crash dumps whose crash handler wrote the crashing thread's true native stack beside
them: the truth for bench/walk_quality.py beyond the sample dumps (issue #32 item 9).

    python bench/truth_corpus.py [--mirrors DIR] [--only NAME]

Each source is a public GitHub repository holding one crash folder: a Unity player's
(crash.dmp with error.log, Player.log or output_log.txt, whose "Stack Trace of Crashed
Thread" / "OUTPUTTING STACK TRACE" block lists each frame's absolute address and module, as
the player's handler walked it with dbghelp's StackWalk64 and the program's own images) or
an Unreal one (UE4Minidump.dmp with CrashContext.runtime-xml, whose <PCallStack> lists
"Module 0xBASE + offset" per frame, walked by the engine's handler). The repositories are
read from snapshots fetched to --mirrors (default /work/.mirror, one OWNER+NAME/repo git
directory each); each dump is written to ~/.cache/dumpkit-bench/truth/NAME.dmp (the dumps
are not committed: their licences are unknown) and its truth to bench/truth/NAME.json:

    {"source": {"repo", "commit", "path", "log"}, "frames": [[module, "0xoffset"], ...],
     "gap_after_context": bool, "incomplete_tail": bool, "how": "..."}

A frame is (module file name as the dump's module list has it, offset of the IP for frame
0 and of the return address for the others), the key walk_quality.py compares; a frame the
log places outside every module of the dump (Mono's JIT code, a wild IP) is ("?", absolute
address). How the truth is made, per dump:
- the log's frames are mapped to the dump's modules (Unity: absolute address inside a
  module's range; Unreal: the module named, its offset as written; the log's base is not
  used, Unreal 4.2x writes it cut to 32 bits);
- the log must contain the dump's exception IP: frames the log lists above it (the crash
  handler's own frames on the same stack, Unreal's ensure handler) are dropped. A log that
  begins below it (Unreal's asserts skip the assert machinery, NumMinidumpFramesToIgnore)
  gets the context frame put first and `gap_after_context`: the real frames between it and
  the log's first are unknown, and walk_quality.py does not score a walker's frames there;
- where the log says its walk lost frames ("<Missing stacktrace information>": the Unity
  handler gave up), `incomplete_tail`: a walker's frames below its last match of a true
  frame are not scored;
- every caller's absolute address is looked for among the words of the crashing thread's
  stack in the dump: found as written, the log prints return addresses (both engines do,
  on every dump here); found only one byte further on, it prints call-site addresses and
  1 is added. The counts go in "how".
"""

from __future__ import annotations

import argparse
import json
import os
import re
import struct
import subprocess
import sys
from typing import Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from dumpkit.sources.minidump import MinidumpTarget, open_dump  # noqa: E402

TRUTH_DIR = os.path.join(HERE, "truth")
CACHE = os.path.join(os.path.expanduser("~/.cache/dumpkit-bench"), "truth")

# name, repository, commit, dump path, log path, log kind
SOURCES: List[Tuple[str, str, str, str, str, str]] = [
    (
        "unity_ksp_2018",
        "maculator/KSP_vanilla_Crash_240318",
        "1cde6561cae27a1a97629115ff49ea52e240c309",
        "crash.dmp",
        "output_log.txt",
        "unity",
    ),
    (
        "unity_ksp_2021",
        "LYJ-Kerman/crash-log",
        "89b1db95b83e40cf744a373e786bde72888b689c",
        "crash.dmp",
        "error.log",
        "unity",
    ),
    (
        "unity_rimworld_2020",
        "Leninade/rimworld-errorlog-1-11-20",
        "1dad892d310e1b9c5e4ea6be319adb020dcb8c0e",
        "crash.dmp",
        "output_log.txt",
        "unity",
    ),
    (
        "unity_rimworld_2021",
        "Riccars/crash",
        "328406a1d63c27963afe065b1aff06910f24cd85",
        "crash.dmp",
        "error.log",
        "unity",
    ),
    (
        "unity_gallipoli",
        "NotDracon/gallipoli-logs",
        "233993cc7c26f5aaca8d56cffbc0b9d90101b8d7",
        "crash.dmp",
        "Player.log",
        "unity",
    ),
    (
        "unreal_fortnite_424",
        "GrayGray72/Fortnite-Audio-Game-Crash",
        "74ebb46b619753d8da062707f589af140677e6da",
        "UE4Minidump.dmp",
        "CrashContext.runtime-xml",
        "unreal",
    ),
    (
        "unreal_editor_422",
        "Dartonyanr/MyProject3",
        "132579829bb4c935a72914345a6db07446ac517a",
        "UE4Minidump.dmp",
        "CrashContext.runtime-xml",
        "unreal",
    ),
    (
        "unreal_editor_427",
        "V1ow/Move-Game",
        "cddd6c00cb4a95a999b74384b405740cc132fb55",
        "UE4Minidump.dmp",
        "CrashContext.runtime-xml",
        "unreal",
    ),
]

_UNITY_START = re.compile(r"Stack Trace of Crashed Thread|=+ OUTPUT+ING STACK TRACE =+")
_UNITY_FRAME = re.compile(r"^0x([0-9A-Fa-f]{8,16}) \((.*?)\)\s")
_UNITY_UNKNOWN = re.compile(r"<Missing stacktrace information>")
_UNITY_END = re.compile(r"^(=+ END OF STACKTRACE|Stacks for Running Threads|Call Stack for Thread)")
_UNREAL_FRAME = re.compile(r"(\S+) 0x[0-9A-Fa-f]+ \+ ([0-9A-Fa-f]+)")

# a log frame: (module as the log names it, absolute address or None, offset or None)
LogFrame = Tuple[str, Optional[int], Optional[int]]


def unity_frames(text: str) -> Tuple[List[LogFrame], List[int]]:
    """The crashed thread's frames of a Unity player log, and where (after how many frames)
    the log says frames are missing."""
    lines = text.replace("\r", "").splitlines()
    start = next((i for i, line in enumerate(lines) if _UNITY_START.search(line)), None)
    if start is None:
        raise ValueError("no crashed-thread stack in the log")
    out: List[LogFrame] = []
    unknown: List[int] = []
    for line in lines[start + 1 :]:
        if _UNITY_END.match(line):
            break
        m = _UNITY_FRAME.match(line + " ")
        if m:
            out.append((m.group(2), int(m.group(1), 16), None))
        elif _UNITY_UNKNOWN.search(line):
            unknown.append(len(out))  # frames the walk could not place: the log's stack is incomplete there
        # else the handler's own output interleaved (ERROR: SymGetSymFromAddr64, SymInit and its
        # module list, "RtlLookupFunctionEntry returned NULL function")
    return out, unknown


def unreal_frames(text: str) -> Tuple[List[LogFrame], List[int]]:
    m = re.search(r"<PCallStack>(.*?)</PCallStack>", text, re.S)
    if m is None:
        raise ValueError("no <PCallStack> in the crash context")
    return [(name, None, int(off, 16)) for name, off in _UNREAL_FRAME.findall(m.group(1))], []


def git_show(mirror: str, commit: str, path: str) -> bytes:
    return subprocess.run(["git", "-C", mirror, "show", f"{commit}:{path}"], capture_output=True, check=True).stdout


def stack_words(target: MinidumpTarget) -> Dict[int, int]:
    """Word -> count over the crashing thread's stack: the dump's memory from the exception's
    SP to the end of the range holding it (the SP can lie outside the thread's recorded stack:
    the Unreal dumps here), and the thread's recorded stack."""
    exc = target.exception
    assert exc is not None and exc.context is not None
    thread = next(t for t in target.threads if t.tid == exc.thread_id)
    sp = exc.context.sp
    spans = [(thread.stack_start, thread.stack_end)]
    hi = sp
    for start, end in sorted(target.memory_ranges()):
        if start <= hi < end:
            hi = end  # on through ranges that follow each other
    if hi > sp:
        spans.append((sp, hi))
    words: Dict[int, int] = {}
    for lo, hi in spans:
        data = target.read_available(lo, hi - lo)
        for (w,) in struct.iter_unpack("<Q", data[: len(data) // 8 * 8]):
            words[w] = words.get(w, 0) + 1
    return words


def build(name: str, repo: str, commit: str, dump_path: str, log_path: str, kind: str, mirrors: str) -> dict:
    mirror = os.path.join(mirrors, repo.replace("/", "+"), "repo")
    if not os.path.isdir(mirror):
        raise FileNotFoundError(f"{mirror}: no snapshot of {repo} (fetch it first)")
    os.makedirs(CACHE, exist_ok=True)
    dump = os.path.join(CACHE, name + ".dmp")
    with open(dump, "wb") as f:
        f.write(git_show(mirror, commit, dump_path))
    text = git_show(mirror, commit, log_path).decode("utf-8", "replace").lstrip("\ufeff")
    log, unknown = unity_frames(text) if kind == "unity" else unreal_frames(text)
    target = open_dump(dump)
    try:
        exc = target.exception
        if exc is None or exc.context is None:
            raise ValueError("the dump has no exception context")
        by_stem = {}
        for mod in target.modules:
            by_stem.setdefault(mod.name.lower().rsplit(".", 1)[0], mod)
        # (module, offset, absolute address) per log frame
        mapped: List[Tuple[str, int, Optional[int]]] = []
        for logname, addr, off in log:
            if addr is not None:
                mod = target.module_at(addr)
                mapped.append((mod.name, addr - mod.base, addr) if mod else ("?", addr, addr))
            else:
                mod = by_stem.get(logname.lower())
                if mod is None:
                    raise ValueError(f"log module {logname} is not in the dump's module list")
                assert off is not None
                mapped.append((mod.name, off, mod.base + off))
        ip = exc.context.ip
        mod = target.module_at(ip)
        ctx = (mod.name, ip - mod.base, ip) if mod else ("?", ip, ip)
        notes = []
        at = next((i for i, f in enumerate(mapped) if f[0].lower() == ctx[0].lower() and f[1] == ctx[1]), None)
        gap = False
        if at is None:
            mapped.insert(0, ctx)
            gap = True
            notes.append(
                f"the log begins below the exception IP ({ctx[0]}+{ctx[1]:#x}): that frame is put first and "
                "the real frames between it and the log's first are unknown (not scored)"
            )
        elif at:
            notes.append(f"the log's {at} frames above the exception IP (the crash handler's) dropped")
            mapped = mapped[at:]
        tail = bool(unknown) and max(unknown) == len(log)
        if unknown and not (tail and len(set(unknown)) == 1):
            raise ValueError(f"the log misses frames inside its stack (after frames {sorted(set(unknown))})")
        if tail:
            notes.append(
                "the log says its walk stopped short (<Missing stacktrace information>): the real frames "
                "below its last are unknown (not scored)"
            )
        words = stack_words(target)
        callers = [f for f in mapped[1:] if f[2] is not None]
        as_is = sum(1 for f in callers if f[2] in words)
        plus1 = sum(1 for f in callers if f[2] not in words and (f[2] or 0) + 1 in words)
        adjust = 1 if plus1 > as_is else 0
        notes.append(
            f"{as_is} of {len(callers)} caller addresses are words on the crashing thread's stack as "
            f"written, {plus1} only one byte on: the log prints "
            + ("call-site addresses; 1 added" if adjust else "return addresses; used as written")
        )
        outside = sum(1 for f in mapped if f[0] == "?")
        if outside:
            notes.append(
                f'{outside} frames outside every module of the dump (JIT code or a wild IP), as ("?", address)'
            )
        frames = [[m, o + (adjust if i else 0)] for i, (m, o, _a) in enumerate(mapped)]
        return {
            "source": {"repo": repo, "commit": commit, "path": dump_path, "log": log_path},
            "frames": frames,
            "gap_after_context": gap,
            "incomplete_tail": tail,
            "how": f"{kind} crash handler's stack of the crashing thread (thread {exc.thread_id}); " + "; ".join(notes),
        }
    finally:
        target.close()


def dumps(truth: dict) -> str:
    """The truth as JSON, a frame a line, offsets in hex as logs and reports write them."""
    frames = ",\n".join(f'  [{json.dumps(m)}, "{o:#x}"]' for m, o in truth["frames"])
    rest = {k: v for k, v in truth.items() if k != "frames"}
    head = json.dumps(rest, indent=1)[:-2]
    return head + ',\n "frames": [\n' + frames + "\n ]\n}\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mirrors", default="/work/.mirror", help="folder of fetched OWNER+NAME/repo snapshots")
    ap.add_argument("--only", help="one source by name")
    a = ap.parse_args()
    os.makedirs(TRUTH_DIR, exist_ok=True)
    for name, repo, commit, dump_path, log_path, kind in SOURCES:
        if a.only and name != a.only:
            continue
        try:
            truth = build(name, repo, commit, dump_path, log_path, kind, a.mirrors)
        except (OSError, ValueError, subprocess.CalledProcessError) as e:
            print(f"{name}: skipped: {e}")
            continue
        with open(os.path.join(TRUTH_DIR, name + ".json"), "w") as f:
            f.write(dumps(truth))
        print(f"{name}: {len(truth['frames'])} frames; {truth['how']}")


if __name__ == "__main__":
    main()
