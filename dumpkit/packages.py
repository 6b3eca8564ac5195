"""Which installed Python distribution owns a file: the version of TensorFlow (or NumPy) a
crashed process loaded, when its modules carry no version resource but the installation
is reachable (the recorded path on the machine that crashed, or a copy of the environment
given with --image-path).

pip records every file a wheel installed in `<site-packages>/<name>-<version>.dist-info/
RECORD`, one `path,hash,size` line each, paths relative to site-packages with forward
slashes. The owner of `.../site-packages/tensorflow/python/_pywrap_tensorflow_internal.pyd`
is the distribution whose RECORD lists `tensorflow/python/_pywrap_tensorflow_internal.pyd`
(on Windows that is `tensorflow-intel`, not `tensorflow`, for TF 2.11-2.15), so the answer
does not depend on guessing a distribution name. Reads are bounded: a few folders up, a
bounded number of dist-info folders, RECORDs read line by line up to a limit."""

from __future__ import annotations

import os
from typing import Dict, Iterable, List, Optional, Tuple
from dumpkit.target import InstalledPackage

__all__ = ["InstalledPackage", "owning_package"]

_SITE_DIRS = ("site-packages", "dist-packages")
_MAX_UP = 8  # folders between a module and its site-packages (tensorflow/python/... is 2)
_MAX_DIST_INFOS = 5_000
_MAX_RECORD_LINES = 200_000  # TensorFlow's RECORD has ~10,000
_MAX_METADATA_BYTES = 64 * 1024  # Name and Version are in the first lines


def _site_packages(path: str) -> Optional[Tuple[str, str]]:
    """(site-packages folder, the file's path relative to it with '/'), or None."""
    parts: List[str] = []
    folder = os.path.dirname(os.path.abspath(path))
    parts.append(os.path.basename(path))
    for _ in range(_MAX_UP):
        if os.path.basename(folder).lower() in _SITE_DIRS:
            return folder, "/".join(reversed(parts))
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        parts.append(os.path.basename(folder))
        folder = parent
    return None


def _dist_infos(site: str, top: str) -> List[str]:
    """dist-info folders of `site`, those naming `top` in top_level.txt first (the usual
    owner), then the others (wheels built without top_level.txt)."""
    try:
        names = sorted(n for n in os.listdir(site) if n.lower().endswith(".dist-info"))[:_MAX_DIST_INFOS]
    except OSError:
        return []
    likely: List[str] = []
    rest: List[str] = []
    for n in names:
        folder = os.path.join(site, n)
        try:
            with open(os.path.join(folder, "top_level.txt"), encoding="utf-8", errors="replace") as f:
                tops = {line.strip().lower() for line in f.read(_MAX_METADATA_BYTES).splitlines()}
        except OSError:
            tops = set()
        (likely if top.lower() in tops else rest).append(folder)
    return likely + rest


def _records(folder: str, relative: str) -> bool:
    try:
        with open(os.path.join(folder, "RECORD"), encoding="utf-8", errors="replace") as f:
            for i, line in enumerate(f):
                if i >= _MAX_RECORD_LINES:
                    return False
                # RECORD is CSV; a path holding a comma is quoted, which never matches here
                if line.split(",", 1)[0].lower() == relative:
                    return True
    except OSError:
        return False
    return False


def _metadata(folder: str) -> Optional[Tuple[str, str]]:
    try:
        with open(os.path.join(folder, "METADATA"), encoding="utf-8", errors="replace") as f:
            head = f.read(_MAX_METADATA_BYTES)
    except OSError:
        return None
    fields: Dict[str, str] = {}
    for line in head.splitlines():
        if not line.strip():
            break  # the headers end at the first blank line; the description follows
        key, sep, value = line.partition(":")
        if sep and key in ("Name", "Version"):
            fields.setdefault(key, value.strip())
    if "Name" in fields and "Version" in fields:
        return fields["Name"], fields["Version"]
    return None


def owning_package(files: Iterable[str]) -> Optional[InstalledPackage]:
    """The installed distribution whose RECORD lists one of `files` (local paths of the
    same module, best first), or None when none is inside a site-packages with one."""
    for path in files:
        found = _site_packages(path)
        if found is None:
            continue
        site, relative = found
        relative = relative.lower()  # Windows' file names compare case-insensitively
        if relative.endswith(".xz"):  # NAME.pyd.xz: an image kept compressed stands for NAME.pyd
            relative = relative[:-3]
        for folder in _dist_infos(site, relative.split("/", 1)[0]):
            if _records(folder, relative):
                meta = _metadata(folder)
                if meta is not None:
                    return InstalledPackage(meta[0], meta[1], folder)
    return None
