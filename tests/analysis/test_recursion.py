"""Cycle detection (dumpkit.analysis.recursion) on the real sample dumps, on a synthetic
1,000,000-frame stack, and as properties of random small stacks."""

from __future__ import annotations

from typing import List, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.samples import sample_facts
from dumpkit.analysis.recursion import _mode, find_cycles, function_codes
from dumpkit.unwind.frames import Frame


def _short(name: str) -> str:
    return name.split("!", 1)[-1]


def _is_rotation(a: Sequence[str], b: Sequence[str]) -> bool:
    if len(a) != len(b):
        return False
    doubled = list(b) + list(b)
    return any(doubled[i : i + len(a)] == list(a) for i in range(len(b)))


def _used(cw) -> int:
    return cw.thread.stack_end - cw.exception.context.sp


# ------------------------------------------------------------------ real sample dumps
def test_recursion_one_single_function_cycle(crash_walk):
    facts = sample_facts("recursion_one.dmp")
    cw = crash_walk("recursion_one.dmp")
    cycles = find_cycles(cw.frames, used_stack=_used(cw))
    assert len(cycles) == 1
    c = cycles[0]
    assert c.period == facts["cycle_period"] == 1
    assert [_short(f) for f in c.functions] == facts["cycle_functions"]
    assert c.functions[0].startswith("opkernels.dll!")
    assert abs(c.repetitions - facts["cycle_repetitions"]) <= 3
    fn = "opkernels.dll!" + facts["cycle_functions"][0]
    assert c.bytes_per_repetition == facts["cycle_bytes_per_repetition"]
    assert c.bytes_per_repetition == facts["frame_bytes_by_function"][fn]
    assert c.first_frame == facts["cycle_first_frame"] and c.frames_above == 0
    assert c.last_frame - c.first_frame + 1 == c.repetitions * c.period
    # the recursion is (almost) the whole stack
    assert c.stack_share is not None and c.stack_share > 0.95
    assert c.total_bytes <= _used(cw)
    assert c.entry_path and _short(c.entry_path[0]) == "run_scenario"


def test_recursion_cycle3_three_functions(crash_walk):
    facts = sample_facts("recursion_cycle3.dmp")
    cw = crash_walk("recursion_cycle3.dmp")
    cycles = find_cycles(cw.frames, used_stack=_used(cw))
    assert len(cycles) == 1
    c = cycles[0]
    assert c.period == facts["cycle_period"] == 3
    got = [_short(f) for f in c.functions]
    assert _is_rotation(got, facts["cycle_functions"])
    # canonical rotation: the member nearest the top of the stack comes first
    assert got[0] == _short(cw.frames[c.first_frame].function_name)
    assert got[0] == facts["fault_function"] == facts["cycle_functions"][0]
    assert got == facts["cycle_functions"]  # stack order, callee first
    assert abs(c.repetitions - facts["cycle_repetitions"]) <= 3
    assert c.bytes_per_repetition == facts["cycle_bytes_per_repetition"]
    per_fn = facts["frame_bytes_by_function"]
    assert c.bytes_per_repetition == sum(per_fn["opkernels.dll!" + f] for f in got)
    assert c.frames_above == 0
    # the entry path ends in the thread's start frames
    assert "tfhost.exe!run_scenario" in c.entry_path


def test_tree_free_recursive_free(crash_walk):
    facts = sample_facts("tree_free.dmp")
    cw = crash_walk("tree_free.dmp")
    cycles = find_cycles(cw.frames)
    assert len(cycles) == 1
    c = cycles[0]
    assert c.period == 1
    assert [_short(f) for f in c.functions] == facts["cycle_functions"] == ["tree_free"]
    assert abs(c.repetitions - facts["cycle_repetitions"]) <= 3
    # frame 0 faulted inside the prologue (a partial frame), yet the per-repetition cost is
    # the real frame size
    assert cw.frames[0].size != facts["cycle_bytes_per_repetition"]
    assert c.bytes_per_repetition == facts["cycle_bytes_per_repetition"]


@pytest.mark.parametrize("name", ["fastfail_abort.dmp", "null_deref.dmp", "big_frame.dmp"])
def test_no_cycle_without_recursion(crash_walk, name):
    facts = sample_facts(name)
    assert facts["cycle_period"] == 0
    cw = crash_walk(name)
    assert find_cycles(cw.frames) == []


# ------------------------------------------------------------------ synthetic stacks
def _frame(i: int, name: str, start: int, size: int) -> Frame:
    return Frame(
        i,
        0x7FF600000000 + start + 0x11,
        0x10000 + 64 * i,
        "k.dll",
        start + 0x11,
        start,
        f"k.dll!{name}+0x11",
        size,
        "unwind_info",
    )


