"""pe/headers.py and PEImage's RVA reading: header fields of PE32+ and PE32 images, the
section table, zero-filled tails, and one-line PEErrors for images that are not PE."""

from __future__ import annotations

import struct

import pytest

from dumpkit import pe
from dumpkit.pe import PEError, PEImage

from tests.support import synth_pe
from tests.support.synth_pe import PEBuilder


def test_headers(img, sample):
    assert img.machine == pe.IMAGE_FILE_MACHINE_AMD64
    assert img.is_pe32plus
    assert img.timestamp == 0x5EADBEEF
    assert img.size_of_image == sample.size_of_image
    assert img.checksum == 0x0004D2C1
    assert img.image_base == 0x180000000
    assert img.size_of_stack_reserve == 0x200000
    assert img.size_of_stack_commit == 0x2000
    assert [s.name for s in img.sections] == [".text", ".xdata", ".pdata", ".rdata", ".rsrc", ".bss"]
    text = img.sections[0]
    assert (text.rva, text.virtual_size, text.raw_offset, text.raw_size) == (0x1000, 0x400, 0x400, 0x400)
    assert img.directory(3).rva == sample.info["pdata"]
    assert img.directory(4) is None
    assert len(img.data_directories) == 16


def test_pe32_headers():
    b = PEBuilder(
        machine=synth_pe.I386,
        pe32plus=False,
        image_base=0x400000,
        timestamp=0x11223344,
        entry_rva=0x1010,
        stack_reserve=0x100000,
        stack_commit=0x1000,
    )
    b.add_section(".text", b"\x90" * 16, characteristics=synth_pe.TEXT_CHARS)
    s = b.build()
    image = PEImage.from_memory(s.reader(), 0x400000)
    assert not image.is_pe32plus
    assert image.machine == pe.IMAGE_FILE_MACHINE_I386
    assert (image.image_base, image.timestamp, image.entry_point_rva) == (0x400000, 0x11223344, 0x1010)
    assert (image.size_of_stack_reserve, image.size_of_stack_commit) == (0x100000, 0x1000)
    assert image.pdata_count == 0 and image.lookup_function(0x1000) is None


def test_read_rva_maps_sections_and_zero_fills(img, sample):
    assert img.read_rva(0x1000, 4) == b"\xcc" * 4
    # .xdata has 0x90 bytes of data; the rest of its page reads as zeros
    assert img.read_rva(sample.info["xdata"] + 0x100, 8) == bytes(8)
    # a virtual-only section reads as zeros from a file, as mapped memory does
    assert img.read_rva(img.sections[-1].rva, 16) == bytes(16)
    # headers
    assert img.read_rva(0, 2) == b"MZ"
    with pytest.raises(PEError):
        img.read_rva(img.size_of_image - 2, 4)


def test_is_code_rva(img, sample):
    assert img.is_code_rva(0x1000)
    assert img.is_code_rva(0x13FF)
    assert not img.is_code_rva(0x1400)  # past the section's virtual size
    assert not img.is_code_rva(sample.info["pdata"])
    assert not img.is_code_rva(0)
    assert not img.is_code_rva(0x7FFFFFFF)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda b: b.__setitem__(slice(0, 2), b"ZM"), "MZ"),
        (lambda b: b.__setitem__(slice(0x80, 0x84), b"PX\0\0"), "PE signature"),
        (lambda b: struct.pack_into("<H", b, 0x80 + 24, 0x999), "magic"),
        (lambda b: struct.pack_into("<I", b, 0x3C, 0xFFFFFFF0), "e_lfanew"),
        (lambda b: struct.pack_into("<H", b, 0x86, 5000), "section count"),
    ],
)
def test_bad_headers_raise_peerror(tmp_path, sample, mutate, message):
    data = bytearray(sample.file)
    mutate(data)
    p = tmp_path / "bad.dll"
    p.write_bytes(bytes(data))
    with pytest.raises(PEError, match=message):
        PEImage.from_file(str(p))


def test_truncated_and_missing_files(tmp_path, sample):
    p = tmp_path / "trunc.dll"
    p.write_bytes(sample.file[:0x90])
    with pytest.raises(PEError):
        PEImage.from_file(str(p))
    (tmp_path / "empty.dll").write_bytes(b"")
    with pytest.raises(PEError):
        PEImage.from_file(str(tmp_path / "empty.dll"))
    with pytest.raises(PEError):
        PEImage.from_file(str(tmp_path / "nope.dll"))


def test_from_memory_missing_header_is_peerror(sample):
    with pytest.raises(PEError, match="not in the dump"):
        PEImage.from_memory(sample.reader(missing=[(0, 0x200)]), sample.image_base)
