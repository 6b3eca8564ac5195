"""pe/resources.py and pe/debug.py: the version resource (fixed info and strings) and the
CodeView record, including absent, unreadable and garbage data."""

from __future__ import annotations

import struct

import pytest

from dumpkit import pe
from dumpkit.pe import PEError, PEImage

from tests.support import synth_pe
from tests.support.synth_pe import make_big_pdata_image


def test_version_info(img):
    v = img.version_info()
    assert v.file_version == "1.2.3.4"
    assert v.product_version == "5.6.7.8"
    assert v.strings == synth_pe.SAMPLE_STRINGS


def test_version_info_absent_or_unreadable(sample):
    r = sample.info["rsrc"]
    image = PEImage.from_memory(sample.reader(missing=[(r, r + 0x1000)]), sample.image_base)
    assert image.version_info() is None
    big = make_big_pdata_image(10)
    assert PEImage.from_memory(big.reader(), big.image_base).version_info() is None


def test_version_blob_garbage_is_bounded():
    # a VS_VERSIONINFO whose children all claim tiny lengths: no hang, no crash
    blob = synth_pe.version_resource((1, 0, 0, 0), (1, 0, 0, 0), {"A": "b"})
    mangled = bytearray(blob) + b"\x06\x00" * 5000
    struct.pack_into("<H", mangled, 0, min(len(mangled), 0xFFFF))
    v = pe.parse_vs_versioninfo(bytes(mangled))
    assert v.file_version == "1.0.0.0"
    with pytest.raises(PEError):
        pe.parse_vs_versioninfo(b"\x00" * 64)


def test_codeview(img):
    cv = img.codeview()
    assert cv.pdb_name == "C:\\build\\synth.pdb"
    assert cv.age == 3
    assert cv.guid == "13121110-1514-1716-1819-1A1B1C1D1E1F"
    assert cv.symbol_id == "131211101514171618191A1B1C1D1E1F3"
