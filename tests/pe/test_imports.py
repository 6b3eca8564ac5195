"""pe/imports.py: the DLLs an image imports and what it takes from each, from real images
(the mingw DLLs of the samples, python.org's extensions, a real dump's memory) and from
synthetic ones for what no committed image shows (MSVC 14.40's linker version, msvcp140's
mutex imports, delay-loads, PE32) and for hostile tables, which end bounded and say so."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest

from dumpkit.commands.inputs import open_target
from dumpkit.pe import MAX_IMPORT_DLLS, MAX_IMPORTS_PER_DLL, ImportTable, PEImage

from tests.support.samples import ROOT, SAMPLE_BIN, sample_path
from tests.support.synth_pe import PEBuilder, import_table, make_import_image

WINPYTHON = ROOT.parent / "shared" / "winpython"
MUTEX = ("MSVCP140.dll", ["_Mtx_lock", "_Mtx_unlock", "?_Throw_C_error@std@@YAXH@Z"])


def _winpython(version: str) -> Path:
    folder = WINPYTHON / f"cpython-{version}-amd64"
    if not folder.is_dir():
        pytest.skip(f"../shared/winpython/cpython-{version}-amd64 not present")
    return folder


# ----------------------------------------------------------------------------- real images
def test_a_mingw_dll_imports_kernel32_and_msvcrt_by_name():
    with PEImage.from_file(str(SAMPLE_BIN / "opkernels.dll")) as image:
        table = image.imports()
        assert image.linker_version == (2, 40)  # GNU ld writes binutils' version
        assert [d.dll for d in table.dlls] == ["KERNEL32.dll", "msvcrt.dll"]
        assert table.complete and image.problems == []
        assert table.imports("kernel32.dll", "EnterCriticalSection")  # the loader's case-insensitive match
        assert table.imports("MSVCRT.DLL", "_initterm")
        assert not table.imports("msvcrt.dll", "EnterCriticalSection")
        assert all(not d.delayed and d.ordinals == () for d in table.dlls)


@pytest.mark.parametrize(
    "version, dll", [("3.8", "python38.dll"), ("3.10", "python310.dll"), ("3.12", "python312.dll")]
)
def test_python_org_extensions_import_their_own_interpreter(version, dll):
    folder = _winpython(version)
    with PEImage.from_file(str(folder / "_ctypes.pyd")) as image:
        table = image.imports()
        assert table.complete
        python = table.from_dll(dll)
        assert len(python) == 1 and "PyType_Ready" in python[0].names
        assert not any(d.dll.lower().startswith("python") and d.dll.lower() != dll for d in table.dlls)
        oleaut = table.from_dll("OLEAUT32.dll")  # SysAllocString & co. are imported by ordinal
        assert oleaut and oleaut[0].ordinals and not oleaut[0].names


def test_msvc_linker_versions_of_python_org_builds():
    """python.org's 3.12 was linked by MSVC 14.42 (Visual Studio 2022 17.12), its 3.10 by 14.29."""
    for version, linker in (("3.12", (14, 42)), ("3.10", (14, 29))):
        with PEImage.from_file(str(_winpython(version) / f"python{version.replace('.', '')}.dll")) as image:
            assert image.linker_version == linker


def test_imports_read_from_a_real_dumps_memory():
    """A full dump holds the images: python.exe's name table names python312.dll, although
    the loader has filled its address table with addresses."""
    target, _problems = open_target(str(sample_path("pyversions/ctypes_recursion_full_py312.trimmed.dmp.xz")))
    with target:
        by_name = {m.name.lower(): m for m in target.modules}
        exe = PEImage.from_memory(target.read, by_name["python.exe"].base)
        assert exe.linker_version == (14, 42)
        assert exe.imports().complete
        assert [d.dll for d in exe.imports().from_dll("python312.dll")] == ["python312.dll"]
        ctypes = PEImage.from_memory(target.read, by_name["_ctypes.pyd"].base)
        assert ctypes.imports().imports("python312.dll", "PyType_Ready")


