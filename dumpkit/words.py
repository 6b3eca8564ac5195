"""How dumpkit writes numbers and counts, in every sentence and every format: one place, so
the verdict's prose and each renderer say "1,710 repetitions" and "1016.2 KiB" alike."""

from __future__ import annotations

from enum import Enum
from typing import Optional, Sequence


def human_bytes(n: Optional[int]) -> str:
    """'304 bytes', '1016.2 KiB', '1 MiB'; '?' when unknown."""
    if n is None:
        return "?"
    if n >= 1 << 20:
        v = n / (1 << 20)
        return f"{v:.1f} MiB" if v % 1 else f"{int(v)} MiB"
    if n >= 1 << 10:
        v = n / (1 << 10)
        return f"{v:.1f} KiB" if v % 1 else f"{int(v)} KiB"
    return f"{n} bytes"


def memory_size(n: int) -> str:
    """A machine's or a process's memory: '15.9 GiB' from 1 GiB up, else as `human_bytes`."""
    return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 30 else human_bytes(n)


def percent_of(part: int, whole: int) -> int:
    """`part` as a whole percentage of `whole`, rounded down and at most 100: 99.6% of a
    limit is not yet 100%."""
    return min(100, 100 * part // whole) if whole > 0 else 0


def plural(n: int, noun: str) -> str:
    """'1 frame', '2 frames', '1,048,444 frames'."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def listing(names: Sequence[str], shown: int) -> str:
    """'a, b, c' or, past `shown` names, 'a, b, c and 4 more'."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


def joined(names: Sequence[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


class Word(str, Enum):
    """A str-valued enum, the base of every word the model carries (verdict kind,
    confidence, severity, call kind, trust, stop reason): it compares, hashes and
    serialises as its value ("recursion"), so JSON is unchanged, and prints as it (str()
    and format() of a mixed-in Enum changed between 3.8 and 3.12)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)
