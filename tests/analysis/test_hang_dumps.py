"""Who waits for whom, on real dumps of stuck processes (issue #43): sample_dumps/hangs,
python.org's CPython 3.8-3.13 under Wine, each program stopped for real (two threads taking
two locks in opposite orders, a ctypes.PyDLL call that keeps the GIL while it waits, a
consumer of a queue nobody feeds, two threads entering two critical sections of a DLL in
opposite orders), dumped while it ran by `dumpkit capture --attach PID --now` (normal and
full memory) or by a plain MiniDumpWriteDump (as Task Manager and procdump write them).
What each thread waited on, and who held it, is what the program itself said a moment
before the dump (the manifest's `threads`, from its marker line).

The tests read the bundles in sample_dumps/bundles (the dump with the memory and image
pages the analysis reads), so they run on any machine; where the raw dump's images are at
hand (python.org's interpreters under ../shared/winpython and Wine's
own DLLs), the raw dumps are checked too."""

from __future__ import annotations

import json
import lzma
from functools import lru_cache
from pathlib import Path
from typing import Callable, Dict, List

import pytest

from dumpkit.analysis.model import Report, VerdictKind, WaitKind
from dumpkit.engine import Options, analyze
from dumpkit.sources.bundle import open_bundle
from dumpkit.sources.minidump import open_dump_bytes
from tests.support.samples import SAMPLES

HANGS = SAMPLES / "hangs"
BUNDLES = SAMPLES / "bundles"
WINE_DLLS = Path("/usr/lib/x86_64-linux-gnu/wine/x86_64-windows")
WINPYTHON = SAMPLES.parent.parent / "shared" / "winpython"

MANIFEST: Dict[str, dict] = (
    {d["name"]: d for d in json.loads((HANGS / "manifest.json").read_text())["dumps"]}
    if (HANGS / "manifest.json").exists()
    else {}
)

# the program's words for a wait -> what dumpkit must call it
KIND = {
    "lock": WaitKind.PYTHON_LOCK,
    "join": WaitKind.PYTHON_LOCK,
    "queue": WaitKind.PYTHON_LOCK,
    "critical_section": WaitKind.CRITICAL_SECTION,
    "gil": WaitKind.GIL,
    "native_wait": WaitKind.HANDLE,
}


def _bundle_name(name: str) -> str:
    return f"hang_{name}"


@lru_cache(maxsize=None)
def _report(name: str, source: str) -> Report:
    if source == "bundle":
        path = BUNDLES / f"{_bundle_name(name)}.dkb"
        if not path.exists():
            pytest.skip(f"{path} is not here")
        target = open_bundle(str(path))
        options = Options(use_recorded_paths=False)
    elif source == "alone":
        # no image at all, not even the interpreter's: what capture kept of them is all
        path = HANGS / MANIFEST[name]["file"]
        target = open_dump_bytes(lzma.decompress(path.read_bytes()), path.name)
        options = Options(use_recorded_paths=False)
    else:
        # "raw": with every image; "raw, no system": as on a machine without the system's DLLs
        # (the interpreter's and the program's own given, Wine's ntdll.dll, kernelbase.dll... not)
        path = HANGS / MANIFEST[name]["file"]
        interpreter = WINPYTHON / f"cpython-{MANIFEST[name]['python_minor']}-amd64"
        wanted = (interpreter, HANGS / "bin") if source == "raw, no system" else (WINE_DLLS, interpreter, HANGS / "bin")
        folders = [p for p in wanted if p.is_dir()]
        if not path.exists() or len(folders) < len(wanted):
            pytest.skip(f"{path.name}: the raw dump or its images (Wine's DLLs, the interpreters) are not here")
        target = open_dump_bytes(lzma.decompress(path.read_bytes()), path.name)
        options = Options(image_paths=tuple(str(p) for p in folders), use_recorded_paths=False)
    try:
        return analyze(target, options, problems=target.soft_errors).report
    finally:
        target.close()


def _bundled() -> List[str]:
    return sorted(n for n in MANIFEST if (BUNDLES / f"{_bundle_name(n)}.dkb").exists())


