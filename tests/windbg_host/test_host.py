"""`!tfstack` loaded and run by Microsoft's debugger engine the way WinDbg and cdb run it
(issues #30, #44): a cdb-like host (host.c) opens each sample dump with the pykd wheel's
dbgeng.dll under Wine and types commands through IDebugControl::Execute; extensions are
loaded with `.load`, their text and DML reach the host's output callbacks separately.

Two routes, both checked against `dumpkit analyze --format json` on the same dump, here
in the lane's CPython 3.8 (the one Python pykd exists for; 3.12 and 3.13 on the engine
route: test_engine_route.py):
- `!tfstack ...` from windbg_scripts/tfstack.dll (the committed build), which finds the
  lane's CPython 3.8 through DUMPKIT_PYTHON and has dumpkit read the session through the
  engine's own interfaces (dumpkit/sources/dbgeng.py); that Python has pykd, so the DLL
  starts it through pykd.pyd, as pykd needs;
- `!py -g ...\\tfstack.py` with pykd.pyd loaded directly (`.load ...\\pykd\\pykd.pyd`),
  over dumpkit/sources/pykd.py: the same report, line for line.
After everything typed, one more command shows the debugger is alive. Every DML link
`!tfstack --all` prints is executed through the host as a click would, followed by `~.`:
a thread link must select that thread, a frame link the frame dumpkit numbered.

Build, cache and skip rules: host.py, conftest.py and tests/support/wine. Runs only when
asked for (conftest.py): `python -m pytest -q tests/windbg_host`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Dict

import pytest

from tests.support.samples import SAMPLE_BIN, SAMPLES
from tests.windbg_host.checks import alive as _alive
from tests.windbg_host.checks import assert_alive as _assert_alive
from tests.windbg_host.checks import assert_links, assert_options, assert_same_story, death as _death, one as _one
from tests.windbg_host.checks import option_runs
from tests.windbg_host.checks import text_of as _text_of
from tests.windbg_host.checks import without_progress
from tests.windbg_host.host import TFSTACK_DLL, TFSTACK_PY
from tests.support import wine as lane
from tests.support.wine import story

W = lane.windows_path
_CACHE: Dict[str, dict] = {}


def _pykd_pyd(env: lane.Env) -> str:
    return W(env.python_dir / "Lib" / "site-packages" / "pykd" / "pykd.pyd")


# ----------------------------------------------------------------------------- options (item 1)
def test_every_option_is_heard_and_nothing_ends_the_debugger(env, host):
    """Every documented option, a bad one and --help, through both routes, on one dump in
    one debugger; after each the debugger answers `? 0nN`."""
    runs = option_runs()
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
    for j in range(len(py_runs)):
        _assert_alive(session, 100 + j)
    assert_options(session, runs)

    # pykd.pyd's own !py: without options the report; with options a one-line refusal
    # (they arrive garbled); without -g (a sub-interpreter) the debugger survives too.
    py = {c: session.by_command(c)[0] for c in py_runs}
    assert "VERDICT" in py[py_runs[0]].dml
    for command in (py_runs[1], py_runs[3]):
        assert "pykd's own !py loses a script's options" in py[command].text, py[command].output
    assert "VERDICT" in py[py_runs[2]].dml


def test_pykd_loaded_first_then_tfstack_dll_share_one_python(env, host):
    """The other order: pykd.pyd loaded first (its Python's folder on PATH, as pykd.pyd
    needs) starts the Python; tfstack.dll then finds it running and uses it; `!py -g` and
    `!tfstack` take turns and the debugger answers after each."""
    script = W(TFSTACK_PY)
    commands = [f".exepath+ {W(SAMPLE_BIN)}", f".load {_pykd_pyd(env)}", f"!py -g {script}", _alive(1)]
    commands += [f".load {W(TFSTACK_DLL)}", "!tfstack --plain", _alive(2), f"!py -g {script}", _alive(3)]
    session = host.run(SAMPLES / "recursion_cycle3.dmp", commands, environ={"WINEPATH": W(env.python_dir)})
    assert session.exited and session.crash is None, _death("recursion_cycle3.dmp", session)
    for n in (1, 2, 3):
        _assert_alive(session, n)
    runs = session.by_command(f"!py -g {script}")
    assert len(runs) == 2 and all("VERDICT" in r.dml for r in runs)
    assert "VERDICT" in _one(session, "!tfstack --plain").text


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
        "!tfstack",
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


@pytest.mark.parametrize("name", story.sample_dumps())
def test_bang_tfstack_tells_what_the_cli_tells(name, env, host, dumps_dir):
    """`!tfstack --json` from the extension DLL: the same verdict, crash, findings, frame
    sizes, every thread's frames and the Python stacks as `dumpkit analyze`."""
    got = _session(env, host, name, dumps_dir)
    run = _one(got["session"], "!tfstack --json")
    assert run.text.lstrip().startswith("{"), run.output[:2000]
    assert_same_story(got["cli"], json.loads(run.text), name)


