"""Remake sample_dumps/bundles/: a bundle of each dump below, made with `dumpkit bundle
--only-used-memory` from the raw dump and the images it was made with, so that the tests
of how processes end (tests/analysis/test_endings_dumps.py) and of hangs
(tests/analysis/test_hang_dumps.py) run on any machine, without python.org's interpreters or
Wine's own DLLs.

The images are where the folders' build scripts keep them (their caches: ENDINGS_CACHE,
ABORTS_CACHE, COLLISIONS_CACHE, defaults cache-<folder> beside the repository, as their build.sh), ../shared/winpython (WINPYTHON)
for the hang dumps, and Wine's PE DLLs
(WINE_DLLS, default Debian's /usr/lib/x86_64-linux-gnu/wine/x86_64-windows). A bundle is
made again only when its dump is named (or with --all); bundles carry what the analysis
read when they were made, so remake them when the analysis reads more.

Usage: python sample_dumps/make_bundles.py [--all | NAME...]
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUT = HERE / "bundles"
WINE_DLLS = os.environ.get("WINE_DLLS", "/usr/lib/x86_64-linux-gnu/wine/x86_64-windows")
ENDINGS = Path(os.environ.get("ENDINGS_CACHE") or REPO.parent / "cache-endings")
ABORTS = Path(os.environ.get("ABORTS_CACHE") or REPO.parent / "cache-aborts")
COLLISIONS = Path(os.environ.get("COLLISIONS_CACHE") or REPO.parent / "cache-collisions")
WINPYTHON = Path(os.environ.get("WINPYTHON", str(REPO.parent / "shared" / "winpython")))


def _endings(name: str, version: str, *extra: Path) -> Tuple[Path, List[Path]]:
    return HERE / "endings" / f"{name}.dmp.xz", [ENDINGS / "images" / f"Python{version}", *extra]


def _collisions(name: str, env: str) -> Tuple[Path, List[Path]]:
    return HERE / "collisions" / f"{name}.dmp.xz", [COLLISIONS / "envs" / env, COLLISIONS / "envs" / f"{env}.legacy"]


def _hang(name: str) -> Tuple[Path, List[Path]]:
    """A hang dump (sample_dumps/hangs): python.org's interpreter, storage.dll."""
    minor = name.rsplit("_py3", 1)[1]
    suffix = ".trimmed.dmp.xz" if "_full_" in name else ".dmp.xz"
    return HERE / "hangs" / f"{name}{suffix}", [WINPYTHON / f"cpython-3.{minor}-amd64", HERE / "hangs" / "bin"]


# the hang dumps bundled (tests/analysis/test_hang_dumps.py): each scenario, each Python, a
# normal and a full dump of each, and the plain MiniDumpNormal (no capture) ones
HANGS = (
    "lock_deadlock_py38",
    "lock_deadlock_py311",
    "lock_deadlock_py312",
    "lock_deadlock_py313",
    "lock_deadlock_full_py312",
    "lock_deadlock_plain_py312",
    "gil_held_py38",
    "gil_held_full_py311",
    "gil_held_py312",
    "gil_held_py313",
    "queue_wait_py311",
    "queue_wait_full_py312",
    "cs_deadlock_py311",
    "cs_deadlock_full_py312",
    "cs_deadlock_plain_py311",
)

# name -> (dump, image folders besides Wine's DLLs)
DUMPS: Dict[str, Tuple[Path, List[Path]]] = {
    **{f"fatal_gil_py{v}": _endings(f"fatal_gil_py{v}", v) for v in ("38", "39", "310", "311", "312", "313")},
    "fatal_gil_full_py313": (
        HERE / "endings" / "fatal_gil_full_py313.trimmed.dmp.xz",
        [ENDINGS / "images" / "Python313"],
    ),
    **{f"fatal_overflow_py{v}": _endings(f"fatal_overflow_py{v}", v) for v in ("38", "39", "310", "311", "312")},
    "fatal_overflow_py313": _endings("fatal_overflow_py313", "313"),
    "fatal_startup_py312": _endings("fatal_startup_py312", "312", ENDINGS / "images" / "AppPython312"),
    "os_abort_py312": _endings("os_abort_py312", "312"),
    "sigabrt_py39": _endings("sigabrt_py39", "39"),
    "os_exit3_py311": _endings("os_exit3_py311", "311"),
    "terminate_self_py312": _endings("terminate_self_py312", "312"),
    "sys_exit3_py310": _endings("sys_exit3_py310", "310"),
    "assert_dll_py312": _endings("assert_dll_py312", "312", HERE / "endings" / "bin"),
    # a delay-load failure: gpuext.pyd (and the stand-in cudart64_110.dll) in endings/bin
    "delayload_dll_py312": _endings("delayload_dll_py312", "312", HERE / "endings" / "bin"),
    "delayload_proc_py310": _endings("delayload_proc_py310", "310", HERE / "endings" / "bin"),
    "two_pythons_py311": _endings(
        "two_pythons_py311", "311", ENDINGS / "wineprefix" / "drive_c" / "scripts" / "oldext", HERE / "endings" / "bin"
    ),
    "cxx_terminate_py312": (
        HERE / "aborts" / "cxx_terminate_py312.dmp",
        [ABORTS / "images" / "Python312", HERE / "aborts" / "bin"],
    ),
    "assert_ucrt_py313": (
        HERE / "aborts" / "assert_ucrt_py313.dmp",
        [ABORTS / "images" / "Python313", HERE / "aborts" / "bin"],
    ),
    # (the MiniDumpNormal tf_check_failed_py311 is not bundled: 4.3 MB for the 10.5 MiB of
    # TensorFlow's pyd its walk reads; its test runs where the images are at hand)
    # the full-memory dump (1.2 GB) is not committed: its bundle keeps the memory the
    # analysis reads, the LogMessage's heap buffer with the Check failed text among it
    "tf_check_failed_full_py311": (
        ABORTS / "dumps" / "tf_check_failed_full_py311.trimmed.dmp",
        [ABORTS / "images" / "Python311-tf"],
    ),
    "omp_duplicate_py311": _collisions("omp_duplicate_py311", "omp_py311"),
    "omp_duplicate_py312": _collisions("omp_duplicate_py312", "omp_py312"),
    "omp_single_py311": _collisions("omp_single_py311", "omp_py311"),
    "msvcp140_mutex_py311": _collisions("msvcp140_mutex_py311", "msvcp140_py311"),
    "two_cuda_runtimes_py311": _collisions("two_cuda_runtimes_py311", "cuda_py311"),
    "cudnn9_shim_abort_py311": _collisions("cudnn9_shim_abort_py311", "cuda_py311"),
    **{f"hang_{name}": _hang(name) for name in HANGS},
}


def bundle(name: str) -> None:
    dump, images = DUMPS[name]
    args = [sys.executable, "-m", "dumpkit", "bundle", str(dump), "--only-used-memory", "-o", str(OUT / f"{name}.dkb")]
    for folder in [Path(WINE_DLLS), *images]:
        if folder.is_dir():
            args += ["--image-path", str(folder)]
    print(f"== {name}", flush=True)
    subprocess.run(args, cwd=REPO, check=True)


def main(argv: List[str]) -> int:
    names = list(DUMPS) if argv == ["--all"] else argv
    unknown = [n for n in names if n not in DUMPS]
    if not names or unknown:
        print(f"usage: make_bundles.py --all | NAME...  (unknown: {unknown}; known: {', '.join(DUMPS)})")
        return 2
    OUT.mkdir(exist_ok=True)
    for name in names:
        bundle(name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
