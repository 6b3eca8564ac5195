"""Reports stay what they were unless a change means to change them: every sample dump's
(and every real dump's, when ../shared is beside the repository) JSON report equals its
committed snapshot in tests/golden/. Regenerate with `python tests/golden/snapshot.py`
when a change is meant to alter reports, and review the diff with it."""

from __future__ import annotations

import json

import pytest

from tests.golden.snapshot import inputs, normalized_report, snapshot_path

pytestmark = pytest.mark.slow  # the full run's (CI's); `-m "not slow"` leaves it out

CASES = list(inputs())


def _diff(expected, actual, path="$", out=None, limit=12):
    """The first differing fields, as JSON paths: a readable failure for a large report."""
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    if isinstance(expected, dict) and isinstance(actual, dict):
        for k in sorted(set(expected) | set(actual)):
            if k not in actual or k not in expected:
                out.append(f"{path}.{k}: {'missing' if k not in actual else 'new'}")
            else:
                _diff(expected[k], actual[k], f"{path}.{k}", out, limit)
    elif isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            out.append(f"{path}: {len(expected)} items -> {len(actual)}")
        for i, (e, a) in enumerate(zip(expected, actual)):
            _diff(e, a, f"{path}[{i}]", out, limit)
    elif expected != actual:
        out.append(f"{path}: {expected!r} -> {actual!r}")
    return out


@pytest.mark.parametrize("name,dump,images", CASES, ids=[c[0] for c in CASES])
def test_report_equals_its_snapshot(name, dump, images):
    path = snapshot_path(name)
    assert path.exists(), f"no snapshot for {dump.name}: run python tests/golden/snapshot.py {dump.name}"
    expected = json.loads(path.read_text())
    actual = normalized_report(dump, images)
    differences = _diff(expected, actual)
    assert not differences, f"{dump.name}: report differs from {path.name}:\n" + "\n".join(differences)
