"""pip downloading pinned Windows wheels (hash-checked, for CPython 3.8 on win_amd64, no
dependencies) into a folder: what the Wine lanes and the --fetch-images tests both need."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def pip_download(pins: Path, dest: Path, timeout: float, python: str = "3.8") -> "subprocess.CompletedProcess[str]":
    """`pip download` of every requirement in `pins` (each with its --hash) into `dest`, for
    CPython `python`; wheels already there are reused. The caller judges the result."""
    argv = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--no-deps",
        "--only-binary=:all:",
        "--platform",
        "win_amd64",
        "--python-version",
        python,
        "--implementation",
        "cp",
        "--require-hashes",
        "-r",
        str(pins),
        "-d",
        str(dest),
    ]
    return subprocess.run(
        argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace", timeout=timeout
    )
