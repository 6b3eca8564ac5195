"""`!tfstack` (windbg_scripts/tfstack.py over dumpkit.sources.pykd) seen through a pykd
stand-in backed by the real sample dumps: the same dump read through the debugger's API
must give the same findings as `dumpkit analyze`.

The stand-in (tests/support/fakes/pykd.py) emulates WinDbg from the raw minidump reader only; it
has no symbols, so every name below comes from dumpkit in both runs and must match."""

from __future__ import annotations

import importlib.util
import json
import lzma
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dumpkit.report.dml import dml_text, link

from dumpkit.target import MemoryNotInDump
from tests.support.samples import ROOT, SAMPLE_BIN, SAMPLES
from tests.support.fakes import pykd as fake_pykd

SCRIPT = ROOT / "windbg_scripts" / "tfstack.py"


def _sample_dumps():
    return sorted(p.name for p in SAMPLES.glob("*.dmp")) + sorted(p.name for p in SAMPLES.glob("*.dmp.xz"))


@pytest.fixture(scope="module")
def tfstack():
    spec = importlib.util.spec_from_file_location("tfstack_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def pykd(monkeypatch):
    monkeypatch.setitem(sys.modules, "pykd", fake_pykd)
    yield fake_pykd
    fake_pykd._close_for_tests()


def _dump_file(name: str, tmp_path_factory) -> Path:
    path = SAMPLES / name
    if not name.endswith(".xz"):
        return path
    out = tmp_path_factory.mktemp("dumps") / Path(name[:-3]).name
    with lzma.open(path) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


def _cli_json(dump: Path) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "dumpkit", "analyze", str(dump), "--image-path", str(SAMPLE_BIN), "--format", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def _tfstack_json(tfstack, pykd, dump: Path, *extra: str) -> dict:
    pykd._open_dump_for_tests(str(dump))
    rc = tfstack.main(["--json", "--image-path", str(SAMPLE_BIN), *extra])
    out = pykd._output_for_tests()
    assert rc in (0, 1), out[-2000:]
    assert pykd._output_for_tests(dml=True) == ""  # JSON goes out as plain text
    return json.loads(out)


def _findings(doc: dict) -> dict:
    crash = next((t for t in doc["threads"] if t["is_crashing"]), None)
    c = doc["crash"] or {}
    return {
        "verdict": (doc["verdict"]["kind"], doc["verdict"]["headline"]),
        "crash": (
            c.get("code"),
            c.get("fastfail_code"),
            c.get("thread_id"),
            c.get("address"),
            c.get("parameters"),
            c.get("raised_by"),
        ),
        "cycles": [
            (
                cy["functions"],
                cy["period"],
                cy["repetitions"],
                cy["bytes_per_repetition"],
                cy["first_frame"],
                cy["last_frame"],
            )
            for cy in (crash["cycles"] if crash else [])
        ],
        "frame_sizes": doc["frame_sizes"],
        "frame_count": crash["frame_count"] if crash else None,
        "frames": [
            (f["index"], f["ip"], f["sp"], f["trust"], f["module"], f["symbol"], f["size"])
            for f in (crash["frames"] if crash else [])
        ],
        "stop_reason": crash["stop_reason"] if crash else None,
    }


@pytest.mark.parametrize("name", _sample_dumps())
@pytest.mark.slow
def test_tfstack_json_matches_cli(name, tfstack, pykd, tmp_path_factory):
    dump = _dump_file(name, tmp_path_factory)
    cli = _findings(_cli_json(dump))
    windbg = _findings(_tfstack_json(tfstack, pykd, dump))
    assert windbg["verdict"] == cli["verdict"]
    assert windbg["crash"] == cli["crash"]
    assert windbg["cycles"] == cli["cycles"]
    assert windbg["frame_sizes"] == cli["frame_sizes"]
    assert windbg["frame_count"] == cli["frame_count"]
    assert windbg["frames"] == cli["frames"]
    assert windbg["stop_reason"] == cli["stop_reason"]
    assert windbg["frames"], "the crashing thread was walked"


def test_dml_output_has_verdict_and_links(tfstack, pykd):
    dump = SAMPLES / "recursion_cycle3.dmp"
    pykd._open_dump_for_tests(str(dump))
    rc = tfstack.main(["--image-path", str(SAMPLE_BIN)])
    assert rc == 0
    dml = pykd._output_for_tests(dml=True)
    assert pykd._output_for_tests(dml=False) == ""  # everything went out as DML
    cli = _cli_json(dump)
    headline = dml_text(cli["verdict"]["headline"], 2000)
    assert headline in dml
    assert "-&gt;" in headline  # the headline's arrows, escaped for DML
    tid = cli["crash"]["thread_id"]
    assert f'<link cmd="~~[0x{tid:x}]s">' in dml
    assert f'<link cmd="~~[0x{tid:x}]s; .ecxr; .frame 0x0">00</link>' in dml
    assert "cycle of 3 functions in call order, 1,710 repetitions" in dml
    # No raw markup from dump strings: every '<' starts one of our own tags.
    assert not re.search(r"<(?!/?(b|link)[ >])", dml)


def test_crashing_thread_frame_links_use_the_exception_context(tfstack, pykd, tmp_path_factory):
    """`~~[tid]s` leaves WinDbg in the thread list's context, but dumpkit numbers the
    crashing thread's frames from the exception record's: its links must `.ecxr` first.
    Wine's self-written dump parks the crashing thread elsewhere in the thread list, so
    there the two contexts, and so the frames `.frame N` would pick, differ."""
    pykd._open_dump_for_tests(str(_dump_file("recursion_one.selfdump.dmp.xz", tmp_path_factory)))
    raw = pykd._s().target
    ex = raw.exception
    listed = next(t for t in raw.threads if t.tid == ex.thread_id)
    assert listed.context.sp != ex.context.sp
    assert tfstack.main(["--image-path", str(SAMPLE_BIN), "--all", "--rows", "3"]) in (0, 1)
    dml = pykd._output_for_tests(dml=True)
    tid = ex.thread_id
    first = f'<link cmd="~~[0x{tid:x}]s; .ecxr; .frame 0x0">00</link>'
    rows = [line for line in dml.splitlines() if first in line]  # frame table and stack
    assert any(f"{ex.context.sp:016x}" in row for row in rows)  # frame 00: the exception context's
    assert f"~~[0x{tid:x}]s; .frame" not in dml
    others = [t for t in raw.threads if t.tid != tid and t.context is not None]
    assert others
    for t in others:
        assert f"~~[0x{t.tid:x}]s; .ecxr" not in dml  # their own context is the right one
    assert any(f'<link cmd="~~[0x{t.tid:x}]s; .frame 0x0">00</link>' in dml for t in others)


def test_thread_and_all_options(tfstack, pykd):
    pykd._open_dump_for_tests(str(SAMPLES / "fastfail_abort.dmp"))
    other = next(t for t in pykd._s().target.threads if t.tid != pykd._s().target.exception.thread_id)
    assert tfstack.main(["--image-path", str(SAMPLE_BIN), "--thread", hex(other.tid)]) == 0
    out = pykd._output_for_tests()
    assert f'<b>Thread</b> <link cmd="~~[0x{other.tid:x}]s">' in out
    pykd._open_dump_for_tests(str(SAMPLES / "fastfail_abort.dmp"))
    assert tfstack.main(["--image-path", str(SAMPLE_BIN), "--all", "--rows", "5"]) == 0
    out = pykd._output_for_tests()
    assert out.count("<b>Thread</b>") == len(pykd._s().target.threads) - 1
    assert "Other threads" not in out


def test_errors_are_one_line(tfstack, pykd):
    pykd._open_dump_for_tests(str(SAMPLES / "null_deref.dmp"))
    assert tfstack.main(["--bogus"]) == 2
    out = pykd._output_for_tests()
    assert out.count("\n") == 1 and out.startswith("tfstack: error:")
    pykd._open_dump_for_tests(str(SAMPLES / "null_deref.dmp"))
    assert tfstack.main(["--thread", "123456"]) == 2
    out = pykd._output_for_tests()
    assert out.count("\n") == 1 and "no thread 123456" in out


def test_unexpected_failure_is_one_line(tfstack, pykd, monkeypatch):
    pykd._open_dump_for_tests(str(SAMPLES / "null_deref.dmp"))

    def broken():
        raise pykd.DbgException("IDebugSystemObjects::GetCurrentThreadDataOffset failed\nHRESULT 0x80004005")

    monkeypatch.setattr(pykd, "getProcessThreads", broken)
    monkeypatch.setattr(pykd, "getModulesList", lambda: 1 / 0)
    rc = tfstack.main([])
    out = pykd._output_for_tests()
    assert rc == 1
    assert out.count("\n") == 1 and out.startswith("tfstack: error: ZeroDivisionError")
    assert "Traceback" not in out


def test_memory_exception_becomes_memory_not_in_dump(pykd):
    from dumpkit.sources.minidump import open_dump
    from dumpkit.sources.pykd import PykdTarget

    dump = SAMPLES / "recursion_one.dmp"
    pykd._open_dump_for_tests(str(dump))
    target = PykdTarget(pykd)
    with open_dump(str(dump)) as raw:
        thread = next(t for t in raw.threads if t.tid == raw.exception.thread_id)
        end = thread.stack_end
        # pykd itself raises on a range that is only partly readable...
        with pytest.raises(pykd.MemoryException):
            pykd.loadBytes(end - 8, 16)
        # ...and the target turns that into dumpkit's error, for partial and unmapped reads.
        with pytest.raises(MemoryNotInDump) as info:
            target.read(end - 8, 16)
        assert info.value.address == end - 8 and info.value.size == 16
        with pytest.raises(MemoryNotInDump):
            target.read(0x10, 8)
        assert target.read(end - 8, 8) == raw.read(end - 8, 8)
        # read_available: the same readable prefix, to the byte, as the file reader.
        for start, size in ((end - 0x3000, 0x5000), (end - 5, 100), (0x10, 8), (thread.stack_start, 1 << 21)):
            assert target.read_available(start, size) == raw.read_available(start, size)


def test_reads_cross_touching_dump_ranges(pykd, monkeypatch):
    """Wine's dumps hold thousands of tiny memory ranges, many touching. The real engine
    reads across touching ranges in one loadBytes call (seen in tests/windbg_real: pykd
    calls a range valid only when dbgeng says it is one region, and touching ranges are);
    a gap between ranges ends a read. The target reads to the byte the file reader
    reaches, one call per chunk, and finds where a gap starts in a bounded number of calls."""
    from dumpkit.sources.minidump import open_dump
    from dumpkit.sources.pykd import CHUNK, PykdTarget

    dump = SAMPLES / "recursion_one.dmp"
    pykd._open_dump_for_tests(str(dump))
    target = PykdTarget(pykd)
    with open_dump(str(dump)) as raw:
        ranges = raw.memory_ranges()
        runs, run = [], [ranges[0]]
        for r in ranges[1:]:
            if r[0] == run[-1][1]:
                run.append(r)
            else:
                runs.append(run)
                run = [r]
        run = max(runs, key=len)  # the longest run of touching ranges
        assert len(run) >= 3
        start, end = run[0][0] + 1, run[-1][1]
        assert pykd._s().mapped_at(start) is None  # the dump's memory, no image file behind it
        assert bytes(pykd.loadBytes(start, end - start)) == raw.read(start, end - start)  # one call
        with pytest.raises(pykd.MemoryException):
            pykd.loadBytes(start, end - start + 1)  # past the run: a gap
        calls = []
        real_load = pykd.loadBytes
        monkeypatch.setattr(
            pykd,
            "loadBytes",
            lambda offset, count, phyAddr=False: calls.append(count) or real_load(offset, count, phyAddr),
        )
        assert target.read(start, end - start) == raw.read(start, end - start)
        assert len(calls) <= (end - start) // CHUNK + 2
        # read_available runs on to the end of the run, stops where the dump does.
        assert target.read_available(start, end - start + 0x100) == raw.read_available(start, end - start + 0x100)
        assert len(target.read_available(start, end - start + 0x100)) == end - start
        with pytest.raises(MemoryNotInDump):
            target.read(start, end - start + 1)
        searches_per_boundary = CHUNK.bit_length() + 2
        assert len(calls) <= 8 * searches_per_boundary


def test_target_matches_the_dump_and_restores_the_debugger(pykd):
    from dumpkit.sources.minidump import open_dump
    from dumpkit.sources.pykd import PykdTarget

    dump = SAMPLES / "big_frame.dmp"
    pykd._open_dump_for_tests(str(dump))
    assert pykd.getThreadSystemID() == pykd._s().target.exception.thread_id  # as WinDbg starts
    start_teb = pykd.getProcessThreads()[0]  # the user switched to another thread (~0s)
    pykd.setCurrentThread(start_teb)
    target = PykdTarget(pykd)
    # The user's thread and register context are as they were.
    assert pykd.getCurrentThread() == start_teb
    assert pykd._s().ecxr is False
    cmds = pykd._commands_for_tests()
    assert ".ecxr" in cmds and cmds[cmds.index(".ecxr") + 1] == ".cxr"
    with open_dump(str(dump)) as raw:
        assert [(t.tid, t.teb, t.context.values, t.stack_end) for t in target.threads] == [
            (t.tid, t.teb, t.context.values, t.stack_end) for t in raw.threads
        ]
        ex, rex = target.exception, raw.exception
        assert (ex.code, ex.flags, ex.address, ex.parameters, ex.thread_id) == (
            rex.code,
            rex.flags,
            rex.address,
            rex.parameters,
            rex.thread_id,
        )
        assert ex.context.values == rex.context.values
        key = lambda m: (m.name, m.path, m.base, m.size, m.timestamp, m.checksum, m.file_version, m.product_version)  # noqa: E731
        # Modules without a version resource have a zeroed VS_FIXEDFILEINFO in the dump:
        # no version, not "0.0.0.0".
        assert any(m.file_version is None for m in raw.modules)
        # The debugger lists modules in load order (the stand-in: the dump's order, which
        # is not by address); the target's list is by base all the same.
        assert [m.base for m in raw.modules] != sorted(m.base for m in raw.modules)
        assert [key(m) for m in target.modules] == sorted((key(m) for m in raw.modules), key=lambda k: k[2])
        s, rs = target.system, raw.system
        assert (
            s.arch_name,
            s.os_major,
            s.os_minor,
            s.os_build,
            s.csd_version,
            s.number_of_processors,
            s.processor_level,
            s.processor_revision,
        ) == (
            rs.arch_name,
            rs.os_major,
            rs.os_minor,
            rs.os_build,
            rs.csd_version,
            rs.number_of_processors,
            rs.processor_level,
            rs.processor_revision,
        )
    assert target.symbol_at(target.modules[0].base + 0x1000) is None  # no PDB: no debugger name


def test_failed_ecxr_is_noticed_not_replaced_by_the_thread_context(pykd):
    """When the debugger has no exception context, `.ecxr` prints its error to the error
    output, which dbgCommand does not return (it gives None). The target must not then
    read the thread's own registers as if they were the exception's."""
    from dataclasses import replace

    from dumpkit.sources.pykd import PykdTarget

    pykd._open_dump_for_tests(str(SAMPLES / "null_deref.dmp"))
    state = pykd._s()
    state.target.exception = replace(state.target.exception, context=None)
    teb = next(t.teb for t in state.target.threads if t.tid == state.target.exception.thread_id)
    pykd.setCurrentThread(teb)
    assert pykd.dbgCommand(".ecxr") is None  # what real pykd hands back
    assert "Unable to get exception context" in pykd._errors_for_tests()[-1]
    target = PykdTarget(pykd)
    assert target.exception is not None and target.exception.context is None
    assert any("`.ecxr` printed no registers" in e and "own context is used" in e for e in target.soft_errors.items)
    assert pykd._s().ecxr is False


def test_debugger_symbols_are_used_when_it_has_a_pdb(pykd, monkeypatch):
    """Names come from findSymbol only for modules whose PDB the debugger has already
    loaded (per `lm`): findSymbol, like module.symfile(), makes kdlib search the symbol
    path for the PDB and open it, minutes for TensorFlow's, so `(deferred)` modules are
    not asked."""
    from dumpkit.sources.pykd import PykdTarget

    asked = []

    def find_symbol(offset, showDisplacement=True):
        asked.append(offset)
        return "opkernels!visit+1a"

    pykd._open_dump_for_tests(str(SAMPLES / "recursion_one.dmp"))
    monkeypatch.setattr(pykd, "findSymbol", find_symbol)
    target = PykdTarget(pykd)
    mod = next(m for m in target.modules if m.name == "opkernels.dll")
    exe = next(m for m in target.modules if m.name.endswith(".exe"))
    assert target.symbol_at(mod.base + 0x14B0) is None  # nothing loaded: no debugger name...
    assert asked == []  # ...and nothing asked that would load a PDB
    pykd._load_pdb_for_tests("opkernels", r"c:\symbols\opkernels.pdb\ABC1\opkernels.pdb")  # `ld opkernels`
    target = PykdTarget(pykd)
    assert target.symbol_at(mod.base + 0x14B0) == "opkernels.dll!visit+0x1a"
    assert target.symbol_at(exe.base + 0x1000) is None
    assert asked == [mod.base + 0x14B0]  # the exe's symbols are still deferred
    assert pykd._commands_for_tests().count("lm") == 2  # once per target, however many frames
    monkeypatch.setattr(pykd, "findSymbol", lambda offset, showDisplacement=True: "opkernels+14b0")
    assert target.symbol_at(mod.base + 0x14B0) is None
    # kdlib picks the nearest symbol, which may start after the address: `-1a` is not a
    # place inside that function.
    monkeypatch.setattr(pykd, "findSymbol", lambda offset, showDisplacement=True: "opkernels!visit-1a")
    assert target.symbol_at(mod.base + 0x14B0) is None
    # Operator names keep their sign characters.
    for said, want in (
        ("opkernels!Node::operator-+1a", "opkernels.dll!Node::operator-+0x1a"),
        ("opkernels!Node::operator--8", None),
        ("opkernels!Node::operator+", "opkernels.dll!Node::operator+"),
        ("opkernels!Node::operator-=", "opkernels.dll!Node::operator-="),
    ):
        monkeypatch.setattr(pykd, "findSymbol", lambda offset, showDisplacement=True, said=said: said)
        assert target.symbol_at(mod.base + 0x14B0) == want, said


def test_lm_symbol_states_are_read_without_loading_anything():
    from dumpkit.sources.pykd import _loaded_symbols

    lm = """start             end                 module name
00007ff6`1a2b0000 00007ff6`1a2d5000   python     (deferred)
00007ffa`3a550000 00007ffa`3a766000   ntdll      (pdb symbols)          c:\\sym\\ntdll.pdb\\1A2B\\ntdll.pdb
00007ffa`10000000 00007ffa`2c000000   _pywrap_tensorflow_internal M (private pdb symbols)  d:\\tf.pdb
00007ffa`30000000 00007ffa`30100000   cudart64_110   (export symbols)       cudart64_110.dll
77a50000 77bd0000   wow_ntdll  (no symbols)

Unloaded modules:
00007ffa`40000000 00007ffa`40010000   gone.dll
"""
    states = dict(_loaded_symbols(lm))
    assert states == {
        0x7FF61A2B0000: "deferred",
        0x7FFA3A550000: "pdb symbols",
        0x7FFA10000000: "private pdb symbols",
        0x7FFA30000000: "export symbols",
        0x77A50000: "no symbols",
    }


def test_dml_escaping(tfstack):
    assert dml_text('std::vector<int> & "x"') == "std::vector&lt;int&gt; &amp; &quot;x&quot;"
    assert dml_text("a\x1b[31mb\nc") == "a\ufffd[31mb c"
    assert link("~~[0x1a]s", "<x>") == '<link cmd="~~[0x1a]s">&lt;x&gt;</link>'


def test_only_the_pykd_source_imports_pykd():
    pattern = re.compile(r"^\s*(import\s+pykd\b|from\s+pykd\b)", re.M)
    offenders = [
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "dumpkit").rglob("*.py")
        if pattern.search(p.read_text(encoding="utf-8"))
    ]
    assert offenders == ["dumpkit/sources/pykd.py"]
    # ...and lazily: importing dumpkit (the pykd source included) does not import pykd.
    code = "import sys, dumpkit.engine, dumpkit.cli, dumpkit.sources.pykd; sys.exit(1 if 'pykd' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


