"""`!tfstack` loaded and run by Microsoft's debugger engine the way WinDbg and cdb run it
(issue #30): a cdb-like host (host.c) opens each sample dump with the pykd wheel's
dbgeng.dll under Wine and types commands through IDebugControl::Execute; extensions are
loaded with `.load`, their text and DML reach the host's output callbacks separately.

Two routes, both checked against `dumpkit analyze --format json` on the same dump:
- `!tfstack ...` from windbg_scripts/tfstack.dll (the committed build), which finds the
  lane's CPython 3.8 through DUMPKIT_PYTHON (or the registry) and runs tfstack.py through
  that Python's pykd.pyd;
- `!py -g ...\\tfstack.py` with pykd.pyd loaded directly (`.load ...\\pykd\\pykd.pyd`).
After everything typed, one more command shows the debugger is alive. Every DML link
`!tfstack --all` prints is executed through the host as a click would, followed by `~.`:
a thread link must select that thread, a frame link the frame dumpkit numbered.

Build, cache and skip rules: host.py and tests/support/wine. Runs only when asked
for (conftest.py): `python -m pytest -q tests/windbg_host`.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from typing import Dict

import pytest

from tests.support.samples import SAMPLE_BIN, SAMPLES
from tests.windbg_host import host as hostlib
from tests.windbg_host.host import TFSTACK_DLL, TFSTACK_PY, Command, Session
from tests.support import wine as lane
from tests.support.wine import story

W = lane.windows_path
_CACHE: Dict[str, dict] = {}


@pytest.fixture(scope="session")
def env():
    try:
        built = lane.build(log=lambda line: print(line, file=sys.stderr))
    except lane.Unavailable as e:
        pytest.skip(f"debugger-host lane unavailable here: {e}")
    built.serve()  # a Wine run then returns when it exits (lane.Env.serve)
    yield built
    built.stop()


@pytest.fixture(scope="session")
def host(env):
    try:
        return hostlib.build(env)
    except lane.Unavailable as e:
        pytest.skip(f"debugger-host lane unavailable here: {e}")


@pytest.fixture(scope="session")
def dumps_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("windbg-host-dumps")


def _alive(n: int) -> str:
    return f"? 0n{n}"


def _assert_alive(session: Session, n: int) -> None:
    got = session.by_command(_alive(n))
    assert got and got[0].finished, (
        f"the debugger did not come back for `? 0n{n}`: {session.crash or session.stderr[-1500:]}"
    )
    assert f"Evaluate expression: {n} = " in got[0].text, got[0].text


def _pykd_pyd(env: lane.Env) -> str:
    return W(env.python_dir / "Lib" / "site-packages" / "pykd" / "pykd.pyd")


# ----------------------------------------------------------------------------- options (item 1)
def test_every_option_is_heard_and_nothing_ends_the_debugger(env, host):
    """Every documented option, a bad one and --help, through both routes, on one dump in
    one debugger; after each the debugger answers `? 0nN`."""
    spaced = "Z:\\no such folder\\images dir"  # quoted, with spaces: must arrive as one word
    runs = [
        f'--json --image-path "{spaced}"',
        "",
        "--all",
        "--json",
        "--thread 0x188",
        "-t 392 --rows 3",
        "--max-frames 100 --json",
        "--plain",
        f"-i {W(SAMPLE_BIN)} --symbol-path {W(SAMPLE_BIN / 'pdb')} --json",
        "--thread 0x188 --json",
        "--bogus",
        "--help",
        "-h",
        "--thread",
        "--rows 0",
        "--thread 0x999",
    ]
    commands = [f".exepath+ {W(SAMPLE_BIN)}", f".load {W(TFSTACK_DLL)}"]
    for i, args in enumerate(runs):
        commands += [f"!tfstack {args}".rstrip(), _alive(i)]
    script = W(TFSTACK_PY)
    py_runs = [f"!py -g {script}", f"!py -g {script} --all", f"!py {script}", f"!py {script} --json --all"]
    commands.append(f".load {_pykd_pyd(env)}")
    for j, command in enumerate(py_runs):
        commands += [command, _alive(100 + j)]
    session = host.run(SAMPLES / "recursion_cycle3.dmp", commands)
    assert session.exited and session.crash is None, _death("recursion_cycle3.dmp", session)
    for i in range(len(runs)):
        _assert_alive(session, i)
    for j in range(len(py_runs)):
        _assert_alive(session, 100 + j)

    out = {args: session.by_command(f"!tfstack {args}".rstrip())[0] for args in runs}

    def doc(args: str) -> dict:
        text = out[args].text
        assert text.lstrip().startswith("{"), text[:1000]
        return json.loads(text)

    problems = doc(runs[0])["images"]["search_problems"]
    assert f"--image-path {spaced}: no such folder" in problems, problems
    assert "VERDICT" in out[""].dml and "<link cmd=" in out[""].dml

    def heading(tid: int) -> str:
        return f'<b>Thread</b> <link cmd="~~[{tid:#x}]s">'

    assert heading(0x184) in out["--all"].dml and heading(0x188) in out["--all"].dml
    assert heading(0x188) in out["--thread 0x188"].dml and heading(0x184) not in out["--thread 0x188"].dml
    assert heading(0x184) not in out[""].dml
    assert doc("--json")["verdict"]["kind"] == "recursion"
    rows3 = out["-t 392 --rows 3"].dml
    assert heading(0x188) in rows3 and len(rows3) < len(out["--thread 0x188"].dml)
    crashing = [t for t in doc("--max-frames 100 --json")["threads"] if t["is_crashing"]][0]
    assert crashing["frame_count"] == 100
    assert not out["--plain"].dml and "VERDICT" in out["--plain"].text
    assert doc(runs[8])["verdict"] == doc("--json")["verdict"]
    assert any(t["tid"] == 0x188 for t in doc("--thread 0x188 --json")["threads"])
    assert "tfstack: error: unrecognized arguments: --bogus" in out["--bogus"].text
    assert "usage: !tfstack" in out["--help"].text and "--image-path DIR" in out["--help"].text
    assert "usage: !tfstack" in out["-h"].text
    assert "expected one argument" in out["--thread"].text
    assert "must be at least 1" in out["--rows 0"].text
    assert "no thread 2457 (0x999)" in out["--thread 0x999"].text
    for args in ("--bogus", "--thread", "--rows 0", "--thread 0x999"):
        assert "Traceback" not in out[args].output + out[args].errors

    # pykd.pyd's own !py: without options the report; with options a one-line refusal
    # (they arrive garbled); without -g (a sub-interpreter) the debugger survives too.
    py = {c: session.by_command(c)[0] for c in py_runs}
    assert "VERDICT" in py[py_runs[0]].dml
    for command in (py_runs[1], py_runs[3]):
        assert "pykd's own !py loses a script's options" in py[command].text, py[command].output
    assert "VERDICT" in py[py_runs[2]].dml


# ----------------------------------------------------------------------------- same story (item 2)
def _session(env, host, name: str, scratch: Path) -> dict:
    if name in _CACHE:
        return _CACHE[name]
    dump = story.dump_file(name, scratch)
    dirs = story.image_dirs(name)
    cli = json.loads(story.cli(env, ["analyze", str(dump), "--format", "json"], dirs).stdout)
    commands = [
        ".exepath " + ";".join(W(d) for d in dirs),
        ".reload",
        f".load {W(TFSTACK_DLL)}",
        "!tfstack --json",
        "!tfstack --all",
        "#links ~.",
        _alive(1),
        f".load {_pykd_pyd(env)}",
        f"!py -g {W(TFSTACK_PY)}",
        _alive(2),
    ]
    session = host.run(dump, commands, timeout=900)
    assert session.exited and session.crash is None, _death(name, session)
    _assert_alive(session, 1)
    _assert_alive(session, 2)
    _CACHE[name] = {"cli": cli, "session": session}
    return _CACHE[name]


def _death(name: str, session: Session) -> str:
    last = session.commands[-1] if session.commands else None
    return (
        f"the debugger died on {name} (exit {session.returncode}, {session.crash or 'no exception record'}) "
        f"in {last.command if last else 'start-up'!r}: {(last.output + last.errors)[-1500:] if last else ''}\n"
        f"{session.stderr[-3000:]}"
    )


def _one(session: Session, command: str) -> Command:
    got = session.by_command(command)
    assert got, f"{command!r} was not run"
    return got[0]


def _text_of(dml: str) -> str:
    import html

    return html.unescape(re.sub(r"<[^>]*>", "", dml))


@pytest.mark.parametrize("name", story.sample_dumps())
def test_bang_tfstack_tells_what_the_cli_tells(name, env, host, dumps_dir):
    """`!tfstack --json` from the extension DLL: the same verdict, crash, findings, frame
    sizes, every thread's frames and the Python stacks as `dumpkit analyze`."""
    got = _session(env, host, name, dumps_dir)
    run = _one(got["session"], "!tfstack --json")
    assert run.text.lstrip().startswith("{"), run.output[:2000]
    full = "_full" in name or ".trimmed." in name
    cli, windbg = story.story_of(got["cli"], full), story.story_of(json.loads(run.text), full)
    for key in ("verdict", "crash", "findings", "frame_sizes", "python", "modules"):
        assert windbg[key] == cli[key], key
    parked = story.parked_threads(got["cli"])
    assert [t["tid"] for t in windbg["threads"]] == [t["tid"] for t in cli["threads"]]
    for w, c in zip(windbg["threads"], cli["threads"]):
        if c["tid"] in parked:  # see test_real_pykd: the debugger walks on from a foreign SP
            assert w["frames"][0][:4] == c["frames"][0][:4], f"thread {c['tid']}"
            continue
        assert w == c, f"thread {c['tid']}"


