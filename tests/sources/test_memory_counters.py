"""The memory-counter streams read two ways: from the file (sources/memory_counters.py) and,
in a WinDbg session, from Microsoft's engine's own `.dumpdebug` words (PykdTarget).

tests/sources/dumpdebug/ holds what the real dbgeng.dll (the real-pykd lane's, under Wine)
printed for every real dump in ../shared that has the streams (tools/record_dumpdebug.py):
dumpkit's reading of the file must equal the engine's reading, field for field, and the
reader of the engine's words must give the same records from that text. The pykd stand-in
prints the blocks as the engine does, so `!tfstack` tells the memory story the CLI does."""

from __future__ import annotations

import importlib.util
import json
import struct
import sys
from pathlib import Path

import pytest

from dumpkit.sources.memory_counters import dumpdebug_fields, from_dumpdebug
from dumpkit.sources.minidump import open_dump

from tests.support.fakes import pykd as fake_pykd
from tests.support.samples import REAL_DUMPS, ROOT, real_dump, run_cli

RECORDED = sorted((Path(__file__).parent / "dumpdebug").glob("*.txt"))
SCRIPT = ROOT / "windbg_scripts" / "tfstack.py"


def _dump_of(recorded: Path) -> Path:
    folder, name = recorded.name[: -len(".txt")].split("--")
    return real_dump(f"{folder}/{name}")


def test_the_engine_was_recorded_on_every_real_dump_with_the_streams():
    if not REAL_DUMPS.is_dir():
        pytest.skip("../shared/real_dumps is not here")
    with_streams = set()
    for path in sorted(REAL_DUMPS.glob("*/*.dmp")):
        try:
            types = {e.type for e in open_dump(str(path)).dump.streams}
        except Exception:  # a dump neither dumpkit nor the engine opens has nothing to compare
            continue
        if {21, 22} <= types:
            with_streams.add(f"{path.parent.name}--{path.name}.txt")
    assert with_streams and with_streams == {p.name for p in RECORDED}


@pytest.mark.parametrize("recorded", RECORDED, ids=[p.name[:-4] for p in RECORDED])
def test_the_file_is_read_as_microsofts_engine_reads_it(recorded):
    text = recorded.read_text(encoding="utf-8")
    engine = dumpdebug_fields(text)
    t = open_dump(str(_dump_of(recorded)))
    system, process = t.system_memory, t.process_memory
    sysinfo = engine["SystemMemoryInfoStream"]
    page = sysinfo[("BasicInfo", "PageSize")]
    assert system.page_size == page
    assert system.physical_memory == sysinfo[("BasicInfo", "NumberOfPhysicalPages")] * page
    assert system.processors == sysinfo[("BasicInfo", "NumberOfProcessors")]
    assert system.highest_user_address == sysinfo[("BasicInfo", "MaximumUserModeAddress")]
    assert system.committed == sysinfo[("BasicPerfInfo", "CommittedPages")] * page
    assert system.commit_limit == sysinfo[("BasicPerfInfo", "CommitLimit")] * page
    assert system.available_memory == sysinfo[("BasicPerfInfo", "AvailablePages")] * page
    vm = engine["ProcessVmCountersStream"]
    assert process.private_commit == vm[("Process Counters", "PrivateUsage")]
    assert process.peak_private_commit == vm[("Process Counters", "PeakPagefileUsage")]
    assert process.working_set == vm[("Process Counters", "WorkingSetSize")]
    assert process.peak_working_set == vm[("Process Counters", "PeakWorkingSetSize")]
    assert process.virtual_size == vm[("Process Counters", "VirtualSize")]
    # and the reader of the engine's words, which PykdTarget uses, gives the same records
    assert from_dumpdebug(text) == (process, system)


def test_text_without_the_streams_gives_no_counters():
    assert from_dumpdebug("Stream 0: type ThreadListStream (3), size 00000064, RVA 000001F8\n") == (None, None)


@pytest.fixture
def pykd(monkeypatch):
    monkeypatch.setitem(sys.modules, "pykd", fake_pykd)
    yield fake_pykd
    fake_pykd._close_for_tests()


def test_tfstack_says_what_the_cli_says_of_a_process_at_the_commit_limit(pykd, tmp_path):
    """A copy of a real Windows dump whose SystemMemoryInfo says the machine was at its
    commit limit (as tests/analysis/test_memory_use.py makes it): the same headline and
    the same memory record through the debugger as from the CLI."""
    data = bytearray(real_dump("node-minidump/windows.dmp").read_bytes())
    _sig, _ver, count, directory = struct.unpack_from("<IIII", data)
    for i in range(count):
        kind, _size, rva = struct.unpack_from("<III", data, directory + 12 * i)
        if kind == 21:
            available, _committed, limit, _peak = struct.unpack_from("<4Q", data, rva + 116)
            struct.pack_into("<4Q", data, rva + 116, available, limit, limit, limit)
    dump = tmp_path / "at_limit.dmp"
    dump.write_bytes(bytes(data))
    cli = json.loads(run_cli("analyze", dump, "--format", "json").stdout)
    spec = importlib.util.spec_from_file_location("tfstack_memory_test", SCRIPT)
    tfstack = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tfstack)
    pykd._open_dump_for_tests(str(dump))
    rc = tfstack.main(["--json"])
    windbg = json.loads(pykd._output_for_tests())
    assert rc in (0, 1)
    assert windbg["verdict"]["headline"] == cli["verdict"]["headline"]
    assert windbg["verdict"]["headline"].endswith(", while the machine's commit charge was at 100% of its limit")
    assert windbg["environment"]["memory"] == cli["environment"]["memory"]
