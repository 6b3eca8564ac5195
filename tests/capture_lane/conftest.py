"""The capture lane runs only when asked for: it starts Wine for every capture (a few
minutes in all), so the main suite leaves it out and says how to run it. Each test module
gets the lane (`capture_lane`) with its Wine server up, and ends it.

    python -m pytest -q tests/capture_lane          (or DUMPKIT_CAPTURE_LANE=1 python -m pytest)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.capture_lane.lane import Unavailable, lane
from tests.support.lanes import opt_in

HERE = Path(__file__).resolve().parent

pytest_collection_modifyitems = opt_in(
    HERE, "DUMPKIT_CAPTURE_LANE", "the capture lane runs on its own: python -m pytest -q tests/capture_lane"
)


@pytest.fixture(scope="module")
def capture_lane():
    try:
        built = lane(log=lambda *_: None)
    except Unavailable as e:
        pytest.skip(f"the capture lane cannot run here: {e}")
    built.env.serve()  # a Wine run then returns when it exits (tests/support/wine: Env.serve)
    yield built
    built.env.stop()
