"""The Wine lanes' environment: Microsoft's debugger engine (the dbgeng.dll inside the
pykd 0.3.4.15 wheel) driven by a genuine Windows CPython 3.8, under Wine. The real-pykd
lane (tests/windbg_real) runs in it; the debugger-host, Windows, capture and py38 lanes
build on it (tests/windbg_host, windows_lane, capture_lane, py38_lane).

Built from public packages only, into a cache folder outside the repository (keyed by
everything that goes into it, so an unchanged lane reuses it and a changed pin rebuilds):
- Debian's `wine64` (Wine 8.0) runs it; a WINEPREFIX of the lane's own under the cache;
- `../shared/winpython/cpython-3.8-amd64` (the PSF's build) is copied to a scratch folder;
- the wheels pinned in `wheels.txt` (pykd and what dumpkit imports) are downloaded from
  PyPI with their hashes checked and unpacked into its `Lib\\site-packages`;
- a stand-in `mscoree.dll` built with mingw from `mscoree.c` sits next to `python.exe`:
  pykd.pyd imports mscoree statically and fails to load unless CLRCreateInstance answers
  S_OK, and Wine has no CLR without wine-mono (not in Debian).

Every Wine call runs under `timeout`, with stdin /dev/null and stdout/stderr pipes (with a
file or terminal as a standard handle this CPython dies in init_sys_streams), and with
WINEDLLOVERRIDES making Wine load the wheel's Microsoft dbgeng/dbghelp/DbgModel and the
stand-in mscoree instead of its own builtins.

`python -m tests.support.wine` builds (or finds) the environment and prints where.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Sequence

from tests.support.pip_wheels import pip_download

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
WHEELS = HERE / "wheels.txt"
MSCOREE_SOURCE = HERE / "mscoree.c"
RUNNER = HERE / "in_debugger.py"
WINPYTHON = ROOT.parent / "shared" / "winpython" / "cpython-3.8-amd64"
LAYOUT = "1"  # bump when the way the environment is laid out changes

DLL_OVERRIDES = "mscoree,dbgeng,dbghelp,dbgmodel=n,b"
WINE_CANDIDATES = ("/usr/lib/wine/wine64", "wine64", "wine")
MINGW = "x86_64-w64-mingw32-gcc"
BOOT_TIMEOUT = 300
SERVER_PERSIST = 600  # seconds a served prefix's wineserver outlives its last program
DOWNLOAD_TIMEOUT = 600


class Unavailable(Exception):
    """The lane cannot run here; the message says why (it becomes the pytest skip reason)."""


@dataclass(frozen=True)
class Env:
    root: Path  # the built environment (cache/<key>)
    wine: str
    python_dir: Path  # the scratch CPython 3.8 with the wheels unpacked
    prefix: Path  # WINEPREFIX

    def environ(self) -> Dict[str, str]:
        env = dict(os.environ)
        env.update(
            WINEPREFIX=str(self.prefix),
            WINEDEBUG="-all",
            WINEDLLOVERRIDES=DLL_OVERRIDES,
            # compiled modules of the checkout go into the cache, not into the work tree
            PYTHONPYCACHEPREFIX=windows_path(self.root / "pycache"),
            PYTHONIOENCODING="utf-8",
        )
        env.pop("PYTHONPATH", None)
        env.pop("PYTHONHOME", None)
        return env

    def python(self, args: Sequence[str], timeout: float) -> subprocess.CompletedProcess:
        """python.exe ARGS under Wine: stdin /dev/null, stdout/stderr pipes, a time limit."""
        return _run(
            ["timeout", "-k", "10", str(int(timeout)), self.wine, "python.exe", *args],
            cwd=self.python_dir,
            env=self.environ(),
            timeout=timeout + 30,
        )

    def debugger(
        self, dump: Path, runs: List[dict], setup: Sequence[str] = (), facts: Sequence[str] = (), timeout: float = 300
    ) -> dict:
        """One Wine process: pykd.loadDump(dump), the setup commands, then tfstack.py once
        per run (see in_debugger.py). Returns what in_debugger.py wrote."""
        with tempfile.TemporaryDirectory(prefix="windbg-lane-", dir=self.root) as tmp:
            request = Path(tmp) / "request.json"
            result = Path(tmp) / "result.json"
            request.write_text(
                json.dumps(
                    {
                        "dump": windows_path(dump),
                        "script": windows_path(ROOT / "windbg_scripts" / "tfstack.py"),
                        "setup": list(setup),
                        "facts": list(facts),
                        "runs": runs,
                        "result": windows_path(result),
                    }
                ),
                encoding="utf-8",
            )
            proc = self.python([windows_path(RUNNER), windows_path(request)], timeout)
            if proc.returncode != 0 or not result.exists():
                raise AssertionError(
                    f"the debugger process failed (exit {proc.returncode}) on {dump.name}:\n"
                    f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
                )
            return json.loads(result.read_text(encoding="utf-8"))

    def serve(self, persist: int = SERVER_PERSIST) -> None:
        """Start this prefix's wineserver and Wine's own services for the lane, with no pipe
        for them to inherit. Otherwise each Wine run starts them itself, they inherit its
        stdout/stderr pipes, and reading its output to the end waits ~2.5 s after it exits,
        until the server (persisting 3 s by default) ends them; already up, a run returns
        when it exits (~0.1 s). The server ends `persist` seconds after the last program,
        should the lane not call stop()."""
        env = self.environ()
        quiet = subprocess.DEVNULL
        # the server daemonizes; the first program starts the services, with its handles
        subprocess.run([_wineserver(), f"-p{persist}"], env=env, timeout=60, stdin=quiet, stdout=quiet, stderr=quiet)
        first = ["timeout", "-k", "10", "120", self.wine, "cmd.exe", "/c", "exit"]
        subprocess.run(first, env=env, timeout=150, stdin=quiet, stdout=quiet, stderr=quiet)

    def stop(self) -> None:
        """End this prefix's wineserver (and so every Wine process of the lane's prefix)."""
        server = _wineserver()
        if os.path.exists(server) or shutil.which(server):
            _run([server, "-k"], env=self.environ(), timeout=60)


def _wineserver() -> str:
    return shutil.which("wineserver") or "/usr/lib/wine/wineserver"


def windows_path(path: Path) -> str:
    """The path as a program under Wine sees it: Wine maps drive Z: to the root."""
    return "Z:" + str(Path(path).resolve()).replace("/", "\\")


def cache_dir() -> Path:
    """$DUMPKIT_WINDBG_CACHE, else dumpkit/windbg-lane in the user's cache folder. The
    account's real home, not $HOME: the test session gives itself an empty $HOME (tests
    must not see ~/.wine), which would rebuild the 750 MB environment every run."""
    explicit = os.environ.get("DUMPKIT_WINDBG_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME")
    if not base:
        try:
            import pwd

            home = pwd.getpwuid(os.getuid()).pw_dir
        except (ImportError, KeyError):
            home = os.path.expanduser("~")
        base = os.path.join(home, ".cache")
    return Path(base) / "dumpkit" / "windbg-lane"


def _run(argv: List[str], timeout: float, **kw) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace", timeout=timeout, **kw
        )
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"{argv[0]} {' '.join(argv[1:3])}... did not finish within {timeout:.0f} s") from e


def find_wine() -> str:
    for cand in WINE_CANDIDATES:
        path = cand if os.path.isabs(cand) else shutil.which(cand)
        if path and os.access(path, os.X_OK):
            return path
    raise Unavailable("Wine is not installed (Debian: apt-get install wine64)")


def _wine_version(wine: str) -> str:
    proc = _run([wine, "--version"], timeout=60)
    return proc.stdout.strip() or proc.stderr.strip()


def environment_key(wine: str) -> str:
    """What the built environment depends on: the pinned wheels (their hashes), the
    stand-in's source, the CPython files (their SHA-256 list), Wine's version, the layout."""
    h = hashlib.sha256()
    for part in (
        WHEELS.read_bytes(),
        MSCOREE_SOURCE.read_bytes(),
        (WINPYTHON.parent / "SHA256SUMS").read_bytes(),
        _wine_version(wine).encode(),
        LAYOUT.encode(),
    ):
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()[:16]


def build(log=print) -> Env:
    """The lane's environment, built into the cache if it is not there yet."""
    wine = find_wine()
    if not (WINPYTHON / "python.exe").is_file() or not (WINPYTHON.parent / "SHA256SUMS").is_file():
        raise Unavailable(f"no Windows CPython 3.8 at {WINPYTHON} (../shared/winpython)")
    key = environment_key(wine)
    cache = cache_dir()
    root = cache / key
    if (root / "ready").is_file():
        return _env(root, wine)
    if shutil.which(MINGW) is None:
        raise Unavailable(f"{MINGW} is not installed (Debian: apt-get install gcc-mingw-w64-x86-64)")
    cache.mkdir(parents=True, exist_ok=True)
    wheels = _download_wheels(cache / "wheels", log)
    work = Path(tempfile.mkdtemp(prefix=f"{key}.build-", dir=cache))
    try:
        log(f"windbg lane: building {root}")
        python_dir = work / "py38"
        shutil.copytree(WINPYTHON, python_dir)
        site = python_dir / "Lib" / "site-packages"  # python38._pth puts it on sys.path
        site.mkdir(parents=True, exist_ok=True)
        for wheel in wheels:
            shutil.unpack_archive(str(wheel), str(site), format="zip")
        proc = _run(
            [MINGW, "-shared", "-O2", "-s", "-o", str(python_dir / "mscoree.dll"), str(MSCOREE_SOURCE)], timeout=120
        )
        if proc.returncode != 0:
            raise AssertionError(f"building the mscoree stand-in failed:\n{proc.stderr[-2000:]}")
        env = _env(work, wine)
        proc = _run(
            ["timeout", "-k", "10", str(BOOT_TIMEOUT), wine, "wineboot", "-i"],
            env=env.environ(),
            timeout=BOOT_TIMEOUT + 30,
        )
        if not (env.prefix / "system.reg").is_file():
            raise Unavailable(f"wineboot could not create a prefix (exit {proc.returncode}): {proc.stderr[-500:]}")
        probe = env.python(["-c", "import pykd, sys; print(pykd.__version__, sys.version.split()[0])"], timeout=120)
        if probe.returncode != 0 or not probe.stdout.startswith("0.3.4.15"):
            raise AssertionError(f"pykd does not import under Wine:\n{probe.stdout[-2000:]}\n{probe.stderr[-2000:]}")
        env.stop()
        publish(work, root, probe.stdout)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return _env(root, wine)


