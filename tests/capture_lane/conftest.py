"""The capture lane runs only when asked for: it starts Wine for every capture (a few
minutes in all), so the main suite leaves it out and says how to run it.

    python -m pytest -q tests/capture_lane          (or DUMPKIT_CAPTURE_LANE=1 python -m pytest)
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def _asked_for(config) -> bool:
    if os.environ.get("DUMPKIT_CAPTURE_LANE") == "1":
        return True
    for arg in config.args:
        path = Path(str(arg).split("::", 1)[0]).resolve()
        if path == HERE or HERE in path.parents:
            return True
    return False


def pytest_collection_modifyitems(config, items):
    if _asked_for(config):
        return
    skip = pytest.mark.skip(reason="the capture lane runs on its own: python -m pytest -q tests/capture_lane")
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(skip)
