"""When the debug loop of `dumpkit capture` writes a dump, and how it lets an exception go
on. Pure: the loop (debugger.py) asks, these rules answer.

- First chance, for the crashes no handler can deal with: a stack overflow (the thread has
  no stack left to run one), a fail-fast (`__fastfail` never reaches a handler) and a heap
  corruption report. The dump then shows the thread as it failed.
- Second chance, for everything else: an access violation that the program handles itself
  (ctypes turns some into OSError; a JIT probes memory on purpose) must stay harmless, so
  only an exception that no handler took is a crash.
- Never: the debugger's own business (the loader's initial breakpoint, single steps,
  Ctrl-C and Ctrl-Break, debug-output strings, MSVC's thread-naming exception).

A process can also end itself with no exception at all: abort() under Wine, raise(SIGABRT)
and _exit(3) everywhere, Intel OpenMP's "OMP: Error #15", TerminateProcess on itself. The
loop stops every exit at ntdll's exit path (`EXIT_FUNCTIONS`, as `bp ntdll!RtlExitUserProcess`
in cdb) and `on_exit` says which to dump:
- `abnormal` (the default): exit code 3 (abort(), raise(SIGABRT), Py_FatalError, OpenMP's
  fatal errors: the C runtime's code for an abnormal end), an NTSTATUS or HRESULT error
  code (0x80000000 and above: a status handed to ExitProcess or TerminateProcess), or any
  nonzero code given to TerminateProcess on the process itself;
- `nonzero`: every nonzero exit code (sys.exit(1) included);
- `never`: exits are not dumped."""

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
from dumpkit.words import Word

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


# ntdll's process-exit path: ExitProcess and the C runtime's exit/_exit end in the first;
# TerminateProcess(GetCurrentProcess(), code) calls the second directly.
RTL_EXIT_USER_PROCESS = "RtlExitUserProcess"  # RtlExitUserProcess(exit code)
NT_TERMINATE_PROCESS = "NtTerminateProcess"  # NtTerminateProcess(handle, exit code)
EXIT_FUNCTIONS = (RTL_EXIT_USER_PROCESS, NT_TERMINATE_PROCESS)
CURRENT_PROCESS = 0xFFFFFFFFFFFFFFFF  # the pseudo-handle GetCurrentProcess() returns, (HANDLE)-1
ABORT_EXIT_CODE = 3  # abort(), raise(SIGABRT) with the default action, _exit(3)


class ExitDumps(Word):
    """Which exits `dumpkit capture` dumps (`--on-exit`)."""

    ABNORMAL = "abnormal"
    NONZERO = "nonzero"
    NEVER = "never"


@record
class ExitCall:
    """A call into ntdll's exit path: which function, the exit code it was given, and
    whether it ends the calling process itself (NtTerminateProcess may be given another
    process's handle, or 0: "every other thread of this process", which RtlExitUserProcess
    does first)."""

    function: str
    exit_code: int
    own_process: bool


def exit_call(function: str, rcx: int, rdx: int) -> ExitCall:
    """The call at `function`'s entry, read from its first two arguments (RCX, RDX)."""
    if function == RTL_EXIT_USER_PROCESS:
        return ExitCall(function, rcx & 0xFFFFFFFF, True)
    return ExitCall(function, rdx & 0xFFFFFFFF, rcx & CURRENT_PROCESS == CURRENT_PROCESS)


def on_exit(call: ExitCall, mode: ExitDumps = ExitDumps.ABNORMAL) -> Decision:
    """Whether an exit stopped at `call` is dumped. Never handled by the debugger: the
    breakpoint is its own, and the process goes on to exit (or is ended with its code)."""
    code = call.exit_code
    if not call.own_process:
        return Decision(False, True, "not the process ending itself")
    if mode is ExitDumps.NEVER or code == 0:
        return Decision(False, True, "a normal exit")
    if mode is ExitDumps.NONZERO:
        return Decision(True, True, f"exit code {code}")
    if code == ABORT_EXIT_CODE:
        return Decision(True, True, "exit code 3: abort(), raise(SIGABRT) or a runtime's fatal error")
    if code >= 0x80000000:
        return Decision(True, True, f"exit code {code:#010x}: an error status")
    if call.function == NT_TERMINATE_PROCESS:
        return Decision(True, True, f"TerminateProcess on itself with code {code}")
    return Decision(False, True, f"exit code {code}: dumped only with --on-exit nonzero")
