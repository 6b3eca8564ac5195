"""`!tfstack` on Microsoft's own debugger engine: windbg_scripts/tfstack.py run through the
real pykd 0.3.4.15 (its dbgeng.dll) in a genuine Windows CPython 3.8 under Wine, on every
sample dump, against `dumpkit analyze --format json` run natively on the same dump.

The debugger is set up the way a WinDbg user would: the dump opened (`pykd.loadDump`),
the folders of the crashed program's binaries on the executable image path (`.exepath` +
`.reload`), so dbgeng maps the images it finds into the dump's address space, as it does
for every module whose file it can reach. `!tfstack` gets no `--image-path`: what it knows
of the images it learns from the debugger. The CLI gets the same folders as `--image-path`
(sample_dumps/bin; for sample_dumps/python, ../shared/winpython's CPython and
sample_dumps/bin/wine).
Both must tell the same story: verdict, crash, cycles, findings, every thread's frames
(SP, IP, module, size, how found, name), the Python stacks. What the debugger does not
expose (the dump's stream list and header, Wine's marker stream, CPU feature bits,
context flags) is left out of the comparison; windbg_scripts/README.md lists it.

Every DML link `!tfstack` prints is run through `pykd.dbgCommand` afterwards: the engine
must accept it, and a `.frame N` link must land on the frame dumpkit numbered N (same
Child-SP as dumpkit's frame N).

Build, cache and skip rules: tests/support/wine. Runs only when asked for
(conftest.py): `python -m pytest -q tests/windbg_real`.
"""

from __future__ import annotations

import json
import re
import struct
import sys
from pathlib import Path
from typing import Dict

import pytest

from tests.support.samples import SAMPLE_BIN, SAMPLES, real_dump, run_cli
from tests.support import wine as lane
from tests.support.wine import story

_CACHE: Dict[str, dict] = {}


@pytest.fixture(scope="session")
def env():
    try:
        built = lane.build(log=lambda line: print(line, file=sys.stderr))
    except lane.Unavailable as e:
        pytest.skip(f"real-pykd lane unavailable here: {e}")
    built.serve()  # a Wine run then returns when it exits (lane.Env.serve)
    yield built
    built.stop()


@pytest.fixture(scope="session")
def dumps_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("windbg-lane-dumps")


def _session(env: lane.Env, name: str, scratch: Path) -> dict:
    """The CLI's report and the debugger's runs on one dump, once per test session."""
    if name in _CACHE:
        return _CACHE[name]
    dump = story.dump_file(name, scratch)
    dirs = story.image_dirs(name)
    proc = story.cli(env, ["analyze", str(dump), "--format", "json"], dirs)
    debugger = env.debugger(
        dump,
        runs=[{"args": ["--json"]}, {"args": ["--all"], "check_links": True}],
        setup=[".exepath " + ";".join(lane.windows_path(d) for d in dirs), ".reload"],
        facts=["lmv"],
        timeout=900,
    )
    for run in debugger["runs"]:
        assert run["error"] is None, run["error"]
    _CACHE[name] = {"cli": json.loads(proc.stdout), "debugger": debugger}
    return _CACHE[name]


def _tfstack_json(session: dict) -> dict:
    out = session["debugger"]["runs"][0]["output"]
    assert out.lstrip().startswith("{"), out[:2000]  # an error line instead of a report
    return json.loads(out)


@pytest.mark.parametrize("name", story.sample_dumps())
def test_real_engine_tells_the_same_story_as_the_cli(name, env, dumps_dir):
    session = _session(env, name, dumps_dir)
    full = "_full" in name or ".trimmed." in name  # full-memory dumps hold the TEBs
    cli, windbg = story.story_of(session["cli"], full), story.story_of(_tfstack_json(session), full)
    assert windbg["verdict"] == cli["verdict"]
    assert windbg["crash"] == cli["crash"]
    assert windbg["findings"] == cli["findings"]
    assert windbg["frame_sizes"] == cli["frame_sizes"]
    assert [t["tid"] for t in windbg["threads"]] == [t["tid"] for t in cli["threads"]]
    parked = story.parked_threads(session["cli"])
    for w, c in zip(windbg["threads"], cli["threads"]):
        if c["tid"] in parked:
            # The thread list gives this thread an SP outside its own stack (Wine's
            # in-process dumps give the writer's thread the crash context). The file
            # reader knows the thread's stack and stops there; the debugger has only the
            # SP and walks on from it, as its `k` does (windbg_scripts/README.md).
            first = [f[:4] + f[5:] for f in (w["frames"][0], c["frames"][0])]  # its size is where the walks part
            assert first[0] == first[1], f"thread {c['tid']}"
            continue
        assert w == c, f"thread {c['tid']}"
    assert windbg["python"] == cli["python"]
    assert windbg["modules"] == cli["modules"]
    assert any(t["crashing"] and t["frames"] for t in cli["threads"]), "the crashing thread was walked"