def publish(work: Path, root: Path, ready: str) -> None:
    """Mark what was built in the scratch folder `work` ready (the file `ready` holds
    `ready`) and move it to `root`, where the next run finds it."""
    (work / "ready").write_text(ready)
    try:
        work.rename(root)
    except OSError:  # built meanwhile by another run: use that one
        pass
    if not (root / "ready").is_file():
        raise AssertionError(f"{root.name} was built in {work} but could not be moved to {root}")


def _env(root: Path, wine: str) -> Env:
    return Env(root=root, wine=wine, python_dir=root / "py38", prefix=root / "prefix")


def _download_wheels(dest: Path, log, pins: Path = WHEELS) -> List[Path]:
    """The wheels pinned in `pins` (a wheels.txt), hash-checked by pip (already downloaded
    ones are reused)."""
    dest.mkdir(parents=True, exist_ok=True)
    log(f"downloading the wheels pinned in {pins.parent.name}/{pins.name}")
    try:
        proc = pip_download(pins, dest, DOWNLOAD_TIMEOUT)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"pip download did not finish within {DOWNLOAD_TIMEOUT:.0f} s") from e
    if proc.returncode != 0:
        raise Unavailable(f"the pinned wheels could not be downloaded: {proc.stderr.strip()[-500:]}")
    wanted = _pinned_names(pins)
    found = [p for p in sorted(dest.glob("*.whl")) if _wheel_key(p.name) in wanted]
    missing = wanted - {_wheel_key(p.name) for p in found}
    if missing:
        raise Unavailable(f"pip did not deliver {', '.join(sorted(missing))}")
    return found


def _pinned_names(pins: Path = WHEELS) -> set:
    out = set()
    for line in pins.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split()[0].split("==")
            out.add((name.lower().replace("-", "_"), version))
    return out


def _wheel_key(filename: str):
    name, version = filename.split("-")[:2]
    return name.lower().replace("-", "_"), version


def main() -> None:
    try:
        built = build()
    except Unavailable as e:
        print(f"windbg lane unavailable: {e}")
        sys.exit(2)
    print(built.root)
