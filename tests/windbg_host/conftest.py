"""The debugger-host lane runs only when asked for: it starts Wine once per dump and takes a
few minutes, so the main suite (`python -m pytest`) leaves it out and says how to run it.

    python -m pytest -q tests/windbg_host          (or DUMPKIT_WINDBG_HOST_LANE=1 python -m pytest)
"""

from __future__ import annotations

from pathlib import Path

from tests.support.lanes import opt_in

HERE = Path(__file__).resolve().parent

pytest_collection_modifyitems = opt_in(
    HERE,
    "DUMPKIT_WINDBG_HOST_LANE",
    "the debugger-host lane runs on its own: python -m pytest -q tests/windbg_host (windbg_scripts/README.md)",
)
