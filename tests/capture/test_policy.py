"""When `dumpkit capture` writes a dump: the crashes no handler can take at their first
chance, everything else only when no handler took it, the debugger's own events never."""

from __future__ import annotations

import pytest

from dumpkit.capture.policy import on_exception


@pytest.mark.parametrize("code", [0xC00000FD, 0xC0000409, 0xC0000374])
def test_crashes_no_handler_can_take_are_dumped_at_their_first_chance(code):
    assert on_exception(code, first_chance=True).dump


@pytest.mark.parametrize("code", [0xC0000005, 0xC000001D, 0xE06D7363, 0xC0000094])
def test_an_exception_the_program_may_handle_waits_for_its_second_chance(code):
    first = on_exception(code, first_chance=True)
    assert not first.dump and not first.handled_by_debugger  # it goes back to the program
    assert on_exception(code, first_chance=False).dump


def test_the_loaders_breakpoint_is_the_debuggers_own_but_an_unhandled_one_is_a_crash():
    first = on_exception(0x80000003, first_chance=True)
    assert not first.dump and first.handled_by_debugger
    assert on_exception(0x80000003, first_chance=False).dump


@pytest.mark.parametrize("code", [0x40010005, 0x40010008, 0x40010006, 0x4001000A, 0x406D1388])
def test_ctrl_c_debug_strings_and_thread_names_are_never_dumped(code):
    for first in (True, False):
        decision = on_exception(code, first)
        assert not decision.dump and not decision.handled_by_debugger  # the program's handlers get them
