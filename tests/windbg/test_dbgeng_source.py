"""dumpkit.sources.dbgeng, the engine route of `!tfstack` (issue #44), on any OS: its COM
calls made through ctypes against a stand-in engine (tests/windbg/fake_dbgeng.py) that
answers from the same emulated debugger session as the pykd stand-in, so the engine route
and the pykd route are read from one session and must give one report. The real engine,
hosting CPython 3.8, 3.12 and 3.13 under Wine: tests/windbg_host."""

from __future__ import annotations

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
from tests.support.samples import SAMPLE_BIN, SAMPLES
from tests.windbg.fake_dbgeng import FakeEngine

NATIVE = ("recursion_cycle3.dmp", "big_frame.dmp", "null_deref.dmp", "fastfail_abort.dmp", "tree_free.dmp")


@pytest.fixture
def session(monkeypatch):
    monkeypatch.setitem(sys.modules, "pykd", fake_pykd)
    yield fake_pykd
    fake_pykd._close_for_tests()


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
