"""The debugger-host lane's harness: a cdb-like host (host.c) that loads Microsoft's
dbgeng.dll (the pykd wheel's, from the real-pykd lane's environment: tests/support/wine),
opens a dump and runs debugger commands through IDebugControl::Execute, so extensions are
loaded and run by the engine as WinDbg and cdb run them. Text and DML arrive separately.

host.exe is built with mingw into the lane's cache folder (never the work tree), next to a
copy of the lane's stand-in mscoree.dll (pykd.pyd imports it; on Windows .NET's answers).
Every run is one Wine process under `timeout`, stdin /dev/null, stdout/stderr pipes.

    python tests/windbg_host/host.py DUMP COMMAND...     runs the commands, prints what a user sees
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Union

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support import wine as lane  # noqa: E402

SOURCE = HERE / "host.c"
SCRIPTS = ROOT / "windbg_scripts"
TFSTACK_DLL = SCRIPTS / "tfstack.dll"
TFSTACK_PY = SCRIPTS / "tfstack.py"


@dataclass
class Command:
    index: int
    command: str
    text: str = ""  # what reached the debugger as plain text
    dml: str = ""  # what reached it as DML
    errors: str = ""  # DEBUG_OUTPUT_ERROR / WARNING text
    hresult: Optional[int] = None  # None: the host never came back from it
    ms: Optional[int] = None
    link: Optional[str] = None  # for a link's command (#links): the link's text
    interrupted: bool = False  # #interrupt-on issued its interrupt during this command

    @property
    def finished(self) -> bool:
        return self.hresult is not None

    @property
    def output(self) -> str:
        """Everything printed, text and DML, in DML form for DML chunks."""
        return self.text + self.dml


@dataclass
class Session:
    commands: List[Command]
    exited: bool  # the host got through every command
    crash: Optional[str]
    returncode: int
    stderr: str
    started: List[str] = field(default_factory=list)  # what the engine printed opening the dump

    def by_command(self, command: str) -> List[Command]:
        return [c for c in self.commands if c.command == command]


@dataclass(frozen=True)
class Host:
    env: lane.Env
    exe: Path

    @property
    def pykd_dir(self) -> Path:
        return self.env.python_dir / "Lib" / "site-packages" / "pykd"

    def run(
        self,
        dump: Union[Path, str],
        commands: Sequence[str],
        environ: Optional[Dict[str, str]] = None,
        python: bool = True,
        timeout: float = 600,
    ) -> Session:
        """COMMANDS run one after another in one debugger process on DUMP (or, for
        `live:COMMAND LINE`, on that program started under the debugger). `python`: the
        lane's CPython is named in DUMPKIT_PYTHON (else the variable is unset)."""
        env = self.env.environ()
        env.pop("DUMPKIT_PYTHON", None)
        if python:
            env["DUMPKIT_PYTHON"] = lane.windows_path(self.env.python_dir)
        env.update(environ or {})
        with tempfile.TemporaryDirectory(prefix="windbg-host-", dir=self.env.root) as tmp:
            cmds = Path(tmp) / "commands.txt"
            out = Path(tmp) / "out.txt"
            cmds.write_text("\n".join(commands) + "\n", encoding="utf-8")
            argv = [
                "timeout",
                "-k",
                "10",
                str(int(timeout)),
                self.env.wine,
                str(self.exe),
                lane.windows_path(self.pykd_dir / "dbgeng.dll"),
                str(dump) if str(dump).startswith("live:") else lane.windows_path(dump),
                lane.windows_path(cmds),
                lane.windows_path(out),
            ]
            try:
                proc = subprocess.run(
                    argv,
                    cwd=str(self.exe.parent),
                    env=env,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    text=True,
                    errors="replace",
                    timeout=timeout + 30,
                )
            except subprocess.TimeoutExpired as e:
                raise AssertionError(f"the host did not finish within {timeout:.0f} s on {dump}") from e
            if proc.returncode == 2 and not out.exists():
                raise AssertionError(f"the host could not start on {dump}: {proc.stderr[-2000:]}")
            return parse(out.read_bytes() if out.exists() else b"", proc.returncode, proc.stderr)


