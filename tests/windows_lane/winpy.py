"""The Windows lane's interpreter, its Wine prefix and its one Wine process.

The interpreter is the real-pykd lane's (tests/support/wine builds it: the PSF's
CPython 3.8 with dumpkit's Windows wheels unpacked in its site-packages, in a cache outside
the repository), used as it is: nothing there is changed. Its embeddable layout has a
`python38._pth`, which fixes sys.path (isolated mode: neither PYTHONPATH nor the working
folder is on it), so `python.exe -m dumpkit` could not find the checkout. The lane gets a
private copy of the interpreter's five start-up files (python.exe and its DLLs, 5 MB) whose
`._pth` lists the original's stdlib zip, its folder (the .pyd files), its site-packages,
the checkout (as Z:\\...), like an editable install, and wine_site/ with `import site`
(sitecustomize.py there works around a Wine pipe bug that hangs ProcessPoolExecutor). The
stdlib, extension modules and wheels are the lane environment's own, by absolute path.

The Wine prefix is the lane's own (built once with wineboot, cached beside the real-pykd
lane's, keyed by Wine's version), not the real-pykd lane's: lanes sharing a prefix share a
wineserver, and each ends its prefix's wineserver when it finishes, which would kill the
other's processes mid-run.

One Wine process runs everything: driver.py, which starts each CLI case as a child
`python.exe -m dumpkit ...`. Its stdout is a pty, so Wine gives it a Windows console
(conhost serving the pty); cases that ask for the console inherit it, the others get pipes.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import os
import pty
import select
import shutil
import struct
import subprocess
import tempfile
import termios
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from tests.support import wine as lane

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
DRIVER = HERE / "driver.py"
WINE_SITE = HERE / "wine_site"  # sitecustomize.py: a Wine 8 pipe bug worked around
CORE_FILES = ("python.exe", "python38.dll", "python3.dll", "vcruntime140.dll", "vcruntime140_1.dll")
CONSOLE_COLUMNS, CONSOLE_ROWS = 160, 50
PREFIX_LAYOUT = "1"  # bump when the way the prefix is made changes
BOOT_TIMEOUT = 300

windows_path = lane.windows_path


def build(log=print, name: str = "windows-lane") -> lane.Env:
    """The real-pykd lane's environment (built if need be), with a prefix of the lane's
    own (`name`: its cache folder). Raises lane.Unavailable when it cannot be had here."""
    env = lane.build(log=log)
    version = subprocess.run(
        [env.wine, "--version"], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60
    ).stdout.strip()
    key = hashlib.sha256(f"{version}\n{PREFIX_LAYOUT}".encode()).hexdigest()[:16]
    root = lane.cache_dir().parent / name / key
    if (root / "ready").is_file():
        return dataclasses.replace(env, prefix=root / "prefix")
    root.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{key}.build-", dir=root.parent))
    try:
        log(f"{name}: making a Wine prefix in {root}")
        mine = dataclasses.replace(env, prefix=work / "prefix")
        proc = subprocess.run(
            ["timeout", "-k", "10", str(BOOT_TIMEOUT), env.wine, "wineboot", "-i"],
            env=environ(mine),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=BOOT_TIMEOUT + 30,
        )
        if not (mine.prefix / "system.reg").is_file():
            raise lane.Unavailable(f"wineboot could not create a prefix (exit {proc.returncode}): {proc.stderr[-500:]}")
        stop(mine)
        lane.publish(work, root, version + "\n")
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return dataclasses.replace(env, prefix=root / "prefix")


def stop(env: lane.Env) -> None:
    """End the wineserver of this prefix (and so every Wine process in it), no other."""
    server = shutil.which("wineserver") or "/usr/lib/wine/wineserver"
    if os.path.exists(server):
        subprocess.run([server, "-k"], env=environ(env), stdin=subprocess.DEVNULL, capture_output=True, timeout=60)


def interpreter(env: lane.Env, folder: Path, extra: Sequence[Path] = ()) -> Path:
    """python.exe in `folder`: the lane's CPython 3.8, with the checkout on its path
    (and the folders `extra`, after the environment's site-packages)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in CORE_FILES:
        shutil.copy2(env.python_dir / name, folder / name)
    entries = [env.python_dir / "python38.zip", env.python_dir, env.python_dir / "Lib" / "site-packages", *extra, ROOT]
    # `import site`: as in an installed Python, and it imports WINE_SITE's sitecustomize
    lines = [windows_path(p) for p in [*entries, WINE_SITE]] + ["import site"]
    (folder / "python38._pth").write_text("\r\n".join(lines) + "\r\n", encoding="ascii")
    return folder / "python.exe"


def environ(env: lane.Env) -> Dict[str, str]:
    """What Wine gets: the prefix, but not the real-pykd lane's DLL overrides, and no
    PYTHONIOENCODING (lane.Env sets it to utf-8; on Windows nobody does, and a pipe then
    gets the ANSI code page): the console and pipes behave as on a Windows machine."""
    out = env.environ()
    for name in ("PYTHONIOENCODING", "WINEDLLOVERRIDES", "PYTHONUTF8", "PYTHONLEGACYWINDOWSSTDIO", "LANGUAGE"):
        out.pop(name, None)
    # Wine takes the Windows locale, and so the ANSI code page, from the Unix one: pinned,
    # so a pipe is cp1252 (a Western Windows) whatever locale the host runs in
    out["LC_ALL"] = "C.UTF-8"
    return out


def run_in_console(
    env: lane.Env, python: Path, args: List[str], cwd: Path, timeout: float
) -> Tuple[Optional[int], bytes, bytes]:
    """python ARGS under Wine with stdin /dev/null, stdout a pty of CONSOLE_COLUMNS x
    CONSOLE_ROWS (Wine's conhost makes it the process's Windows console) and stderr a
    pipe. Returns (exit code or None on timeout, the pty's byte stream, stderr)."""
    try:
        master, slave = pty.openpty()
    except OSError as e:
        raise lane.Unavailable(f"no pty to make a Windows console of: {e}") from None
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", CONSOLE_ROWS, CONSOLE_COLUMNS, 0, 0))
    argv = ["timeout", "-k", "10", str(int(timeout)), env.wine, str(python), *args]
    proc = subprocess.Popen(
        argv, cwd=cwd, env=environ(env), stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE
    )
    os.close(slave)
    assert proc.stderr is not None
    err_fd = proc.stderr.fileno()
    out, err = bytearray(), bytearray()
    open_fds = {master, err_fd}
    deadline = time.monotonic() + timeout + 30
    exited_at: Optional[float] = None
    while open_fds and time.monotonic() < deadline:
        if exited_at is None and proc.poll() is not None:
            exited_at = time.monotonic()
        # Wine's background processes (wineserver, services) may hold the pty open after
        # python.exe ends: once it has ended, drain for a moment and stop.
        if exited_at is not None and time.monotonic() - exited_at > 3:
            break
        ready, _, _ = select.select(list(open_fds), [], [], 0.2)
        for fd in ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the pty's last writer closed it
                chunk = b""
            if not chunk:
                open_fds.discard(fd)
            elif fd == master:
                out += chunk
            else:
                err += chunk
    try:
        code: Optional[int] = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        code = None
    os.close(master)
    proc.stderr.close()
    return (None if code in (124, 137) else code), bytes(out), bytes(err)
