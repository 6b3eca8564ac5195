"""Which CPython builds the structure layouts were checked on, and how far that reaches.

A layout is *verified* on a build when dumpkit read every thread's Python stack out of a
real crash dump of that build and it matched what the crashed program itself printed
(sample_dumps/python for 3.8, sample_dumps/pyversions for 3.9-3.13). Another patch release
of the same minor is *trusted* when the reason is stated: for 3.9-3.12, CPython's headers
of every final patch release of that minor declare the structures the reader uses with the
fields it reads at the same offsets (docs/cpython-layout-stability.md: the releases
compared and how); for 3.13, the process publishes its own offsets (`_Py_DebugOffsets`),
which the reader checks for consistency before using them.

The judgement is made per dump from the interpreter DLL's version resource, so a report
says which build the layout was verified on when it is not the dump's own."""

from __future__ import annotations

from typing import Dict, Optional, Tuple

Version = Tuple[int, int]

# The build of each minor whose real crash dumps the layout was verified on: (micro, who built it).
VERIFIED_BUILDS: Dict[Version, Tuple[str, str]] = {
    (3, 8): ("1", "the PSF's Windows build"),
    (3, 9): ("13", "python.org's Windows build"),
    (3, 10): ("11", "python.org's Windows build"),
    (3, 11): ("9", "python.org's Windows build"),
    (3, 12): ("9", "python.org's Windows build"),
    (3, 13): ("2", "python.org's Windows build"),
}

# The final patch releases whose headers were compared (first, last micro) and found to
# keep every field the reader uses at the same offset: docs/cpython-layout-stability.md
# (headers of each release's tarball; releases after 2024-09-07 could not be had, and 3.9.8's
# tarball is missing, though 3.9.7 and 3.9.9 are identical and DWARF-derived offsets of
# 3.9.8 published by profilers agree; only additions after the fields read, and in 3.9.3 a
# reverted change that leaves them in place).
STABLE_PATCHES: Dict[Version, Tuple[int, int]] = {
    (3, 8): (0, 20),
    (3, 9): (0, 20),
    (3, 10): (0, 15),
    (3, 11): (0, 10),
    (3, 12): (0, 6),
}

# The last release of a minor that has reached its end of life: a compared range from .0
# to it covers a dump that does not say its patch release.
FINAL_RELEASE: Dict[Version, int] = {(3, 8): 20}

# Minors whose layout comes from the process's own _Py_DebugOffsets. 3.14's record is read
# in its header's field order, and its frames' tagged code references and entry-frame owner
# as its headers declare them; no genuine 3.14 build could be had to verify that on.
SELF_DESCRIBED = frozenset({(3, 13), (3, 14)})


def _final_micro(micro: Optional[str]) -> Optional[int]:
    """9 from '9'; None for a pre-release ('0rc1') or an unknown micro."""
    return int(micro) if micro is not None and micro.isdigit() else None


def layout_trust(version: Version, micro: Optional[str]) -> Tuple[bool, str]:
    """(verified, the sentence a report shows) for an interpreter of `version` whose
    version resource gives `micro` (None when the dump recorded none)."""
    built = VERIFIED_BUILDS.get(version)
    minor = f"{version[0]}.{version[1]}"
    if built is None and version in SELF_DESCRIBED:
        return False, (
            f"structure offsets read from the process's own _Py_DebugOffsets; the reader follows CPython {minor}'s "
            "headers and was not verified on a real dump of it"
        )
    if built is None:
        return False, f"structure layout from CPython {minor}'s headers, not verified on a real dump"
    seen = f"{minor}.{built[0]}"
    if micro == built[0]:
        return True, f"structure layout verified on real crash dumps of CPython {seen} ({built[1]})"
    if version in SELF_DESCRIBED:
        return True, (
            f"structure offsets read from the process's own _Py_DebugOffsets (the reader verified on CPython {seen})"
        )
    this = f"{minor}.{micro}" if micro is not None else f"this {minor} (the dump records no patch release)"
    stable = STABLE_PATCHES.get(version)
    number = _final_micro(micro)
    whole_minor = (
        stable is not None and micro is None and stable[0] == 0 and stable[1] >= FINAL_RELEASE.get(version, 1 << 16)
    )
    if stable is not None and (whole_minor or (number is not None and stable[0] <= number <= stable[1])):
        return True, (
            f"structure layout verified on CPython {seen}; {this} is trusted because the headers of every {minor} "
            f"release from {minor}.{stable[0]} to {minor}.{stable[1]} keep the fields read at the same offsets"
        )
    return False, (
        f"structure layout verified on CPython {seen}, not on {this}: its headers were not compared, so the "
        "Python stacks may be wrong"
    )