def _walk_tables_kept(fact: dict) -> bool:
    """A dump that holds ntdll.dll's unwind tables (capture keeps what a walk reads of the
    modules on the threads' stacks, capture/walkdata.py): it is read with no image at all."""
    return "ntdll.dll" in fact.get("unwind_tables_in_dump", ())


def _cases(where: Callable[[dict], bool] = lambda fact: True) -> list:
    """(dump, source) of the dumps whose manifest entry `where` takes: every bundled dump
    from its bundle, every dump that holds the walk tables alone (no image at all), and every
    dump raw (skipped where its images are not at hand; in the full suite only, the fast tier
    reads the bundles)."""
    names = [n for n in sorted(MANIFEST) if where(MANIFEST[n])]
    bundled = set(_bundled())
    alone = [(n, "alone") for n in names if _walk_tables_kept(MANIFEST[n])]
    raw = [pytest.param(n, "raw", marks=pytest.mark.slow, id=f"{n}-raw") for n in names]
    return [(n, "bundle") for n in names if n in bundled] + alone + raw


def _tids(fact: dict) -> Dict[str, int]:
    return {t["name"]: t["tid"] for t in fact["threads"]}


def _python_aware(fact: dict) -> bool:
    """A dump that holds the objects waited on: full memory, or capture's (it keeps what
    each stack points to); a plain MiniDumpNormal keeps the stacks only."""
    return fact["dump_type"] == "full" or fact["tool"] == "capture"


@pytest.mark.parametrize("name", [n for n in sorted(MANIFEST) if _walk_tables_kept(MANIFEST[n])])
def test_a_dump_that_kept_the_walk_tables_reads_with_no_image_as_with_them(name: str) -> None:
    """Far from the machine that wrote it, with no ntdll.dll, kernelbase.dll or python3X.dll
    at hand: every wait named, and the same waits, owners and headline as the bundle (the dump
    with the pages of the images the analysis read)."""
    alone, bundled = _report(name, "alone"), _report(name, "bundle")
    assert alone.waits and all(not w.unnamed_in for w in alone.waits), alone.waits
    assert [(w.tid, w.kind, w.what, w.obj, w.owner) for w in alone.waits] == [
        (w.tid, w.kind, w.what, w.obj, w.owner) for w in bundled.waits
    ]
    assert alone.verdict.headline == bundled.verdict.headline


def test_a_committed_hang_dump_holds_the_walk_tables() -> None:
    if not MANIFEST:
        pytest.skip("sample_dumps/hangs is not here")
    assert any(_walk_tables_kept(fact) for fact in MANIFEST.values())


def test_the_hang_dumps_are_bundled_for_every_scenario() -> None:
    if not MANIFEST:
        pytest.skip("sample_dumps/hangs is not here")
    scenarios = {MANIFEST[n]["scenario"] for n in _bundled()}
    assert scenarios == {d["scenario"] for d in MANIFEST.values()}


@pytest.mark.parametrize("name,source", _cases())
def test_each_thread_waits_on_what_the_program_said(name: str, source: str) -> None:
    fact = MANIFEST[name]
    report = _report(name, source)
    waits = {w.tid: w for w in report.waits}
    for thread in fact["threads"]:
        said = thread["waits_on"]["kind"]
        assert thread["tid"] in waits, f"{thread['name']} ({thread['tid']}): no wait reported"
        assert waits[thread["tid"]].kind is KIND[said], (thread["name"], said, waits[thread["tid"]])
        if said == "queue":
            assert "queue.Queue" in waits[thread["tid"]].what
        if said == "join":
            assert (waits[thread["tid"]].python_line or "").endswith("calling threading.join") or not _python_aware(
                fact
            )


@pytest.mark.parametrize("name,source", _cases())
def test_an_owner_named_is_the_owner(name: str, source: str) -> None:
    """Never a wrong owner: where dumpkit names who holds what a thread waits on, it is the
    thread the program said holds it."""
    fact = MANIFEST[name]
    tids = _tids(fact)
    report = _report(name, source)
    waits = {w.tid: w for w in report.waits}
    for thread in fact["threads"]:
        holder = thread["waits_on"].get("held_by")
        w = waits.get(thread["tid"])
        if w is not None and w.owner is not None:
            assert holder is not None and w.owner == tids[holder], (thread["name"], w)