def test_stand_in_covers_exactly_the_pykd_calls_dumpkit_makes():
    """Every pykd function the source, the script and the command's body call exists in the stand-in, and the
    stand-in offers nothing else (so it cannot hide a call real pykd 0.3 lacks)."""
    used = set()
    for path in (ROOT / "dumpkit" / "sources" / "pykd.py", SCRIPT, ROOT / "dumpkit" / "commands" / "tfstack.py"):
        text = path.read_text(encoding="utf-8")
        used |= set(re.findall(r"(?:self\._pykd|\bp|\b_pykd|\b_out)\.([A-Za-z_][A-Za-z0-9_]*)\b", text))
        used |= set(re.findall(r"(?<![.\w])pykd\.([A-Za-z_][A-Za-z0-9_]*)\(", text))  # the module, handed in
        used |= set(re.findall(r'getattr\((?:p|pykd_module|self\._pykd), "([A-Za-z]+)"', text))
    used -= {"add_argument"}  # argparse's parser, also named p
    # what only the engine route's session has (dumpkit.sources.dbgeng.EngineSession:
    # partial reads; Ctrl-Break is asked for with getattr, so pykd needs neither)
    from dumpkit.sources.dbgeng import EngineSession

    engine_only = {"readVirtual"}
    assert all(hasattr(EngineSession, n) for n in engine_only | {"interrupted"})
    used -= engine_only
    public = {
        n
        for n in vars(fake_pykd)
        if not n.startswith("_")
        and n
        not in {
            "annotations",
            "os",
            "Dict",
            "List",
            "Optional",
            "Tuple",
            "MinidumpTarget",
            "open_dump",
            "MemoryNotInDump",
            "version",
            "FixedFileInfo",
            "systemVersion",
            "exceptionInfo",
            "debugEvent",
            "eventType",
            "module",
            "stackFrame",
        }
    }  # types of what the used calls return
    assert used - public == set()
    assert public - used == set()


