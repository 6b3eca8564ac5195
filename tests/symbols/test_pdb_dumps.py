"""PDB names on real dumps: pdbhost.exe + pdbkernels.dll (clang + lld, mingw target, with
PDBs; sample_dumps/build_pdb.sh) crashed under Wine. Their recursion and fail-fast run
through static functions that only the PDBs name; the dumps record paths that do not exist
here, so the PDBs are found as on a user's machine: beside an --image-path image, in a
symbol store, on a symbol server. A PDB of another build is refused, with a message."""

from __future__ import annotations

import functools
import json
import http.server
import shutil
import threading
from pathlib import Path

import pytest

from dumpkit.engine import Options

from tests.support.samples import analyse_file, SAMPLE_BIN, run_cli, sample_path
from tests.symbols.pdbfiles import copy_tree, other_build, pdb_path

WINE_BIN = SAMPLE_BIN / "wine"
CYCLE = ("parse_value", "parse_list", "parse_item")


def report(dump: str, image_paths=(), symbol_paths=()):
    return analyse_file(
        sample_path(dump), Options(image_paths=[str(WINE_BIN), *image_paths], symbol_paths=symbol_paths)
    )


def images_only(tmp_path: Path) -> Path:
    """The two images without their PDBs."""
    return copy_tree(("pdbhost.exe", "pdbkernels.dll"), tmp_path / "images")


def crashing(r):
    return next(t for t in r.threads if t.is_crashing)


def module(r, name):
    return next(m for m in r.modules if m.name == name)


def test_static_recursion_cycle_is_named_from_the_pdb():
    r = report("pdb_static_cycle.dmp", [str(SAMPLE_BIN / "pdb")])
    t = crashing(r)
    cycle = t.cycles[0]
    assert sorted(cycle.functions) == sorted(f"pdbkernels.dll!{n}" for n in CYCLE)
    assert cycle.period == 3 and cycle.repetitions > 2000
    # below the cycle: the exported entry, then the host's two static functions
    entry = list(cycle.entry_path)
    at = entry.index("pdbkernels.dll!parse_document")
    assert entry[at : at + 3] == [
        "pdbkernels.dll!parse_document",
        "pdbhost.exe!run_scenario",
        "pdbhost.exe!op_worker_main",
    ]
    for n in CYCLE:
        assert f"pdbkernels.dll!{n}" in r.verdict.headline
    # every frame of the cycle, and the frame-size lines, carry the PDB's names
    assert all(f.symbol.split("+")[0] in cycle.functions for f in t.frames[:30])
    assert {s.function for s in r.frame_sizes} >= set(cycle.functions)
    assert module(r, "pdbkernels.dll").symbol_source.startswith("pdb: ")
    assert module(r, "pdbkernels.dll").symbol_source.endswith("pdbkernels.pdb")
    assert module(r, "pdbhost.exe").symbol_source.endswith("pdbhost.pdb")
    assert module(r, "ntdll.dll").symbol_source == "image: exports and COFF symbols"
    assert not r.soft_errors


def test_without_the_pdbs_the_same_functions_have_no_names(tmp_path):
    r = report("pdb_static_cycle.dmp", [str(images_only(tmp_path))])
    cycle = crashing(r).cycles[0]
    assert all(f.startswith("pdbkernels.dll!func_") for f in cycle.functions)
    assert module(r, "pdbkernels.dll").symbol_source == "image: exports and COFF symbols"


def test_fail_fast_raised_in_a_static_function_is_attributed_by_name():
    r = report("pdb_static_fastfail.dmp", [str(SAMPLE_BIN / "pdb")])
    assert r.crash.raised_by == "pdbkernels.dll!shape_check_failed"
    assert "raised by pdbkernels.dll!shape_check_failed" in r.verdict.headline
    assert r.verdict.confidence == "high"


@pytest.mark.parametrize("change", [{"age": 2}, {"guid_byte": 0}], ids=["age", "guid"])
def test_a_pdb_of_another_build_is_refused_never_used(tmp_path, change):
    folder = images_only(tmp_path)
    other_build(pdb_path("pdbkernels.pdb"), folder / "pdbkernels.pdb", **change)
    r = report("pdb_static_cycle.dmp", [str(folder)])
    assert all(f.startswith("pdbkernels.dll!func_") for f in crashing(r).cycles[0].functions)
    refusals = [e for e in r.soft_errors if e.startswith("pdbkernels.dll: PDB pdbkernels.pdb not used")]
    assert len(refusals) == 1
    assert "another build" in refusals[0] and str(folder / "pdbkernels.pdb") in refusals[0]
    assert ("age 2, the image wants 1" if "age" in change else "the image wants") in refusals[0]
    assert "PDB not used" in module(r, "pdbkernels.dll").symbol_source


