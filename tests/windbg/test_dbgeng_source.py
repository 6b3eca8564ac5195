"""dumpkit.sources.dbgeng, the engine route of `!tfstack` (issue #44), on any OS: its COM
calls made through ctypes against a stand-in engine (tests/windbg/fake_dbgeng.py) that
answers from the same emulated debugger session as the pykd stand-in, so the engine route
and the pykd route are read from one session and must give one report. The real engine,
hosting CPython 3.8, 3.12 and 3.13 under Wine: tests/windbg_host."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from dumpkit.engine import Options, analyze
from dumpkit.problems import Problems
from dumpkit.report.json_report import render_json
from dumpkit.sources.dbgeng import DbgengTarget, EngineSession
from dumpkit.sources.pykd import PykdTarget
from tests.support.fakes import pykd as fake_pykd
from tests.support.samples import ROOT, SAMPLE_BIN, SAMPLES
from tests.windbg.fake_dbgeng import FakeEngine

SCRIPT = ROOT / "windbg_scripts" / "tfstack.py"
NATIVE = ("recursion_cycle3.dmp", "big_frame.dmp", "null_deref.dmp", "fastfail_abort.dmp", "tree_free.dmp")


@pytest.fixture
def session(monkeypatch):
    monkeypatch.setitem(sys.modules, "pykd", fake_pykd)
    yield fake_pykd
    fake_pykd._close_for_tests()


@pytest.fixture(scope="module")
def tfstack():
    spec = importlib.util.spec_from_file_location("tfstack_engine_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _report(target) -> dict:
    opts = Options(image_paths=(str(SAMPLE_BIN),))
    return json.loads(render_json(analyze(target, opts, problems=target.soft_errors).report))


@pytest.mark.parametrize("name", NATIVE)
def test_the_engine_route_reads_the_session_as_pykd_does(name, session):
    """DbgengTarget over the engine's COM interfaces and PykdTarget over pykd, on one
    debugger session: the same JSON report, to the byte, and every object the engine
    session asked for or made is released when it closes."""
    session._open_dump_for_tests(str(SAMPLES / name))
    by_pykd = _report(PykdTarget(fake_pykd, Problems()))
    engine = FakeEngine()
    with EngineSession(engine.client) as s:
        by_engine = _report(DbgengTarget(s, Problems()))
    assert by_engine == by_pykd
    assert by_engine["verdict"]["kind"]
    assert engine.leaked() == []


def test_reads_go_on_where_the_engine_stops_short(session, monkeypatch):
    """ReadVirtual stops at the end of what the engine can read in one go (where two of a
    dump's memory ranges touch, the real engine does not always join them): the target
    reads on from there, and stops only where nothing more can be read."""
    session._open_dump_for_tests(str(SAMPLES / "recursion_cycle3.dmp"))
    engine = FakeEngine()
    with EngineSession(engine.client) as s:
        target = DbgengTarget(s, Problems())
        sp = target.exception.context.sp
        whole = target.read_available(sp, 0x3000)
        cut = sp + 0x1800
        real = s.readVirtual

        def stops_at_cut(address, size):
            if address < cut < address + size:
                size = cut - address
            return real(address, size)

        monkeypatch.setattr(s, "readVirtual", stops_at_cut)
        assert target.read_available(sp, 0x3000) == whole
        assert len(whole) == 0x3000


def _run(tfstack, engine: FakeEngine, typed: str) -> str:
    answer = tfstack.run_with_engine(engine.client, typed)
    assert answer is None, answer
    return engine.text()


def test_tfstack_dll_entry_prints_through_the_engine(tfstack, session):
    """windbg_scripts/tfstack.py's run_with_engine, as tfstack.dll calls it: the options
    as typed, the report through IDebugControl4::ControlledOutputWide (DML, or text with
    --plain and --json), errors one line, and nothing left registered or referenced."""
    session._open_dump_for_tests(str(SAMPLES / "recursion_cycle3.dmp"))
    engine = FakeEngine()
    out = _run(tfstack, engine, f'--json --image-path "{SAMPLE_BIN}"')
    assert json.loads(out)["verdict"]["kind"] == "recursion"
    assert engine.text(dml=True) == ""

    engine = FakeEngine()
    _run(tfstack, engine, f"-i {SAMPLE_BIN} --all --rows 3")
    dml = engine.text(dml=True)
    assert "<b>VERDICT</b>" in dml and '<link cmd="~~[0x194]s">' in dml
    assert "cycle of 3 functions in call order, 1,710 repetitions" in dml

    for typed, said in (
        ("--bogus", "tfstack: error: unrecognized arguments: --bogus (try !tfstack --help)"),
        ("--thread", "expected one argument"),
        (f"-i {SAMPLE_BIN} --thread 0x999", "no thread 2457 (0x999)"),
    ):
        engine = FakeEngine()
        text = _run(tfstack, engine, typed)
        assert said in text and text.count("\n") == 1, text
        assert engine.leaked() == []
    engine = FakeEngine()
    assert "usage: !tfstack" in _run(tfstack, engine, "--help")


def test_ctrl_break_polled_from_the_engine_stops_the_run(tfstack, session, monkeypatch):
    """On the engine route a watch thread asks IDebugControl::GetInterrupt every POLL
    seconds while the walk runs: armed, the run stops with one line and no report."""
    import dumpkit.commands.tfstack as body

    monkeypatch.setattr(body.BreakWatch, "POLL", 0.01)
    session._open_dump_for_tests(str(SAMPLES / "recursion_cycle3.dmp"))
    engine = FakeEngine()
    engine.interrupt_after = 1
    text = _run(tfstack, engine, f"-i {SAMPLE_BIN}")
    assert "tfstack: interrupted (Ctrl-Break): no report" in text, text[-2000:]
    assert "VERDICT" not in text and engine.leaked() == []


def test_ctrl_break_the_engine_takes_in_a_command_stops_the_run(tfstack, session, monkeypatch):
    """A Ctrl-Break that lands while one of the session's commands runs is taken by the
    engine (the command fails, GetInterrupt says nothing): the command, which only reads,
    works when run again, and that is the sign the run must stop rather than report what
    the failed command would have told (here `lm`: which modules have PDBs)."""
    import dumpkit.commands.tfstack as body

    monkeypatch.setattr(body.BreakWatch, "POLL", 0.01)
    session._open_dump_for_tests(str(SAMPLES / "recursion_cycle3.dmp"))
    engine = FakeEngine()
    engine.fail_once = {"lm"}
    text = _run(tfstack, engine, f"-i {SAMPLE_BIN}")
    assert "tfstack: interrupted (Ctrl-Break): no report" in text, text[-2000:]
    engine = FakeEngine()
    text = _run(tfstack, engine, f"-i {SAMPLE_BIN} --plain")  # and only that once
    assert "VERDICT" in text and "interrupted" not in text


def test_nothing_escapes_run_with_engine(tfstack, session, monkeypatch):
    """A failure inside dumpkit, even SystemExit or KeyboardInterrupt, is one line on the
    debugger's output (a debugger hosting Python dies of what reaches the interpreter's
    exit path); without dumpkit's dependencies the answer is one line for tfstack.dll to
    print, naming the fix."""
    session._open_dump_for_tests(str(SAMPLES / "recursion_cycle3.dmp"))
    import dumpkit.commands.tfstack as body

    for raised in (RuntimeError("boom"), SystemExit(3), KeyboardInterrupt()):

        def explode(*args, _raised=raised, **kwargs):
            raise _raised

        monkeypatch.setattr(body, "run_tfstack", explode)
        engine = FakeEngine()
        assert tfstack.run_with_engine(engine.client, "--plain") is None
        assert engine.text().startswith("tfstack: error: "), engine.text()
        assert engine.leaked() == []
    monkeypatch.undo()
    monkeypatch.setitem(sys.modules, "pykd", fake_pykd)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    answer = tfstack.run_with_engine(FakeEngine().client, "")
    assert answer.startswith("tfstack: dumpkit cannot be imported in the Python at ")
    assert "No module named 'capstone'" in answer and "-m pip install dumpkit" in answer


def test_long_output_goes_out_in_pieces_cut_at_line_ends(session):
    """The engine formats each output call into a buffer of its own: a report is written
    in pieces of at most 4,000 characters, cut after a line end so DML tags stay whole."""
    session._open_dump_for_tests(str(SAMPLES / "null_deref.dmp"))
    engine = FakeEngine()
    line = '<link cmd="~~[0x1]s">' + "x" * 70 + "</link>"
    with EngineSession(engine.client) as s:
        s.output("\n".join([line] * 300), dml=True)
    pieces = [t for t, _ in engine.output]
    assert len(pieces) > 1 and all(len(p) <= 4000 for p in pieces)
    assert all(p.endswith("\n") for p in pieces)
    assert "".join(pieces) == "\n".join([line] * 300) + "\n"


def test_the_fake_engine_is_at_the_slots_dbgeng_h_gives(session):
    """The stand-in and the source agree on slots only if both follow dbgeng.h; the
    numbers that matter, written down from Microsoft's header once more."""
    from dumpkit.sources import dbgeng

    assert dbgeng._CONTROL["Execute"][0] == 66
    assert dbgeng._CONTROL["GetLastEventInformation"][0] == 94
    assert dbgeng._CONTROL["ControlledOutputWide"][0] == 122  # IDebugControl4
    assert dbgeng._CONTROL["GetSystemVersionValues"][0] == 160
    assert dbgeng._SYMBOLS["GetModuleNameString"][0] == 53  # IDebugSymbols2
    assert dbgeng._CLIENT["CreateClient"][0] == 30
    assert Path(dbgeng.__file__).name == "dbgeng.py"


def test_pip_installs_the_extension_where_the_dll_looks_for_its_python():
    """pyproject.toml's data-files put tfstack.dll and tfstack.py, which must stay together,
    into <prefix>/share/dumpkit/windbg: the folder tfstack.c's from_own_prefix takes for
    the Python it was installed into."""
    import re

    text = (ROOT / "pyproject.toml").read_text()
    block = text.split("[tool.setuptools.data-files]", 1)[1].split("\n[", 1)[0]
    (folder, files), *rest = re.findall(r'^"([^"]+)"\s*=\s*\[([^\]]*)\]', block, re.M)
    assert not rest and folder == "share/dumpkit/windbg"
    names = re.findall(r'"([^"]+)"', files)
    assert {"windbg_scripts/tfstack.dll", "windbg_scripts/tfstack.py"} <= set(names)
    assert all((ROOT / name).is_file() for name in names)
    source = (ROOT / "windbg_scripts" / "tfstack.c").read_text()
    assert '{L"windbg", L"dumpkit", L"share"}' in source
