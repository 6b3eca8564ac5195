"""Shared fixtures: where the bundled sample dumps and ../shared/real_dumps live."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SAMPLES = ROOT / "sample_dumps"
SAMPLE_BIN = SAMPLES / "bin"
REAL_DUMPS = ROOT.parent / "shared" / "real_dumps"


def sample_manifest():
    path = SAMPLES / "manifest.json"
    if not path.exists():
        return []
    return json.loads(path.read_text())["dumps"]


def sample_path(name: str) -> Path:
    p = SAMPLES / name
    if not p.exists():
        pytest.skip(f"sample dump {name} not present")
    return p


def real_dump(rel: str) -> Path:
    p = REAL_DUMPS / rel
    if not p.exists():
        pytest.skip(f"../shared/real_dumps/{rel} not present")
    return p


def real_manifest():
    """../shared/real_dumps/manifest.json (one entry per dump), or [] when absent."""
    path = REAL_DUMPS / "manifest.json"
    return json.loads(path.read_text()) if path.exists() else []


def real_dumps():
    if not REAL_DUMPS.is_dir():
        return []
    return sorted(REAL_DUMPS.glob("*/*.dmp"))


# --- walked crashing threads of the sample dumps (tests/analysis: recursion, frame sizes,
# --- stack budget). One walk per dump per session.
class CrashWalk:
    """A sample dump opened and its crashing thread walked from the exception context."""

    def __init__(self, target, walker, thread, walk, facts):
        self.target = target
        self.walker = walker
        self.thread = thread
        self.walk = walk
        self.frames = walk.frames
        self.exception = target.exception
        self.facts = facts  # the dump's manifest.json entry ({} when there is no manifest)

    def module_base(self, name):
        low = name.lower()
        for m in self.target.modules:
            if m.name.lower() == low:
                return m.base
        return None


def sample_facts(name: str) -> dict:
    """The manifest.json entry of a sample dump; skips when the manifest or entry is missing."""
    for d in sample_manifest():
        if d.get("file") == name:
            return d
    pytest.skip(f"sample_dumps/manifest.json has no entry for {name}")


@pytest.fixture(scope="session")
def crash_walk():
    """crash_walk("recursion_one.dmp") -> CrashWalk (cached); skips when the dump is absent."""
    cache = {}

    def get(name: str) -> CrashWalk:
        if name not in cache:
            path = sample_path(name)
            from dumpkit.images import ImageLocator
            from dumpkit.sources.minidump import open_dump
            from dumpkit.unwind.amd64 import ImageProvider, Walker, walk_thread

            target = open_dump(str(path))
            locator = ImageLocator(image_paths=[str(SAMPLE_BIN)] if SAMPLE_BIN.is_dir() else [])
            walker = Walker(target, ImageProvider(target, locator))
            ex = target.exception
            thread = next(t for t in target.threads if t.tid == ex.thread_id)
            walk = walk_thread(walker, thread, ex.context)
            facts = next((d for d in sample_manifest() if d.get("file") == name), {})
            cache[name] = CrashWalk(target, walker, thread, walk, facts)
        return cache[name]

    return get
