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
    verified, note = layout_trust((3, 14), "0")
    assert not verified and "not verified on a real dump" in note


def test_a_prerelease_is_not_covered_by_the_final_releases_compared():
    verified, note = layout_trust((3, 11), "0rc1")
    assert not verified and "3.11.9" in note and "3.11.0rc1" in note
