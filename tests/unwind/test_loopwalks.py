"""One walk per thread (issue #45 item 1): the walk the loop takes of a thread from its own
registers serves as that thread's stack and as the evidence other threads' scanned frames
are checked against (unwind/loopwalks.py). On every sample dump, bundle and real dump, the
engine's walks are those of the walker that walks each apart (`reuse_walks=False`, what
dumpkit did before): the same frames, possible frames, support, stops and problems; and
no thread is walked twice from the same registers."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import pytest

from dumpkit.unwind.frames import StackWalk
from tests.support.samples import every_dump, real_dumps
from tests.support.walks import assert_same_walks, counted_walks


def _walk_all(path: Path, image_paths: Sequence[str], reuse: bool) -> Tuple[Dict[int, StackWalk], List[str], int]:
    """The engine's walks of every thread, the run's problems and how many walks the loop
    took."""
    return counted_walks(path, image_paths, "reuse_walks", reuse, "_walk", lambda walk, *args: (walk(*args), 1))


@pytest.mark.parametrize("path, image_paths", every_dump())
def test_each_thread_is_walked_once_into_the_walks_of_walking_apart(path, image_paths, plain):
    dump = plain(path)
    before, before_problems, _ = _walk_all(dump, image_paths, reuse=False)
    after, after_problems, taken = _walk_all(dump, image_paths, reuse=True)
    assert_same_walks((after, after_problems), (before, before_problems))
    # each walked thread once from its own registers; the crashing one also from the
    # exception's (a thread longer than the evidence's EVIDENCE_FRAMES, none here, twice)
    assert taken <= len(before) + 1


def test_a_walker_that_walks_apart_walks_the_evidence_again():
    """The reference above does walk twice, so the comparison compares two ways."""
    dump = next((p for p in real_dumps() if p.name == "stability-report.dmp"), None)
    if dump is None:
        pytest.skip("../shared/real_dumps/rust-minidump/stability-report.dmp not present")
    walks, _, apart = _walk_all(dump, [], reuse=False)
    _, _, once = _walk_all(dump, [], reuse=True)
    assert once <= len(walks) + 1 < apart