def _mapped(session: dict) -> Dict[str, str]:
    """module file name -> the file dbgeng maps its image from (`lmv`)."""
    out, name = {}, None
    for line in session["debugger"]["facts"][0]["output"].splitlines():
        if not line.startswith(" "):
            name = None
        m = re.match(r"^\s+Image name:\s*(\S+)", line)
        if m:
            name = m.group(1).lower()
        m = re.match(r"^\s+Mapped memory image file:\s*(.+?)\s*$", line)
        if m:
            out["pending"] = m.group(1)
        if name and "pending" in out:
            out[name] = out.pop("pending")
    out.pop("pending", None)
    return out


@pytest.mark.parametrize("name", story.sample_dumps())
def test_images_the_debugger_maps_are_read_from_their_files(name, env, dumps_dir):
    """dbgeng serves a mapped image's bytes from the file, so the whole image looks
    captured; read as memory it loses the COFF symbol table (frames named func_16b0
    instead of run_scenario). The pykd source must take such images from files too."""
    session = _session(env, name, dumps_dir)
    mapped = _mapped(session)
    cli_sources = {m["name"].lower(): m["image_source"] or "" for m in session["cli"]["modules"]}
    exe = next(name for name in cli_sources if name.endswith(".exe"))
    if not cli_sources[exe].startswith("dump-memory"):  # a full dump holds the image itself
        assert exe in mapped, f"dbgeng did not map {exe} from .exepath: {sorted(mapped)}"
    assert mapped, "dbgeng mapped no image: nothing here tests reading them from files"
    for m in _tfstack_json(session)["modules"]:
        key = m["name"].lower()
        if key in mapped and not cli_sources[key].startswith("dump-memory"):
            assert not (m["image_source"] or "").startswith("dump-memory"), (key, m["image_source"])
    facts = session["debugger"]["runs"][1]["output"]
    assert "From the debugger" in facts and "module image(s) from files" in facts


@pytest.mark.parametrize("name", story.sample_dumps())
def test_every_dml_link_runs_in_the_real_engine(name, env, dumps_dir):
    session = _session(env, name, dumps_dir)
    links = session["debugger"]["runs"][1]["links"]
    assert links, "the DML output has links"
    doc = _tfstack_json(session)
    frames = {t["tid"]: {f["index"]: f for f in t["frames"]} for t in doc["threads"]}
    checked = 0
    for link in links:
        command = link["command"]
        assert link["raised"] is None, f"{command!r}: {link['raised']}"
        frame = story.FRAME_LINK.match(command)
        if frame:
            # the label is dumpkit's frame number; the command the debugger's
            tid, index = int(frame.group(1), 16), int(frame.group(2), 16)
            line = story.frame_line(link["output"], index)
            assert line is not None, f"{command!r} did not select frame {index:#x}: {link['output']!r}"
            ours = frames[tid].get(int(link["label"], 16))
            if ours is not None:
                child_sp = int(line.split()[1].replace("`", ""), 16)
                assert child_sp == int(ours["sp"], 16), f"{command!r}: dbgeng's frame is at {line!r}"
                checked += 1
            continue
        code = story.CODE_LINK.match(command)
        if code:
            # dbgeng disassembles from that address: its first instruction line starts with it
            address = int(code.group(1), 16)
            shown = (f"{address >> 32:08x}`{address & 0xFFFFFFFF:08x}", f"{address:08x}")
            assert any(s in (link["output"] or "") for s in shown), f"{command!r}: {link['output']!r}"
            continue
        if command == ".ecxr":  # the crash site's "exception context" link
            assert story.REGISTERS.search(link["output"] or ""), f"{command!r}: {link['output']!r}"
            continue
        thread = story.THREAD_LINK.match(command)
        assert thread, f"a link this test does not know: {command!r}"
        assert link["output"], f"{command!r} printed nothing"
    assert checked, "no frame link was checked against dumpkit's frames"