@pytest.mark.slow
def test_million_frames_period3_with_noise():
    n = 1_000_000
    top = [_frame(0, "memset", 0x9000, 40), _frame(1, "copy_helper", 0x9100, 56)]
    pattern = [("expand", 0x100, 304), ("visit", 0x200, 96), ("reduce", 0x300, 208)]
    bottom_names = ["run_op", "execute", "eval_frame", "thread_main", "thread_start"]
    body = n - len(top) - len(bottom_names)
    frames: List[Frame] = list(top)
    for j in range(body):
        name, start, size = pattern[j % 3]
        frames.append(_frame(len(frames), name, start, size))
    for k, name in enumerate(bottom_names):
        frames.append(_frame(len(frames), name, 0x5000 + 0x100 * k, 48))
    assert len(frames) == n

    cycles = find_cycles(frames, used_stack=sum(f.size for f in frames))
    assert len(cycles) == 1
    c = cycles[0]
    assert c.period == 3
    assert c.functions == ("k.dll!expand", "k.dll!visit", "k.dll!reduce")
    assert c.repetitions == body // 3
    assert c.frames_above == 2 and c.first_frame == 2
    assert c.last_frame == 2 + 3 * (body // 3) - 1
    assert c.bytes_per_repetition == 304 + 96 + 208
    assert c.total_bytes == c.repetitions * 608
    # the partial repetition left at the bottom, then the real entry path, outermost last
    tail = [_short(x) for x in c.entry_path]
    assert tail[-len(bottom_names) :] == bottom_names
    assert 0.9 < c.stack_share <= 1.0


def test_smallest_period_wins():
    frames = [_frame(i, "visit", 0x100, 96) for i in range(40)]
    (c,) = find_cycles(frames)
    assert c.period == 1 and c.repetitions == 40


def test_same_function_different_return_addresses_is_one_function():
    frames = []
    for i in range(30):
        f = _frame(i, "visit", 0x100, 96)
        f.ip += (i % 2) * 0x20  # two different call sites inside visit
        f.symbol = f"k.dll!visit+{f.ip - 0x7FF600000000 - 0x100:#x}"
        frames.append(f)
    (c,) = find_cycles(frames)
    assert c.period == 1 and c.repetitions == 30


def test_secondary_cycle_deeper_in_the_stack():
    frames: List[Frame] = []
    for _ in range(50):
        frames.append(_frame(len(frames), "visit", 0x100, 96))
    frames.append(_frame(len(frames), "bridge", 0x800, 64))
    for i in range(40):
        name, start = (("walk_a", 0x400), ("walk_b", 0x500))[i % 2]
        frames.append(_frame(len(frames), name, start, 80))
    frames.append(_frame(len(frames), "main", 0x900, 48))
    cycles = find_cycles(frames)
    assert [(c.period, c.repetitions) for c in cycles] == [(1, 50), (2, 20)]
    second = cycles[1]
    assert second.functions == ("k.dll!walk_a", "k.dll!walk_b")
    assert second.frames_above == 51 and second.first_frame == 51
    assert second.entry_path == ("k.dll!main",)


def test_short_repeat_deep_in_the_stack_is_not_a_cycle():
    frames = [_frame(i, f"f{i}", 0x100 * (i + 1), 48) for i in range(20)]
    frames += [_frame(20 + i, ("a", "b")[i % 2], (0x5000, 0x5100)[i % 2], 48) for i in range(8)]
    frames += [_frame(28, "main", 0x9000, 48)]
    assert find_cycles(frames) == []  # 4 repetitions, 20 frames below the top


def test_frames_without_module_use_symbol_or_ip():
    frames = [Frame(i, 0x1234, 0x1000 + 32 * i, None, None, None, None, 32, "scan") for i in range(12)]
    (c,) = find_cycles(frames)
    assert c.period == 1 and c.functions == ("0x1234",) and c.repetitions == 12


def test_empty_and_tiny_stacks():
    assert find_cycles([]) == []
    assert find_cycles([_frame(0, "a", 0x100, 8)]) == []
    assert find_cycles([_frame(i, "a", 0x100, 8) for i in range(2)]) == []


# ------------------------------------------------------------------ properties
def _frames_from_keys(keys: Sequence[int]) -> List[Frame]:
    return [_frame(i, f"fn{k}", 0x1000 * (k + 1), 16 * (k + 1)) for i, k in enumerate(keys)]


def _brute_best_cover(keys: Sequence[int], max_period: int, min_reps: int, top_noise: int, secondary_reps: int) -> int:
    n = len(keys)
    best = 0
    for p in range(1, max_period + 1):
        for s in range(n):
            length = p
            while s + length < n and keys[s + length] == keys[s + length - p]:
                length += 1
            if s + length > n:
                continue
            reps = length // p
            if reps >= min_reps and (s <= top_noise or reps >= secondary_reps):
                best = max(best, reps * p)
    return best


keys_strategy = st.lists(st.integers(min_value=0, max_value=4), min_size=0, max_size=120)


@settings(max_examples=300, deadline=None)
@given(keys_strategy)
def test_property_reported_cycles_really_repeat(keys):
    frames = _frames_from_keys(keys)
    codes = function_codes(frames)
    for c in find_cycles(frames, max_period=8):
        p = c.period
        assert c.repetitions >= 3
        assert c.last_frame - c.first_frame + 1 == c.repetitions * p
        assert 0 <= c.first_frame and c.last_frame < len(frames)
        for i in range(c.first_frame, c.last_frame + 1 - p):
            assert codes[i] == codes[i + p]
        # members, in stack order from the first frame of the cycle
        assert c.functions == tuple(frames[c.first_frame + j].function_name for j in range(p))
        # the period is primitive: no smaller period explains one repetition
        for d in range(1, p):
            if p % d == 0:
                assert any(codes[c.first_frame + j] != codes[c.first_frame + j + d] for j in range(p - d))
        assert c.frames_above == c.first_frame
        assert c.bytes_per_repetition == sum(f.size for f in frames[c.first_frame : c.first_frame + p])
        assert c.total_bytes == sum(f.size for f in frames[c.first_frame : c.last_frame + 1])
        assert c.entry_path == tuple(f.function_name for f in frames[c.last_frame + 1 : c.last_frame + 17])


@settings(max_examples=300, deadline=None)
@given(keys_strategy)
def test_property_primary_cycle_is_the_largest(keys):
    frames = _frames_from_keys(keys)
    cycles = find_cycles(frames, max_period=6)
    best = _brute_best_cover(keys, 6, 3, 8, 10)
    if best == 0:
        assert cycles == []
    else:
        assert cycles and cycles[0].repetitions * cycles[0].period == best
        covers = [c.repetitions * c.period for c in cycles]
        assert covers == sorted(covers, reverse=True)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=6),
    st.integers(min_value=3, max_value=30),
    st.lists(st.integers(min_value=10, max_value=14), max_size=8),
    st.lists(st.integers(min_value=20, max_value=24), max_size=8),
)
def test_property_planted_cycle_is_found(unit, reps, above, below):
    # plant `reps` repetitions of `unit` under up to 8 noise frames; noise keys never
    # occur in the unit, so the planted run cannot be extended
    keys = list(above) + unit * reps + list(below)
    frames = _frames_from_keys(keys)
    cycles = find_cycles(frames, max_period=8)
    assert cycles
    # the smallest period of the unit
    p = next(
        d
        for d in range(1, len(unit) + 1)
        if len(unit) % d == 0 and all(unit[i] == unit[i % d] for i in range(len(unit)))
    )
    planted = len(unit) * reps
    covering = [
        c for c in cycles if c.first_frame <= len(above) + p and c.period == p and c.repetitions * p >= planted - p
    ]
    assert covering, (unit, reps, above, below, cycles)


