"""What the debugger lanes compare (tests/windbg_real and tests/windbg_host): which sample
dumps they run on, where each one's images are, the CLI run beside the debugger's, and a
report reduced to the story it tells (what happened, not which file it came from)."""

from __future__ import annotations

import lzma
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List, Optional

from tests.support import wine as lane
from tests.support.samples import ROOT, SAMPLE_BIN, SAMPLES

PYTHON_DUMPS = SAMPLES / "python"
WINPYTHON = lane.WINPYTHON


# CPython 3.9-3.13 (sample_dumps/pyversions): one of each kind of verdict in Python terms
# (a ctypes recursion, a worker thread's access violation with every Python stack, a
# __repr__ recursion), so !tfstack is seen to say what dumpkit analyze says of them.
PYVERSIONS = (
    "pyversions/ctypes_recursion_py312.dmp.xz",
    "pyversions/thread_av_py311.trimmed.dmp.xz",
    "pyversions/slot_recursion_py311.dmp.xz",
)


def sample_dumps() -> List[str]:
    """The sample dumps, then the real CPython 3.8 ones (sample_dumps/python: the Python
    stacks are read through the debugger too) and some of 3.9-3.13, named relative to
    sample_dumps/."""
    out = []
    for folder in (SAMPLES, PYTHON_DUMPS):
        for pattern in ("*.dmp", "*.dmp.xz"):
            out += sorted(str(p.relative_to(SAMPLES)) for p in folder.glob(pattern))
    return out + [name for name in PYVERSIONS if (SAMPLES / name).exists()]


def image_dirs(name: str) -> List[Path]:
    """Where the crashed program's images are: the CLI's --image-path, the debugger's .exepath."""
    if name.startswith("python/"):  # the PSF's CPython these dumps crashed, Wine's own DLLs
        return [WINPYTHON, SAMPLE_BIN / "wine"]
    if name.startswith("pyversions/"):  # python.org's CPython 3.X, nativelib.dll, Wine's DLLs
        minor = re.search(r"_py3(\d+)", name).group(1)
        return [WINPYTHON.parent / f"cpython-3.{minor}-amd64", SAMPLES / "pyversions" / "bin", SAMPLE_BIN / "wine"]
    return [SAMPLE_BIN]


def dump_file(name: str, scratch: Path) -> Path:
    path = SAMPLES / name
    if not name.endswith(".xz"):
        return path
    out = scratch / Path(name[:-3]).name
    if not out.exists():
        with lzma.open(path) as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst)
    return out


def cli(env: lane.Env, args: List[str], dirs: List[Path]) -> subprocess.CompletedProcess:
    """dumpkit run natively, with the same images reachable as the debugger has: a path like
    C:\\windows\\system32\\ucrtbase.dll is found in the lane's Wine prefix, by the debugger
    and (through WINEPREFIX) by the CLI."""
    proc = subprocess.run(
        [sys.executable, "-m", "dumpkit", *args] + [arg for d in dirs for arg in ("--image-path", str(d))],
        env=dict(os.environ, WINEPREFIX=str(env.prefix)),
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode in (0, 1), proc.stderr
    return proc


def thread_story(t: dict, teb_stack: bool) -> dict:
    return {
        "tid": t["tid"],
        "crashing": t["is_crashing"],
        "frame_count": t["frame_count"],
        "stop_reason": t["stop_reason"],
        "elided": t["elided_frames"],
        "frames": [
            (f["index"], f["ip"], f["sp"], f["module"], f["size"], f["trust"], f["symbol"]) for f in t["frames"]
        ],
        "cycles": t["cycles"],
        "stack": (t["stack_start"] if not teb_stack else None, t["stack_end"], t["teb"]),
        "budget": t["budget"],
    }


def story_of(doc: dict, teb_stack: bool = False) -> dict:
    """Everything the report says about what happened (not about the file it came from).

    `teb_stack`: the dump holds the threads' TEBs (full-memory dumps). The debugger's
    stack then starts at SP (its TEB's StackLimit is far below); the file reader's at the
    thread's stack descriptor, which may start a few bytes below SP: not compared."""
    return {
        "verdict": doc["verdict"],
        "crash": {k: v for k, v in (doc["crash"] or {}).items() if k != "context_flags"},
        "findings": doc["findings"],
        "frame_sizes": doc["frame_sizes"],
        "threads": [thread_story(t, teb_stack) for t in doc["threads"]],
        "python": doc["python"],
        "modules": [(m["name"], m["base"], m["size"], m.get("file_version")) for m in doc["modules"]],
    }


def parked_threads(doc: dict) -> set:
    """Threads whose thread-list SP lies outside the stack the dump recorded for them."""
    out = set()
    for t in doc["threads"]:
        sp = int(dict(t["registers"] or []).get("rsp", "0x0"), 16)
        if t["stack_start"] and not int(t["stack_start"], 16) <= sp <= int(t["stack_end"], 16):
            out.add(t["tid"])
    return out


FRAME_LINK = re.compile(r"~~\[0x([0-9a-f]+)\]s;(?: \.ecxr;)? \.frame 0x([0-9a-f]+)$")
THREAD_LINK = re.compile(r"~~\[0x([0-9a-f]+)\]s$")
CODE_LINK = re.compile(r"u 0x([0-9a-f]+)$")  # the faulting code's addresses (crash site)
REGISTERS = re.compile(r"\b[re]ip=[0-9a-f]+")


def frame_line(output: Optional[str], index: int) -> Optional[str]:
    for line in (output or "").splitlines():
        if re.match(rf"^{index:02x} [0-9a-f]{{8}}`[0-9a-f]{{8}} ", line):
            return line
    return None
