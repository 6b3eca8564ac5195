"""Who holds the GIL, read by dumpkit/cpython/gil.py from synthetic process memory: the
decision and its witnesses, and what it says when the memory is missing, damaged or caught
mid-switch. The GIL's fields are placed with the reader's own GIL layouts (their offsets
are checked against CPython's headers by test_gil_layouts_against_headers.py and on real
dumps by test_gil_real_dumps.py); what is tested here is what the reader makes of them."""

from __future__ import annotations

import struct
from ctypes import sizeof
from typing import Optional

import pytest

from dumpkit.cpython import read_python_state
from dumpkit.cpython.debug_offsets import parse_fields, record_size
from dumpkit.cpython.gil_layouts import GIL_LAYOUTS, GilLayout, gil_layout_from_debug_offsets
from dumpkit.cpython.layouts import LAYOUTS
from dumpkit.cpython.model import GilSource
from tests.cpython import headers as H
from tests.cpython.builder import Call, Func, Process

RUN = Func("run_job", "C:\\app\\main.py", 40, [(2, 40), (8, 41), (5, 42)])
MINORS = [8, 9, 10, 11, 12, 13]


class Gil:
    """A process with threads 11 and 12 and a GIL whose fields a test sets."""

    def __init__(self, minor: int, tids=(11, 12)):
        self.minor = minor
        self.p = Process((3, minor))
        for tid in tids:
            self.p.add_thread(tid, [Call(RUN, 3)])
        self.target = self.p.build()
        self.runtime = self.p.exports["_PyRuntime"]
        self.layout = self._layout()
        self.interp = self.p.addresses["interp"]
        if minor == 12:
            self.interp = self._roomy_interpreter()
        self.gil_at = self.runtime + self.layout.gil
        if not self.layout.in_runtime:
            self.gil_at = self.p.memory.alloc(self.layout.gil_size)
            self.p.memory.patch(self.interp + self.layout.gil, struct.pack("<Q", self.gil_at))

    def _layout(self) -> GilLayout:
        if self.minor >= 13:
            version = (3, self.minor)
            raw = self.p.memory.read(self.runtime, record_size(version))
            return gil_layout_from_debug_offsets(parse_fields(raw, version), version)
        return GIL_LAYOUTS[(3, self.minor)]

    def _roomy_interpreter(self) -> int:
        """3.12's interpreter stand-in ends before ceval.gil: a copy with room for it."""
        old = self.p.memory.read(self.interp, sizeof(H.INTERP_312))
        new = self.p.memory.alloc(self.layout.gil + 8)
        self.p.memory.patch(new, old)
        head = self.runtime + LAYOUTS[(3, 12)].runtime_interpreters_head
        self.p.memory.patch(head, struct.pack("<Q", new))
        return new

    def tstate(self, tid: Optional[int]) -> int:
        return self.p.addresses[f"tstate {tid}"] if tid else 0

    def set(
        self, locked: int, last: Optional[int], current: Optional[int] = None, switches: int = 7, waiters: int = 2
    ) -> None:
        """The GIL's fields (`last`: the last holder's tid, or an address) and the second
        witness (`current`: the tid it names; by default the holder while taken)."""
        lay = self.layout
        last_at = last if last is None or last > 0xFFFF else self.tstate(last)
        raw = bytearray(lay.gil_size)
        struct.pack_into("<I", raw, lay.interval, 5000)
        struct.pack_into("<Q", raw, lay.last_holder, last_at or 0)
        struct.pack_into("<i", raw, lay.locked, locked)
        struct.pack_into("<I", raw, lay.switch_number, switches)
        if lay.cond_waiting is not None:
            struct.pack_into("<i", raw, lay.cond_waiting, waiters)
        if lay.in_runtime:
            self.p.memory.put(self.gil_at, bytes(raw))
        else:
            self.p.memory.patch(self.gil_at, bytes(raw))
        current = (last if locked == 1 else None) if current is None else current
        if lay.tstate_current is not None:
            self.p.memory.put(self.runtime + lay.tstate_current, struct.pack("<Q", self.tstate(current)))
        elif lay.status_bit is not None:
            for tid in (11, 12):
                if f"tstate {tid}" in self.p.addresses:
                    flag = 1 << lay.status_bit if tid == current else 0
                    self.p.memory.patch(self.tstate(tid) + lay.tstate_status, struct.pack("<I", flag))

    def read(self):
        return read_python_state(self.target, self.p.export).gil


