"""pe/exports.py: named, aliased, ordinal-only and forwarded exports, the nearest export at
or below an address, and bounded work on hostile counts or unreadable tables."""

from __future__ import annotations

import time

from dumpkit.pe import PEImage

from tests.support.synth_pe import make_sample_image


def test_exports(img, sample):
    i = sample.info
    assert img.exports() == [
        (i["f0"], "alpha"),
        (i["f1"], "beta"),
        (i["f1"], "beta_alias"),
        (i["f2"], "#12"),
        (i["f5"], "epsilon"),
    ]  # "forwarded" is a forwarder: skipped; index 2 has no name: ordinal base 10 + 2
    assert img.nearest_export(i["f1"] + 0x10) == ("beta", i["f1"])
    assert img.nearest_export(i["f0"]) == ("alpha", i["f0"])
    assert img.nearest_export(i["f5"] - 1) == ("#12", i["f2"])
    assert img.nearest_export(i["f5"] + 0x1000) == ("epsilon", i["f5"])
    assert img.nearest_export(i["f0"] - 1) is None
    assert img.problems == []


def test_hostile_export_counts_are_bounded(tmp_path):
    s = make_sample_image(nnames_claim=0xFFFFFFFF, nfuncs_claim=0xFFFFFFFF)
    image = PEImage.from_file(s.write(tmp_path / "hostile.dll"))
    t = time.monotonic()
    exps = image.exports()
    assert time.monotonic() - t < 2
    assert isinstance(exps, list)
    assert image.problems and "claims" in image.problems[0]
    assert image.nearest_export(0x1000) is None or isinstance(image.nearest_export(0x1000), tuple)
    image.close()


def test_exports_unreadable_in_memory_gives_empty(sample):
    r = sample.info["rdata"]
    image = PEImage.from_memory(sample.reader(missing=[(r, r + 0x1000)]), sample.image_base)
    assert image.exports() == []
    assert image.nearest_export(0x1010) is None
    assert any("export" in p for p in image.problems)