@pytest.mark.parametrize("name", story.sample_dumps())
def test_py_route_shows_what_the_cli_tells(name, env, host, dumps_dir):
    """`!py -g tfstack.py` with pykd.pyd loaded: the DML report a user reads names the
    CLI's verdict, each recursion cycle's functions, the crashing thread's frame count and
    first frame, and the first Python functions of each Python stack."""
    got = _session(env, host, name, dumps_dir)
    run = _one(got["session"], f"!py -g {W(TFSTACK_PY)}")
    shown = _text_of(run.dml)
    cli = got["cli"]
    assert cli["verdict"]["headline"] in shown
    for t in cli["threads"]:
        for cycle in t["cycles"] if t["is_crashing"] else []:
            for member in cycle["functions"]:
                assert str(member) in shown, (member, cycle)
    crashing = [t for t in cli["threads"] if t["is_crashing"]]
    if crashing:
        assert f"{crashing[0]['frame_count']:,} frames" in shown
    for f in crashing[0]["frames"][:1] if crashing else []:
        if f["symbol"]:
            assert f["symbol"] in shown, f
    for stack in (cli["python"] or {}).get("threads", []):
        for frame in stack["frames"][:5]:
            if frame["function"]:
                assert frame["function"] in shown, frame


_LINK_FRAME = re.compile(r"~~\[0x([0-9a-f]+)\]s;(?: \.ecxr;)? \.frame 0x([0-9a-f]+)$")
_LINK_THREAD = re.compile(r"~~\[0x([0-9a-f]+)\]s$")
_CURRENT_THREAD = re.compile(r"^\.\s+\d+\s+Id: [0-9a-f]+\.([0-9a-f]+) ", re.M)


