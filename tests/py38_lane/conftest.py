"""The py38 lane runs only when asked for: it starts Wine and runs the fast tier's
platform-neutral tests on the genuine Windows CPython 3.8 (a few minutes), so the main suite
(`python -m pytest`) leaves it out and says how to run it.

    python -m pytest -q tests/py38_lane          (or DUMPKIT_PY38_LANE=1 python -m pytest)
"""

from __future__ import annotations

from pathlib import Path

from tests.support.lanes import opt_in

HERE = Path(__file__).resolve().parent

pytest_collection_modifyitems = opt_in(
    HERE, "DUMPKIT_PY38_LANE", "the py38 lane runs on its own: python -m pytest -q tests/py38_lane"
)
