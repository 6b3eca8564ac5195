#!/usr/bin/env python3
"""Record what Microsoft's debugger engine says of the memory-counter streams of the real
dumps in ../shared/real_dumps: `.dumpdebug`'s SystemMemoryInfoStream and
ProcessVmCountersStream blocks, run by the dbgeng.dll of the real-pykd lane (pykd 0.3.4.15
under Wine, tests/support/wine). tests/sources/test_memory_counters.py holds dumpkit's
reading of the files to them, and PykdTarget reads the same text in a WinDbg session.

    python tools/record_dumpdebug.py        # rewrite tests/sources/dumpdebug/*.txt

Each file is named after the dump (`<folder>--<file>.txt`) and holds the two blocks as the
engine printed them, nothing else of the dump."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support import wine as lane  # noqa: E402
from tests.support.samples import real_dumps  # noqa: E402

OUT = ROOT / "tests" / "sources" / "dumpdebug"
WANTED = ("SystemMemoryInfoStream", "ProcessVmCountersStream")


def blocks(text: str) -> str:
    """The `Stream N: type X ...` blocks of the wanted streams, each with its indented lines."""
    kept, keep = [], False
    for line in text.splitlines():
        if line.startswith("Stream "):
            keep = any(f"type {name} " in line for name in WANTED)
        elif not line.startswith(" "):
            keep = False
        if keep:
            kept.append(line.rstrip())
    return "\n".join(kept) + "\n"


def main() -> None:
    env = lane.build(log=lambda line: print(line, file=sys.stderr))
    env.serve()
    OUT.mkdir(parents=True, exist_ok=True)
    try:
        with tempfile.TemporaryDirectory(dir=env.root) as tmp:
            for dump in real_dumps():
                copy = Path(tmp) / dump.name
                shutil.copy(dump, copy)
                try:
                    got = env.debugger(copy, runs=[], facts=[".dumpdebug"], timeout=300)
                except AssertionError as e:  # a dump the engine will not open (invalid-range.dmp)
                    print(f"skipped {dump.name}: {str(e).splitlines()[0]}", file=sys.stderr)
                    continue
                text = blocks(got["facts"][0]["output"])
                if text.strip():
                    target = OUT / f"{dump.parent.name}--{dump.name}.txt"
                    target.write_text(text, encoding="utf-8")
                    print(f"wrote {target.relative_to(ROOT)}")
    finally:
        env.stop()


if __name__ == "__main__":
    main()
