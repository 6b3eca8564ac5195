"""Issue #14 item 2: a bundle gives the report the dump gives with its images, on a machine
without them. For every sample dump (and every real dump in ../shared when it is there): the
bundle is written from the dump and its images, then analysed with no image path at all; its
JSON report (and `stack --all --python`'s) equals the original's but for the dump's path and
which file served each image."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest

from tests.support.bundles import report_json, stacks_json, write
from tests.support.samples import (
    PY_SAMPLES,
    REAL_DUMPS,
    SAMPLE_BIN,
    SAMPLES,
    python_bundle,
    python_images,
    python_manifest,
)

pytestmark = pytest.mark.slow  # the full run's (CI's); `-m "not slow"` leaves it out


def _cases():
    for p in sorted(SAMPLES.glob("*.dmp")) + sorted(SAMPLES.glob("*.dmp.xz")):
        yield pytest.param(p, "sample", id=f"sample--{p.name}")
    for facts in python_manifest():
        yield pytest.param(facts, "python", id=f"python--{facts['file']}")
    if REAL_DUMPS.is_dir():
        for p in sorted(REAL_DUMPS.glob("*/*.dmp")):
            yield pytest.param(p, "real", id=f"real--{p.parent.name}--{p.name}")


def _inputs(case, kind, plain, tmp_path):
    """(a plain dump, its image folders) for one case; skips when the images are not here."""
    if kind == "sample":
        return plain(case), [str(SAMPLE_BIN)]
    if kind == "real":
        return case, []
    path = PY_SAMPLES / case["file"]
    if not path.exists():
        bundle = python_bundle(case)
        if bundle is None:
            pytest.skip(f"{case['file']} not present")
        # A committed bundle: its dump is the one the images are checked against.
        with zipfile.ZipFile(bundle) as zf, zf.open("dump.dmp") as src, open(tmp_path / "dump.dmp", "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        path = tmp_path / "dump.dmp"
    return plain(path), python_images(case, bundled=False)


@pytest.mark.parametrize("case,kind", list(_cases()))
def test_a_bundle_without_images_reports_what_the_dump_with_images_does(case, kind, plain, tmp_path):
    from dumpkit.sources.bundle import open_bundle
    from dumpkit.sources.minidump import open_dump

    dump, images = _inputs(case, kind, plain, tmp_path)
    out = tmp_path / "crash.dkb"
    summary = write(Path(dump), out, images)
    expected = report_json(open_dump(str(dump)), images)
    actual = report_json(open_bundle(str(out)))
    assert actual == expected
    # The bundle holds the modules an image file served, and only those (the dump's own
    # memory serves the rest: a full-memory dump's bundle holds no image at all).
    from_files = {m["name"] for m in expected["modules"] if "TimeDateStamp" in (m["image_source"] or "")}
    assert {e.name for e in summary.manifest.images} == from_files
    if _stacks_too(case, kind):  # `stack --all --python` too, where it adds something: costly
        assert stacks_json(open_bundle(str(out))) == stacks_json(open_dump(str(dump)), images)


def _stacks_too(case, kind) -> bool:
    """The Python stacks (full-memory dumps) and one native sample with several threads."""
    if kind == "python":
        return bool(case.get("python_threads_in_dump"))
    return kind == "sample" and case.name == "recursion_cycle3.dmp"


@pytest.mark.parametrize("case,kind", list(_cases()))
def test_a_bundle_of_only_the_memory_read_reports_what_the_dump_does(case, kind, plain, tmp_path):
    """bundle --only-used-memory: the memory the analysis did not read is left out of the
    bundle's dump, and the reports (analyze, and stack --all --python where it adds
    something) are still those of the whole dump with its images."""
    from dumpkit.sources.bundle import open_bundle
    from dumpkit.sources.minidump import open_dump

    dump, images = _inputs(case, kind, plain, tmp_path)
    out = tmp_path / "slim.dkb"
    summary = write(Path(dump), out, images, only_used_memory=True)
    assert summary.manifest.version == 4 and summary.manifest.dump.kept is not None
    assert report_json(open_bundle(str(out))) == report_json(open_dump(str(dump)), images)
    if _stacks_too(case, kind):
        assert stacks_json(open_bundle(str(out))) == stacks_json(open_dump(str(dump)), images)
