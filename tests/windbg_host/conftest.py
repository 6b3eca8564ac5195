"""The debugger-host lane runs only when asked for: it starts Wine once per dump and takes a
few minutes, so the main suite (`python -m pytest`) leaves it out and says how to run it.

    python -m pytest -q tests/windbg_host          (or DUMPKIT_WINDBG_HOST_LANE=1 python -m pytest)
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def _asked_for(config) -> bool:
    if os.environ.get("DUMPKIT_WINDBG_HOST_LANE") == "1":
        return True
    for arg in config.args:
        path = Path(str(arg).split("::", 1)[0]).resolve()
        if path == HERE or HERE in path.parents:
            return True
    return False


def pytest_collection_modifyitems(config, items):
    if _asked_for(config):
        return
    skip = pytest.mark.skip(
        reason="the debugger-host lane runs on its own: python -m pytest -q tests/windbg_host (windbg_scripts/README.md)"
    )
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(skip)