def test_the_windbg_side_runs_on_python_38(env, dumps_dir):
    """pykd exists for CPython <= 3.9 only: the WinDbg side of dumpkit must import and
    run there (this lane's interpreter is the PSF's 3.8)."""
    session = _session(env, story.sample_dumps()[0], dumps_dir)
    assert session["debugger"]["python"].startswith("3.8.")
    assert session["debugger"]["pykd"].startswith("0.3.4.15")


# ----------------------------------------------------------------- PDBs (issue #15 item 6)
PDB_DUMPS = ("pdb_static_cycle.dmp", "pdb_static_fastfail.dmp")


def _names(doc: dict) -> Dict[tuple, str]:
    """(thread, frame number) -> the frame's function name, without its offset."""
    return {(t["tid"], f["index"]): (f["symbol"] or "").split("+", 1)[0] for t in doc["threads"] for f in t["frames"]}


@pytest.mark.parametrize("name", PDB_DUMPS)
def test_with_the_same_pdbs_the_debugger_and_the_cli_name_the_same_functions(name, env):
    """The sample's PDBs next to its images: the debugger gets them through `.sympath` (and
    the images through `.exepath`), `!tfstack` uses the debugger's names; `dumpkit stack`
    reads the same PDBs itself. The static functions only a PDB names must come out the
    same from both, frame for frame."""
    pdb_dir = SAMPLE_BIN / "pdb"
    ours = json.loads(story.cli(env, ["stack", str(SAMPLES / name), "--all", "--json"], [pdb_dir, SAMPLE_BIN]).stdout)
    folders = ";".join(lane.windows_path(d) for d in (pdb_dir, SAMPLE_BIN))
    debugger = env.debugger(
        SAMPLES / name,
        runs=[{"args": ["--json", "--all"]}],
        setup=[".exepath " + folders, ".sympath " + lane.windows_path(pdb_dir), ".reload"],
        facts=["lm", "x pdbkernels!parse_*", "x pdbkernels!shape_check_failed"],
        timeout=900,
    )
    run = debugger["runs"][0]
    assert run["error"] is None, run["error"]
    facts = "\n".join((f["output"] or f["raised"] or "") for f in debugger["facts"])
    assert "(private pdb symbols)" in facts or "(pdb symbols)" in facts, f"dbgeng loaded no PDB:\n{facts}"
    # !tfstack --json is analyze's report (a long stack's head and tail); `stack --json` has
    # every frame: each frame the debugger's report shows is compared with the CLI's.
    theirs = _names(json.loads(run["output"]))
    names = _names(ours)
    assert theirs and set(theirs) <= set(names)
    # the PDB's static names are there at all (else this compares func_<rva> with itself)
    assert any(n.startswith("pdbkernels.dll!") and "func_" not in n for n in theirs.values())
    assert theirs == {k: names[k] for k in theirs}


# ------------------------------------------------- memory counters (.dumpdebug, real dumps)


def test_the_real_engine_gives_the_memory_the_cli_reads_from_the_file(env, tmp_path):
    """A copy of a real Windows dump (node-minidump's electron crash) with its machine at the
    commit limit: `!tfstack` on Microsoft's engine reads the counters from `.dumpdebug` and
    tells the CLI's memory record and headline (tests/analysis/test_memory_use.py makes the
    same copy)."""
    src = real_dump("node-minidump/windows.dmp")
    data = bytearray(src.read_bytes())
    _sig, _ver, count, directory = struct.unpack_from("<IIII", data)
    for i in range(count):
        kind, _size, rva = struct.unpack_from("<III", data, directory + 12 * i)
        if kind == 21:  # SystemMemoryInfo: the commit charge at 99.5% of the limit
            available, _committed, limit, _peak = struct.unpack_from("<4Q", data, rva + 116)
            struct.pack_into("<4Q", data, rva + 116, available, limit - limit // 200, limit, limit)
    dump = tmp_path / "memory-at-limit.dmp"
    dump.write_bytes(bytes(data))
    cli = json.loads(run_cli("analyze", dump, "--format", "json").stdout)
    debugger = env.debugger(dump, runs=[{"args": ["--json"]}], timeout=600)
    run = debugger["runs"][0]
    assert run["error"] is None, run["error"]
    windbg = json.loads(run["output"])
    assert windbg["environment"]["memory"] == cli["environment"]["memory"]
    assert windbg["environment"]["memory"]["limits_reached"] == ["commit_limit"]
    assert windbg["verdict"]["headline"] == cli["verdict"]["headline"]
    assert cli["verdict"]["headline"].endswith(", while the machine's commit charge was at 99% of its limit")
