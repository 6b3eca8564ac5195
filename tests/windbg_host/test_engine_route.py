"""`!tfstack` on the Pythons people run now (issue #44): tfstack.dll starts python.org's
CPython 3.12 or 3.13 (../shared/winpython, laid out as a user has it with dumpkit
installed: tests/support/wine/pythons.py) inside Microsoft's debugger engine, and dumpkit
reads the session through the engine's own COM interfaces (dumpkit/sources/dbgeng.py),
with no pykd anywhere. The same cdb-like host as test_host.py types the commands.

On a representative set of the sample dumps (native recursion, a stack probe the engine
cannot unwind out of, an access violation, a fail-fast, Python stacks of CPython 3.8, 3.12
and 3.13 processes), split between the two Pythons: `!tfstack --json` tells what `dumpkit
analyze` tells, every link of `!tfstack --all` does what its text says, and the debugger
answers after each command. Then, on one dump: every option; a second `.load`, `.unload`
and `.load` again; a virtual environment named in DUMPKIT_PYTHON; a Python whose dumpkit
raises SystemExit on import; the DLL loaded from where pip installs it into a Python; the
PEP 514 registry (newest Python with dumpkit first); the one-line messages when no Python
fits. And a live process started under the debugger, not a dump; and the names of the
PDBs the debugger loaded. The million-frame sample with progress and
Ctrl-Break runs on 3.13 in test_host.py. CPython 3.8 on this route: test_host.py.

Runs only when asked for: `python -m pytest -q tests/windbg_host`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Dict, Tuple

import pytest

from tests.support import wine as lane
from tests.support.samples import SAMPLE_BIN, SAMPLES
from tests.support.wine import story
from tests.windbg_host.checks import alive, assert_alive, assert_links, assert_options, assert_same_story
from tests.windbg_host.checks import death, one, option_runs, text_of
from tests.windbg_host.host import TFSTACK_DLL

W = lane.windows_path
LOAD = f".load {W(TFSTACK_DLL)}"
# What each session asks after its set-up: the report as JSON and as text with its links, the
# debugger asked whether it is alive after each
_STORY = (LOAD, "!tfstack --json", alive(1), "!tfstack --all", "#links ~.", alive(2))

# (Python, sample dump): each Python sees native crashes and Python processes' dumps
CASES = (
    ("3.12", "recursion_cycle3.dmp"),
    ("3.12", "big_frame.dmp"),
    ("3.12", "python/py_recursion.dmp.xz"),
    ("3.12", "pyversions/ctypes_recursion_py312.dmp.xz"),
    ("3.13", "null_deref.dmp"),
    ("3.13", "fastfail_abort.dmp"),
    ("3.13", "python/repr_recursion_full.trimmed.dmp.xz"),
    ("3.13", "pyversions/thread_av_py313.trimmed.dmp.xz"),
)
_CACHE: Dict[Tuple[str, str], dict] = {}


def _python(pythons, version: str) -> Dict[str, str]:
    return {"DUMPKIT_PYTHON": W(pythons[version].home)}


def _session(env, host, pythons, version: str, name: str, scratch: Path) -> dict:
    key = (version, name)
    if key in _CACHE:
        return _CACHE[key]
    if not (SAMPLES / name).exists():
        pytest.skip(f"{name} is not in sample_dumps")
    dump = story.dump_file(name, scratch)
    dirs = story.image_dirs(name)
    cli = json.loads(story.cli(env, ["analyze", str(dump), "--format", "json"], dirs).stdout)
    commands = [".exepath " + ";".join(W(d) for d in dirs), ".reload", *_STORY]
    session = host.run(dump, commands, environ=_python(pythons, version), python=False, timeout=900)
    assert session.exited and session.crash is None, death(name, session)
    _CACHE[key] = {"cli": cli, "session": session}
    return _CACHE[key]


@pytest.mark.parametrize("version,name", CASES)
def test_engine_route_tells_what_the_cli_tells(version, name, env, host, pythons, dumps_dir):
    """The report, its links and a live debugger after each command, with no pykd."""
    got = _session(env, host, pythons, version, name, dumps_dir)
    session = got["session"]
    assert_alive(session, 1)
    assert_alive(session, 2)
    run = one(session, "!tfstack --json")
    assert run.text.lstrip().startswith("{"), (run.output + run.errors)[:2000]
    assert_same_story(got["cli"], json.loads(run.text), name)
    assert_links(session, "!tfstack --json", "!tfstack --all")
    assert "From the debugger" in text_of(one(session, "!tfstack --all").dml)


def _names(doc: dict) -> Dict[tuple, str]:
    """(thread, frame number) -> the frame's function name, without its offset."""
    return {(t["tid"], f["index"]): (f["symbol"] or "").split("+", 1)[0] for t in doc["threads"] for f in t["frames"]}