@pytest.mark.parametrize("name", story.sample_dumps())
def test_py_route_shows_what_the_cli_tells(name, env, host, dumps_dir):
    """`!py -g tfstack.py` with pykd.pyd loaded (dumpkit over pykd) prints the very report
    `!tfstack` printed in the same debugger (dumpkit over the engine's interfaces), and
    that DML names the CLI's verdict, each recursion cycle's functions, the crashing
    thread's frame count and first frame, and the first Python functions of each Python
    stack."""
    got = _session(env, host, name, dumps_dir)
    run = _one(got["session"], f"!py -g {W(TFSTACK_PY)}")
    engine = _one(got["session"], "!tfstack")
    assert without_progress(run.dml) == without_progress(engine.dml)
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


@pytest.mark.parametrize("name", story.sample_dumps())
def test_every_link_does_what_its_text_says(name, env, host, dumps_dir):
    """Each link of `!tfstack --all`, clicked: the engine takes it; a thread link selects
    that thread (`~.` says so); a frame link selects that thread and the frame with dumpkit's
    Child-SP for the frame number it shows; a code link disassembles from its address."""
    got = _session(env, host, name, dumps_dir)
    assert_links(got["session"], "!tfstack --json", "!tfstack --all")


# ----------------------------------------------------------------------------- long walks (item 5)
@pytest.mark.parametrize("version", ["3.8", "3.13"])
def test_million_frames_with_progress_and_ctrl_break(version, env, host, dumps_dir, request):
    """deep_recursion_1m (1,048,444 frames), in the lane's CPython 3.8 and in python.org's
    3.13: `!tfstack` prints a progress line while it walks (asked for after 0.05 s here: a
    warm run takes about a second) and the report after. A passive interrupt (Ctrl-Break)
    0.3 s into a later run stops it with one line instead of a report cut short (the
    engine fails the memory reads it interrupts, and dumpkit polls for it), the debugger
    goes on, and the next run is whole again. Times: bench/README.md."""
    environ = {"DUMPKIT_TFSTACK_PROGRESS_AFTER": "0.05"}
    if version != "3.8":
        environ["DUMPKIT_PYTHON"] = W(request.getfixturevalue("pythons")[version].home)
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
        environ=environ,
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
    print(f"\n!tfstack on deep_recursion_1m, CPython {version}: {full.ms} ms cold, {again.ms} ms warm")


def test_the_committed_dll_is_built_from_its_source(tmp_path):
    """windbg_scripts/tfstack.dll is what build_tfstack_dll.sh makes of tfstack.c."""
    if shutil.which(lane.MINGW) is None:
        pytest.skip(f"{lane.MINGW} is not installed")
    out = tmp_path / "tfstack.dll"
    proc = lane._run(["sh", str(TFSTACK_DLL.parent / "build_tfstack_dll.sh"), str(out)], timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == TFSTACK_DLL.read_bytes(), "rebuild: sh windbg_scripts/build_tfstack_dll.sh"