# ----------------------------------------------------------------------------- tfstack.js
JS = ROOT / "windbg_scripts" / "tfstack.js"

# Runs tfstack.js under node with a stand-in for WinDbg's `host` object; prints the
# debugger commands the alias executed and what it logged, as JSON.
_JS_HARNESS = r"""
const fs = require("fs"), vm = require("vm");
const [scriptPath, userVarsJson, argsJson] = process.argv.slice(1);  // node -e: no script name
const executed = [], logged = [];
const host = {
    namespace: {Debugger: {
        State: {UserVariables: JSON.parse(userVarsJson)},
        Utility: {Control: {ExecuteCommand(cmd) {
            executed.push(cmd);
            if (cmd === ".scriptlist") {
                return ["Command Loaded Scripts:", "    JavaScript script from 'C:\\dk\\windbg_scripts\\tfstack.js'"];
            }
            return ["output line"];
        }}},
    }},
    diagnostics: {debugLog(text) { logged.push(text); }},
    apiVersionSupport: function () {},
    functionAlias: function (fn, name) { this.fn = fn; this.name = name; },
};
const context = vm.createContext({host});
vm.runInContext(fs.readFileSync(scriptPath, "utf8"), context);
const alias = context.initializeScript().find(r => r.name === "tfstack");
alias.fn(...JSON.parse(argsJson));
console.log(JSON.stringify({executed, logged}));
"""