@pytest.mark.parametrize("name,source", _cases(lambda fact: bool(fact.get("deadlock"))))
def test_a_deadlock_is_the_headline_with_both_lines(name: str, source: str) -> None:
    fact = MANIFEST[name]
    report = _report(name, source)
    cycle = {_tids(fact)[n] for n in fact["deadlock"]}
    if not _python_aware(fact):
        # a plain MiniDumpNormal holds neither the locks' owners nor the Python stacks:
        # dumpkit says what each thread waits on, claims no deadlock, and says what would tell
        assert report.deadlocks == ()
        assert report.verdict.kind is VerdictKind.NO_EXCEPTION
        assert any("full-memory dump" in step for step in report.verdict.next_steps)
        return
    assert [set(d.threads) for d in report.deadlocks] == [cycle]
    assert report.verdict.kind is VerdictKind.DEADLOCK
    headline = report.verdict.headline
    assert headline.startswith("Deadlock: ")
    for thread in fact["threads"]:
        if thread["tid"] in cycle:
            function, _file, line = thread["python_frames"][-1]
            assert f"{function} (" in headline and f":{line})" in headline, (function, line, headline)
    assert report.signature is not None and report.signature.kind == "DEADLOCK"


@pytest.mark.parametrize("name,source", _cases(lambda fact: fact["scenario"] == "gil_held"))
def test_the_gil_holder_and_its_native_call(name: str, source: str) -> None:
    fact = MANIFEST[name]
    report = _report(name, source)
    holder = _tids(fact)[fact["gil"]["ground_truth"]["held_by"]]
    assert report.verdict.kind is VerdictKind.GIL_HELD
    headline = report.verdict.headline
    # a full dump's heap has the threads' names, and today's capture keeps the name objects
    # the stacks point to; a name given must be the program's
    named = {t.tid: t.name for t in report.threads}.get(holder)
    assert named in (("device",) if fact["dump_type"] == "full" else ("device", None))
    shown = f' "{named}"' if named else ""
    assert headline.startswith(f"Thread {holder}{shown} at wait_for_device (")
    assert "ctypes" in headline and "holds the GIL" in headline
    waiting = len(fact["gil"]["ground_truth"]["waiting"])
    assert f"{waiting} threads wait for the GIL" in headline


def test_one_signature_per_deadlock_across_pythons_and_dump_kinds() -> None:
    """Triage groups hang dumps by what they wait on: the same two lines, one group, on
    every Python and whichever way the dump was written."""
    names = [n for n in _bundled() if MANIFEST[n]["scenario"] == "lock_deadlock" and _python_aware(MANIFEST[n])]
    if len(names) < 2:
        pytest.skip("fewer than two lock_deadlock bundles")
    signatures = {_report(n, "bundle").signature.text for n in names}
    assert signatures == {"DEADLOCK | read_catalog (lock_deadlock.py:60) | update_index (lock_deadlock.py:42)"}


@pytest.mark.parametrize("name,source", _cases())
def test_threads_are_named_as_the_program_named_them(name: str, source: str) -> None:
    """threading.Thread names, from the interpreter's memory: every thread of a full dump,
    and never a wrong one where the heap is only partly there."""
    fact = MANIFEST[name]
    report = _report(name, source)
    named = {t.tid: t.name for t in report.threads}
    for thread in fact["threads"]:
        if fact["dump_type"] == "full":
            assert named.get(thread["tid"]) == thread["name"]
        elif named.get(thread["tid"]) is not None:
            assert named[thread["tid"]] == thread["name"]
    if fact["dump_type"] == "full" and report.deadlocks:
        for thread in fact["threads"]:
            if thread["tid"] in report.deadlocks[0].threads:
                assert f'thread {thread["tid"]} "{thread["name"]}"' in report.verdict.headline


def _deadlock_bundle() -> str:
    names = [n for n in _bundled() if MANIFEST[n].get("deadlock") and _python_aware(MANIFEST[n])]
    if not names:
        pytest.skip("no deadlock bundle")
    return names[0]