def test_the_cli_says_why_a_pdb_was_refused(tmp_path):
    folder = images_only(tmp_path)
    other_build(pdb_path("pdbkernels.pdb"), folder / "pdbkernels.pdb", age=7)
    out = run_cli("analyze", sample_path("pdb_static_fastfail.dmp"), "--image-path", folder, "--image-path", WINE_BIN)
    assert out.returncode == 1  # analysed, with a problem met
    assert "pdbkernels.pdb" in out.stderr and "age 7, the image wants 1" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_refused_candidate_does_not_stop_the_search(tmp_path):
    folder = images_only(tmp_path)
    other_build(pdb_path("pdbkernels.pdb"), folder / "pdbkernels.pdb", age=2)
    store = _store(tmp_path / "store", "pdbkernels.pdb")
    r = report("pdb_static_cycle.dmp", [str(folder)], [str(store)])
    assert sorted(crashing(r).cycles[0].functions) == sorted(f"pdbkernels.dll!{n}" for n in CYCLE)
    assert module(r, "pdbkernels.dll").symbol_source.startswith(f"pdb: {store}")
    assert not [e for e in r.soft_errors if "PDB" in e]


def _store(root: Path, name: str) -> Path:
    """NAME/<GUID><AGE>/NAME, the key read from the image's CodeView record."""
    from dumpkit.pe import PEImage

    image = PEImage.from_file(str(pdb_path(name.replace(".pdb", ".dll"))))
    try:
        cv = image.codeview()
    finally:
        image.close()
    assert cv is not None
    dest = root / name / cv.symbol_id / name
    dest.parent.mkdir(parents=True)
    shutil.copy(pdb_path(name), dest)
    return root


def test_pdb_from_a_symbol_store(tmp_path):
    store = _store(tmp_path / "store", "pdbkernels.pdb")
    r = report("pdb_static_cycle.dmp", [str(images_only(tmp_path))], [f"srv*{store}"])
    assert sorted(crashing(r).cycles[0].functions) == sorted(f"pdbkernels.dll!{n}" for n in CYCLE)
    assert module(r, "pdbkernels.dll").symbol_source.startswith(f"pdb: {store}")


def test_a_symbol_store_pointer_to_the_pdb_is_followed(tmp_path):
    """symstore /p keeps NAME.pdb/KEY/file.ptr (PATH:<where the PDB is>) instead of the file."""
    store = _store(tmp_path / "store", "pdbkernels.pdb")
    (key,) = list((store / "pdbkernels.pdb").iterdir())
    real = tmp_path / "drop" / "pdbkernels.pdb"
    real.parent.mkdir()
    (key / "pdbkernels.pdb").rename(real)
    (key / "file.ptr").write_text(f"PATH:{real}\r\n")
    r = report("pdb_static_cycle.dmp", [str(images_only(tmp_path))], [str(store)])
    assert sorted(crashing(r).cycles[0].functions) == sorted(f"pdbkernels.dll!{n}" for n in CYCLE)
    assert module(r, "pdbkernels.dll").symbol_source.startswith(f"pdb: {real}")


def test_a_damaged_compressed_pdb_in_a_store_is_named_not_guessed_at(tmp_path, monkeypatch):
    monkeypatch.setenv("DUMPKIT_CACHE", str(tmp_path / "dumpkit-cache"))
    store = _store(tmp_path / "store", "pdbkernels.pdb")
    (key,) = list((store / "pdbkernels.pdb").iterdir())
    (key / "pdbkernels.pdb").unlink()
    (key / "pdbkernels.pd_").write_bytes(b"MSCF\0\0\0\0" + bytes(64))
    r = report("pdb_static_cycle.dmp", [str(images_only(tmp_path))], [str(store)])
    said = [e for e in r.soft_errors if "pdbkernels.pd_" in e]
    assert said and "cabinet format 0.0, dumpkit reads 1.3" in said[0]
    assert "pdbkernels.dll!parse_list" not in crashing(r).cycles[0].functions


