"""pe/coff.py: function names from the COFF symbol table (the only source of names for a
mingw image's static functions) and long section names ("/N" in the section table)."""

from __future__ import annotations

import struct
import subprocess

import pytest

from dumpkit.pe import PEImage

from .conftest import GCC

C_SOURCE = r"""
static __attribute__((noinline)) int hidden_helper(int x) { return x * 7 + 1; }
__declspec(dllexport) int visible(int x) { return hidden_helper(x) + 2; }
int main(int argc, char **argv) { (void)argv; return visible(argc); }
"""


@pytest.fixture(scope="module")
def exe_with_symbols(tmp_path_factory):
    if not GCC:
        pytest.skip("mingw-w64 (x86_64-w64-mingw32-gcc) not installed")
    d = tmp_path_factory.mktemp("coff")
    (d / "s.c").write_text(C_SOURCE)
    # -g adds .debug_* sections, whose names are longer than 8 bytes: "/N" in the table
    subprocess.run([GCC, "-O2", "-g", "-o", "s.exe", "s.c"], cwd=d, check=True, timeout=120)
    return d / "s.exe"


def test_static_function_named_from_coff_symbols(exe_with_symbols):
    with PEImage.from_file(str(exe_with_symbols)) as image:
        syms = {name: rva for rva, name in image.coff_functions()}
        assert "hidden_helper" in syms and "visible" in syms
        assert "hidden_helper" not in {n for _, n in image.exports()}  # only COFF names it
        helper = syms["hidden_helper"]
        assert image.is_code_rva(helper)
        assert image.nearest_function_symbol(helper + 3) == ("hidden_helper", helper)
        assert image.problems == []


def test_long_section_names_come_from_the_string_table(exe_with_symbols):
    with PEImage.from_file(str(exe_with_symbols)) as image:
        names = [s.name for s in image.sections]
        assert ".debug_info" in names
        assert not any(n.startswith("/") for n in names)


def test_memory_image_has_no_coff_symbols(exe_with_symbols):
    with PEImage.from_file(str(exe_with_symbols)) as image:
        data = exe_with_symbols.read_bytes()
        mem = bytearray(image.size_of_image)
        mem[: image.size_of_headers] = data[: image.size_of_headers]
        for s in image.sections:
            n = min(s.raw_size, s.mapped_size)
            mem[s.rva : s.rva + n] = data[s.raw_offset : s.raw_offset + n]
    mimg = PEImage.from_memory(lambda a, n: bytes(mem[a - 0x10000 : a - 0x10000 + n]), 0x10000)
    assert mimg.coff_functions() == [] and mimg.nearest_function_symbol(0x1000) is None


def test_hostile_symbol_count_is_bounded(exe_with_symbols, tmp_path):
    data = bytearray(exe_with_symbols.read_bytes())
    e_lfanew = struct.unpack_from("<I", data, 0x3C)[0]
    struct.pack_into("<I", data, e_lfanew + 4 + 12, 0xFFFFFFFF)  # NumberOfSymbols
    p = tmp_path / "hostile.exe"
    p.write_bytes(bytes(data))
    with PEImage.from_file(str(p)) as image:
        assert image.coff_functions() == []  # the claimed table runs past the file
        assert any("COFF symbol table" in line for line in image.problems)
