"""What the reader says when the dump lacks memory or holds damaged structures: a status
and one-line problems, never an exception, never an unbounded walk."""

from __future__ import annotations

import random
import struct

import pytest

from dumpkit.cpython import Status, read_python_state
from dumpkit.target import Module
from tests.cpython import headers as H
from tests.cpython.builder import Call, Func, Memory, Process
from tests.support.fakes.target import MemoryTarget

RUN = Func("run_job", "C:\\app\\main.py", 40, [(2, 40), (8, 41), (5, 42)])
WALK = Func("walk", "C:\\app\\tree.py", 29, [(3, 29), (4, 31), (9, 32)])
FRAME_BACK = {8: H.FRAME_38.f_back.offset, 10: H.FRAME_310.f_back.offset, 12: H.IFRAME_312.previous.offset}


def _process(minor, depth=4):
    p = Process((3, minor))
    p.add_thread(11, [Call(WALK, 10)] * depth + [Call(RUN, 3)])
    p.add_thread(12, [Call(RUN, 12)])
    return p


def _one_line(state):
    for text in (state.message, *state.problems, *(q for t in state.threads for q in t.problems)):
        assert "\n" not in text
    for t in state.threads:
        for f in t.frames:
            assert f.problem is None or "\n" not in f.problem


@pytest.mark.parametrize("minor", [8, 10, 12])
def test_a_frame_chain_that_loops_back_stops_with_a_problem(minor):
    p = _process(minor)
    target = p.build()
    frames = p.frame_addresses[11]
    p.memory.patch(frames[2] + FRAME_BACK[minor], struct.pack("<Q", frames[0]))
    state = read_python_state(target, p.export)
    thread = state.thread(11)
    assert len(thread.frames) == 3
    assert any("loops back" in q for q in thread.problems)
    _one_line(state)


@pytest.mark.parametrize("minor", [8, 12])
def test_a_loop_deep_below_the_kept_frames_is_still_caught(minor):
    p = Process((3, minor))
    p.add_thread(11, [Call(WALK, 10)] * 300)
    target = p.build()
    frames = p.frame_addresses[11]
    p.memory.patch(frames[250] + FRAME_BACK[minor], struct.pack("<Q", frames[200]))
    thread = read_python_state(target, p.export, keep_frames=50).thread(11)
    assert any("loops back" in q for q in thread.problems)
    assert thread.depth < 400


@pytest.mark.parametrize("minor", [8, 12])
def test_a_frame_missing_from_the_dump_ends_the_chain_with_what_is_known(minor):
    p = _process(minor)
    target = p.build()
    p.memory.drop(p.frame_addresses[11][2])
    thread = read_python_state(target, p.export).thread(11)
    assert [f.function for f in thread.frames[:2]] == ["walk", "walk"]
    assert thread.frames[2].function is None and "not in the dump" in thread.frames[2].problem
    assert thread.problems and thread.problems[0].startswith("chain cut")


def test_an_unreadable_name_keeps_the_rest_of_the_frame():
    p = _process(11)
    target = p.build()
    p.memory.drop(p.strings["walk"])
    frame = read_python_state(target, p.export).thread(11).frames[0]
    assert frame.function is None and "co_name" in frame.problem
    assert (frame.filename, frame.line, frame.first_line) == ("C:\\app\\tree.py", 32, 29)
    assert frame.location == "C:\\app\\tree.py:32 in ?"


def test_an_object_of_the_wrong_type_is_not_taken_for_code():
    p = _process(9)
    target = p.build()
    p.memory.patch(p.codes[id(WALK)] + 8, struct.pack("<Q", 0xDEAD0000))
    frame = read_python_state(target, p.export).thread(11).frames[0]
    assert frame.function is None and "is not a code object" in frame.problem


def test_thread_states_not_in_the_dump_say_which_dump_would_have_them():
    p = _process(10)
    target = p.build()
    p.memory.drop(p.addresses["tstate 11"])
    p.memory.drop(p.addresses["tstate 12"])
    state = read_python_state(target, p.export)
    assert state.status is Status.MEMORY_MISSING
    assert "thread state" in state.message and "MiniDumpWithFullMemory" in state.message
    assert "MiniDumpWithPrivateReadWriteMemory" in state.message
    _one_line(state)


@pytest.mark.parametrize("minor", [8, 13, 14])
def test_runtime_not_in_the_dump(minor):
    p = _process(minor)
    target = p.build()
    p.memory.drop(p.exports["_PyRuntime"])
    state = read_python_state(target, p.export)
    assert state.status is Status.MEMORY_MISSING
    assert "_PyRuntime" in state.message and "procdump -ma" in state.message and "DumpType=2" in state.message
    assert state.version == f"3.{minor}.2"


