"""`dumpkit bundle --only-used-memory` (issue #14 item 1's optional mode) on the full-memory
Python sample: the bundle's dump keeps only the memory the analysis read; a read of the
memory left out says "not in the bundle", never zeros; the bundle is much smaller. (The
report equality on every sample dump is in test_roundtrip.py.)"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from tests.bundle.helpers import write
from tests.conftest import PY_SAMPLES, run_cli

FULL = PY_SAMPLES / "py_recursion_full.trimmed.dmp.xz"


@pytest.fixture(scope="module")
def full(tmp_path_factory) -> Path:
    """The full-memory sample (no image path: its python38.dll is in the dump's memory)."""
    from tests.conftest import plain_dump

    return plain_dump(FULL, tmp_path_factory.mktemp("plain"))


@pytest.fixture(scope="module")
def slim(full, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("slim") / "slim.dkb"
    write(full, out, only_used_memory=True)
    return out


def test_memory_left_out_is_not_in_the_bundle_never_zeros(full, slim):
    from dumpkit.bundle.reader import open_bundle
    from dumpkit.sources.minidump import MemoryNotInBundle, open_dump
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


def test_the_member_keeps_the_dump_layout_and_zeros_only_left_out_memory(full, slim):
    with zipfile.ZipFile(slim) as zf:
        manifest = json.loads(zf.read("manifest.json"))
        stored = zf.read("dump.dmp")
    raw = full.read_bytes()
    assert manifest["version"] == 3 and len(stored) == len(raw) == manifest["dump"]["size"]
    kept = manifest["dump"]["kept"]
    for off, n in kept:
        assert stored[off : off + n] == raw[off : off + n]
    at = 0
    for off, n in kept + [[len(raw), 0]]:
        assert stored[at:off] == bytes(off - at)  # between the kept ranges: zeros
        at = off + n
    assert sum(n for _, n in kept) < len(raw) // 3


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
