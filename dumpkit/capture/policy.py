"""When the debug loop of `dumpkit capture` writes a dump, and how it lets an exception go
on. Pure: the loop (debugger.py) asks, these rules answer.

- First chance, for the crashes no handler can deal with: a stack overflow (the thread has
  no stack left to run one), a fail-fast (`__fastfail` never reaches a handler) and a heap
  corruption report. The dump then shows the thread as it failed.
- Second chance, for everything else: an access violation that the program handles itself
  (ctypes turns some into OSError; a JIT probes memory on purpose) must stay harmless, so
  only an exception that no handler took is a crash.
- Never: the debugger's own business (the loader's initial breakpoint, single steps,
  Ctrl-C and Ctrl-Break, debug-output strings, MSVC's thread-naming exception)."""

from __future__ import annotations


from dumpkit.analysis.codes.model import (
    DBG_CONTROL_BREAK,
    DBG_CONTROL_C,
    DBG_PRINTEXCEPTION_C,
    DBG_PRINTEXCEPTION_WIDE_C,
    STATUS_BREAKPOINT,
    STATUS_HEAP_CORRUPTION,
    STATUS_SINGLE_STEP,
    STATUS_STACK_BUFFER_OVERRUN,
    STATUS_STACK_OVERFLOW,
    STATUS_WX86_BREAKPOINT,
)
from dumpkit.records import record

MS_VC_THREAD_NAME = 0x406D1388  # RaiseException by MSVC's SetThreadName idiom (not an NTSTATUS)

FIRST_CHANCE_FATAL = frozenset({STATUS_STACK_OVERFLOW, STATUS_STACK_BUFFER_OVERRUN, STATUS_HEAP_CORRUPTION})
DEBUGGER_BUSINESS = frozenset(
    {
        STATUS_BREAKPOINT,
        STATUS_SINGLE_STEP,
        STATUS_WX86_BREAKPOINT,
        DBG_CONTROL_C,
        DBG_CONTROL_BREAK,
        DBG_PRINTEXCEPTION_C,
        DBG_PRINTEXCEPTION_WIDE_C,
        MS_VC_THREAD_NAME,
    }
)

# ... even when no handler takes them (an unhandled breakpoint, __debugbreak(), is a crash)
NEVER_A_CRASH = frozenset(
    {DBG_CONTROL_C, DBG_CONTROL_BREAK, DBG_PRINTEXCEPTION_C, DBG_PRINTEXCEPTION_WIDE_C, MS_VC_THREAD_NAME}
)


@record
class Decision:
    dump: bool
    handled_by_debugger: bool  # continue with DBG_CONTINUE (else DBG_EXCEPTION_NOT_HANDLED)
    why: str


def on_exception(code: int, first_chance: bool) -> Decision:
    """What to do with an exception event of `code` at its first or second chance."""
    code &= 0xFFFFFFFF
    if code in DEBUGGER_BUSINESS and (first_chance or code in NEVER_A_CRASH):
        # the loader's breakpoint and single steps are the debugger's own; Ctrl-C and the
        # strings go back to the program, whose handlers expect them
        own = code in (STATUS_BREAKPOINT, STATUS_WX86_BREAKPOINT, STATUS_SINGLE_STEP) and first_chance
        return Decision(False, own, "not a crash")
    if first_chance and code in FIRST_CHANCE_FATAL:
        return Decision(True, False, "no handler can run for it: dumped at its first chance")
    if not first_chance:
        return Decision(True, False, "no handler took it (second chance)")
    return Decision(False, False, "first chance: the program may handle it")