def test_debug_offsets_with_a_wrong_cookie_or_bad_offsets_are_refused():
    p = _process(13)
    target = p.build()
    runtime = p.exports["_PyRuntime"]
    p.memory.patch(runtime, b"xdebugpz")
    state = read_python_state(target, p.export)
    assert state.status is Status.UNSUPPORTED and "cookie" in state.message
    p.memory.patch(runtime, b"xdebugpy")
    # code_object.filename beyond code_object.size: a record read with a wrong field order
    record = p.memory.read(runtime, 24 + 8 * 60)
    fields = [n for g, names in H.DEBUG_OFFSETS_313 for n in (f"{g}.{x}" for x in names)]
    at = 24 + 8 * fields.index("code_object.filename")
    p.memory.patch(runtime + at, struct.pack("<Q", 1 << 16))
    state = read_python_state(target, p.export)
    assert state.status is Status.UNSUPPORTED and "does not hold together" in state.message
    assert record  # the record was readable all along


def test_a_314_record_in_a_dll_that_says_313_is_refused_not_misread():
    """A 3.14 record taken for 3.13's (its version field says 3.13): read in 3.13's order its
    groups slide, and the sizes they start with no longer hold their offsets."""
    p = _process(14)
    target = p.build()
    runtime = p.exports["_PyRuntime"]
    p.memory.patch(runtime + 8, struct.pack("<Q", 0x030D02F0))
    dll = target.modules[-1]
    target.modules[-1] = Module("python313.dll", dll.path.replace("314", "313"), dll.base, dll.size, "3.13.2150.1013")
    state = read_python_state(target, p.export)
    assert state.status is Status.UNSUPPORTED and "does not hold together" in state.message


def test_thread_state_list_that_loops():
    p = _process(12)
    target = p.build()
    first = p.addresses["tstate 11"]
    p.memory.patch(first + H.TSTATE_312.next.offset, struct.pack("<Q", first))
    state = read_python_state(target, p.export)
    assert [t.thread_id for t in state.threads] == [11]
    assert any("loops back" in q for q in state.problems)


def test_long_names_are_cut_at_one_kib():
    p = Process((3, 12))
    long = Func("f" * 5000, "C:\\app\\" + "\u4e2d" * 3000 + ".py", 1, [(4, (1, 1, 0, 5))])
    p.add_thread(1, [Call(long, 1)])
    frame = read_python_state(p.build(), p.export).threads[0].frames[0]
    assert frame.function == "f" * 1024 + "..."
    assert frame.filename == "C:\\app\\" + "\u4e2d" * (512 - 7) + "..."


def test_what_is_not_a_supported_python():
    mem = Memory()
    none = MemoryTarget(
        mem, [Module("python.exe", "python.exe", 0x1000, 0x1000), Module("python3.dll", "p", 0x9000, 0x10)]
    )
    assert read_python_state(none, lambda name: None).status is Status.NO_PYTHON
    old = MemoryTarget(mem, [Module("python37.dll", "p", 0x10000, 0x1000)])
    assert read_python_state(old, lambda name: 0x10100).status is Status.UNSUPPORTED
    ft = MemoryTarget(mem, [Module("python313t.dll", "p", 0x10000, 0x1000)])
    state = read_python_state(ft, lambda name: 0x10100)
    assert state.status is Status.UNSUPPORTED and "free-threaded" in state.message
    p = _process(11)
    no_image = read_python_state(p.build(), None)
    assert no_image.status is Status.NO_RUNTIME and "image path" in no_image.message
    no_export = read_python_state(p.build(), lambda name: None)
    assert no_export.status is Status.NO_RUNTIME and "does not export _PyRuntime" in no_export.message


@pytest.mark.parametrize("minor", [8, 10, 11, 13, 14])
def test_random_damage_never_raises(minor):
    """Flip bytes all over the interpreter's memory: every read ends in a state, bounded."""
    rng = random.Random(minor)
    for _ in range(60):
        p = _process(minor, depth=6)
        target = p.build()
        for _ in range(rng.randint(1, 12)):
            start = rng.choice(p.memory._starts)
            size = len(p.memory.blocks[start])
            at = start + rng.randrange(size)
            p.memory.patch(at, bytes(rng.randrange(256) for _ in range(min(8, start + size - at))))
        state = read_python_state(target, p.export, keep_frames=1000)
        assert isinstance(state.status, Status)
        _one_line(state)