def test_names_from_the_pdbs_the_debugger_loaded(env, host, pythons):
    """pdb_static_cycle.dmp, whose static functions only its PDB names: with the PDB folder
    on the debugger's `.sympath` and the module's symbols loaded (`x` loads them), the
    engine route names frames with the debugger's names (IDebugSymbols::GetNameByOffset),
    and they are the names `dumpkit stack` gives the same frames reading the same PDBs
    itself (as tests/windbg_real checks of the pykd route)."""
    name = "pdb_static_cycle.dmp"
    pdb_dir = SAMPLE_BIN / "pdb"
    ours = json.loads(story.cli(env, ["stack", str(SAMPLES / name), "--all", "--json"], [pdb_dir, SAMPLE_BIN]).stdout)
    folders = ";".join(W(d) for d in (pdb_dir, SAMPLE_BIN))
    commands = [".exepath " + folders, ".sympath " + W(pdb_dir), ".reload", "x pdbkernels!parse_*", "lm"]
    commands += [LOAD, "!tfstack --json --all", alive(1)]
    session = host.run(SAMPLES / name, commands, environ=_python(pythons, "3.12"), python=False)
    assert session.exited and session.crash is None, death(name, session)
    assert_alive(session, 1)
    assert "pdb symbols)" in one(session, "lm").text, one(session, "lm").text
    run = one(session, "!tfstack --json --all")
    doc = json.loads(run.text)
    theirs, names = _names(doc), _names(ours)
    assert theirs and set(theirs) <= set(names)
    assert any(n.startswith("pdbkernels.dll!") and "func_" not in n for n in theirs.values())
    assert theirs == {k: names[k] for k in theirs}


def test_options_and_loading_again_on_the_engine_route(host, pythons):
    """CPython 3.12: every option as on 3.8 (test_host.py), then a second `.load` of the
    loaded DLL, `.unload` and `.load` again: the Python started once keeps running and the
    next `!tfstack` reports; the debugger answers after each."""
    runs = option_runs()
    commands = [f".exepath+ {W(SAMPLE_BIN)}", LOAD, "!tfstack.help"]
    for i, args in enumerate(runs):
        commands += [f"!tfstack {args}".rstrip(), alive(i)]
    commands += [LOAD, alive(50), "!tfstack --plain --rows 2", alive(51)]
    commands += [f".unload {W(TFSTACK_DLL)}", alive(52), LOAD, "!tfstack --json --max-frames 10", alive(53)]
    session = host.run(SAMPLES / "recursion_cycle3.dmp", commands, environ=_python(pythons, "3.12"), python=False)
    assert session.exited and session.crash is None, death("recursion_cycle3.dmp", session)
    assert_options(session, runs)
    for n in (50, 51, 52, 53):
        assert_alive(session, n)
    helped = one(session, "!tfstack.help").text
    assert f"Python: {W(pythons['3.12'].home)} (3.12, from DUMPKIT_PYTHON)" in helped, helped
    assert "VERDICT" in one(session, "!tfstack --plain --rows 2").text
    again = one(session, "!tfstack --json --max-frames 10")
    assert json.loads(again.text)["verdict"]["kind"] == "recursion", (again.text + again.errors)[:2000]


def _venv(folder: Path, home: Path, dumpkit_init: str = "") -> Path:
    """A virtual environment as `python -m venv` lays it out (what tfstack.dll reads of
    one): pyvenv.cfg naming the installation, and Lib\\site-packages; with a `dumpkit`
    package there whose __init__.py is `dumpkit_init` when given."""
    (folder / "Scripts").mkdir(parents=True)
    site = folder / "Lib" / "site-packages"
    site.mkdir(parents=True)
    (folder / "pyvenv.cfg").write_text(
        f"home = {W(home)}\r\ninclude-system-site-packages = false\r\nversion = 3.13.2\r\n"
    )
    if dumpkit_init:
        (site / "dumpkit").mkdir()
        (site / "dumpkit" / "__init__.py").write_text(dumpkit_init)
    return folder


