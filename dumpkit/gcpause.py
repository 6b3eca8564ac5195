"""Python's cyclic garbage collector, paused while one dump is analysed.

A dump's analysis makes no reference cycles (tests/triage/test_no_cycles.py): what it
makes is freed by reference counting when its report is done. The collector's passes
during it only walk live objects (a Unity player's 62,000 memory ranges, its JIT unwind
tables), 5-15% of a triage worker's time on such dumps. Paused, a cycle an unforeseen path
makes waits for the collector's next pass after the dump instead of during it; each dump's
work is bounded, so is what waits."""

from __future__ import annotations

import contextlib
import gc
from typing import Iterator

__all__ = ["paused"]


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No automatic collection inside the block; the collector as it was after it (paused
    blocks nest: only the outermost resumes it)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
