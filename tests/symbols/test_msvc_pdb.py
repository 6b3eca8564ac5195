"""The PDB reader on a real MSVC PDB (tests/symbols/msvc: a DLL and its PDB from debugpy's
Windows wheel), checked against what the DLL itself says: its CodeView record, its exports
and its .pdata. The clang + lld samples cover the dumps; this covers what MSVC writes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from dumpkit.pe import PEImage
from dumpkit.symbols.pdb import PdbFile, open_pdb

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "tests" / "symbols" / "msvc"
DLL = HERE / "attach_amd64.dll"
PDB = HERE / "attach_amd64.pdb"


@pytest.fixture(scope="module")
def pair():
    image = PEImage.from_file(str(DLL))
    pdb = open_pdb(str(PDB), PdbFile(str(PDB)))
    yield image, pdb
    pdb.close()
    image.close()


def test_the_pdb_is_the_one_the_dlls_codeview_record_names(pair):
    image, pdb = pair
    cv = image.codeview()
    assert cv is not None and cv.pdb_name.endswith("attach_amd64.pdb")
    assert pdb.mismatch(cv) is None
    # another age of the same GUID is another build: refused with the reason
    why = pdb.mismatch(dataclasses.replace(cv, age=cv.age + 1))
    assert why is not None and str(cv.age + 1) in why


def test_every_export_is_named_by_the_pdb_as_the_export_table_names_it(pair):
    image, pdb = pair
    exports = image.exports()
    assert len(exports) == 4
    for rva, name in exports:
        fn = pdb.function_at(rva)
        assert fn is not None and fn.name == name and fn.rva == rva


def test_every_pdata_function_has_a_pdb_function_that_covers_it(pair):
    image, pdb = pair
    assert image.pdata_count > 50
    for i in range(image.pdata_count):
        entry = image.resolve_indirect(image.pdata_entry(i))
        fn = pdb.function_at(entry.begin_rva)
        assert fn is not None, hex(entry.begin_rva)
        # a function's unwind entries (chained parts included) lie inside the PDB's range
        assert fn.rva <= entry.begin_rva and entry.end_rva <= fn.rva + fn.size, (fn, hex(entry.begin_rva))


def test_msvc_line_records_name_the_source_file_of_each_export(pair):
    image, pdb = pair
    files = set()
    for rva, name in image.exports():
        line = pdb.line_at(rva)
        assert line is not None and line.line > 0, name
        files.add(line.file.rsplit("\\", 1)[-1])
    assert files == {"attach.cpp", "run_code_in_memory.hpp"}


def test_cxx_names_come_back_as_msvc_writes_them(pair):
    _, pdb = pair
    names = set()
    image = pair[0]
    for i in range(image.pdata_count):
        fn = pdb.function_at(image.resolve_indirect(image.pdata_entry(i)).begin_rva)
        if fn is not None:
            names.add(fn.name)
    assert "std::_Throw_bad_array_new_length" in names
    assert "std::exception::`scalar deleting destructor'" in names


# ----------------------------------------------------------------------------- a real dump
# sample_dumps/msvc/msvc_pdb_av.dmp.xz: the genuine CPython 3.8 under Wine called the DLL's
# AttachAndRunPythonCode with a NULL out-pointer (sample_dumps/msvc/build.sh).
MSVC_DUMP = ROOT / "sample_dumps" / "msvc" / "msvc_pdb_av.dmp.xz"


def _crash_report(plain, image_dir: Path):
    from dumpkit.engine import Options

    from tests.support.samples import analyse_file

    if not MSVC_DUMP.exists():
        pytest.skip("sample_dumps/msvc/msvc_pdb_av.dmp.xz not present")
    report = analyse_file(str(plain(MSVC_DUMP)), Options(image_paths=[str(image_dir)]))
    crash = next(t for t in report.threads if t.is_crashing)
    module = next(m for m in report.modules if m.name == "attach_amd64.dll")
    return report, crash.frames[0], module


def test_a_crash_in_msvc_code_is_named_and_placed_from_its_pdb(plain):
    report, top, module = _crash_report(plain, HERE)
    assert top.symbol == "attach_amd64.dll!AttachAndRunPythonCode+0xa"
    assert top.source is not None and top.source.endswith("attach.cpp:543")
    assert module.symbol_source is not None and module.symbol_source.startswith("pdb: ")
    assert "read from 0x0" in report.verdict.headline


def test_without_the_pdb_the_export_names_the_frame_and_no_line_is_made_up(plain, tmp_path):
    (tmp_path / "attach_amd64.dll").write_bytes(DLL.read_bytes())
    _, top, module = _crash_report(plain, tmp_path)
    assert top.symbol == "attach_amd64.dll!AttachAndRunPythonCode+0xa"
    assert top.source is None
    assert not (module.symbol_source or "").startswith("pdb")