def test_virtual_environments_and_a_dumpkit_that_raises(host, pythons, tmp_path):
    """DUMPKIT_PYTHON naming a virtual environment (its Scripts folder, as `where python`
    shows it): `!tfstack` runs in its installation, the environment's packages first. One
    whose `dumpkit` raises SystemExit when imported: one line per run, and the debugger
    goes on (SystemExit never reaches the interpreter's exit path)."""
    dump = SAMPLES / "null_deref.dmp"
    good = _venv(tmp_path / "good", pythons["3.13"].home)
    session = host.run(
        dump,
        [f".exepath+ {W(SAMPLE_BIN)}", LOAD, "!tfstack.help", "!tfstack --plain", alive(1)],
        environ={"DUMPKIT_PYTHON": W(good / "Scripts")},
        python=False,
    )
    assert session.exited and session.crash is None, death("null_deref.dmp", session)
    assert_alive(session, 1)
    assert "a virtual environment" in one(session, "!tfstack.help").text
    assert "VERDICT" in one(session, "!tfstack --plain").text

    bad = _venv(tmp_path / "bad", pythons["3.13"].home, "raise SystemExit(3)\n")
    session = host.run(
        dump,
        [LOAD, "!tfstack", alive(1), "!tfstack --json", alive(2)],
        environ={"DUMPKIT_PYTHON": W(bad)},
        python=False,
    )
    assert session.exited and session.crash is None, death("null_deref.dmp", session)
    assert_alive(session, 1)
    assert_alive(session, 2)
    for command in ("!tfstack", "!tfstack --json"):
        said = one(session, command).errors + one(session, command).output
        assert "tfstack: error: SystemExit: 3" in said and said.count("\n") == 1, said


def test_a_live_process(env, host, pythons):
    """A live process, not a dump: sample_dumps/bin/tfhost.exe started under the debugger
    (as `cdb tfhost.exe null_deref` starts it) stops at its access violation; `!tfstack`
    in CPython 3.13 reads it through the engine (memory, threads, registers, modules as
    the running process has them) and tells what `dumpkit analyze` tells of the dump that
    scenario made (sample_dumps/null_deref.dmp): the verdict, the crash and the crashing
    thread's first frame; its links work and the debugger answers after each command."""
    program = f"live:{W(SAMPLE_BIN / 'tfhost.exe')} null_deref"
    commands = [f".exepath+ {W(SAMPLE_BIN)}", *_STORY]
    session = host.run(program, commands, environ=_python(pythons, "3.13"), python=False)
    assert session.exited and session.crash is None, death(program, session)
    assert_alive(session, 1)
    assert_alive(session, 2)
    run = one(session, "!tfstack --json")
    doc = json.loads(run.text)
    cli = json.loads(
        story.cli(env, ["analyze", str(SAMPLES / "null_deref.dmp"), "--format", "json"], [SAMPLE_BIN]).stdout
    )
    assert doc["dump"]["path"].startswith("live process")
    assert doc["verdict"]["kind"] == cli["verdict"]["kind"] and doc["verdict"]["headline"] == cli["verdict"]["headline"]
    for key in ("code", "code_name", "access"):
        assert doc["crash"].get(key) == cli["crash"].get(key), key
    crashing = [t for t in doc["threads"] if t["is_crashing"]][0]
    expected = [t for t in cli["threads"] if t["is_crashing"]][0]
    assert crashing["frames"][0]["symbol"] == expected["frames"][0]["symbol"] == "opkernels.dll!null_deref"
    assert not doc["soft_errors"], doc["soft_errors"]  # a live exception event needs no `.ecxr`
    assert_links(session, "!tfstack --json", "!tfstack --all")


