"""A scan for a return address (`Walker.scan`, aligned) in a process without JIT code asks
about the words 8 bytes above a 16-byte boundary alone: a module's return address is taken
only there, and a word elsewhere can be nothing else. On every sample dump, bundle and
real dump, from many SPs of every walked thread's stack, it finds what the rule itself
says: the first word within reach that can be a return address and sits on such a slot, or
that can be one outside every module (JIT code)."""

from __future__ import annotations

from typing import Optional, Tuple

import pytest

from dumpkit.engine import Options, make_walker
from dumpkit.problems import Problems
from dumpkit.unwind.frames import Trust
from dumpkit.unwind.walk import StackWindow, Walker
from tests.support.samples import every_dump, open_any

THREADS = 6  # threads of a dump scanned from
STARTS = 300  # SPs of each, one word apart from the thread's own


def _rule(walker: Walker, sp: int, window: StackWindow) -> Optional[Tuple[int, int, Trust]]:
    """The first word at or above sp, within the walker's reach, that `scan` may take."""
    code, module_at = walker.code, walker.target.module_at
    at = sp
    for _ in range(walker.scan_words):
        if at + 8 > window.stack_hi:
            return None
        word = window.read(at)
        if word is None:
            return None
        kind = code.plausible_return(word) if word > 0x10000 else None
        if kind is not None and (at & 15 == 8 or module_at(word) is None):
            return at, word, kind
        at += 8
    return None


@pytest.mark.parametrize("path, image_paths", every_dump())
def test_an_aligned_scan_finds_what_its_rule_says(path, image_paths, plain):
    problems = Problems()
    target = open_any(plain(path), problems)
    walker = make_walker(target, Options(image_paths=image_paths), problems=problems)
    step = walker.step
    if step is None or step.word_size != 8:
        pytest.skip("not an x64 dump")
    compared = 0
    for thread in [t for t in target.threads if t.context is not None][:THREADS]:
        start = step.start(thread, thread.context)
        for k in range(STARTS):
            sp = start.sp + 8 * k
            if sp >= start.stack_hi:
                break
            window = StackWindow(target, sp, start.stack_lo, start.stack_hi, 8, False)
            reference = StackWindow(target, sp, start.stack_lo, start.stack_hi, 8, False)
            assert walker.scan(sp, window.read, start.stack_hi, 8, aligned=True) == _rule(walker, sp, reference), hex(
                sp
            )
            compared += 1
    assert compared or not target.threads
