"""A short fuzz campaign of the bundle reader under pytest (issue #14 item 7): mutated
bundles (manifest fields, the dump, image and PDB pages, the zip's bytes) through
open_bundle + analyze + JSON. ~30 s (DUMPKIT_BUNDLE_FUZZ_SECONDS changes it); the atheris
form is run by hand (tests/fuzz/README.md)."""

from __future__ import annotations

import os
import random
import tempfile

import pytest

from tests.fuzz import bundle_harness

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not bundle_harness.harness.seed_files(), reason="no sample dumps")]


def test_seed_bundles_analyse_cleanly_and_carry_pdb_pages():
    files = bundle_harness.seed_files()
    assert any(p.name == "pdb_static_cycle.dkb" for p in files)
    for p in files:
        js = bundle_harness.run_one(p.read_bytes())
        assert js is not None, p
        if p.name.startswith("pdb_static"):
            assert '"symbol_source": "pdb: ' in js  # the PDB pages are being fuzzed too
    # a version 4 bundle (only the memory read, as pieces) is fuzzed too
    slim = [p for p in files if p.name.endswith(".slim.dkb")]
    assert slim and all(b'"version": 4' in _manifest(p) for p in slim)


def _manifest(path):
    import zipfile

    with zipfile.ZipFile(path) as zf:
        return zf.read("manifest.json")


def test_the_mutator_reaches_past_the_checks():
    """Most mutations must give a bundle that opens (else only the checks get fuzzed), and
    some must touch the PDB pages."""
    pool = bundle_harness.seeds()
    rng = random.Random(5)
    opened = 0
    for _ in range(40):
        data = bundle_harness.mutate(rng.choice(pool), rng)
        opened += bundle_harness.run_one(data) is not None
    assert opened >= 10


def test_bundle_fuzz_smoke_campaign():
    seconds = float(os.environ.get("DUMPKIT_BUNDLE_FUZZ_SECONDS", "30"))
    crash_dir = tempfile.mkdtemp(prefix="dumpkit-bundle-fuzz-crash-")
    stats = bundle_harness.campaign(seconds, seed=int(os.environ.get("DUMPKIT_FUZZ_SEED", "1415")), crash_dir=crash_dir)
    assert stats["executions"] > 0
    print(f"bundle fuzz smoke: {stats}")
