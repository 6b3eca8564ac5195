"""The capture lane's environment: `dumpkit capture` run by each genuine Windows CPython
(3.8-3.13) under Wine, on crashing scripts run by the same interpreter.

Built on the real-pykd lane's environment (tests/support/wine: Wine and a CPython 3.8 with
dumpkit's Windows dependencies unpacked into Lib\\site-packages; the prefix is this lane's
own, made as the Windows lane's is): 3.8 is
that interpreter itself; 3.9-3.13 are scratch copies of ../shared/winpython's embeddable
builds whose `._pth` file adds that site-packages folder (the dependencies are pure Python,
and capstone's wheel is not tied to a Python version). The checkout is run from where it
is (scripts/run_dumpkit.py puts it on sys.path), so no copy of dumpkit is installed."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Sequence

from tests.support.wine import ROOT, Env, Unavailable, cache_dir, windows_path
from tests.support.wine import _run as run_under_wine  # stdin /dev/null, pipes, a time limit
from tests.windows_lane import winpy

HERE = Path(__file__).resolve().parent
SHARED_PYTHONS = ROOT.parent / "shared" / "winpython"
VERSIONS = ("3.8", "3.9", "3.10", "3.11", "3.12", "3.13")
RUNNER = HERE / "scripts" / "run_dumpkit.py"

__all__ = ["CaptureLane", "Unavailable", "VERSIONS", "dumpkit_args", "lane"]


@dataclass
class CaptureLane:
    env: Env
    pythons: Dict[str, Path]  # version -> folder holding python.exe

    def python_exe(self, version: str) -> str:
        return windows_path(self.pythons[version] / "python.exe")

    def dumpkit(self, version: str, args: Sequence[str], timeout: float = 240) -> subprocess.CompletedProcess:
        """`dumpkit ARGS` run by the Windows CPython `version` under Wine."""
        folder = self.pythons[version]
        argv = ["timeout", "-k", "10", str(int(timeout)), self.env.wine, "python.exe", *dumpkit_args(args)]
        return run_under_wine(argv, timeout + 30, cwd=folder, env=self.env.environ())

    def start(self, version: str, args: Sequence[str]) -> subprocess.Popen:
        """`python.exe ARGS` by the Windows CPython `version` under Wine, not waited for: the
        caller ends it. The Linux process is the Windows one (wine execs into it), so a signal
        sent to it reaches the program. stdin /dev/null and text pipes, as every Wine run here."""
        return subprocess.Popen(
            [self.env.wine, "python.exe", *args],
            cwd=self.pythons[version],
            env=self.env.environ(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
        )

    def wine(self, args: Sequence[str], timeout: float = 60) -> subprocess.CompletedProcess:
        """A Wine builtin program (reg.exe...) in the lane's prefix."""
        argv = ["timeout", "-k", "10", str(int(timeout)), self.env.wine, *args]
        return run_under_wine(argv, timeout + 30, env=self.env.environ())


def dumpkit_args(args: Sequence[str]) -> List[str]:
    """python.exe's arguments for `dumpkit ARGS` from this checkout."""
    return [windows_path(RUNNER), windows_path(ROOT), *args]


def _scratch(version: str, site_packages: Path, root: Path) -> Path:
    """A copy of ../shared/winpython's CPython `version` whose ._pth adds site_packages."""
    minor = version.split(".")[1]
    source = SHARED_PYTHONS / f"cpython-{version}-amd64"
    if not (source / f"python3{minor}.dll").exists():
        raise Unavailable(f"{source} is not here (../shared/winpython)")
    dest = root / f"py3{minor}"
    if not (dest / ".copied").exists():
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(source, dest)
        for path in dest.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)  # ../shared is read-only
        (dest / ".copied").write_text("ok\n")
    pth = dest / f"python3{minor}._pth"
    lines = [f"python3{minor}.zip", ".", windows_path(site_packages)]
    pth.write_text("\r\n".join(lines) + "\r\n")
    return dest


def lane(log=print) -> CaptureLane:
    # The real-pykd lane's environment with a Wine prefix of this lane's own (as the Windows
    # lane has): CI runs this lane beside the debugger-host lane, and each lane ends its
    # prefix's wineserver when it finishes, which would kill the other's programs.
    env = winpy.build(log=log, name="capture-lane")
    site_packages = env.python_dir / "Lib" / "site-packages"
    root = cache_dir() / "capture-lane"
    root.mkdir(parents=True, exist_ok=True)
    pythons = {"3.8": env.python_dir}
    for version in VERSIONS[1:]:
        pythons[version] = _scratch(version, site_packages, root)
    return CaptureLane(env, pythons)
