"""The line `dumpkit capture --attach` says when Ctrl-C's DebugActiveProcessStop fails. The
failure itself is made for real in the capture lane (the program detaches its debugger
itself, then Ctrl-C); here, the three fates the line can tell, which Wine cannot all make."""

from __future__ import annotations

from dumpkit.commands.capture import detach_failed

ERROR = "Access is denied. (error 5)"


def test_a_program_still_running_keeps_running():
    assert detach_failed(4242, ERROR, False, None) == (
        "dumpkit capture: could not detach from process 4242: Access is denied. (error 5); "
        "it keeps running (dumpkit exits without ending it)"
    )


def test_a_program_that_had_exited_says_its_code():
    line = detach_failed(4242, "The parameter is incorrect. (error 87)", True, 3)
    assert line.endswith("(error 87); it had already exited with code 3")


def test_a_program_gone_without_a_code_says_only_that():
    assert detach_failed(4242, ERROR, True, None).endswith("; it had already exited")