def _run_tfstack_js(user_vars: dict, *args: str) -> dict:
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.skip("node is not installed")
    proc = subprocess.run(
        [node, "-e", _JS_HARNESS, str(JS), json.dumps(user_vars), json.dumps(list(args))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_tfstack_js_names_the_python_that_has_pykd():
    # pykd-ext without -X.Y runs the highest Python 3 installed, which has no pykd (0.3.4.15
    # stops at 3.9): the alias must ask for 3.9 unless the user chose another.
    out = _run_tfstack_js({}, "--all")
    assert out["executed"][-1] == r"!py -3.9 C:\dk\windbg_scripts\tfstack.py --plain --all"
    assert out["logged"] == ["output line\n"]
    out = _run_tfstack_js({"tfstackPython": "3.8", "tfstackDir": "D:\\my tools\\"})
    assert out["executed"] == [r'!py -3.8 "D:\my tools\tfstack.py" --plain']
    out = _run_tfstack_js({"tfstackPython": ""})
    assert out["executed"][-1] == r"!py C:\dk\windbg_scripts\tfstack.py --plain"
    out = _run_tfstack_js({"tfstackPython": "3.9; .kill"})
    assert not any(c.startswith("!py") for c in out["executed"])
    assert out["logged"][0].startswith("tfstack: error: @$tfstackPython must look like 3.9")


def test_tfstack_py_first_line_selects_python_39():
    # pykd-ext's `!py` reads `#! pythonX.Y` from the first line when no version is given.
    first = SCRIPT.read_bytes().split(b"\n", 1)[0]
    assert first == b"#! python3.9"


@pytest.mark.skipif(
    importlib.util.find_spec("pykd") is not None,
    reason="pykd is installed in this Python (the py38 lane's, as in WinDbg's): this is the case of a Python without it",
)
def test_script_runs_the_way_pykd_ext_runs_it(tmp_path):
    """pykd-ext (Python 3) executes the script's text in __main__ with PyRun_String: no
    __file__, sys.argv[0] = the script's path. Without dumpkit installed (python -S), the
    script finds its checkout from argv[0], then reports the missing pykd in one line."""
    code = (
        "import sys; path = sys.argv[1]; sys.argv = [path, '--json']; "
        "exec(compile(open(path).read(), '<string>', 'exec'), sys.modules['__main__'].__dict__); "
        "import dumpkit; print(dumpkit.__file__)"
    )
    proc = subprocess.run(
        [sys.executable, "-S", "-c", code, str(SCRIPT)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert Path(proc.stdout.strip()) == ROOT / "dumpkit" / "__init__.py"
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("tfstack: error: pykd is not installed in this Python")
    assert "!py -3.9" in proc.stderr


# ----------------------------------------------------------------------------- the real engine's ways
# Behaviour first seen with the real pykd + dbgeng (tests/windbg_real) and modelled in the stand-in.


def test_images_the_debugger_maps_from_files_are_not_taken_for_dump_memory(tfstack, pykd, tmp_path_factory):
    """With the binaries on `.exepath`, dbgeng maps every module image it finds, so its
    header reads as if the dump held it. Taken as a memory image it has no COFF symbols
    (tfhost.exe!func_16b0 instead of run_scenario) and its data sections hold the file's
    initial values. The target must hide what the dump does not hold and name frames as
    `dumpkit analyze` does, with no --image-path: the debugger's `.exepath` is searched."""
    from dumpkit.sources.pykd import PykdTarget

    dump = SAMPLES / "recursion_cycle3.dmp"
    pykd._open_dump_for_tests(str(dump))
    pykd.dbgCommand(f".exepath {SAMPLE_BIN}")
    pykd.dbgCommand(".reload")
    raw = pykd._s().target
    exe = next(m for m in raw.modules if m.name == "tfhost.exe")
    assert bytes(pykd.loadBytes(exe.base, 2)) == b"MZ"  # dbgeng serves the file's header
    with pytest.raises(MemoryNotInDump):
        raw.read(exe.base, 2)  # which the dump does not hold
    target = PykdTarget(pykd)
    assert exe.base in target.mapped_image_files
    with pytest.raises(MemoryNotInDump):
        target.read(exe.base, 2)
    held = next((a, b) for a, b in raw.memory_ranges() if exe.contains(a))  # .xdata Wine's dbghelp touched
    assert target.read(held[0], held[1] - held[0]) == raw.read(held[0], held[1] - held[0])
    assert any("from files" in fact for fact in target.debugger_facts())

    cli = _cli_json(dump)
    pykd._open_dump_for_tests(str(dump))
    pykd.dbgCommand(f".exepath {SAMPLE_BIN}")
    pykd.dbgCommand(".reload")
    assert tfstack.main(["--json"]) in (0, 1)
    windbg = json.loads(pykd._output_for_tests())
    crash = next(t for t in windbg["threads"] if t["is_crashing"])
    assert "tfhost.exe!run_scenario" in crash["cycles"][0]["entry_path"]
    assert _findings(windbg)["frames"] == _findings(cli)["frames"]
    sources = {m["name"]: m["image_source"] for m in windbg["modules"]}
    assert not sources["tfhost.exe"].startswith("dump-memory")


def test_frame_links_follow_the_debuggers_own_frame_numbers(tfstack, pykd):
    """`.frame N` selects the debugger's frame N. Where its unwind differs from dumpkit's
    (dbgeng cannot unwind out of ___chkstk_ms on big_frame.dmp: its frame 1 has another
    Child-SP), a link to dumpkit's frame must not show another frame: it becomes plain
    text; frames both have keep their links, under the debugger's number."""
    dump = SAMPLES / "big_frame.dmp"
    pykd._open_dump_for_tests(str(dump))
    tid = pykd._s().target.exception.thread_id
    doc = _cli_json(dump)
    frames = next(t for t in doc["threads"] if t["is_crashing"])["frames"]
    sps = [int(f["sp"], 16) for f in frames]
    # dbgeng's trace as the real engine gives it on this dump: frame 0 right, then lost.
    pykd._set_stack_for_tests(tid, [sps[0], sps[0] + 8, sps[0] + 16], exception_context=True)
    assert tfstack.main([]) == 0
    dml = pykd._output_for_tests(dml=True)
    assert f'<link cmd="~~[0x{tid:x}]s; .ecxr; .frame 0x0">00</link>' in dml
    assert ".ecxr; .frame 0x1" not in dml  # dbgeng's frame 1 is somewhere else
    assert re.search(r"^\s+01\s+\S", dml, re.M)  # the row is still there, without a link
    # A debugger whose trace matches keeps every link; numbers above 0xffff never get one.
    pykd._open_dump_for_tests(str(dump))
    pykd._set_stack_for_tests(tid, sps, exception_context=True)
    assert tfstack.main([]) == 0
    dml = pykd._output_for_tests(dml=True)
    for f in frames:
        assert f'.ecxr; .frame 0x{f["index"]:x}">' in dml


def test_a_dump_without_an_exception_record_has_no_crash(pykd, tmp_path):
    """dbgeng makes up a break-instruction event (0x80000003 at address 0) for a dump that
    recorded no exception; the target must not report it as the crash."""
    import struct

    from dumpkit.sources.pykd import PykdTarget

    data = bytearray((SAMPLES / "null_deref.dmp").read_bytes())
    count, rva = struct.unpack_from("<II", data, 8)
    for i in range(count):
        if struct.unpack_from("<I", data, rva + 12 * i)[0] == 6:  # ExceptionStream -> UnusedStream
            struct.pack_into("<I", data, rva + 12 * i, 0)
    dump = tmp_path / "no_exception.dmp"
    dump.write_bytes(bytes(data))
    pykd._open_dump_for_tests(str(dump))
    assert pykd.getLastException().exceptionCode == 0x80000003  # what dbgeng says
    target = PykdTarget(pykd)
    assert target.exception is None
    assert _cli_json(dump)["crash"] is None


def test_rejected_commands_raise_as_in_the_real_engine(pykd):
    pykd._open_dump_for_tests(str(SAMPLES / "null_deref.dmp"))
    with pytest.raises(pykd.DbgException, match="0x80040205"):
        pykd.dbgCommand("no_such_command")
    assert pykd.dbgCommand("!cpuid") is None  # prints nothing on a user-mode dump
    assert pykd.dbgCommand(".cxr") is None  # nothing to reset


# Output of the real engine (dbgeng 10.0 in pykd 0.3.4.15, under Wine) on recursion_cycle3.dmp
# with `.exepath` set, cut to a few lines: what the parsers must read.
REAL_LMV = """start             end                 module name
00000000`7b600000 00000000`7b795000   kernel32   (deferred)
    Mapped memory image file: C:\\windows\\system32\\kernel32.dll
    Image path: C:\\windows\\system32\\kernel32.dll
    Image name: kernel32.dll
    Timestamp:        Sat Feb 18 22:16:11 2023 (63F14E2B)
00000001`40000000 00000001`4004a000   tfhost     (deferred)
    Mapped memory image file: z:\\work\\wt-windbg\\sample_dumps\\bin\\tfhost.exe
    Image path: Z:\\work\\nope\\sample_dumps\\bin\\tfhost.exe
    Image name: tfhost.exe
00000002`c7470000 00000002`c781a000   ucrtbase   (deferred)
    Image path: C:\\windows\\system32\\ucrtbase.dll
    Image name: ucrtbase.dll
"""
REAL_DUMPDEBUG = """----- User Mini Dump Analysis

MINIDUMP_HEADER:
Version         A793 (0)
NumberOfStreams 8
Flags           0
                0000 MiniDumpNormal

Streams:
Stream 0: type SystemInfoStream (7), size 00000038, RVA 00000080
  ProcessorArchitecture   0009 (PROCESSOR_ARCHITECTURE_AMD64)
  ProcessorLevel          0019
  ProcessorRevision       0101
  NumberOfProcessors      02
Stream 2: type ModuleListStream (4), size 000003D0, RVA 00001A25
  9 modules
  RVA 00001A29, 00000001`40000000 - 00000001`4004a000: 'Z:\\work\\main\\sample_dumps\\bin\\tfhost.exe', 0
Stream 4: type MemoryListStream (5), size 0001C5C4, RVA 000025A7
  7260 memory ranges
  range#    RVA      Address             Size
       0 0001EB6B    00000000`0021f9b0   00000000`00000650
       1 0001F1BB    00000001`7000eb64   00000000`00000100
      10 0011E633    00000001`4000f000   00000000`00000004
      11 0011E637    00000001`4000f004   00000000`00000006
Stream 5: type MiscInfoStream (15), size 00000018, RVA 00132119
Stream 6: type Memory64ListStream (9), size 000003C0, RVA 00002F8D
  59 memory ranges
  RVA 0x3CCD BaseRva
  range#    RVA      Address             Size
       0 00003CCD    00000000`00010000   00000000`00002000
  Total memory: 1474000
Stream 7: type UnusedStream (0), size 00000000, RVA 00000000
"""


def test_debugger_outputs_are_parsed_as_the_real_engine_prints_them():
    from dumpkit.sources.pykd import _exe_path, _mapped_images, _parse_dumpdebug
    from dumpkit.spans import gaps as _gaps
    from dumpkit.spans import join as _merge

    assert _mapped_images(REAL_LMV) == {
        0x7B600000: "C:\\windows\\system32\\kernel32.dll",
        0x140000000: "z:\\work\\wt-windbg\\sample_dumps\\bin\\tfhost.exe",
    }
    ranges, fields, streams, _counters = _parse_dumpdebug(REAL_DUMPDEBUG)
    assert ranges == [
        (0x10000, 0x12000),
        (0x21F9B0, 0x220000),
        (0x14000F000, 0x14000F004),
        (0x14000F004, 0x14000F00A),
        (0x17000EB64, 0x17000EC64),
    ]
    assert fields == {"ProcessorLevel": 0x19, "ProcessorRevision": 0x101}
    assert "MemoryListStream" in streams and "ExceptionStream" not in streams
    assert _exe_path(
        "Executable image search path is: Z:\\bin;srv*c:\\sym*https://x\nExpanded Executable image search path is: z:\\bin\n"
    ) == ["Z:\\bin", "srv*c:\\sym*https://x"]
    assert _exe_path("Executable image search path is: \n") == []
    held = _merge(ranges)  # touching ranges join, as dbgeng reads them
    assert (0x14000F000, 0x14000F00A) in held
    assert _gaps(0x14000E000, 0x140010000, held) == [(0x14000E000, 0x14000F000), (0x14000F00A, 0x140010000)]


def test_tfstack_says_why_a_process_ended_itself(tfstack, pykd, tmp_path_factory):
    """A dump stopped at ntdll!RtlExitUserProcess (sample_dumps/endings: Py_FatalError under
    Wine) reads in the debugger as in `analyze`: the Fatal Python error's own words, how it
    ended, where the words were read (issue #41 item 7). Needs the interpreter's image, for
    the message's string, and Wine's DLLs, for the way out's names."""
    wine_dlls = Path("/usr/lib/x86_64-linux-gnu/wine/x86_64-windows")
    python = ROOT.parent / "shared" / "winpython" / "cpython-3.11-amd64"
    if not wine_dlls.is_dir() or not python.is_dir():
        pytest.skip("needs ../shared/winpython and Wine's own DLLs (Debian's wine64)")
    dump = _dump_file("endings/fatal_gil_py311.dmp.xz", tmp_path_factory)
    pykd._open_dump_for_tests(str(dump))
    rc = tfstack.main(["--image-path", str(wine_dlls), "--image-path", str(python)])
    assert rc in (0, 1)
    dml = pykd._output_for_tests(dml=True)
    message = "Fatal Python error: PyThreadState_Get: the function must be called with the GIL held"
    assert dml_text(message, 2000) in dml
    assert "Reason" in dml and "Ended" in dml and "exit code" in dml
    assert "breakpoint instruction" not in dml
