"""dumpkit.symbols.pdb on real PDBs (clang + lld for the mingw target, sample_dumps/bin/pdb)
and on damaged ones: names for code, the build check, and one PdbError for anything else."""

from __future__ import annotations

import random

import pytest

from dumpkit.pe import PEImage
from dumpkit.symbols.pdb import PdbError, open_pdb
from dumpkit.symbols.pdb.records import procedures
from dumpkit.target import CodeViewRecord

from tests.symbols.pdbfiles import other_build, pdb_path


@pytest.fixture(scope="module")
def kernels():
    pdb = open_pdb(str(pdb_path("pdbkernels.pdb")))
    yield pdb
    pdb.close()


def _codeview(name: str) -> CodeViewRecord:
    image = PEImage.from_file(str(pdb_path(name)))
    try:
        cv = image.codeview()
    finally:
        image.close()
    assert cv is not None
    return cv


def _function_rva(name: str, pdb) -> int:
    """The RVA the image's own .pdata gives the function the PDB names `name` (no test
    knows addresses: the build decides them)."""
    for module in pdb.dbi.modules:
        starts, funcs = pdb._module_functions(module.index)
        for f in funcs:
            if f.name == name:
                return f.rva
    raise AssertionError(f"{name} not among the PDB's procedures")


def test_the_pdb_is_the_one_the_image_names(kernels):
    cv = _codeview("pdbkernels.dll")
    assert cv.pdb_name == "pdbkernels.pdb"
    assert kernels.info.guid == cv.guid and kernels.info.age == cv.age
    assert kernels.mismatch(cv) is None


def test_static_functions_are_named_by_their_procedure_records(kernels):
    image = PEImage.from_file(str(pdb_path("pdbkernels.dll")))
    try:
        for name in ("parse_value", "parse_list", "parse_item"):
            rva = _function_rva(name, kernels)
            rf = image.lookup_function(rva)
            assert rf is not None and rf.begin_rva == rva, name  # the PDB agrees with .pdata
            inside = (rf.begin_rva + rf.end_rva) // 2
            found = kernels.function_at(inside)
            assert found is not None and found.name == name and found.size is not None
            assert found.rva <= inside < found.rva + found.size
            assert image.nearest_export(rva) is None or image.nearest_export(rva)[1] < rva  # no export names it
    finally:
        image.close()


def test_a_leaf_without_unwind_entry_is_still_named(kernels):
    # shape_check_failed ends in int 0x29 and needs no stack: lld gives it no .pdata entry,
    # so nothing in the image bounds it; its procedure record does.
    rva = _function_rva("shape_check_failed", kernels)
    image = PEImage.from_file(str(pdb_path("pdbkernels.dll")))
    try:
        assert image.lookup_function(rva) is None
    finally:
        image.close()
    found = kernels.function_at(rva + 2)
    assert found is not None and found.name == "shape_check_failed" and found.rva == rva


def test_static_and_global_procedures_are_told_apart(kernels):
    module = next(m for m in kernels.dbi.modules if m.name.endswith("pdbkernels.o"))
    raw = kernels._msf.stream(module.stream).read(0, module.symbols_size)
    procs = {p.name: p.static for p in procedures(raw, 4, module.symbols_size)}
    assert procs["parse_value"] is True and procs["shape_check_failed"] is True
    assert procs["parse_document"] is False and procs["validate_shape"] is False


def test_code_without_debug_info_is_named_by_its_public_symbol(kernels):
    # The mingw CRT's objects carry no CodeView: their functions are only S_PUB32 records.
    crt = [m for m in kernels.dbi.modules if m.stream is None]
    assert crt, "expected CRT objects without symbol streams"
    pub = kernels._public_at(0x1500)
    assert pub is not None and pub.size is None and pub.rva <= 0x1500
    assert kernels.function_at(0x1500) == pub


def test_a_pdb_of_another_build_is_refused_with_its_reason(tmp_path):
    cv = _codeview("pdbkernels.dll")
    wrong_age = open_pdb(str(other_build(pdb_path("pdbkernels.pdb"), tmp_path / "a.pdb", age=cv.age + 1)))
    wrong_guid = open_pdb(str(other_build(pdb_path("pdbkernels.pdb"), tmp_path / "g.pdb", guid_byte=0x00)))
    try:
        assert f"age {cv.age + 1}, the image wants {cv.age}" == wrong_age.mismatch(cv)
        changed = cv.guid[:6] + "00" + cv.guid[8:]  # the first byte is Data1's lowest
        assert wrong_guid.mismatch(cv) == f"GUID {changed}, the image wants {cv.guid}"
    finally:
        wrong_age.close()
        wrong_guid.close()


@pytest.mark.parametrize(
    "damage,message",
    [
        (lambda b: b"not a pdb at all" * 8, "bad signature"),
        (lambda b: b[:100], "file has 100 bytes"),
        (lambda b: b[:32] + (3000).to_bytes(4, "little") + b[36:], "block size 3000"),
        (lambda b: b[:52] + (0x7FFFFFFF).to_bytes(4, "little") + b[56:], "block"),  # block map outside
        (lambda b: b[: len(b) // 2], ""),
    ],
    ids=["garbage", "truncated-header", "block-size", "block-map-outside", "half"],
)
def test_damaged_pdbs_are_one_pdb_error(tmp_path, damage, message):
    path = tmp_path / "d.pdb"
    path.write_bytes(damage(pdb_path("pdbkernels.pdb").read_bytes()))
    with pytest.raises(PdbError) as e:
        pdb = open_pdb(str(path))
        for rva in range(0x1000, 0x2000, 0x10):
            pdb.function_at(rva)
            pdb.line_at(rva)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_random_damage_never_raises_anything_but_pdb_error(tmp_path):
    """Mutations of the directory/header region and anywhere else, and truncations: every
    outcome is a usable PDB or one PdbError (never IndexError, struct.error...)."""
    src = pdb_path("pdbkernels.pdb").read_bytes()
    rng = random.Random(15)
    path = tmp_path / "m.pdb"
    outcomes = {"ok": 0, "error": 0}
    for i in range(400):
        data = bytearray(src)
        for _ in range(rng.choice((1, 4, 16))):
            pos = rng.randrange(0x4000) if i % 2 else rng.randrange(len(data))
            data[pos] = rng.randrange(256)
        if i % 5 == 0:
            data = data[: rng.randrange(len(data))]
        path.write_bytes(bytes(data))
        try:
            pdb = open_pdb(str(path))
            try:
                for rva in (0x1000, 0x1350, 0x1370, 0x1420, 0x1500, 0x9000):
                    pdb.function_at(rva)
                    pdb.line_at(rva)
            finally:
                pdb.close()
            outcomes["ok"] += 1
        except PdbError:
            outcomes["error"] += 1
    assert outcomes["error"] > 20 and outcomes["ok"] > 20


def test_streams_are_read_by_blocks_not_whole(kernels, monkeypatch):
    """A lookup reads a few blocks (the contributions' binary search, one module's
    symbols, the publics' address map), never the whole file."""
    reads = []
    msf = kernels._msf
    real = msf.read_blocks

    def counting(first, count):
        reads.append(count)
        return real(first, count)

    monkeypatch.setattr(msf, "read_blocks", counting)
    kernels._lookups.clear()
    kernels._modules.clear()
    kernels.function_at(0x1377)
    assert sum(reads) * msf.block_size < msf.file_size // 2