@pytest.mark.parametrize("minor", MINORS)
def test_a_taken_gil_names_its_holder_and_both_witnesses_agree(minor):
    g = Gil(minor)
    g.set(locked=1, last=12)
    gil = g.read()
    assert gil.held is True and gil.holder_thread_id == 12 and gil.holder_thread_state == g.tstate(12)
    assert gil.last_holder_thread_id == 12 and gil.switches == 7 and gil.address == g.gil_at
    assert gil.waiters == (None if minor == 13 else 2)  # 3.13's condition variable counts none
    assert not gil.problems
    second = GilSource.TSTATE_CURRENT if minor <= 11 else GilSource.THREAD_STATUS
    assert [w.source for w in gil.witnesses] == [GilSource.GIL, second]
    assert all(w.thread_state == g.tstate(12) and w.thread_id == 12 for w in gil.witnesses)


def test_a_taken_314_gil_names_its_holder_from_the_gil_alone():
    """3.14: the GIL's place comes from _Py_DebugOffsets as on 3.13; its thread-state status
    bit is not read (3.14's bit-field was never checked on a real build), so the GIL itself
    is the one witness."""
    g = Gil(14)
    g.set(locked=1, last=12)
    gil = g.read()
    assert gil.held is True and gil.holder_thread_id == 12 and gil.address == g.gil_at
    assert [w.source for w in gil.witnesses] == [GilSource.GIL] and not gil.problems


@pytest.mark.parametrize("minor", MINORS)
def test_a_free_gil_has_no_holder_and_names_the_thread_that_released_it(minor):
    g = Gil(minor)
    g.set(locked=0, last=11)
    gil = g.read()
    assert gil.held is False and gil.holder_thread_id is None and gil.holder_thread_state is None
    assert gil.last_holder_thread_id == 11 and not gil.problems
    assert all(w.thread_state == 0 for w in gil.witnesses)


@pytest.mark.parametrize("minor", [8, 12, 13])
def test_a_free_gil_last_held_by_a_thread_that_has_ended_is_no_problem(minor):
    g = Gil(minor)
    gone = g.p.memory.alloc(64)  # a thread state no longer listed
    g.set(locked=0, last=gone)
    gil = g.read()
    assert gil.held is False and gil.last_holder_thread_state == gone and gil.last_holder_thread_id is None
    assert not gil.problems


@pytest.mark.parametrize("minor", [8, 11, 12, 13])
def test_a_dump_caught_mid_switch_keeps_the_gils_word_and_says_so(minor):
    g = Gil(minor)
    g.set(locked=1, last=11, current=0)  # taken, but the thread state not yet current
    gil = g.read()
    assert gil.held is True and gil.holder_thread_id == 11
    assert gil.witnesses[1].thread_state == 0
    assert any("between taking the GIL and becoming current" in q for q in gil.problems)


@pytest.mark.parametrize("minor", [9, 12])
def test_witnesses_that_name_two_threads_are_a_problem(minor):
    g = Gil(minor)
    g.set(locked=1, last=11, current=12)
    gil = g.read()
    assert gil.held is True and gil.holder_thread_id == 11
    assert any("disagree" in q and "thread 12" in q and "thread 11" in q for q in gil.problems)


@pytest.mark.parametrize("minor", [10, 13])
def test_a_second_witness_naming_a_thread_while_the_gil_is_free_is_a_problem(minor):
    g = Gil(minor)
    g.set(locked=0, last=11, current=12)
    gil = g.read()
    assert gil.held is False
    assert any("although the GIL is free" in q for q in gil.problems)


@pytest.mark.parametrize(
    "locked,last,words", [(-1, 0, "not created"), (7, 11, "neither 0 nor 1"), (1, 0, "last_holder is NULL")]
)
@pytest.mark.parametrize("minor", [8, 12])
def test_a_gil_that_does_not_hold_together_is_not_known(minor, locked, last, words):
    g = Gil(minor)
    g.set(locked=locked, last=last or None, current=0)
    gil = g.read()
    assert gil.held is None and gil.holder_thread_id is None
    assert any(words in q for q in gil.problems)
    assert gil.witnesses[0].thread_state is None


