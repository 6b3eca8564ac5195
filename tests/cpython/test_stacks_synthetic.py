"""The reader on synthetic process memory for every supported version: the structures laid
out by ctypes from the tests' own transcription of each version's headers
(tests/cpython/headers.py), line tables written by each version's compiler rules."""

from __future__ import annotations

import time

import pytest

from dumpkit.cpython.verified import VERIFIED_BUILDS

from dumpkit.cpython import Status, find_interpreter, read_python_state
from tests.cpython.builder import Call, Func, Process

VERSIONS = [(3, 8), (3, 9), (3, 10), (3, 11), (3, 12), (3, 13)]
# and 3.14, read from headers alone (no genuine build could be had to verify it on)
EVERY = VERSIONS + [(3, 14)]

MAIN = Func("<module>", "C:\\app\\main.py", 1, [(6, 1), (4, 3), (10, 250), (3, 251)])
RUN = Func("run_job", "C:\\app\\main.py", 40, [(2, 40), (8, 41), (5, 42), (300, 44), (4, 45)])
WALK = Func("walk", "C:\\app\\tree.py", 29, [(3, 29), (4, 31), (9, 32), (2, 33)])
# non-ASCII names: one byte (latin-1), two bytes (kana) and four bytes per character
WORKER = Func("naïve_worker", "C:\\app\\työ.py", 7, [(1, 7), (12, 8), (3, 9)])
WAIT = Func("待つ", "C:\\app\\待つ.py", 300, [(1, 300), (2, 301), (20, 420)])
EMOJI = Func("wait_\U0001f600", "C:\\app\\main.py", 60, [(4, 60), (4, 61)])


def _locations(version, segments):
    """3.11+ code carries columns; give each run a location the compiler could write."""
    if version < (3, 11):
        return segments
    return [(u, (line, line, 4, 30)) for u, line in segments]


def _func(version, f: Func) -> Func:
    return Func(f.name, f.filename, f.first_line, _locations(version, f.segments))


def _process(version):
    p = Process(version)
    main, run, walk = (_func(version, f) for f in (MAIN, RUN, WALK))
    worker, wait, emoji = (_func(version, f) for f in (WORKER, WAIT, EMOJI))
    p.add_thread(0x1A2C, [Call(walk, 10), Call(walk, 9), Call(run, 20), Call(main, 12)])
    p.add_thread(0x2B04, [Call(wait, 20), Call(emoji, 5), Call(worker, 4)])
    return p


def _expected(call: Call):
    return (call.func.name, call.func.filename, call.line, call.func.first_line)


@pytest.mark.parametrize("version", VERSIONS, ids=lambda v: f"{v[0]}.{v[1]}")
def test_every_threads_python_stack(version):
    p = _process(version)
    state = read_python_state(p.build(), p.export)
    assert state.status is Status.READ, state.message
    assert state.dll == f"python3{version[1]}.dll"
    assert state.version == f"3.{version[1]}.2"
    # a 3.X.2 build: the note names the build the layout was verified on (verified.py
    # judges whether 3.X.2 is trusted; tests/cpython/test_verified.py pins that)
    seen = f"3.{version[1]}.{VERIFIED_BUILDS[version][0]}"
    assert seen in (state.layout_note or ""), state.layout_note
    assert {t.thread_id for t in state.threads} == {0x1A2C, 0x2B04}
    for tid, calls in p.threads:
        thread = state.thread(tid)
        assert thread is not None
        got = [(f.function, f.filename, f.line, f.first_line) for f in thread.frames]
        assert got == [_expected(c) for c in calls]
        assert not thread.truncated and not thread.problems
        assert all(f.problem is None for f in thread.frames)
    assert state.thread(0x1A2C).frames[0].location == "C:\\app\\tree.py:32 in walk"
    assert [f.line for f in state.thread(0x2B04).frames] == [420, 61, 8]


@pytest.mark.parametrize("version", [(3, 12), (3, 13), (3, 14)], ids=lambda v: f"{v[0]}.{v[1]}")
def test_c_entry_shim_frames_are_not_python_frames(version):
    p = Process(version)
    main, run = _func(version, MAIN), _func(version, RUN)
    # 3.14: the eval loop's entry frame (owner 3) and a C stack frame (owner 4)
    p.add_thread(7, [Call(run, 20, shim_below=True, shim_owner=4), Call(main, 12, shim_below=True)])
    state = read_python_state(p.build(), p.export)
    assert [f.function for f in state.threads[0].frames] == ["run_job", "<module>"]