def test_the_dll_pip_installed_into_a_python_uses_that_python(env, host, pythons):
    """`pip install dumpkit` puts tfstack.dll and tfstack.py into the Python's
    share\\dumpkit\\windbg (pyproject.toml's data-files): loaded from there, with no
    DUMPKIT_PYTHON and nothing registered, it runs in that Python."""
    home = pythons["3.13"].home
    installed = home / "share" / "dumpkit" / "windbg"
    installed.mkdir(parents=True, exist_ok=True)
    for name in ("tfstack.dll", "tfstack.py"):
        shutil.copy2(TFSTACK_DLL.parent / name, installed / name)
    _reg_clear(env)
    dll = W(installed / "tfstack.dll")
    session = host.run(
        SAMPLES / "recursion_cycle3.dmp",
        [f".exepath+ {W(SAMPLE_BIN)}", f".load {dll}", "!tfstack.help", "!tfstack", alive(1)],
        python=False,
    )
    assert session.exited and session.crash is None, death("recursion_cycle3.dmp", session)
    assert_alive(session, 1)
    helped = one(session, "!tfstack.help").text
    assert f"Python: {W(home)} (3.13, from the Python tfstack.dll is installed in)" in helped, helped
    assert "VERDICT" in one(session, "!tfstack").dml


_PYTHON_CORE = r"HKCU\Software\Python\PythonCore"


def _reg(env: lane.Env, *args: str) -> None:
    proc = lane._run(["timeout", "-k", "10", "120", env.wine, "reg", *args], env=env.environ(), timeout=150)
    assert proc.returncode == 0, proc.stderr


def _register(env: lane.Env, tag: str, folder: Path) -> None:
    _reg(env, "add", rf"{_PYTHON_CORE}\{tag}\InstallPath", "/ve", "/d", W(folder), "/f")


def test_python_found_through_the_registry_and_a_one_line_message_when_none(env, host, pythons, tmp_path):
    """No DUMPKIT_PYTHON: with nothing registered, one line says what was looked for and
    how to fix it; a DUMPKIT_PYTHON that is no Python is named. With python.org's PEP 514
    keys (`reg add`): 3.13 and 3.12 both with dumpkit, the newest runs the report; a 3.13
    without dumpkit (the untouched embeddable folder) and 3.12 with it: 3.12."""
    dump = SAMPLES / "null_deref.dmp"
    base = [f".exepath+ {W(SAMPLE_BIN)}", LOAD]
    _reg_clear(env)
    missing = host.run(dump, base + ["!tfstack", alive(1)], python=False)
    assert_alive(missing, 1)
    line = one(missing, "!tfstack").output + one(missing, "!tfstack").errors
    assert line.count("\n") == 1, line
    assert "tfstack: no Python found (DUMPKIT_PYTHON is not set" in line and "Software\\Python" in line, line
    assert "py -m pip install dumpkit" in line, line

    wrong = host.run(dump, base + ["!tfstack", alive(1)], python=False, environ={"DUMPKIT_PYTHON": W(tmp_path)})
    assert_alive(wrong, 1)
    text = one(wrong, "!tfstack").errors + one(wrong, "!tfstack").output
    assert f"DUMPKIT_PYTHON={W(tmp_path)} is not a 64-bit CPython 3.8 or later" in text, text

    try:
        _register(env, "3.12", pythons["3.12"].home)
        _register(env, "3.13", pythons["3.13"].home)
        newest = host.run(dump, base + ["!tfstack.help", "!tfstack", alive(1)], python=False)
        _register(env, "3.13", lane.ROOT.parent / "shared" / "winpython" / "cpython-3.13-amd64")
        with_dumpkit = host.run(dump, base + ["!tfstack.help", alive(1)], python=False)
    finally:
        _reg_clear(env)
    assert_alive(newest, 1)
    assert f"Python: {W(pythons['3.13'].home)} (3.13, from HKCU PythonCore\\3.13)" in one(newest, "!tfstack.help").text
    assert "VERDICT" in one(newest, "!tfstack").dml
    assert_alive(with_dumpkit, 1)
    helped = one(with_dumpkit, "!tfstack.help").text
    assert f"Python: {W(pythons['3.12'].home)} (3.12, from HKCU PythonCore\\3.12)" in helped, helped


def _reg_clear(env: lane.Env) -> None:
    lane._run(
        ["timeout", "-k", "10", "120", env.wine, "reg", "delete", _PYTHON_CORE, "/f"], env=env.environ(), timeout=150
    )
