"""Frames found by scanning in code without unwind data are taken by the walk loop itself
(`Walker._scanned_frames`), not one call into the step each: on every sample dump, bundle
and real dump, the engine's walks are those of the walker that steps each frame
(`scan_runs=False`): the same frames, possible frames, support, stops and problems."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import pytest

from dumpkit.unwind.frames import StackWalk
from tests.support.samples import every_dump, real_dumps
from tests.support.walks import assert_same_walks, counted_walks


def _frames_taken(take, step, walk):  # type: ignore[no-untyped-def]
    before = len(walk.walked)
    stop = take(step, walk)
    return stop, len(walk.walked) - before


def _walk_all(path: Path, image_paths: Sequence[str], scan_runs: bool) -> Tuple[Dict[int, StackWalk], List[str], int]:
    """The engine's walks of every thread, the run's problems and how many frames the
    loop took by scanning alone."""
    return counted_walks(path, image_paths, "scan_runs", scan_runs, "_scanned_frames", _frames_taken)


@pytest.mark.parametrize("path, image_paths", every_dump())
def test_the_loops_scanned_frames_are_the_steps(path, image_paths, plain):
    dump = plain(path)
    before, before_problems, none = _walk_all(dump, image_paths, scan_runs=False)
    after, after_problems, _ = _walk_all(dump, image_paths, scan_runs=True)
    assert none == 0
    assert_same_walks((after, after_problems), (before, before_problems))


def test_the_loop_takes_scanned_frames_of_a_dump_without_its_images():
    """The comparison above compares two ways: a real dump walked without its images has
    frames the loop takes by scanning alone."""
    dump = next((p for p in real_dumps() if p.name == "stability-report.dmp"), None)
    if dump is None:
        pytest.skip("../shared/real_dumps/rust-minidump/stability-report.dmp not present")
    _, _, taken = _walk_all(dump, [], scan_runs=True)
    assert taken > 0