def test_every_format_says_who_waits_for_whom() -> None:
    """Text, Markdown, HTML, JSON and !tfstack's DML: the deadlock and each thread's wait."""
    from dumpkit.report.dml import render_dml
    from dumpkit.report.html import render_html
    from dumpkit.report.json_report import report_dict
    from dumpkit.report.markdown import render_markdown
    from dumpkit.report.text import render_text

    report = _report(_deadlock_bundle(), "bundle")
    cycle = report.deadlocks[0]
    lines = [w for w in report.waits if w.tid in cycle.threads]
    for name, rendered in (
        ("text", render_text(report, width=1000)),
        ("markdown", render_markdown(report)),
        ("html", render_html(report)),
        ("dml", "\n".join(render_dml(report, plain=True))),
    ):
        assert "Who waits for whom" in rendered, name
        assert "waits for" in rendered and "held by thread" in rendered, name
        for w in lines:
            function = (w.python_line or "").split(" (", 1)[0]
            assert function and function in rendered, (name, function)
    data = report_dict(report)
    assert [set(d["threads"]) for d in data["deadlocks"]] == [set(cycle.threads)]
    assert {w["tid"] for w in data["waits"]} >= set(cycle.threads)
    assert data["verdict"]["kind"] == "deadlock"


def test_triage_groups_hang_dumps_by_what_they_wait_on(tmp_path: Path) -> None:
    """One group per deadlock over the same two lines, whichever Python and dump kind; the
    GIL hang apart."""
    from dumpkit.triage.analyse import Job, analyse_one
    from dumpkit.triage.group import group

    deadlocks = [n for n in _bundled() if MANIFEST[n]["scenario"] == "lock_deadlock" and _python_aware(MANIFEST[n])]
    gil = [n for n in _bundled() if MANIFEST[n]["scenario"] == "gil_held"]
    if len(deadlocks) < 2 or not gil:
        pytest.skip("not enough hang bundles")
    records = [
        analyse_one(Job(use_recorded_paths=False), str(BUNDLES / f"{_bundle_name(n)}.dkb")) for n in deadlocks + gil
    ]
    assert all(r.ok for r in records), [r.error for r in records if not r.ok]
    groups = group(records)
    by_signature = {g.signature: g.count for g in groups}
    assert by_signature["DEADLOCK | read_catalog (lock_deadlock.py:60) | update_index (lock_deadlock.py:42)"] == len(
        deadlocks
    )
    assert by_signature["GIL_HELD | wait_for_device (gil_held.py:56)"] == len(gil)


def _without_system_images(name: str) -> Report:
    return _report(name, "raw, no system")


def _needs_system_images(name: str) -> bool:
    """A capture dump without the walk tables: without the system DLLs' images its waits
    cannot be named (one with the tables is read `alone`)."""
    return MANIFEST[name]["tool"] == "capture" and not _walk_tables_kept(MANIFEST[name])


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(n for n in MANIFEST if _needs_system_images(n)))
def test_without_the_system_images_no_waiting_thread_is_called_running(name: str) -> None:
    """Every thread of these dumps waits (the program said on what). Without the images of
    the DLLs the waits are in, a thread stopped in them is not known to wait, and must not
    be called running; the dump is a snapshot, not a damaged file, however the walks ended
    below the nameless frames; and the first step names the images that would tell. (A dump
    that kept the walk tables names its waits without them: the test of the `alone` reads.)"""
    report = _without_system_images(name)
    waits = {w.tid: w for w in report.waits}
    for thread in MANIFEST[name]["threads"]:
        wait = waits[thread["tid"]]
        assert wait.kind is not WaitKind.RUNNING, (thread["name"], wait)
        if wait.kind is WaitKind.UNKNOWN:
            assert wait.unnamed_in and "ntdll.dll" in wait.unnamed_in
            assert "whose images are not here" in wait.what or "whose image is not here" in wait.what
    verdict = report.verdict
    assert "damaged" not in verdict.headline
    if _gil_counted(name):
        assert verdict.kind is VerdictKind.GIL_HELD
    else:
        assert verdict.kind is VerdictKind.NO_EXCEPTION and "written on request" in verdict.headline
        assert "stopped in system DLLs whose images are not here" in verdict.headline
    assert verdict.next_steps[0].startswith("Give dumpkit the images of ntdll.dll")
    assert "Wine's own DLLs are in the Wine installation's PE DLL folder" in verdict.next_steps[0]