@settings(max_examples=100, deadline=None)
@given(keys_strategy)
def test_property_wide_codes_same_answer(keys):
    # more than 255 distinct functions: codes are packed 2 bytes wide; the unique tail
    # frames cannot take part in a cycle, so the answer must be the narrow one
    narrow = find_cycles(_frames_from_keys(keys), max_period=6)
    wide = find_cycles(_frames_from_keys(list(keys) + list(range(100, 400))), max_period=6)

    def strip(cs):
        return [(c.functions, c.period, c.repetitions, c.first_frame, c.last_frame) for c in cs]

    assert strip(wide) == strip(narrow)


def test_four_byte_codes():
    # more than 65535 distinct functions: codes are packed 4 bytes wide
    frames = [_frame(j, ("a", "b")[j % 2], (0x1000, 0x2000)[j % 2], 48) for j in range(2 * 12)]
    frames += [_frame(len(frames), f"u{i}", 0x100000 + 0x10 * i, 32) for i in range(70_000)]
    (c,) = find_cycles(frames)
    assert (c.functions, c.period, c.repetitions, c.first_frame) == (("k.dll!a", "k.dll!b"), 2, 12, 0)
    assert c.entry_path[0] == "k.dll!u0"


def test_wide_codes_planted_cycle_after_many_functions():
    # 300 distinct functions on top of a 3-function cycle whose codes are >= 256
    frames = [_frame(i, f"noise{i}", 0x100000 + 0x100 * i, 32) for i in range(300)]
    for j in range(3 * 40):
        name, start = (("a", 0x1000), ("b", 0x2000), ("c", 0x3000))[j % 3]
        frames.append(_frame(len(frames), name, start, 48))
    frames.append(_frame(len(frames), "main", 0x9000, 48))
    (c,) = find_cycles(frames)
    assert (c.functions, c.period, c.repetitions, c.first_frame) == (("k.dll!a", "k.dll!b", "k.dll!c"), 3, 40, 300)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([None, 8, 16, 24, 48]), min_size=1, max_size=12))
def test_bytes_per_repetition_takes_the_most_common_size_first_seen_on_a_tie(sizes):
    # one member's frame sizes over the repetitions: the report's bytes per repetition
    # uses the most common known size, the first seen among equals, 0 when none is known
    known = [s for s in sizes if s is not None]
    want = max(known, key=lambda s: (known.count(s), -known.index(s))) if known else 0
    assert _mode(sizes) == want
