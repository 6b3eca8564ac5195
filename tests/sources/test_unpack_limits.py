"""A packed dump that unpacks far beyond any real dump is refused early, in one line
(issue #45 item 5): past what its minidump header and streams account for (a bomb's zeros
behind a header), or past DUMPKIT_MAX_UNPACK_RATIO times its packed size."""

from __future__ import annotations

import gzip
import lzma
import os
import struct
import tracemalloc
import zlib
from pathlib import Path

import pytest

from dumpkit.pe.xz import read_index
from dumpkit.sources import packed
from dumpkit.sources.accounted import accounted_size
from dumpkit.target import DumpError
from tests.support.samples import REAL_DUMPS, SAMPLES, real_dumps, run_cli, sample_path

PLAIN = "recursion_cycle3.dmp"


def _gzip_of_zeros(out: Path, header: bytes, gib: int) -> Path:
    """A gzip file of `header` and then `gib` GiB of zeros, made without compressing them:
    one deflate block of 1 MiB of zeros, flushed to a byte boundary with the dictionary
    reset, repeated (the CRC is left wrong: the reader never gets that far)."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = c.compress(header + bytes((1 << 20) - len(header))) + c.flush(zlib.Z_FULL_FLUSH)
    block = c.compress(bytes(1 << 20)) + c.flush(zlib.Z_FULL_FLUSH)
    with open(out, "wb") as f:
        f.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff")  # gzip header, deflate
        f.write(first)
        for _ in range((gib << 10) - 1):
            f.write(block)
        f.write(c.flush(zlib.Z_FINISH))
        f.write(struct.pack("<II", 0, 0))
    return out


def _header() -> bytes:
    """A real dump's MINIDUMP_HEADER (its directory, like all else, is zeros behind it)."""
    return sample_path(PLAIN).read_bytes()[:32]


def _all_dumps():
    found = sorted(p for p in SAMPLES.rglob("*") if p.name.endswith((".dmp", ".dmp.xz")) and "bin" not in p.parts)
    return found + real_dumps()


def _head_and_size(path: Path):
    """A dump's first MiB and its size (an .xz sample's from the xz index: unpacking them
    all would take half a minute)."""
    if path.suffix != ".xz":
        data = path.read_bytes()
        return data[: 1 << 20], len(data)
    with open(path, "rb") as f:
        found = read_index(f, path.stat().st_size)
    assert found is not None, path
    with lzma.open(path) as f:
        return f.read(1 << 20), sum(b.size for b in found[1])


def test_every_real_dump_accounts_for_every_byte_of_its_file():
    """What a dump's header and streams account for is its file, on every sample and real
    dump whose first MiB tells (rust-minidump's deliberately broken dumps claim more)."""
    told = 0
    for path in _all_dumps():
        head, size = _head_and_size(path)
        accounted = accounted_size(head)
        if accounted is None:
            continue
        told += 1
        if path.name in ("invalid-range.dmp", "invalid-record-count.dmp"):
            assert accounted > size
        else:
            assert accounted == size, path
    assert told > 100 or not REAL_DUMPS.is_dir() and told > 60


def test_a_gzip_of_zeros_behind_a_minidump_header_is_refused_before_it_is_unpacked(tmp_path):
    """8 GiB of zeros in an 8 MB gzip: refused in one line once unpacking passes what the
    header accounts for, holding a few MiB (not 256 MiB in memory, then a temporary copy)."""
    bomb = _gzip_of_zeros(tmp_path / "crash.dmp.gz", _header(), 8)
    assert bomb.stat().st_size < (9 << 20)
    tracemalloc.start()
    try:
        with pytest.raises(DumpError) as e:
            packed.open_packed(str(bomb), packed.packing_of(str(bomb)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(e.value).startswith("gzip-compressed: unpacks past the ")
    assert "its minidump header and streams account for" in str(e.value)
    assert peak < packed.UNACCOUNTED * 3


def test_the_cli_says_it_in_one_line_and_triage_lists_it(tmp_path):
    bomb = _gzip_of_zeros(tmp_path / "crash.dmp.gz", _header(), 1)
    r = run_cli("analyze", bomb)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith(f"dumpkit: error: {bomb}: gzip-compressed: unpacks past the ")
    assert len(r.stderr.splitlines()) == 1
    r = run_cli("triage", tmp_path, "--format", "json", "--no-progress", "-j", "1")
    assert r.returncode == 1 and '"status": "error"' in r.stdout and "unpacks past the" in r.stdout


def test_past_the_ratio_set_a_packed_dump_is_refused_naming_the_setting(tmp_path, monkeypatch):
    """A real dump packed 15-25 times: refused under a limit of 5, which the line names;
    read as ever under the default."""
    dump = tmp_path / "crash.dmp.gz"
    dump.write_bytes(gzip.compress(sample_path(PLAIN).read_bytes()))
    packing = packed.packing_of(str(dump))
    assert packing is not None
    target = packed.open_packed(str(dump), packing)
    target.close()
    monkeypatch.setenv(packed.RATIO_ENV, "5")
    with pytest.raises(DumpError) as e:
        packed.open_packed(str(dump), packing)
    assert str(e.value).startswith("gzip-compressed: unpacks to more than 5 times its ")
    assert "DUMPKIT_MAX_UNPACK_RATIO" in str(e.value)


@pytest.mark.parametrize("command", ["analyze", "triage"])
def test_a_ratio_setting_that_is_no_number_is_one_line(tmp_path, command):
    dump = tmp_path / "crash.dmp.xz"
    dump.write_bytes(lzma.compress(sample_path(PLAIN).read_bytes()))
    r = run_cli(command, dump, env={**os.environ, packed.RATIO_ENV: "lots"})
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "DUMPKIT_MAX_UNPACK_RATIO='lots' is not a whole number above 0" in r.stderr
    assert len(r.stderr.splitlines()) == 1
