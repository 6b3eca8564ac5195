"""A short fuzz campaign under pytest: structure-aware random mutations of the sample and
real dumps through open + walk + analyze + render (every format), in-process.

~60 s by default, bounded by time (DUMPKIT_FUZZ_SECONDS changes it). The long
coverage-guided campaign (atheris) is run by hand: see tests/fuzz/README.md; its pytest
form below is skipped unless DUMPKIT_FUZZ_LONG is set (and always under CI)."""

from __future__ import annotations

import os
import random
import tempfile

import pytest

from tests.fuzz import harness

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not harness.seed_files(), reason="no seed dumps (sample_dumps/, ../shared/real_dumps)"),
]


def test_seeds_analyse_cleanly():
    """Every seed runs through; only the real dumps with no thread, module or exception
    record (rust-minidump's invalid-*.dmp) are rejected, as the CLI rejects them."""
    from dumpkit.analysis.facts import nothing_to_analyse
    from dumpkit.sources.minidump import open_dump

    for p in harness.seed_files():
        with open_dump(str(p)) as t:
            usable = nothing_to_analyse(t, t.soft_errors) is None
        assert (harness.run_one(p.read_bytes()) is not None) == usable, p


def test_mutator_is_deterministic():
    seed = harness.seeds()[0]
    a = harness.mutate(seed, random.Random(7))
    b = harness.mutate(seed, random.Random(7))
    assert a == b


def test_fuzz_smoke_campaign():
    seconds = float(os.environ.get("DUMPKIT_FUZZ_SECONDS", "60"))
    crash_dir = tempfile.mkdtemp(prefix="dumpkit-fuzz-crash-")
    stats = harness.campaign(seconds, seed=int(os.environ.get("DUMPKIT_FUZZ_SEED", "20261122")), crash_dir=crash_dir)
    assert stats["executions"] > 0
    print(f"fuzz smoke: {stats}")


@pytest.mark.skipif(
    not os.environ.get("DUMPKIT_FUZZ_LONG") or bool(os.environ.get("CI")),
    reason="long campaign: set DUMPKIT_FUZZ_LONG=SECONDS (never under CI)",
)
def test_fuzz_long_campaign():
    stats = harness.campaign(
        float(os.environ["DUMPKIT_FUZZ_LONG"]), seed=1, crash_dir=str(harness.ROOT / "tests" / "fuzz" / "crashes")
    )
    assert stats["executions"] > 0
