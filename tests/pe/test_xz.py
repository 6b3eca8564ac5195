"""Block-indexed .xz images (pe/xz.py through images.XzBacking): a read decompresses only
the blocks it touches and returns the bytes a whole decompression gives; a file that is
not one indexed stream is read from the start as before; a damaged block is one error."""

from __future__ import annotations

import lzma
import random
import shutil

import pytest

from dumpkit.images import XzBacking
from dumpkit.pe import PEError, PEImage
from tests.support.samples import SAMPLE_BIN

NTDLL = SAMPLE_BIN / "wine" / "ntdll.dll.xz"


@pytest.fixture(scope="module")
def ntdll_bytes():
    if not NTDLL.exists():
        pytest.skip("sample binaries not present")
    return lzma.decompress(NTDLL.read_bytes())


def test_reads_anywhere_give_the_whole_files_bytes_and_cost_only_their_blocks(ntdll_bytes):
    b = XzBacking(str(NTDLL))
    assert b._blocks is not None, "the committed Wine images are written in blocks (README there)"
    assert b.size == len(ntdll_bytes)  # from the index: nothing decompressed for it
    assert b.decompressed == 0
    rng = random.Random(20)
    for _ in range(200):
        at = rng.randrange(len(ntdll_bytes))
        n = rng.randrange(1, 600_000)
        n = min(n, len(ntdll_bytes) - at)
        assert b.read(at, n) == ntdll_bytes[at : at + n]
    with pytest.raises(PEError, match="past the end"):
        b.read(len(ntdll_bytes) - 2, 3)
    b.close()


def test_naming_from_the_coff_table_at_the_end_does_not_decompress_the_middle(ntdll_bytes):
    b = XzBacking(str(NTDLL))
    image = PEImage.from_backing(b, str(NTDLL))
    assert any(
        name == "RtlUserThreadStart" for _, name in image.coff_functions()
    )  # ntdll keeps its COFF symbols (the end of the file)
    assert b.decompressed < len(ntdll_bytes) // 2


def test_a_file_with_a_damaged_index_is_read_from_the_start(tmp_path, ntdll_bytes):
    data = bytearray(NTDLL.read_bytes())
    data[-20] ^= 0xFF  # inside the index: its CRC32 no longer matches
    p = tmp_path / "ntdll.dll.xz"
    p.write_bytes(bytes(data))
    b = XzBacking(str(p))
    assert b._blocks is None
    assert b.read(0, 4096) == ntdll_bytes[:4096]


def test_a_damaged_block_is_one_error_and_the_others_still_read(tmp_path, ntdll_bytes):
    p = tmp_path / "ntdll.dll.xz"
    shutil.copy(NTDLL, p)
    b = XzBacking(str(p))
    assert b._blocks is not None
    second = b._blocks._blocks[1]
    data = bytearray(p.read_bytes())
    data[second.at + second.length // 2] ^= 0xFF
    p.write_bytes(bytes(data))
    b = XzBacking(str(p))
    assert b.read(0, 100) == ntdll_bytes[:100]
    with pytest.raises(PEError, match="cannot decompress"):
        b.read(second.start + 10, 10)


def test_a_single_block_file_still_reads_sequentially(tmp_path):
    payload = bytes(range(256)) * 5000
    p = tmp_path / "one.dll.xz"
    p.write_bytes(lzma.compress(payload))
    b = XzBacking(str(p))
    assert b._blocks is None
    assert b.read(1000, 10) == payload[1000:1010]
    assert b.size == len(payload)