_RECORD = re.compile(rb"@@(CMD|OUT|END|LINK|EXIT|CRASH|INTERRUPT)([^\n]*)\n")
ERROR_MASKS = 2 | 4  # DEBUG_OUTPUT_ERROR, DEBUG_OUTPUT_WARNING


def parse(data: bytes, returncode: int, stderr: str) -> Session:
    commands: List[Command] = []
    started: List[str] = []
    current: Optional[Command] = None
    link: Optional[str] = None
    exited, crash = False, None
    pos = 0
    while pos < len(data):
        m = _RECORD.match(data, pos)
        if m is None:
            raise AssertionError(f"unreadable host output at byte {pos}: {data[pos : pos + 200]!r}")
        kind, rest = m.group(1).decode(), m.group(2).decode("utf-8", "replace").strip()
        pos = m.end()
        if kind == "OUT":
            which, mask, size = rest.split()
            chunk = data[pos : pos + int(size)].decode("utf-8", "replace")
            pos += int(size)
            if current is None:
                started.append(chunk)
            elif which == "D":
                current.dml += chunk
            elif int(mask) & ERROR_MASKS and not int(mask) & 1:
                current.errors += chunk
            else:
                current.text += chunk
        elif kind == "CMD":
            index, _, command = rest.partition(" ")
            current = Command(int(index), command, link=link)
            link = None
            commands.append(current)
        elif kind == "END":
            index, hresult, ms = rest.split()
            assert current is not None and current.index == int(index)
            current.hresult, current.ms = int(hresult, 16), int(ms)
        elif kind == "LINK":
            link = rest
        elif kind == "INTERRUPT":
            assert current is not None
            current.interrupted = True
        elif kind == "EXIT":
            exited = True
        elif kind == "CRASH":
            crash = rest
    for c in commands:  # the engine echoes each command first (DEBUG_EXECUTE_ECHO), as cdb shows it
        if c.text.startswith(c.command + "\n"):
            c.text = c.text[len(c.command) + 1 :]
    return Session(commands, exited, crash, returncode, stderr, started)


def build(env: lane.Env) -> Host:
    """host.exe (and the mscoree stand-in next to it) in the lane's cache, built once per
    source version."""
    if shutil.which(lane.MINGW) is None:
        raise lane.Unavailable(f"{lane.MINGW} is not installed (Debian: apt-get install gcc-mingw-w64-x86-64)")
    key = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    folder = env.root.parent / f"host-{key}"
    exe = folder / "host.exe"
    if not exe.is_file():
        work = Path(tempfile.mkdtemp(prefix=f"host-{key}.build-", dir=env.root.parent))
        try:
            proc = subprocess.run(
                [lane.MINGW, "-O2", "-Wall", "-o", str(work / "host.exe"), str(SOURCE)],
                capture_output=True,
                text=True,
                timeout=120,
            )
            if proc.returncode != 0:
                raise AssertionError(f"building the debugger host failed:\n{proc.stderr[-3000:]}")
            shutil.copy2(env.python_dir / "mscoree.dll", work / "mscoree.dll")
            try:
                work.rename(folder)
            except OSError:  # built meanwhile by another run
                pass
        finally:
            if work.exists():
                shutil.rmtree(work, ignore_errors=True)
    return Host(env=env, exe=exe)


def _main(argv: List[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    try:
        env = lane.build()
    except lane.Unavailable as e:
        print(f"debugger-host lane unavailable: {e}")
        return 2
    host = build(env)
    session = host.run(Path(argv[0]), argv[1:])
    for c in session.commands:
        print(f"> {c.command}" + (f"   (link {c.link!r})" if c.link else ""))
        sys.stdout.write(c.text + c.errors + c.dml)
        print(f"  [{'hr=%#x, %d ms' % (c.hresult, c.ms) if c.finished else 'did not return'}]")
    print("host exited normally" if session.exited else f"host died: {session.crash or session.returncode}")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
