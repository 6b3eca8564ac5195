"""The capture lane runs only when asked for: it starts Wine for every capture (a few
minutes in all), so the main suite leaves it out and says how to run it.

    python -m pytest -q tests/capture_lane          (or DUMPKIT_CAPTURE_LANE=1 python -m pytest)
"""

from __future__ import annotations

from pathlib import Path

from tests.support.lanes import opt_in

HERE = Path(__file__).resolve().parent

pytest_collection_modifyitems = opt_in(
    HERE, "DUMPKIT_CAPTURE_LANE", "the capture lane runs on its own: python -m pytest -q tests/capture_lane"
)