@pytest.mark.slow
def test_triage_without_the_system_images_groups_by_where_the_python_code_was() -> None:
    """A fleet read away from its machines: no wait can be named, so each dump's signature is
    its threads' Python lines (SNAPSHOT), which groups the dumps by what the program was
    doing, one group per scenario whichever Python and dump kind, a deadlock over the same
    lines as with the images; a GIL hang whose interpreter counts the GIL's waiters is
    GIL_HELD by its holder's line, as with the images. Each record names ntdll.dll as the
    image to give. A dump whose capture kept the walk tables is signed as with the images."""
    from dumpkit.triage.analyse import Job, analyse_one
    from dumpkit.triage.group import group

    names = sorted(n for n in MANIFEST if MANIFEST[n]["tool"] == "capture")
    interpreters = {n: WINPYTHON / f"cpython-{MANIFEST[n]['python_minor']}-amd64" for n in names}
    if not names or not all(p.is_dir() for p in interpreters.values()):
        pytest.skip("the raw hang dumps' interpreters (../shared/winpython) are not here")
    records = {
        n: analyse_one(
            Job(image_paths=(str(interpreters[n]), str(HANGS / "bin")), use_recorded_paths=False),
            str(HANGS / MANIFEST[n]["file"]),
        )
        for n in names
    }
    assert all(r.ok for r in records.values())
    kinds = {n: "GIL_HELD" if _gil_counted(n) else "SNAPSHOT" for n in names}
    for n in names:
        if _walk_tables_kept(MANIFEST[n]):
            with_images = _report(n, "bundle").signature
            kinds[n] = with_images.kind
            assert records[n].signature == with_images.text
    assert {n: r.kind for n, r in records.items()} == kinds
    # the dump's own copy of what a walk reads of ntdll.dll serves where it was kept
    assert {n: "ntdll.dll" in r.missing_images for n, r in records.items()} == {
        n: not _walk_tables_kept(MANIFEST[n]) for n in names
    }
    # one group per scenario, the GIL hangs of 3.13 (no waiters counted) apart
    scenarios = {(MANIFEST[n]["scenario"], kinds[n]) for n in names}
    groups = group(list(records.values()))
    assert len(groups) == len(scenarios)
    for g in groups:
        assert len({MANIFEST[n]["scenario"] for n, r in records.items() if r.signature == g.signature}) == 1
    deadlock = next(
        r for n, r in records.items() if MANIFEST[n]["scenario"] == "lock_deadlock" and kinds[n] == "SNAPSHOT"
    )
    assert deadlock.signature == "SNAPSHOT | read_catalog (lock_deadlock.py:60) | update_index (lock_deadlock.py:42)"


def _gil_counted(name: str) -> bool:
    """A GIL hang on a Python whose GIL counts its waiters (3.8-3.12; 3.13's native
    condition variable does not)."""
    fact = MANIFEST[name]
    return fact["scenario"] == "gil_held" and fact["python_minor"] != "3.13"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(n for n in MANIFEST if _needs_system_images(n) and _gil_counted(n)))
def test_without_the_system_images_the_gils_holder_and_its_waiters_come_from_the_interpreter(name: str) -> None:
    """No wait is named, but the interpreter's state names the GIL's holder and counts the
    threads waiting for it: the verdict says so, no more sure than that (whether the holder
    is stuck is what the missing images would tell), under the signature the dump has with
    the images."""
    fact = MANIFEST[name]
    truth = fact["gil"]["ground_truth"]
    holder = next(t for t in fact["threads"] if t["name"] == truth["held_by"])
    report = _without_system_images(name)
    verdict = report.verdict
    assert verdict.kind is VerdictKind.GIL_HELD and verdict.confidence == "medium"
    assert verdict.headline.startswith(f"Thread {holder['tid']}")
    assert "holds the GIL while it is in ntdll.dll" in verdict.headline
    assert verdict.headline.endswith(f"; {len(truth['waiting'])} threads wait for the GIL")
    assert report.signature is not None and report.signature.text == "GIL_HELD | wait_for_device (gil_held.py:56)"
    assert any(s.startswith("If the GIL's holder is blocked in a native call") for s in verdict.next_steps)