# ----------------------------------------------------------------------------- synthetic images
def test_msvc_1440_extension_with_the_constexpr_mutex():
    s = make_import_image([MUTEX, ("KERNEL32.dll", ["GetLastError", 7])])
    for image in (PEImage.from_bytes(s.file), PEImage.from_memory(s.reader(), s.image_base)):
        assert image.linker_version == (14, 40)
        table = image.imports()
        assert table.imports("msvcp140.dll", "_Mtx_lock") and not table.imports("msvcp140.dll", "_Mtx_init_in_situ")
        assert table.from_dll("kernel32.dll")[0].ordinals == (7,)
        assert table.complete and image.problems == []


def test_delay_loaded_imports_are_listed_as_delayed():
    s = make_import_image([("KERNEL32.dll", ["Sleep"])], delayed=[("python39.dll", ["PyLong_FromLong"])])
    table = PEImage.from_bytes(s.file).imports()
    (late,) = table.from_dll("python39.dll")
    assert late.delayed and late.names == ("PyLong_FromLong",)
    assert not table.from_dll("kernel32.dll")[0].delayed


def test_pe32_thunks_are_four_bytes():
    s = make_import_image([MUTEX], pe32plus=False, linker_version=(14, 29))
    image = PEImage.from_bytes(s.file)
    assert not image.is_pe32plus and image.linker_version == (14, 29)
    assert image.imports().from_dll("MSVCP140.dll")[0].names == tuple(MUTEX[1])


def test_without_a_name_table_names_come_from_the_file_but_not_from_memory():
    """Old linkers leave OriginalFirstThunk 0: the file's address table holds the names, a
    process's holds addresses, so from memory the DLL is known but not what it takes."""
    s = make_import_image([MUTEX], name_table=False)
    assert PEImage.from_bytes(s.file).imports().imports("msvcp140.dll", "_Mtx_lock")
    image = PEImage.from_memory(s.reader(), s.image_base)
    (dll,) = image.imports().dlls
    assert dll.dll == "MSVCP140.dll" and dll.names == () and not dll.complete
    assert not image.imports().complete and any("no name table" in p for p in image.problems)


def test_no_import_directory_is_an_empty_complete_table():
    b = PEBuilder()
    b.add_section(".text", b"\xc3")
    image = PEImage.from_bytes(b.build().file)
    assert image.imports() == ImportTable((), True)


def test_the_table_is_parsed_once():
    s = make_import_image([MUTEX])
    image = PEImage.from_memory(s.reader(), s.image_base)
    first = image.imports()
    reads = s.reads
    assert image.imports() is first and s.reads == reads


# ----------------------------------------------------------------------------- hostile images
def test_an_unreadable_directory_is_an_incomplete_empty_table():
    s = make_import_image([MUTEX])
    r = s.info["rdata"]
    image = PEImage.from_memory(s.reader(missing=[(r, r + 0x1000)]), s.image_base)
    assert image.imports() == ImportTable((), False)
    assert any("import table" in p for p in image.problems)


def test_an_unreadable_name_leaves_the_dll_known_and_incomplete():
    s = make_import_image([MUTEX])
    # two descriptors (40 bytes), the name and address tables (2 x 4 thunks), then the
    # first hint/name entry: a hole there takes `_Mtx_lock` away
    first = s.info["rdata"] + 40 + 64
    image = PEImage.from_memory(s.reader(missing=[(first, first + 4)]), s.image_base)
    table = image.imports()
    (dll,) = table.dlls
    assert dll.dll == "MSVCP140.dll" and dll.names == tuple(MUTEX[1][1:]) and not dll.complete
    assert not table.complete and any("unreadable" in p for p in image.problems)


def test_a_descriptor_list_without_an_end_stops_at_the_limit():
    """Descriptors all pointing at one name and one empty thunk list, with no zero entry:
    the section is filled with them up to the image's end."""
    b = PEBuilder(linker_version=(14, 40))
    count = MAX_IMPORT_DLLS + 500
    rdata = b.next_rva
    table_end = rdata + 20 * count
    name, thunks = table_end, table_end + 16
    blob = struct.pack("<5I", thunks, 0, 0, name, thunks) * count + b"evil.dll\0".ljust(16, b"\0") + bytes(8)
    b.add_section(".rdata", blob)
    b.set_dir(1, rdata, 20)
    image = PEImage.from_bytes(b.build().file)
    started = time.monotonic()
    table = image.imports()
    assert time.monotonic() - started < 5
    assert len(table.dlls) == MAX_IMPORT_DLLS and not table.complete
    assert any("no end" in p for p in image.problems)


