"""The Windows lane runs only when asked for: it starts Wine (once) and runs dumpkit's CLI
on the genuine Windows CPython 3.8, which takes about a minute, so the main suite
(`python -m pytest`) leaves it out and says how to run it.

    python -m pytest -q tests/windows_lane          (or DUMPKIT_WINDOWS_LANE=1 python -m pytest)
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def _asked_for(config) -> bool:
    if os.environ.get("DUMPKIT_WINDOWS_LANE") == "1":
        return True
    for arg in config.args:
        path = Path(str(arg).split("::", 1)[0]).resolve()
        if path == HERE or HERE in path.parents:
            return True
    return False


def pytest_collection_modifyitems(config, items):
    if _asked_for(config):
        return
    skip = pytest.mark.skip(reason="the Windows lane runs on its own: python -m pytest -q tests/windows_lane")
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(skip)
