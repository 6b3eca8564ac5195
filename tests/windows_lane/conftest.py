"""The Windows lane runs only when asked for: it starts Wine (once) and runs dumpkit's CLI
on the genuine Windows CPython 3.8, which takes about a minute, so the main suite
(`python -m pytest`) leaves it out and says how to run it.

    python -m pytest -q tests/windows_lane          (or DUMPKIT_WINDOWS_LANE=1 python -m pytest)
"""

from __future__ import annotations

from pathlib import Path

from tests.support.lanes import opt_in

HERE = Path(__file__).resolve().parent

pytest_collection_modifyitems = opt_in(
    HERE, "DUMPKIT_WINDOWS_LANE", "the Windows lane runs on its own: python -m pytest -q tests/windows_lane"
)
