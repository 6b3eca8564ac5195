"""Shared fixtures: where the bundled sample dumps and ../shared/real_dumps live."""
from __future__ import annotations

import json
import os
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


def real_dumps():
    if not REAL_DUMPS.is_dir():
        return []
    return sorted(REAL_DUMPS.glob("*/*.dmp"))
