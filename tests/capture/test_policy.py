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


# --------------------------------------------------------------------------- exits
from dumpkit.capture.policy import (  # noqa: E402
    CURRENT_PROCESS,
    NT_TERMINATE_PROCESS,
    RTL_EXIT_USER_PROCESS,
    ExitDumps,
    exit_call,
    on_exit,
)


def test_the_exit_code_is_the_first_argument_of_rtlexituserprocess_and_the_second_of_ntterminateprocess():
    call = exit_call(RTL_EXIT_USER_PROCESS, 3, 0x1234)
    assert (call.exit_code, call.own_process) == (3, True)
    call = exit_call(NT_TERMINATE_PROCESS, CURRENT_PROCESS, 0xE0000001)
    assert (call.exit_code, call.own_process) == (0xE0000001, True)


def test_terminating_another_process_or_the_other_threads_is_not_the_process_ending_itself():
    # RtlExitUserProcess first calls NtTerminateProcess(0, code) to end the other threads
    assert not exit_call(NT_TERMINATE_PROCESS, 0, 3).own_process
    assert not on_exit(exit_call(NT_TERMINATE_PROCESS, 0x1A4, 3)).dump


@pytest.mark.parametrize("code", [3, 0xC0000409, 0x80004005, 0xE0000001])
def test_abort_code_3_and_error_statuses_are_dumped_by_default(code):
    assert on_exit(exit_call(RTL_EXIT_USER_PROCESS, code, 0)).dump


@pytest.mark.parametrize("code", [0, 1, 2, 42])
def test_ordinary_exit_codes_are_not_dumped_by_default(code):
    decision = on_exit(exit_call(RTL_EXIT_USER_PROCESS, code, 0))
    assert not decision.dump and decision.handled_by_debugger  # the breakpoint is the debugger's own


def test_terminateprocess_on_itself_is_dumped_whatever_its_code_but_0():
    assert on_exit(exit_call(NT_TERMINATE_PROCESS, CURRENT_PROCESS, 7)).dump
    assert not on_exit(exit_call(NT_TERMINATE_PROCESS, CURRENT_PROCESS, 0)).dump


def test_nonzero_dumps_every_nonzero_exit_and_never_none():
    assert on_exit(exit_call(RTL_EXIT_USER_PROCESS, 1, 0), ExitDumps.NONZERO).dump
    assert not on_exit(exit_call(RTL_EXIT_USER_PROCESS, 0, 0), ExitDumps.NONZERO).dump
    assert not on_exit(exit_call(RTL_EXIT_USER_PROCESS, 3, 0), ExitDumps.NEVER).dump
