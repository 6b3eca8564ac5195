"""`dumpkit bundle --only-used-memory` (issue #14 item 1's optional mode) on the full-memory
Python sample: the bundle's dump keeps only the memory the analysis read; a read of the
memory left out says "not in the bundle", never zeros; the bundle is much smaller. (The
report equality on every sample dump is in test_roundtrip.py.)"""

from __future__ import annotations

import hashlib
import json
import struct
import zipfile
from pathlib import Path

import pytest

from tests.support.bundles import write
from tests.support.samples import PY_SAMPLES, run_cli

pytestmark = pytest.mark.slow  # the full run's (CI's); `-m "not slow"` leaves it out

FULL = PY_SAMPLES / "py_recursion_full.trimmed.dmp.xz"


@pytest.fixture(scope="module")
def full(tmp_path_factory) -> Path:
    """The full-memory sample (no image path: its python38.dll is in the dump's memory)."""
    from tests.support.samples import plain_dump

    return plain_dump(FULL, tmp_path_factory.mktemp("plain"))


@pytest.fixture(scope="module")
def slim(full, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("slim") / "slim.dkb"
    write(full, out, only_used_memory=True)
    return out


def test_memory_left_out_is_not_in_the_bundle_never_zeros(full, slim):
    from dumpkit.sources.bundle import open_bundle
    from dumpkit.sources.memory import MemoryNotInBundle
    from dumpkit.sources.minidump import open_dump
    from dumpkit.target import MemoryNotInDump

    original = open_dump(str(full))
    target = open_bundle(str(slim))
    kept = target.bundle.dump.kept
    assert kept is not None
    # the same captured ranges as the dump; the bytes served are the dump's wherever served
    assert target.memory_ranges() == original.memory_ranges()
    left_out = served = 0
    for start, end in original.memory_ranges():
        for page in range(start, end, 0x1000):
            want = original.read(page, 16)
            got = target.read_available(page, 16)
            if got:
                assert got == want
                served += 1
                continue
            left_out += 1
            with pytest.raises(MemoryNotInBundle, match=r"is not in the bundle") as e:
                target.read(page, 16)
            assert isinstance(e.value, MemoryNotInDump)  # every reader of memory handles it
            assert "\n" not in str(e.value)
    assert served and left_out > served, (served, left_out)
    # memory the dump never captured is still "not in the dump"
    with pytest.raises(MemoryNotInDump, match=r"is not in the dump"):
        target.read(0x10, 8)
    original.close()
    target.close()


def test_the_member_holds_only_the_kept_bytes_back_to_back(full, slim):
    with zipfile.ZipFile(slim) as zf:
        manifest = json.loads(zf.read("manifest.json"))
        stored = zf.read("dump.dmp")
    raw = full.read_bytes()
    assert manifest["version"] == 4 and manifest["dump"]["size"] == len(raw)
    kept = manifest["dump"]["kept"]
    assert stored == b"".join(raw[off : off + n] for off, n in kept)
    assert hashlib.sha256(stored).hexdigest() == manifest["dump"]["sha256"]
    assert len(stored) < len(raw) // 3
    # the header, the stream directory and every stream are kept whole
    (count, directory) = struct.unpack_from("<II", raw, 8)
    needed = [(0, 32), (directory, 12 * count)]
    needed += [struct.unpack_from("<II", raw, directory + 12 * i + 4)[::-1] for i in range(count)]
    for off, n in needed:
        assert n == 0 or any(a <= off and off + n <= a + m for a, m in kept), (off, n)


def test_a_version_3_bundle_whose_member_is_the_zeroed_dump_still_reads(full, slim, tmp_path):
    """Version 3 (written before version 4) stored the dump's layout with zeros outside
    dump.kept: such a bundle reads as the version 4 one does."""
    from tests.support.bundles import report_json

    from dumpkit.sources.bundle import open_bundle

    with zipfile.ZipFile(slim) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    doc = json.loads(members["manifest.json"])
    layout = bytearray(doc["dump"]["size"])
    at = 0
    for off, n in doc["dump"]["kept"]:
        layout[off : off + n] = members["dump.dmp"][at : at + n]
        at += n
    doc["version"] = 3
    doc["dump"]["sha256"] = hashlib.sha256(layout).hexdigest()
    old = tmp_path / "v3.dkb"
    with zipfile.ZipFile(old, "w", compression=zipfile.ZIP_STORED) as zf:  # fast; the format is in the manifest
        for name, data in {**members, "manifest.json": json.dumps(doc).encode(), "dump.dmp": bytes(layout)}.items():
            zf.writestr(name, data)
    v3 = open_bundle(str(old))
    assert v3.bundle.version == 3 and not v3.bundle.dump.packed
    assert report_json(v3) == report_json(open_bundle(str(slim)))


def test_only_used_memory_makes_a_full_memory_dumps_bundle_much_smaller(full, slim, tmp_path, capsys):
    whole = tmp_path / "whole.dkb"
    write(full, whole)
    small, big = slim.stat().st_size, whole.stat().st_size
    with capsys.disabled():
        print(f"\n{FULL.name}: dump {full.stat().st_size:,} B; bundle {big:,} B; --only-used-memory {small:,} B")
    assert small * 5 < big


def test_cli_writes_says_and_rebundles_a_slim_bundle(full, tmp_path):
    out = tmp_path / "a.dkb"
    r = run_cli("bundle", full, "-o", out, "--only-used-memory")
    assert r.returncode == 0, r.stderr
    assert "kept (the rest is memory the analysis did not read, left out)" in r.stdout
    # bundled again (as --redact does): what was left out stays out, the same bytes
    again = tmp_path / "b.dkb"
    r = run_cli("bundle", out, "-o", again)
    assert r.returncode == 0, r.stderr
    assert again.read_bytes() == out.read_bytes()
    r = run_cli("analyze", again, "--format", "json")
    assert r.returncode in (0, 1) and json.loads(r.stdout)["verdict"]
    # redacted and slimmed again: nothing the first bundle left out comes back (as zeros)
    red = tmp_path / "c.dkb"
    r = run_cli("bundle", out, "-o", red, "--redact", "--only-used-memory")
    assert r.returncode == 0, r.stderr

    def kept(path):
        with zipfile.ZipFile(path) as zf:
            return json.loads(zf.read("manifest.json"))["dump"]["kept"]

    first = kept(out)
    for off, n in kept(red):
        assert any(a <= off and off + n <= a + m for a, m in first), (off, n)


def test_a_dump_over_4_gib_is_bundled_by_its_kept_pieces(tmp_path):
    """A multi-GB full-memory dump is where --only-used-memory pays: its bundle stores the
    few MB the analysis read, in bounded memory, and gives the dump's report. Without it,
    the dump is too big for a bundle, and the one line says which dump and what to do."""
    from tests.support.bundles import report_json
    from tests.support.samples import SAMPLE_BIN, sample_path, sparse_dump
    from tests.support.measured import run_cli as run_measured

    from dumpkit.sources.bundle import open_bundle
    from dumpkit.sources.minidump import open_dump

    big = tmp_path / "big.dmp"
    sparse_dump(sample_path("recursion_cycle3.dmp"), big, 5)
    size = big.stat().st_size
    assert size > 5 << 30
    out = tmp_path / "big.dkb"
    r = run_measured(
        ["bundle", big, "--image-path", SAMPLE_BIN, "-o", out, "--only-used-memory"], address_space=16 << 30
    )
    assert r.code == 0, r.stderr
    assert r.max_rss_kb < 200 << 10, r.max_rss_kb  # nothing of the 5 GiB is held
    assert out.stat().st_size < 2 << 20
    with zipfile.ZipFile(out) as zf:
        manifest = json.loads(zf.read("manifest.json"))
    assert manifest["version"] == 4 and manifest["dump"]["size"] == size
    assert report_json(open_bundle(str(out))) == report_json(open_dump(str(big)), [str(SAMPLE_BIN)])

    r = run_measured(["bundle", big, "--image-path", SAMPLE_BIN, "-o", tmp_path / "whole.dkb"], address_space=16 << 30)
    assert r.code == 2 and not (tmp_path / "whole.dkb").exists()
    line = r.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert "big.dmp is " in line and "--only-used-memory" in line, line

    # --redact searches a copy of the whole dump in memory: refused, in one line, up front
    r = run_measured(
        ["bundle", big, "-o", tmp_path / "red.dkb", "--redact", "--only-used-memory"], address_space=16 << 30
    )
    assert r.code == 2 and r.max_rss_kb < 200 << 10, (r.code, r.max_rss_kb)
    assert r.stderr.count("\n") == 1 and "--redact takes a dump of at most 4096 MiB" in r.stderr, r.stderr


def test_kept_pieces_too_big_for_memory_are_read_from_a_private_mapped_copy(full, slim, monkeypatch):
    """Over DUMP_IN_MEMORY the member goes to a private temporary file, mapped; the pieces
    are served from the mapping as from memory, and the file does not outlive the target."""
    import glob
    import tempfile

    from tests.support.bundles import report_json

    from dumpkit.sources import bundle as reader

    in_memory = report_json(reader.open_bundle(str(slim)))
    monkeypatch.setattr(reader, "DUMP_IN_MEMORY", 0)
    before = set(glob.glob(f"{tempfile.gettempdir()}/dumpkit-bundle-*.dmp"))
    assert report_json(reader.open_bundle(str(slim))) == in_memory
    assert set(glob.glob(f"{tempfile.gettempdir()}/dumpkit-bundle-*.dmp")) <= before
