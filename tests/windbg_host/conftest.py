"""The debugger-host lane runs only when asked for: it starts Wine once per dump and takes a
few minutes, so the main suite (`python -m pytest`) leaves it out and says how to run it.

    python -m pytest -q tests/windbg_host          (or DUMPKIT_WINDBG_HOST_LANE=1 python -m pytest)

Its fixtures, shared by both files: the Wine environment (built or found, its server
kept up for the session), the host program, a scratch folder for decompressed dumps, and
the genuine CPython 3.12 and 3.13 with dumpkit installed (tests/support/wine/pythons.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support import wine as lane
from tests.support.lanes import opt_in

HERE = Path(__file__).resolve().parent

pytest_collection_modifyitems = opt_in(
    HERE,
    "DUMPKIT_WINDBG_HOST_LANE",
    "the debugger-host lane runs on its own: python -m pytest -q tests/windbg_host (windbg_scripts/README.md)",
)


@pytest.fixture(scope="session")
def env():
    try:
        built = lane.build(log=lambda line: print(line, file=sys.stderr))
    except lane.Unavailable as e:
        pytest.skip(f"debugger-host lane unavailable here: {e}")
    built.serve()  # a Wine run then returns when it exits (lane.Env.serve)
    yield built
    built.stop()


@pytest.fixture(scope="session")
def host(env):
    from tests.windbg_host import host as hostlib

    try:
        return hostlib.build(env)
    except lane.Unavailable as e:
        pytest.skip(f"debugger-host lane unavailable here: {e}")


@pytest.fixture(scope="session")
def dumps_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("windbg-host-dumps")


@pytest.fixture(scope="session")
def pythons(env):
    """version -> tests.support.wine.pythons.Installed (3.12 embeddable, 3.13 installed)."""
    from tests.support.wine import pythons as built

    try:
        return built.build(env, log=lambda line: print(line, file=sys.stderr))
    except lane.Unavailable as e:
        pytest.skip(f"the engine route's Pythons are unavailable here: {e}")