def test_a_compressed_pdb_in_a_store_names_the_functions(tmp_path, monkeypatch):
    """symstore /compress's NAME.pd_ (here made by gcab, tests/symbols/data) is expanded into
    dumpkit's cache and its names used."""
    monkeypatch.setenv("DUMPKIT_CACHE", str(tmp_path / "dumpkit-cache"))
    store = _store(tmp_path / "store", "pdbkernels.pdb")
    (key,) = list((store / "pdbkernels.pdb").iterdir())
    (key / "pdbkernels.pdb").unlink()
    shutil.copy(Path(__file__).parent / "data" / "pdbkernels.pd_", key / "pdbkernels.pd_")
    r = report("pdb_static_cycle.dmp", [str(images_only(tmp_path))], [str(store)])
    assert sorted(crashing(r).cycles[0].functions) == sorted(f"pdbkernels.dll!{n}" for n in CYCLE)
    assert (tmp_path / "dumpkit-cache" / "symbols" / "pdbkernels.pdb" / key.name / "pdbkernels.pdb").is_file()


def test_pdb_from_a_symbol_server_over_loopback(tmp_path):
    served = _store(tmp_path / "served", "pdbkernels.pdb")
    cache = tmp_path / "cache"
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        r = report("pdb_static_cycle.dmp", [str(images_only(tmp_path))], [f"srv*{cache}*{url}"])
    finally:
        server.shutdown()
        server.server_close()
    assert sorted(crashing(r).cycles[0].functions) == sorted(f"pdbkernels.dll!{n}" for n in CYCLE)
    downloaded = list(cache.glob("pdbkernels.pdb/*/pdbkernels.pdb"))
    assert len(downloaded) == 1
    assert module(r, "pdbkernels.dll").symbol_source == f"pdb: {downloaded[0]}"


def test_call_sites_in_the_cycle_have_their_source_lines():
    """The C13 line records put each return address of the cycle on the source line that
    makes the next call, and the report's frames carry it (the lines are read from the
    committed source, not typed here)."""
    source = (SAMPLE_BIN.parent / "src" / "pdbkernels.c").read_text().splitlines()
    calls = {
        "parse_value": "return parse_list(",
        "parse_list": "return parse_item(",
        "parse_item": "return parse_value(",
    }
    r = report("pdb_static_cycle.dmp", [str(SAMPLE_BIN / "pdb")])
    frames = crashing(r).frames
    seen = set()
    for f in frames[1:7]:  # return addresses: the line of the call
        function = f.symbol.split("!")[1].split("+")[0]
        path, _, line = f.source.rpartition(":")
        assert path.endswith("pdbkernels.c")
        assert calls[function] in source[int(line) - 1], (function, f.source)
        seen.add(function)
    assert seen == set(calls)
    # frames no PDB named (ntdll's, here from exports) have no source line
    assert all(f.source is None for f in frames if f.module == "ntdll.dll")


def test_source_lines_show_in_every_format_and_only_when_there(tmp_path):
    from dumpkit.report.json_report import render_json
    from dumpkit.report.markdown import render_markdown
    from dumpkit.report.text import render_text

    r = report("pdb_static_cycle.dmp", [str(SAMPLE_BIN / "pdb")])
    top = crashing(r).frames[0]
    cell = f"{top.symbol} [pdbkernels.c:{top.source.rsplit(':', 1)[1]}]"
    assert cell in render_text(r, color=False) and cell in render_markdown(r)
    assert json.loads(render_json(r))["threads"][0]["frames"][0]["source"] == top.source
    # a report without PDB lines has no source field at all (not null)
    plain = report("pdb_static_cycle.dmp", [str(images_only(tmp_path))])
    frames = [f for t in json.loads(render_json(plain))["threads"] for f in t["frames"]]
    assert frames and not any("source" in f for f in frames)
    assert "[pdbkernels.c:" not in render_text(plain, color=False)
    out = run_cli("stack", sample_path("pdb_static_cycle.dmp"), "--image-path", SAMPLE_BIN / "pdb")
    assert out.returncode == 0 and cell in out.stdout


def test_a_damaged_pdb_is_one_line_and_names_fall_back(tmp_path):
    folder = images_only(tmp_path)
    (folder / "pdbkernels.pdb").write_bytes(pdb_path("pdbkernels.pdb").read_bytes()[:3000])
    r = report("pdb_static_cycle.dmp", [str(folder)])
    assert all(f.startswith("pdbkernels.dll!func_") for f in crashing(r).cycles[0].functions)
    problems = [e for e in r.soft_errors if "pdbkernels.pdb" in e]
    assert len(problems) == 1 and "\n" not in problems[0]
    assert "unreadable (claims" in problems[0] and "file has 3000 bytes" in problems[0]