@pytest.mark.parametrize("name", story.sample_dumps())
def test_every_link_does_what_its_text_says(name, env, host, dumps_dir):
    """Each link of `!tfstack --all`, clicked: the engine takes it; a thread link selects
    that thread (`~.` says so); a frame link selects that thread and the frame with dumpkit's
    Child-SP for the frame number it shows; a code link disassembles from its address."""
    got = _session(env, host, name, dumps_dir)
    commands = got["session"].commands
    shown = _one(got["session"], "!tfstack --all")
    assert "<link cmd=" in shown.dml
    doc = json.loads(_one(got["session"], "!tfstack --json").text)
    frames = {t["tid"]: {f["index"]: f for f in t["frames"]} for t in doc["threads"]}
    links = [(i, c) for i, c in enumerate(commands) if c.link is not None]
    assert links, "no link was run"
    checked_frames = checked_threads = 0
    for i, link in links:
        assert link.finished and link.hresult == 0, (link.command, link.hresult, link.errors)
        after = commands[i + 1]
        assert after.command == "~."
        frame = _LINK_FRAME.match(link.command)
        thread = _LINK_THREAD.match(link.command)
        if frame or thread:
            tid = int((frame or thread).group(1), 16)
            current = _CURRENT_THREAD.search(after.text)
            assert current and int(current.group(1), 16) == tid, (link.command, after.text)
            checked_threads += 1
        if frame:
            index = int(frame.group(2), 16)
            line = story.frame_line(link.text, index)
            assert line is not None, f"{link.command!r} did not select frame {index:#x}: {link.text!r}"
            ours = frames[tid].get(int(link.link, 16))
            if ours is not None:
                assert int(line.split()[1].replace("`", ""), 16) == int(ours["sp"], 16), (link.command, line)
                checked_frames += 1
        elif not thread:
            code = story.CODE_LINK.match(link.command)
            if code:
                address = int(code.group(1), 16)
                assert f"{address >> 32:08x}`{address & 0xFFFFFFFF:08x}" in link.text, (link.command, link.text)
            else:
                assert link.command == ".ecxr" and story.REGISTERS.search(link.text), (link.command, link.text)
    assert checked_threads and checked_frames


