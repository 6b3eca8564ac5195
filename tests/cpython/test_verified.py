"""Which builds a Python stack's layout is trusted on, and what the report says of it."""

from __future__ import annotations

from dumpkit.cpython.verified import layout_trust


def test_the_build_the_layout_was_verified_on_is_verified():
    verified, note = layout_trust((3, 12), "9")
    assert verified and "verified on real crash dumps of CPython 3.12.9" in note


def test_any_313_release_reads_the_offsets_the_process_publishes():
    verified, note = layout_trust((3, 13), "5")
    assert verified and "_Py_DebugOffsets" in note and "3.13.2" in note


def test_a_minor_never_verified_says_so():
    verified, note = layout_trust((3, 15), "0")
    assert not verified and "not verified on a real dump" in note


def test_314_reads_the_published_offsets_but_says_it_was_never_verified():
    verified, note = layout_trust((3, 14), "2")
    assert not verified and "_Py_DebugOffsets" in note and "not verified on a real dump" in note


def test_a_prerelease_is_not_covered_by_the_final_releases_compared():
    verified, note = layout_trust((3, 11), "0rc1")
    assert not verified and "3.11.9" in note and "3.11.0rc1" in note


def test_a_patch_release_whose_headers_were_compared_is_trusted_with_the_reason():
    verified, note = layout_trust((3, 10), "4")
    assert verified and "3.10.11" in note and "3.10.0 to 3.10.15" in note


def test_a_patch_release_past_the_compared_range_is_not_trusted():
    verified, note = layout_trust((3, 11), "13")
    assert not verified and "3.11.9" in note and "not on 3.11.13" in note


def test_an_unknown_patch_release_is_trusted_only_when_every_release_was_compared():
    assert layout_trust((3, 8), None)[0]  # 3.8.0 to 3.8.20, the last 3.8
    verified, note = layout_trust((3, 12), None)
    assert not verified and "records no patch release" in note
