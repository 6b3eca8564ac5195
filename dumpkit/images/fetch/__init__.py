"""`--fetch-images`: each module's image fetched from where it is published, as an image
source beside the symbol store (the locator asks it last; the analysis never knows where
an image came from). Off unless asked (`--fetch-images`, or DUMPKIT_FETCH_IMAGES=1 for
!tfstack and fleet workers): without it nothing leaves the machine.

published.py (where a module is published: pure), pipconfig.py (pip's index settings),
http.py (requests as pip makes them, ranges, bounds), index.py (the simple API),
wheels.py (which wheels fit, best first), ziparchive.py (one member out of a zip over
ranges), identity.py (is it the module's build), msi.py (the cabinets in python.org's
PDB packages), cache.py (the fetched-images cache),
fetcher.py (the run's fetcher that ties them together)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from dumpkit.images.fetch.fetcher import ImageFetcher, ProgressHook
    from dumpkit.target import Target

FETCH_ENV = "DUMPKIT_FETCH_IMAGES"


def fetch_requested(flag: bool = False) -> bool:
    """The flag, or DUMPKIT_FETCH_IMAGES set to 1/yes/true/on."""
    return flag or os.environ.get(FETCH_ENV, "").strip().lower() in ("1", "yes", "true", "on")


def fetcher_for(target: "Target", limit: int, progress: Optional["ProgressHook"] = None) -> "ImageFetcher":
    """The run's fetcher, for the process the dump holds."""
    from dumpkit.images.fetch.fetcher import ImageFetcher
    from dumpkit.images.fetch.published import process_of

    return ImageFetcher(process_of(target.modules, target.system), limit, progress=progress)
