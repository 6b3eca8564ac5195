"""dumpkit.symbols.cabinet and .lzx on real cabinets (tests/symbols/data/README.md says who
made each), and on damaged ones: every failure is one CabinetError line."""

from __future__ import annotations

import hashlib
import io
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from dumpkit.symbols.cabinet import Cabinet, CabinetError

from tests.support.samples import sample_path

DATA = Path(__file__).resolve().parent / "data"


def open_cab(data: bytes, name: str = "test.cab") -> Cabinet:
    return Cabinet(io.BytesIO(data), len(data), name)


def expand(data: bytes, member: str, limit: int = 1 << 30) -> bytes:
    cab = open_cab(data)
    out = io.BytesIO()
    cab.extract(cab.member(member), out, limit)
    return out.getvalue()


@pytest.mark.parametrize("name", ["pdbkernels.dll", "pdbkernels.pdb"])
def test_gcab_mszip_store_files_expand_to_the_original(name):
    packed = (DATA / (name[:-1] + "_")).read_bytes()
    cab = open_cab(packed)
    assert [m.name for m in cab.members] == [name]
    assert cab.folders[0].method_name == "MSZIP" and cab.folders[0].blocks > 1  # the dictionary carries over
    assert expand(packed, name) == sample_path(f"bin/pdb/{name}").read_bytes()


def test_gcab_made_now_reads_too(tmp_path):
    """The installed gcab, when there is one, on an image of the sample dumps."""
    if shutil.which("gcab") is None:
        pytest.skip("gcab not installed (apt-get install -y gcab)")
    src = sample_path("bin/opkernels.dll")
    shutil.copy(src, tmp_path / "opkernels.dll")
    subprocess.run(["gcab", "-c", "-z", "-n", "opkernels.dl_", "opkernels.dll"], cwd=tmp_path, check=True)
    assert expand((tmp_path / "opkernels.dl_").read_bytes(), "opkernels.dll") == src.read_bytes()


def test_lzx_mszip_and_quantum_folders_of_one_cabinet():
    packed = (DATA / "mixed.cab").read_bytes()
    cab = open_cab(packed)
    assert [(f.method_name, f.window_bits) for f in cab.folders] == [("MSZIP", 0), ("LZX", 18), ("Quantum", 0)]
    assert expand(packed, "lzx.txt").decode().strip().splitlines()[1] == (
        "If you can read this, the LZX decompressor is working!"
    )
    assert expand(packed, "mszip.txt").strip() == b"If you can read this, the MSZIP decompressor is working!"
    with pytest.raises(CabinetError, match="compressed with Quantum, which dumpkit does not read"):
        expand(packed, "qtm.txt")


def test_lzx_many_frames_with_a_2mb_window_and_e8_translation():
    """449 frames: the bit stream realigned at each, the window carried over, the E8
    translation undone; the result is byte for byte what cabextract gives (a cabinet
    itself, whose directory reads)."""
    packed = (DATA / "large-files-cab.cab").read_bytes()
    cab = open_cab(packed)
    assert (cab.folders[0].method_name, cab.folders[0].window_bits, cab.folders[0].blocks) == ("LZX", 21, 449)
    out = expand(packed, "large-files.cab")
    assert len(out) == 14_689_228
    assert hashlib.sha256(out).hexdigest() == "30e0e3f37c7bdd389b5d1c73d08b2e2b422c50b5c32362e9995504e7c80cb1c1"
    inner = open_cab(out)
    assert [m.name for m in inner.members] == ["mszip-2gb.txt", "lzx15-2gb.txt", "lzx21-2gb.txt"]


def test_output_larger_than_the_limit_is_refused_before_it_is_made():
    packed = (DATA / "pdbkernels.dl_").read_bytes()
    with pytest.raises(CabinetError, match="65536 bytes, more than the limit of 4096"):
        expand(packed, "pdbkernels.dll", limit=4096)


def test_damaged_cabinets_are_one_line_each():
    good = (DATA / "pdbkernels.dl_").read_bytes()
    cab = open_cab(good)
    data_at = cab.folders[0].data_offset
    flipped = bytearray(good)
    flipped[data_at + 40] ^= 0xFF
    cases = {
        b"PK\x03\x04" + good[4:]: "not a cabinet",
        good[:30]: "the file ends inside the cabinet's header",
        good[: data_at + 100]: r"says it is 26645 bytes, the file has 175 \(truncated\)",
        bytes(flipped): "data block 0 fails its checksum",
    }
    for data, why in cases.items():
        with pytest.raises(CabinetError, match=why) as e:
            expand(data, "pdbkernels.dll")
        assert "\n" not in str(e.value)


def test_mutated_lzx_and_mszip_data_fail_cleanly():
    """Random damage to the compressed blocks (checksums cleared, so it reaches the
    decoders) ends in a CabinetError or a wrong result, never another exception or a hang."""
    rng = random.Random(35)
    sources = [(DATA / "mixed.cab").read_bytes(), (DATA / "pdbkernels.dl_").read_bytes()]
    for _ in range(300):
        data = bytearray(rng.choice(sources))
        cab = open_cab(bytes(data))
        for folder in cab.folders:
            data[folder.data_offset : folder.data_offset + 4] = bytes(4)  # no checksum
        start = min(f.data_offset for f in cab.folders)
        for _ in range(rng.randint(1, 6)):
            data[rng.randrange(start + 8, len(data))] = rng.randrange(256)
        damaged = open_cab(bytes(data))
        for member in damaged.members:
            try:
                damaged.extract(member, io.BytesIO(), 1 << 20)
            except CabinetError as e:
                assert "\n" not in str(e)


class _LzxWriter:
    """Bits MSB-first into 16-bit little-endian words, and bytes between them: enough of an
    LZX writer to make uncompressed blocks, which no cabinet at hand contains."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.bits: list = []

    def put(self, value: int, n: int) -> None:
        self.bits += [(value >> (n - 1 - i)) & 1 for i in range(n)]

    def raw(self, data: bytes) -> None:
        """Pad to the next word (1 to 16 bits, as an uncompressed block's header is), then bytes."""
        self.bits += [0] * (16 - len(self.bits) % 16)
        for w in range(0, len(self.bits), 16):
            word = int("".join(map(str, self.bits[w : w + 16])), 2)
            self.out += word.to_bytes(2, "little")
        self.bits = []
        self.out += data


def _uncompressed_block(w: _LzxWriter, data: bytes) -> None:
    w.put(3, 3)  # block type: uncompressed
    w.put(len(data) >> 8, 16)
    w.put(len(data) & 0xFF, 8)
    w.raw((1).to_bytes(4, "little") * 3 + data + (b"\0" if len(data) & 1 else b""))


def test_lzx_uncompressed_blocks_of_odd_length():
    from dumpkit.symbols.lzx import lzx_frames

    w = _LzxWriter()
    w.put(0, 1)  # no E8 translation
    _uncompressed_block(w, b"hello")  # odd: one byte of padding follows
    _uncompressed_block(w, b", world!")
    assert b"".join(lzx_frames([(bytes(w.out), 13)], 15)) == b"hello, world!"
    with pytest.raises(ValueError, match="the data ends inside an uncompressed block"):
        list(lzx_frames([(bytes(w.out[:-3]), 13)], 15))