@pytest.mark.parametrize("minor", [8, 13])
def test_a_holder_the_reader_did_not_list_is_said_and_its_thread_id_read_from_it(minor):
    g = Gil(minor)
    stray = g.p.memory.alloc(1024)  # a thread state outside the interpreter's list
    if minor == 13:  # where _Py_DebugOffsets says thread_id is
        thread_id = parse_fields(g.p.memory.read(g.runtime, record_size()))["thread_state.thread_id"]
    else:
        thread_id = LAYOUTS[(3, minor)].tstate_thread_id
    g.p.memory.patch(stray + thread_id, struct.pack("<I", 99))
    g.set(locked=1, last=stray, current=0)
    gil = g.read()
    assert gil.held is True and gil.holder_thread_id == 99 and gil.holder_thread_state == stray
    assert any("not among the interpreter's thread states" in q for q in gil.problems)


@pytest.mark.parametrize("minor", MINORS)
def test_a_gil_the_dump_lacks_is_not_known_and_the_dump_that_has_it_is_named(minor):
    g = Gil(minor)
    if not g.layout.in_runtime:  # 3.12+: the GIL the interpreter points to is not in the dump
        g.p.memory.drop(g.gil_at)
    gil = g.read()
    assert gil.held is None and not gil.witnesses
    assert any("is not in the dump" in q and "full-memory dump" in q for q in gil.problems)


def test_a_runtime_the_dump_lacks_leaves_the_gil_unknown_too():
    g = Gil(11)
    g.set(locked=1, last=11)
    g.p.memory.drop(g.runtime)  # _PyRuntime's data section: not in a MiniDumpNormal dump
    state = read_python_state(g.target, g.p.export)
    assert state.status == "memory_missing"
    assert state.gil.held is None and "MiniDumpWithFullMemory" in state.gil.problems[0]


@pytest.mark.parametrize("minor", [12, 13])
def test_an_interpreter_without_its_gil_yet_says_so(minor):
    g = Gil(minor)
    g.p.memory.patch(g.interp + g.layout.gil, struct.pack("<Q", 0))
    gil = g.read()
    assert gil.held is None and any("is NULL" in q for q in gil.problems)


def test_a_subinterpreter_with_a_gil_of_its_own_is_said_and_the_main_ones_read():
    g = Gil(13)
    g.set(locked=1, last=12)
    values = parse_fields(g.p.memory.read(g.runtime, record_size()))
    sub = g.p.memory.alloc(sizeof(H.INTERP_313))
    own = g.p.memory.alloc(g.layout.gil_size)
    g.p.memory.patch(sub + values["interpreter_state.next"], struct.pack("<Q", g.interp))  # main is last
    g.p.memory.patch(sub + g.layout.gil, struct.pack("<Q", own))
    g.p.memory.patch(g.runtime + values["runtime_state.interpreters_head"], struct.pack("<Q", sub))
    gil = g.read()
    assert gil.held is True and gil.address == g.gil_at
    assert any("1 subinterpreter(s) use a GIL of their own" in q for q in gil.problems)


def test_an_interpreter_list_that_loops_is_walked_once():
    g = Gil(13)
    g.set(locked=1, last=12)
    values = parse_fields(g.p.memory.read(g.runtime, record_size()))
    g.p.memory.patch(g.interp + values["interpreter_state.next"], struct.pack("<Q", g.interp))
    gil = g.read()
    assert any("loops back" in q for q in gil.problems)


def test_every_sentence_is_one_line():
    for minor in MINORS:
        g = Gil(minor)
        g.set(locked=1, last=11, current=12)
        for q in g.read().problems:
            assert "\n" not in q


def test_a_waiter_count_that_is_not_one_is_dropped_and_said():
    g = Gil(10)
    g.set(locked=1, last=11, waiters=-5)
    gil = g.read()
    assert gil.held is True and gil.waiters is None
    assert any("counts -5 waiters" in q for q in gil.problems)