def test_a_314_process_is_read_from_its_own_offsets_and_said_unverified():
    """3.14: _Py_DebugOffsets in 3.14's field order, frames whose code reference is a tagged
    _PyStackRef; every frame comes back, and the report says the reader is unverified there."""
    p = _process((3, 14))
    state = read_python_state(p.build(), p.export)
    assert state.status is Status.READ, state.message
    assert (state.dll, state.version) == ("python314.dll", "3.14.2")
    assert not state.layout_verified
    assert "_Py_DebugOffsets" in (state.layout_note or "") and "not verified" in (state.layout_note or "")
    for tid, calls in p.threads:
        got = [(f.function, f.filename, f.line, f.first_line) for f in state.thread(tid).frames]
        assert got == [_expected(c) for c in calls]
    assert state.thread(0x1A2C).frames[0].location == "C:\\app\\tree.py:32 in walk"


def test_a_313_record_is_not_taken_for_a_314_one():
    """A python314.dll whose record says 3.13 (or the other way round) is refused with the
    reason, not read in the wrong field order."""
    p = _process((3, 13))
    target = p.build()
    dll = target.modules[-1]
    target.modules[-1] = type(dll)(
        "python314.dll", dll.path.replace("313", "314"), dll.base, dll.size, "3.14.0150.1013"
    )
    state = read_python_state(target, p.export)
    assert state.status is Status.UNSUPPORTED
    assert "_Py_DebugOffsets says 3.13, the DLL is 3.14" in state.message


@pytest.mark.parametrize("version", [(3, 8), (3, 11)], ids=lambda v: f"{v[0]}.{v[1]}")
@pytest.mark.slow
def test_deep_recursion_is_read_whole_and_fast(version):
    """10^5 frames of two functions: every frame read, in well under the time a report may
    take (the code objects and lines are read once, then shared)."""
    p = Process(version)
    walk, run = _func(version, WALK), _func(version, RUN)
    depth = 100_000
    p.add_thread(1, [Call(walk, 10 if i % 2 else 12) for i in range(depth)] + [Call(run, 20)])
    target = p.build()
    started = time.perf_counter()
    state = read_python_state(target, p.export)
    elapsed = time.perf_counter() - started
    frames = state.threads[0].frames
    assert len(frames) == depth + 1 and not state.threads[0].truncated
    assert [f.line for f in frames[:3]] == [32, 32, 32] and frames[-1].function == "run_job"
    assert elapsed < 10, f"{depth} frames took {elapsed:.1f}s"


def test_a_very_deep_stack_keeps_its_innermost_frames_and_its_entry_path():
    p = Process((3, 10))
    walk, run, main = (_func((3, 10), f) for f in (WALK, RUN, MAIN))
    p.add_thread(1, [Call(walk, 10)] * 2998 + [Call(run, 20), Call(main, 12)])
    thread = read_python_state(p.build(), p.export, keep_frames=100).threads[0]
    assert thread.depth == 3000 and not thread.truncated
    assert len(thread.frames) == 100 + 1000 and thread.omitted == 1900 and thread.omitted_at == 100
    assert [f.function for f in thread.frames[-3:]] == ["walk", "run_job", "<module>"]
    assert thread.frames[-1].line == 250


def test_the_link_cap_marks_the_thread_truncated():
    p = Process((3, 10))
    walk = _func((3, 10), WALK)
    p.add_thread(1, [Call(walk, 10)] * 3000)
    thread = read_python_state(p.build(), p.export, keep_frames=100, max_links=500).threads[0]
    assert thread.truncated and thread.depth == 500
    assert any("longer than 500 links" in q for q in thread.problems)


def test_version_comes_from_the_version_resource():
    p = _process((3, 11))
    p.file_version = "3.11.1121.1013"  # 3.11.1rc1: micro*1000 + 0xC*10 + serial
    target = p.build()
    assert find_interpreter(target.modules).version_text == "3.11.1rc1"
    assert read_python_state(target, p.export).version == "3.11.1rc1"


@pytest.mark.parametrize("version", EVERY, ids=lambda v: f"{v[0]}.{v[1]}")
def test_a_frame_not_yet_started_is_on_its_first_line(version):
    """A frame pushed but not yet run points before its first instruction (f_lasti -1,
    prev_instr one code unit before the code): CPython reports co_firstlineno."""
    p = Process(version)
    walk, run = _func(version, WALK), _func(version, RUN)
    p.add_thread(1, [Call(walk, -1), Call(run, 20)])
    frames = read_python_state(p.build(), p.export).threads[0].frames
    assert [(f.function, f.line, f.problem) for f in frames] == [("walk", 29, None), ("run_job", 44, None)]
