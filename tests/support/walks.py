"""The engine's walks of every thread of a dump under a walker setting, and everything a
walk says as one comparable value: for the tests that hold a fast path of the walk loop
to its reference (tests/unwind/test_loopwalks.py, tests/unwind/test_scanned_runs.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, List, Sequence, Tuple

from dumpkit.engine import Options, make_walker, walk_all
from dumpkit.problems import Problems
from dumpkit.unwind.frames import Frame, StackWalk
from dumpkit.unwind.walk import Walker
from tests.support.samples import open_any


def _row(f: Frame) -> Tuple[object, ...]:
    return (f.index, f.ip, f.sp, f.module, f.rva, f.function_start, f.symbol, f.size, f.trust, f.source)


def seen(w: StackWalk) -> Tuple[object, ...]:
    """Everything a walk says."""
    return (
        [_row(f) for f in w.frames],
        [_row(f) for f in w.possible],
        w.stop,
        w.frame_limit,
        w.problems,
        w.support,
        w.unsaved_jit_unwind,
    )


def walks_with(
    path: Path, image_paths: Sequence[str], setting: Callable[[Walker], None]
) -> Tuple[Dict[int, StackWalk], List[str]]:
    """The engine's walks of every thread and the run's problems, with the walker as
    `setting` leaves it (a switch set, a method wrapped to count)."""
    problems = Problems()
    target = open_any(path, problems)
    options = Options(image_paths=image_paths)
    walker = make_walker(target, options, problems=problems)
    setting(walker)
    return walk_all(target, walker, options, problems), list(problems.items)


def assert_same_walks(
    after: Tuple[Dict[int, StackWalk], List[str]], before: Tuple[Dict[int, StackWalk], List[str]]
) -> None:
    """Two `walks_with` results say the same of every thread, and the runs met the same
    problems."""
    assert sorted(after[0]) == sorted(before[0])
    for tid in before[0]:
        assert seen(after[0][tid]) == seen(before[0][tid]), tid
    assert after[1] == before[1]


def counted_walks(
    path: Path, image_paths: Sequence[str], switch: str, on: bool, method: str, count: Callable[..., Tuple[Any, int]]
) -> Tuple[Dict[int, StackWalk], List[str], int]:
    """`walks_with` the walker's `switch` set to `on`, and what its `method` did: each call
    goes through `count(the method, its arguments...)`, which returns (the method's result,
    a number), and the numbers are added up."""
    total = [0]

    def setting(walker: Walker) -> None:
        setattr(walker, switch, on)
        inner = getattr(walker, method)

        def counted(*args: Any) -> Any:
            result, n = count(inner, *args)
            total[0] += n
            return result

        setattr(walker, method, counted)

    walks, problems = walks_with(path, image_paths, setting)
    return walks, problems, total[0]