def test_a_thunk_list_without_an_end_stops_at_the_limit():
    b = PEBuilder(linker_version=(14, 40))
    rdata = b.next_rva
    n = MAX_IMPORTS_PER_DLL + 100
    thunks = rdata + 40
    name = thunks + 8 * n
    hint_name = name + 16
    blob = struct.pack("<5I", thunks, 0, 0, name, thunks) + bytes(20)
    blob += struct.pack("<Q", hint_name) * n + b"x.dll\0".ljust(16, b"\0") + b"\0\0_Mtx_lock\0"
    b.add_section(".rdata", blob)
    b.set_dir(1, rdata, 40)
    image = PEImage.from_bytes(b.build().file)
    started = time.monotonic()
    (dll,) = image.imports().dlls
    assert time.monotonic() - started < 10
    assert len(dll.names) == MAX_IMPORTS_PER_DLL and not dll.complete
    assert any("has no end" in p for p in image.problems)


def test_names_past_the_byte_budget_are_cut():
    """Every thunk names one 4000-byte string: the names' byte budget ends the reading long
    before the thunks do."""
    b = PEBuilder(linker_version=(14, 40))
    rdata = b.next_rva
    n = 8000
    thunks = rdata + 40
    name = thunks + 8 * (n + 1)
    hint_name = name + 16
    blob = struct.pack("<5I", thunks, 0, 0, name, thunks) + bytes(20)
    blob += struct.pack("<Q", hint_name) * n + bytes(8) + b"x.dll\0".ljust(16, b"\0") + b"\0\0" + b"A" * 4000 + b"\0"
    b.add_section(".rdata", blob)
    b.set_dir(1, rdata, 40)
    image = PEImage.from_bytes(b.build().file)
    (dll,) = image.imports().dlls
    assert 0 < len(dll.names) < n and not dll.complete


def test_out_of_image_rvas_are_problems_not_exceptions():
    b = PEBuilder(linker_version=(14, 40))
    rdata = b.next_rva
    blob = struct.pack("<5I", 0x7FFFFFF0, 0, 0, 0x7FFFFFF0, 0x7FFFFFF0)  # name and tables far outside
    blob += struct.pack("<5I", rdata + 60, 0, 0, rdata + 76, rdata + 60) + bytes(20)
    blob += struct.pack("<QQ", 0x7FFFFFF0, 0) + b"ok.dll\0"  # a thunk naming an RVA outside
    b.add_section(".rdata", blob)
    b.set_dir(1, rdata, 60)
    image = PEImage.from_bytes(b.build().file)
    table = image.imports()
    assert [d.dll for d in table.dlls] == ["ok.dll"] and table.dlls[0].names == ()
    assert not table.complete and len(image.problems) >= 2


def test_a_directory_outside_the_image():
    s = make_import_image([MUTEX])
    data = bytearray(s.file)
    directory = 0x80 + 24 + 112 + 8 * 1  # e_lfanew + signature/file header + optional header + entry 1
    struct.pack_into("<II", data, directory, 0x7FFFFF00, 20)
    image = PEImage.from_bytes(bytes(data))
    assert image.imports() == ImportTable((), False) and image.problems


def test_the_synthetic_table_is_what_a_linker_writes():
    """The builder's layout, checked once: the descriptor points at the name table, the name
    table at hint/name entries whose names follow a two-byte hint."""
    blob = import_table(0x2000, [("A.dll", ["f"])])
    name_table, _, _, dll_name, address_table = struct.unpack_from("<5I", blob, 0)
    assert name_table == 0x2000 + 40 and address_table == name_table + 16
    (hint_name,) = struct.unpack_from("<Q", blob, name_table - 0x2000)
    assert blob[hint_name - 0x2000 + 2 :].startswith(b"f\0")
    assert blob[dll_name - 0x2000 :].startswith(b"A.dll\0")
