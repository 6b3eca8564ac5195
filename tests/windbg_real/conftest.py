"""The real-pykd lane runs only when asked for: it starts Wine once per dump and takes a
few minutes, so the main suite (`python -m pytest`) leaves it out and says how to run it.

    python -m pytest -q tests/windbg_real          (or DUMPKIT_WINDBG_LANE=1 python -m pytest)
"""

from __future__ import annotations

from pathlib import Path

from tests.support.lanes import opt_in

HERE = Path(__file__).resolve().parent

pytest_collection_modifyitems = opt_in(
    HERE,
    "DUMPKIT_WINDBG_LANE",
    "the real-pykd lane runs on its own: python -m pytest -q tests/windbg_real (windbg_scripts/README.md)",
)
