"""Real Windows wheels for the --fetch-images tests: the ones pinned in index_wheels.txt,
downloaded once with pip (hash-checked, --platform win_amd64 --python-version 3.8) into
a cache folder outside the repository, as the Wine lanes keep theirs; a test skips when
they cannot be had (offline), with pip's reason."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Optional, Tuple

import pytest

from tests.support.pip_wheels import pip_download

PINS = Path(__file__).with_name("index_wheels.txt")
DOWNLOAD_TIMEOUT = 1800


def cache_dir() -> Path:
    """$DUMPKIT_INDEX_WHEELS, else dumpkit/index-wheels in the account's real cache folder
    (the test session gives itself an empty $HOME)."""
    explicit = os.environ.get("DUMPKIT_INDEX_WHEELS")
    if explicit:
        return Path(explicit)
    try:
        import pwd

        home = pwd.getpwuid(os.getuid()).pw_dir
    except (ImportError, KeyError):
        home = os.path.expanduser("~")
    return Path(home) / ".cache" / "dumpkit" / "index-wheels"


def _pin(project: str, version: Optional[str]) -> Tuple[str, str]:
    """(requirement line, Python it is for) of the pin of `project` (at `version`)."""
    for line in PINS.read_text().splitlines():
        req, _, note = line.partition("#")
        name, _, rest = req.partition("==")
        if name.strip().lower() == project.lower() and (version is None or rest.split()[0] == version):
            python = note.split("python", 1)[1].strip() if "python" in note else "3.8"
            return req.strip(), python
    raise KeyError(project)


def wheel(project: str, version: Optional[str] = None) -> Path:
    """The pinned wheel of `project` (downloaded now if it is not in the cache yet)."""
    pin, python = _pin(project, version)
    version = pin.split("==", 1)[1].split()[0]
    folder = cache_dir()
    prefix = f"{project.replace('-', '_')}-{version}-"
    found = sorted(folder.glob(f"{prefix}*.whl")) if folder.is_dir() else []
    if found:
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as req:
        req.write(pin + "\n")
    try:
        proc = pip_download(Path(req.name), folder, DOWNLOAD_TIMEOUT, python)
    finally:
        os.unlink(req.name)
    found = sorted(folder.glob(f"{prefix}*.whl"))
    if proc.returncode != 0 or not found:
        pytest.skip(f"{project} {version} could not be downloaded: {proc.stderr.strip()[-300:]}")
    return found[0]
