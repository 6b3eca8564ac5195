"""Which of a project's wheels could hold a module the crashed process loaded, best first.

A wheel fits when its tags fit the process (the CPython minor read from python3X.dll, the
CPU: win_amd64, win32 or win_arm64). Of those, a module whose TimeDateStamp is its link
time was built shortly before the wheel was uploaded: candidates uploaded at or after that
time come first, nearest first, then the ones before it, nearest first. Without upload
times (an HTML-only index) or without a TimeDateStamp (a reproducible build), the newest
versions come first. Versions the caller already has reason for (a requirement pinned by
a wheel that did not hold the module) come before all others."""

from __future__ import annotations

import re
from typing import Iterable, List, Optional, Sequence, Tuple

from dumpkit.images.fetch.index import IndexFile, normalize
from dumpkit.records import record

# A wheel built before its upload: how long before a TimeDateStamp an upload may still be
# the module's (clocks differ; some projects upload a day's builds in one go).
UPLOAD_SLACK = 2 * 24 * 3600


@record
class Wheel:
    project: str  # normalized
    version: str
    python: Tuple[str, ...]
    abi: Tuple[str, ...]
    platform: Tuple[str, ...]


def parse_wheel_name(filename: str) -> Optional[Wheel]:
    if not filename.lower().endswith(".whl"):
        return None
    parts = filename[:-4].split("-")
    if len(parts) not in (5, 6):
        return None
    return Wheel(
        normalize(parts[0]),
        parts[1],
        tuple(parts[-3].lower().split(".")),
        tuple(parts[-2].lower().split(".")),
        tuple(parts[-1].lower().split(".")),
    )


def fits(wheel: Wheel, python_minor: Optional[int], platform: str) -> bool:
    """Whether pip on the crashed process's Python could have installed `wheel`."""
    if platform not in wheel.platform:
        return False
    for py in wheel.python:
        if py in ("py3", "py2", "py30") or py.startswith("py3"):
            return True
        m = re.fullmatch(r"cp3(\d+)", py)
        if m is None:
            continue
        minor = int(m.group(1))
        if python_minor is None:
            return True
        if minor == python_minor:
            return True
        if "abi3" in wheel.abi and minor <= python_minor:
            return True
    return False


def version_key(version: str) -> Tuple:
    """A sort key for versions good enough for ordering one project's releases."""
    out: List[Tuple[int, str]] = []
    for piece in re.findall(r"\d+|[a-z]+", version.lower())[:12]:
        out.append((int(piece), "") if piece.isdigit() else (-1, piece))
    final = 1 if not re.search(r"(a|b|rc|dev)\d*", version.lower()) else 0
    return (tuple(out), final)


def candidates(
    files: Iterable[IndexFile],
    project: str,
    python_minor: Optional[int],
    platform: str,
    timestamp: int,
    preferred: Sequence[str] = (),
) -> List[IndexFile]:
    """The project's wheels that fit, best first (module docstring)."""
    fitting: List[Tuple[IndexFile, Wheel]] = []
    seen = set()
    for f in files:
        w = parse_wheel_name(f.filename)
        if w is None or w.project != normalize(project) or f.filename in seen:
            continue
        if fits(w, python_minor, platform):
            seen.add(f.filename)
            fitting.append((f, w))
    timed = timestamp > 0 and all(f.upload_time is not None for f, _ in fitting)
    if timed:

        def delta(item: Tuple[IndexFile, Wheel]) -> float:
            return (item[0].upload_time or 0.0) - timestamp

        # uploaded after the link time (nearest first), then before it (nearest first)
        fitting.sort(key=lambda it: (0 if delta(it) >= -UPLOAD_SLACK else 1, abs(delta(it))))
    else:
        fitting.sort(key=lambda it: version_key(it[1].version), reverse=True)
    fitting.sort(key=lambda it: 0 if it[1].version in preferred else 1)  # stable: keeps the order within
    return [f for f, _ in fitting]