# ----------------------------------------------------------------------------- finding Python (item 3)
_REG_KEY = r"HKCU\Software\Python\PythonCore\3.8\InstallPath"


def _reg(env: lane.Env, *args: str) -> None:
    proc = lane._run(["timeout", "-k", "10", "120", env.wine, "reg", *args], env=env.environ(), timeout=150)
    assert proc.returncode == 0, proc.stderr


def test_python_found_through_the_registry_and_a_one_line_message_when_none(env, host, tmp_path):
    """No DUMPKIT_PYTHON: the one line says what was looked for and how to fix it; a
    DUMPKIT_PYTHON without pykd is named; with python.org's PEP 514 key (`reg add`) the
    same command runs the report."""
    dump = SAMPLES / "null_deref.dmp"
    base = [f".exepath+ {W(SAMPLE_BIN)}", f".load {W(TFSTACK_DLL)}"]
    missing = host.run(dump, base + ["!tfstack", _alive(1)], python=False)
    _assert_alive(missing, 1)
    line = _one(missing, "!tfstack").output + _one(missing, "!tfstack").errors
    assert line.count("\n") == 1, line
    assert "tfstack: no Python with pykd found" in line and "DUMPKIT_PYTHON is not set" in line
    assert "PythonCore" in line and 'pip install "dumpkit[windbg]"' in line

    wrong = host.run(dump, base + ["!tfstack", _alive(1)], python=False, environ={"DUMPKIT_PYTHON": W(tmp_path)})
    _assert_alive(wrong, 1)
    text = _one(wrong, "!tfstack").errors + _one(wrong, "!tfstack").output
    assert f"DUMPKIT_PYTHON={W(tmp_path)} has no Lib\\site-packages\\pykd\\pykd.pyd" in text

    _reg(env, "add", _REG_KEY, "/ve", "/d", W(env.python_dir), "/f")
    try:
        found = host.run(dump, base + ["!tfstack", _alive(1)], python=False)
    finally:
        _reg(env, "delete", r"HKCU\Software\Python\PythonCore", "/f")
    _assert_alive(found, 1)
    assert "VERDICT" in _one(found, "!tfstack").dml


# ----------------------------------------------------------------------------- long walks (item 5)
def test_million_frames_with_progress_and_ctrl_break(env, host, dumps_dir):
    """deep_recursion_1m (1,048,444 frames): `!tfstack` prints a progress line while it
    walks (asked for after 0.5 s here: a warm run takes about a second) and the report
    after. A passive interrupt (Ctrl-Break) 0.3 s into a later run stops it with one line
    instead of a report cut short (dbgeng fails the memory reads it interrupts), the
    debugger goes on, and the next run is whole again. Times: bench/README.md."""
    dump = story.dump_file("deep_recursion_1m.dmp.xz", dumps_dir)
    session = host.run(
        dump,
        [
            f".exepath+ {W(SAMPLE_BIN)}",
            f".load {W(TFSTACK_DLL)}",
            "!tfstack",
            _alive(1),
            "#interrupt 300 !tfstack --plain",
            _alive(2),
            "!tfstack --plain --rows 5",
        ],
        environ={"DUMPKIT_TFSTACK_PROGRESS_AFTER": "0.5"},
        timeout=900,
    )
    assert session.exited and session.crash is None, session.stderr[-3000:]
    _assert_alive(session, 1)
    _assert_alive(session, 2)
    full = _one(session, "!tfstack")
    broken = _one(session, "!tfstack --plain")
    again = _one(session, "!tfstack --plain --rows 5")
    assert "1,048,440 repetitions" in _text_of(full.dml)
    assert "tfstack: working," in full.text and "Ctrl-Break stops" in full.text
    assert "tfstack: interrupted (Ctrl-Break)" in broken.text and "VERDICT" not in broken.text, broken.text[-2000:]
    assert "1,048,440 repetitions" in again.text
    print(f"\n!tfstack on deep_recursion_1m: {full.ms} ms cold, {again.ms} ms warm")


def test_the_committed_dll_is_built_from_its_source(tmp_path):
    """windbg_scripts/tfstack.dll is what build_tfstack_dll.sh makes of tfstack.c."""
    if shutil.which(lane.MINGW) is None:
        pytest.skip(f"{lane.MINGW} is not installed")
    out = tmp_path / "tfstack.dll"
    proc = lane._run(["sh", str(TFSTACK_DLL.parent / "build_tfstack_dll.sh"), str(out)], timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == TFSTACK_DLL.read_bytes(), "rebuild: sh windbg_scripts/build_tfstack_dll.sh"
