"""The py38 lane's interpreter: the Windows lane's (tests/windows_lane/winpy.py: the PSF's
CPython 3.8 with dumpkit's Windows wheels, from tests/support/wine, and the checkout
on its path) with a Wine prefix of its own and one more folder on its path: the test runner
pinned in wheels.txt (pytest, hypothesis, jsonschema), unpacked once into the cache beside
the other lanes', keyed by wheels.txt and the environment it goes with."""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path
from typing import Tuple

from tests.support import wine as lane
from tests.windows_lane import winpy

HERE = Path(__file__).resolve().parent
PINS = HERE / "wheels.txt"
LAYOUT = "1"  # bump when the way the runner's folder is made changes
NAME = "py38-lane"


def build(log=print) -> Tuple[lane.Env, Path]:
    """(the environment with this lane's prefix, the folder of the unpacked test wheels),
    built if need be. Raises lane.Unavailable when it cannot be had here."""
    env = winpy.build(log=log, name=NAME)
    h = hashlib.sha256()
    for part in (PINS.read_bytes(), env.root.name.encode(), LAYOUT.encode()):
        h.update(hashlib.sha256(part).digest())
    root = lane.cache_dir().parent / NAME / f"runner-{h.hexdigest()[:16]}"
    if (root / "ready").is_file():
        return env, root / "site-packages"
    wheels = lane._download_wheels(lane.cache_dir() / "wheels", log, pins=PINS)
    root.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{root.name}.build-", dir=root.parent))
    try:
        for wheel in wheels:
            shutil.unpack_archive(str(wheel), str(work / "site-packages"), format="zip")
        lane.publish(work, root, "\n".join(w.name for w in wheels) + "\n")
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return env, root / "site-packages"
