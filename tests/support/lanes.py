"""The lanes that run under Wine (tests/windbg_real, windbg_host, capture_lane,
windows_lane, py38_lane) start Wine and take minutes, so the main suite leaves them out
unless asked for: by naming the lane's folder on the command line, or by its environment
variable."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import pytest


def opt_in(folder: Path, variable: str, reason: str) -> Callable:
    """A `pytest_collection_modifyitems` hook for a lane's conftest.py: the tests below
    `folder` are skipped with `reason` unless the run names the folder (or a file in it)
    or sets `variable`=1."""

    def asked_for(config) -> bool:
        if os.environ.get(variable) == "1":
            return True
        for arg in config.args:
            path = Path(str(arg).split("::", 1)[0]).resolve()
            if path == folder or folder in path.parents:
                return True
        return False

    def pytest_collection_modifyitems(config, items):
        if asked_for(config):
            return
        skip = pytest.mark.skip(reason=reason)
        for item in items:
            if folder in Path(str(item.fspath)).resolve().parents:
                item.add_marker(skip)

    return pytest_collection_modifyitems
