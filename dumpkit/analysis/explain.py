"""`dumpkit explain <code>`: what an exit/exception code means, what usually causes it in a
Python/TensorFlow process on Windows, what to do next, and how to capture a dump next time.

Pure: takes a ParsedCode (from codes.parse_code), returns an Explanation (the meaning,
causes, steps and capture help as data; report/view/explanation.py decides how it is
shown). No dump is needed.
"""

from __future__ import annotations

from dumpkit.cpython.verified import VERIFIED_BUILDS
from typing import Dict, Optional, Tuple

from dumpkit.analysis.codes import (
    STATUS_ACCESS_VIOLATION,
    STATUS_CODES,
    STATUS_CPP_EH_EXCEPTION,
    STATUS_IN_PAGE_ERROR,
    STATUS_STACK_BUFFER_OVERRUN,
    STATUS_STACK_OVERFLOW,
    ParsedCode,
    lookup_fastfail,
    lookup_status,
    to_signed32,
)
from dumpkit.analysis.codes.model import HRESULT, STATUS_HEAP_CORRUPTION, STATUS_ILLEGAL_INSTRUCTION, WIN32, CodeInfo
from dumpkit.analysis.codes.winerror import describe_hresult, describe_win32, win32_name
from dumpkit.records import record


@record
class Explanation:
    title: str
    code_hex: str  # "0xC00000FD"
    signed_decimal: int  # -1073741571: what Python's subprocess and most tools print
    unsigned_decimal: int  # 3221225725
    name: str  # "STATUS_STACK_OVERFLOW", or "0x%08X" when unknown
    summary: str
    causes: Tuple[str, ...]
    next_steps: Tuple[str, ...]
    capture_help: Tuple[str, ...]  # how to capture a dump, in full (`--how-to-capture`)
    subcode: Optional[int] = None
    subcode_name: Optional[str] = None
    mixups: Tuple[str, ...] = ()  # the confusions this code is known for
    known: bool = True
    capture_pointer: Tuple[str, ...] = ()  # the one line shown without `--how-to-capture`
    suggestion: Optional[str] = None  # a known code the unknown one may be a typo of
    kind: str = "status"  # codes.model's STATUS, HRESULT or WIN32


# --------------------------------------------------------------------------------------
# Advice per fail-fast subcode (the facts about each subcode live in codes.FAST_FAIL)
# --------------------------------------------------------------------------------------

_HEAP_CAUSES = (
    "A heap buffer overrun, double free or use-after-free in native code (an extension "
    "module, a custom op, a CUDA library); the check fires on a later heap or list "
    "operation, not where the damage was done",
    "Memory allocated by one C runtime or heap and freed by another (an extension built "
    "with a static CRT or a different compiler passing ownership across a DLL boundary)",
)
_HEAP_STEPS = (
    "Make the damage fault where it happens: enable full page heap for python.exe "
    "(gflags /p /enable python.exe /full, from the Debugging Tools for Windows), reproduce, "
    "and analyse the new dump; disable it again afterwards (/p /disable)",
    "Run `dumpkit analyze` on the dump for the modules involved and their versions",
)
_CFG_CAUSES = (
    "A call through a corrupted or dangling function pointer (an object or callback "
    "freed while still registered, a vtable overwritten by a heap overrun)",
    "Code injected by another product (antivirus, screen recorders, overlays, GPU or "
    "input tools) that hooks functions with targets Control Flow Guard does not know",
    "Run-time generated code (JITs) not registered as valid call targets",
)
_CFG_STEPS = (
    "Frame 1 of the stack is the function that made the indirect call: find where its function pointer came from",
    "Check the module list for injected third-party DLLs and retry with them disabled",
)

_FASTFAIL_ADVICE: Dict[int, Tuple[Tuple[str, ...], Tuple[str, ...]]] = {
    7: (
        (
            "A failed CHECK() / LOG(FATAL) in TensorFlow, absl, XLA or a custom op: the "
            "message ('Check failed: ...' with a file and line) is printed to stderr just "
            "before the process dies",
            "std::terminate(): a C++ exception that nobody caught, thrown out of a noexcept "
            "function, a destructor or a thread's entry function",
            "Python's own Py_FatalError ('Fatal Python error: ...' on stderr): an extension "
            "misusing the GIL or thread state, or corrupted interpreter state",
            "A failed assert() in a library built with assertions on ('Assertion failed: ..., file ..., line ...')",
            "GPU start-up failures turned into CHECK failures (cuDNN/cuBLAS handle "
            "creation, out of GPU memory while initialising, driver/runtime mismatch)",
        ),
        (
            "Capture stderr (`python script.py 2> stderr.txt`): the last lines name the check "
            "that failed, and that is usually the whole diagnosis",
            "Run with `python -X faulthandler`: abort() raises SIGABRT before it fails fast, "
            "so faulthandler prints the Python stack of every thread ('Fatal Python error: "
            "Aborted'); the exit code then becomes 3 instead of 0xC0000409",
            "`dumpkit analyze` on a dump names the function that called abort() and, when the dump holds "
            "it, the message printed just before ('Fatal Python error: ...', 'Check failed: ...', the C++ "
            "exception in flight); `dumpkit capture` adds the memory it is read from to its dumps",
        ),
    ),
    2: (
        (
            "A local array overrun in native code: a copy or format into a stack buffer "
            "without a length check, an off-by-one loop, a too-small buffer for a path or "
            "string",
            "Caller and callee disagreeing on a structure's size (built against different "
            "headers or packing), so the callee writes past the caller's stack object",
        ),
        (
            "The function whose stack cookie was smashed is the caller of "
            "__report_gsfailure (frame 1): look at its local buffers",
            "Rebuild the extension with AddressSanitizer (/fsanitize=address) to catch the overrun at the write",
            "This is memory corruption: do not trust the rest of the process's state",
        ),
    ),
    5: (
        (
            "A C runtime function got an invalid argument from native code: an invalid or "
            "closed file descriptor, a NULL string or format, a buffer size too small for a "
            "_s function, a bad fopen mode or strftime format",
            "File descriptors or FILE* passed between modules that use different C runtimes "
            "(each CRT has its own descriptor table)",
        ),
        (
            "The frames just above the handler name the CRT function and the caller that passed the bad argument",
            "`dumpkit analyze` on a dump shows them",
        ),
    ),
    3: (_HEAP_CAUSES, _HEAP_STEPS),
    29: (_HEAP_CAUSES, _HEAP_STEPS),
    35: (_HEAP_CAUSES, _HEAP_STEPS),
    50: (_HEAP_CAUSES, _HEAP_STEPS),
    10: (_CFG_CAUSES, _CFG_STEPS),
    31: (_CFG_CAUSES, _CFG_STEPS),
    46: (_CFG_CAUSES, _CFG_STEPS),
    64: (_CFG_CAUSES, _CFG_STEPS),
    44: (
        (
            "Hardware-enforced stack protection (CET shadow stack) found a return address "
            "that does not match its call: stack corruption, or a library that rewrites "
            "return addresses (some hooking, coroutine or custom unwinding code)",
        ),
        (
            "Look for third-party DLLs that hook or switch stacks; check whether "
            "hardware-enforced stack protection was turned on for python.exe",
        ),
    ),
    71: (
        ("A module built with AddressSanitizer found a memory error",),
        ("The ASan report on stderr has the access, the allocation and the free stacks",),
    ),
    13: (
        (
            "longjmp or exception unwinding to a corrupted or invalid target (a jump buffer "
            "used after its function returned, or stack corruption)",
        ),
        (
            "Look for setjmp/longjmp-based error handling in the native libraries on the "
            "stack (image codecs often use it)",
        ),
    ),
    38: (
        (
            "longjmp to a target Control Flow Guard does not know: a jump buffer that was "
            "corrupted or used after its function returned",
        ),
        (
            "Look for setjmp/longjmp-based error handling in the native libraries on the "
            "stack (image codecs often use it)",
        ),
    ),
}


# --------------------------------------------------------------------------------------
# Capture help
# --------------------------------------------------------------------------------------

_LOCALDUMPS_KEY = r"HKLM\SOFTWARE\Microsoft\Windows\Windows Error Reporting\LocalDumps"

_PROCESS_START_CODES = {0xC0000135, 0xC0000138, 0xC0000139, 0xC0000142, 0xC000007B}
_NOT_A_CRASH = {0x00000000, 0xC000013A, 0x406D1388}
_FAULTHANDLER_SEES = {
    STATUS_ACCESS_VIOLATION,
    STATUS_IN_PAGE_ERROR,
    0xC0000094,
    0xC0000095,
    STATUS_ILLEGAL_INSTRUCTION,
    0xC000008D,
    0xC000008E,
    0xC000008F,
    0xC0000090,
    0xC0000091,
    0xC0000093,
    0xC0000096,
    STATUS_HEAP_CORRUPTION,
    0xC00002B4,
    0xC00002B5,
    0xC0000008,
    0xC0000026,
    0xC0000025,
}


def _faulthandler_note(code: int, subcode: Optional[int]) -> str:
    base = "Python's faulthandler (`python -X faulthandler`, or PYTHONFAULTHANDLER=1) "
    if code == STATUS_STACK_BUFFER_OVERRUN:
        note = (
            base + "never sees a fail-fast: __fastfail ends the process without "
            "dispatching any exception inside it, so only a dump shows where it "
            "happened."
        )
        if subcode in (None, 7):
            note += (
                " abort() (subcode 7) is the exception: the C runtime raises SIGABRT "
                "before failing fast, and faulthandler's SIGABRT handler prints the "
                "Python stack ('Fatal Python error: Aborted'); the exit code then "
                "becomes 3."
            )
        return note
    if code == STATUS_STACK_OVERFLOW:
        return (
            base + "prints 'Windows fatal exception: stack overflow', but it runs on "
            "the thread that has just run out of stack, so the Python traceback is "
            "often cut short or missing; a dump has the whole stack."
        )
    if code == STATUS_CPP_EH_EXCEPTION:
        return (
            base + "deliberately ignores C++ exceptions (0xE06D7363); when one is "
            "uncaught the process ends in abort(), which faulthandler does report "
            "(see 0xC0000409/7)."
        )
    if code in _FAULTHANDLER_SEES:
        return (
            base + "prints the Python stack of every thread for this exception, so "
            "you learn which Python line called into the native code that crashed. "
            "It hooks exceptions as they are raised, so it also prints for ones "
            "native code later handles: a 'Windows fatal exception' line before a "
            "process that keeps running is not the crash."
        )
    return (
        base + "prints the Python stack for access violations, illegal instructions, "
        "divide errors and stack overflows; it cannot see fail-fast exits."
    )


def capture_pointer_for(code: int, kind: str = "status") -> Tuple[str, ...]:
    """The one short pointer `explain` gives without `--how-to-capture`."""
    code &= 0xFFFFFFFF
    if kind in (HRESULT, WIN32):
        return ()  # an error a call returned, not a crash: nothing to dump
    if code in _NOT_A_CRASH:
        return ("This is not a crash, so there is nothing to dump.",)
    if code in _PROCESS_START_CODES:
        return ("A crash dump shows little for a process Windows could not start: `--how-to-capture` says what does.",)
    if 0 < code < 0x100:
        return (_EXIT_DUMP,)
    return (
        "Have Windows write a full-memory dump (WER LocalDumps with DumpType=2, or procdump -ma): "
        "that is what lets `dumpkit analyze` show the Python stack as well as the native one. "
        "`dumpkit explain --how-to-capture` says how.",
    )


# An exit code is no exception: Windows Error Reporting and procdump -e never see it.
_EXIT_DUMP = (
    "An exit writes no crash dump (Windows Error Reporting and procdump -e see no exception): "
    "`dumpkit capture -- python script.py` stops the process at ntdll!RtlExitUserProcess and writes one "
    "(exit code 3 and error statuses by default, `--on-exit nonzero` for any nonzero code), and "
    "`dumpkit analyze` then says what ended it; ProcDump's -t also dumps at termination."
)


# A hang has no code to explain: it is said with the advice for any crash (`--how-to-capture` alone).
_HANG_DUMP = (
    "A program that stopped responding (a deadlock, a thread waiting for good) raises no exception, so none "
    "of the above writes a dump: dump it while it runs, and it keeps running. "
    r"`dumpkit capture --attach <pid> --now -o C:\dumps` writes a Python-aware dump at once (every thread's "
    "Python stack and what each thread's stack points to, the locks it waits on among them; `--full` for full "
    'memory). Without dumpkit: Task Manager, Details tab, right-click python.exe, "Create dump file" (a '
    r"full-memory dump under %LOCALAPPDATA%\Temp, its path shown), or "
    r"`procdump -accepteula -ma <pid> C:\dumps`. A full-memory dump holds the Python stacks, a plain minidump "
    r"does not. In a venv, dump the python.exe whose command line names the script, not the Scripts\python.exe "
    "launcher above it.",
)


def capture_help_for(code: Optional[int], subcode: Optional[int] = None) -> Tuple[str, ...]:
    """How to capture a dump of this crash next time (plain-text paragraphs); for any
    crash, and a hang, when `code` is None."""
    hang = _HANG_DUMP if code is None else ()
    code = 0xFFFFFFFF if code is None else code & 0xFFFFFFFF  # no status has that value
    if 0 < code < 0x100:
        return (
            _EXIT_DUMP,
            "With it the dump is Python-aware (every thread's Python stack) and holds the memory the dying "
            "thread's stack points to, where a runtime's last message often still is. In a venv, "
            r"Scripts\python.exe is a launcher: capture follows it to the real interpreter.",
            "Then run `dumpkit analyze <dump>.dmp` on any machine (Linux included). " + python_versions_sentence(),
        )
    if code in _NOT_A_CRASH:
        return (
            "This is not a crash, so there is nothing to dump. If the process should "
            "not have stopped, find out who stopped it (Ctrl+C, a closed console, a "
            "job runner's timeout).",
        )
    if code in _PROCESS_START_CODES:
        return (
            "The process failed while Windows was loading it, before any Python code ran, "
            "so a crash dump shows little. Run the same command in a console to see the "
            "DLL Windows names, or open the executable in a dependency viewer "
            "(Dependencies, or `dumpbin /dependents`).",
            "For the full story, turn on loader snaps and run under a debugger: "
            "`gflags -i python.exe +sls`, then `cdb -g python.exe script.py`; the "
            "debugger output lists every DLL search and the one that failed. Turn it off "
            "again with `gflags -i python.exe -sls`.",
        )
    return (
        "Windows Error Reporting can write a dump of every crash with no extra tools. In "
        "an elevated prompt, create the key " + _LOCALDUMPS_KEY + r"\python.exe with "
        "three values:\n"
        r'reg add "' + _LOCALDUMPS_KEY + r'\python.exe" /v DumpFolder /t REG_EXPAND_SZ '
        r"/d C:\dumps /f"
        "\n"
        r'reg add "' + _LOCALDUMPS_KEY + r'\python.exe" /v DumpType /t REG_DWORD /d 2 /f'
        "\n"
        r'reg add "' + _LOCALDUMPS_KEY + r'\python.exe" /v DumpCount /t REG_DWORD /d 10 /f'
        "\n"
        "DumpType 2 is a full-memory dump: for a Python process, the one that makes the Python "
        "stack possible (dumpkit reads the interpreter's frames from the process's memory), "
        "and it holds code and unwind data too. 1 is a minidump (small, with every thread's "
        "native stack but not the memory the Python stack is read from). "
        "DumpCount is how many dumps to keep. Values put directly under LocalDumps "
        r"apply to every program; without DumpFolder dumps go to %LOCALAPPDATA%\CrashDumps.",
        "Or use Sysinternals ProcDump, which writes a dump when the process hits an "
        "unhandled exception (fail-fast and stack overflow included). To start the "
        "script under ProcDump, or to wait for the next python.exe to start:\n"
        r"procdump -accepteula -e -ma -x C:\dumps python.exe script.py"
        "\n"
        r"procdump -accepteula -e -ma -w python.exe C:\dumps"
        "\n"
        "-e dumps on an unhandled exception, -ma writes a full-memory dump (what the Python "
        "stack needs; -mp or no option gives less). In a venv, "
        r"Scripts\python.exe is a small launcher that starts the real interpreter as a "
        "child process, so ProcDump would watch the launcher: use the LocalDumps key "
        "(it matches both), or attach to the interpreter by process id "
        r"(`procdump -e -ma <pid> C:\dumps`; print os.getpid() at start-up).",
        _faulthandler_note(code, subcode),
        *hang,
        "Then run `dumpkit analyze <dump>.dmp` on any machine (Linux included). " + python_versions_sentence(),
    )


def python_versions_sentence() -> str:
    """Which CPython builds dumpkit reads the Python stack of (cpython/verified.py)."""
    seen = ", ".join(f"{v[0]}.{v[1]}.{VERIFIED_BUILDS[v][0]}" for v in sorted(VERIFIED_BUILDS))
    return (
        f"It reads the Python stack of 64-bit CPython 3.8-3.13, verified on real crash dumps of {seen}; "
        "other patch releases of those versions are trusted where their headers were compared, and the "
        "report says which applies. 3.14's is read from the offsets the process publishes, not yet verified "
        "on a real dump of it."
    )


# --------------------------------------------------------------------------------------
# explain
# --------------------------------------------------------------------------------------

_MIXUPS: Dict[int, Tuple[str, ...]] = {
    STATUS_STACK_OVERFLOW: (
        "Often called a 'buffer overrun'; it is not one. 0xC00000FD is a thread running "
        "out of stack, usually from recursion or very large stack frames. The "
        "misleadingly named buffer-overrun code is 0xC0000409 (-1073740791).",
    ),
    STATUS_STACK_BUFFER_OVERRUN: (
        "Despite its name, 0xC0000409 is rarely a buffer overrun and never a stack "
        "overflow (that is 0xC00000FD, -1073741571). Since Windows 8 every __fastfail "
        "exits with this code; only subcode 2 (FAST_FAIL_STACK_COOKIE_CHECK_FAILURE) is a "
        "real stack buffer overrun, and subcode 7 (abort()) is the usual one.",
        "The exit code alone does not carry the subcode: it is the first exception parameter in a crash dump.",
    ),
}


def _raiser_clause(ff) -> str:
    """'; raised by X', or, when X is what the summary already names ("abort() was
    called" / "abort() in the C runtime, typically reached from ..."), only the rest."""
    raiser = ff.likely_raiser
    head = ff.summary.split(" ", 1)[0]
    if raiser.startswith(head + " ") and ", " in raiser:
        return ", " + raiser.split(", ", 1)[1]
    return f"; raised by {raiser}"


def _title(code_hex: str, name: str, summary: str) -> str:
    return f"{code_hex} {name}: {summary}"


_CRASH_CODES = _FAULTHANDLER_SEES | {STATUS_STACK_OVERFLOW, STATUS_STACK_BUFFER_OVERRUN, STATUS_CPP_EH_EXCEPTION}


def nearest_known_code(code: int) -> Optional[str]:
    """A code dumpkit has notes on that `code` is a one-digit typo of (0xC00001FD for
    0xC00000FD), as `0xC00000FD STATUS_STACK_OVERFLOW`; else None. The first digit is
    never the typo: it holds the severity and customer bits, which mean something."""
    typed = f"{code & 0xFFFFFFFF:08X}"
    near = []
    for known in STATUS_CODES:
        digits = f"{known:08X}"
        if digits[0] == typed[0] and sum(a != b for a, b in zip(digits, typed)) == 1:
            # the crash codes people mistype first, then the numerically nearest
            near.append((known not in _CRASH_CODES, abs(known - code), known))
    if not near:
        return None
    best = min(near)[2]
    return f"0x{best:08X} {STATUS_CODES[best].name}"


def _error_explanation(parsed: ParsedCode, info: CodeInfo) -> Explanation:
    """An HRESULT or a Win32 error: a result a call returned, not a crash code."""
    code = parsed.code & 0xFFFFFFFF
    return Explanation(
        title=f"0x{code:08X} {info.name}: {info.summary}",
        code_hex=f"0x{code:08X}",
        signed_decimal=to_signed32(code),
        unsigned_decimal=code,
        name=info.name,
        summary=info.summary,
        causes=info.causes,
        next_steps=info.next_steps,
        capture_help=capture_help_for(code),
        known=info.known,
        capture_pointer=capture_pointer_for(code, parsed.kind),
        kind=parsed.kind,
    )


def _exit_code_readings(code: int, causes: Tuple[str, ...]) -> Tuple[str, ...]:
    """A small exit code may be a Win32 error a launcher passed on: say which one."""
    name = win32_name(code) if 0 < code < 0x10000 else None
    if name is None:
        return causes
    return causes + (
        f"As a Win32 error, {code} is {name}: some launchers and services exit with GetLastError()'s value",
    )


def explain(parsed: ParsedCode) -> Explanation:
    code = parsed.code & 0xFFFFFFFF
    if parsed.kind == HRESULT:
        return _error_explanation(parsed, describe_hresult(code))
    if parsed.kind == WIN32:
        return _error_explanation(parsed, describe_win32(code))
    info = lookup_status(code)
    code_hex = f"0x{code:08X}"
    signed = to_signed32(code)
    mixups = _MIXUPS.get(code, ())
    capture = capture_help_for(code, parsed.subcode)
    pointer = capture_pointer_for(code)

    if code == STATUS_STACK_BUFFER_OVERRUN and parsed.subcode is not None:
        ff = lookup_fastfail(parsed.subcode)
        causes, steps = _FASTFAIL_ADVICE.get(parsed.subcode, ((), ()))
        if not causes:
            causes = (f"The process ended itself with __fastfail({ff.name}); {ff.summary}.",)
            if ff.likely_raiser:
                causes += (f"Usually raised by {ff.likely_raiser}.",)
        if not steps:
            steps = (
                "`dumpkit analyze` on a dump shows the function that raised the fail-fast and the modules involved",
            )
        summary = f"fail-fast {ff.name} ({parsed.subcode}): {ff.summary}"
        if ff.likely_raiser and parsed.subcode in _FASTFAIL_ADVICE:
            summary += _raiser_clause(ff)
        sub_mixups: Tuple[str, ...] = mixups[:1]
        if parsed.subcode == 2:
            sub_mixups = (
                "Here the name is right: subcode 2 is a real stack buffer overrun. It is "
                "still not a stack overflow (that is 0xC00000FD, -1073741571), and most "
                "other 0xC0000409 crashes (subcode 7, abort()) overran nothing.",
            )
        elif parsed.subcode == 7:
            sub_mixups = (
                "This is abort(): nothing overflowed. The name "
                "STATUS_STACK_BUFFER_OVERRUN is historical; the subcode is what "
                "counts.",
            )
        return Explanation(
            title=f"{code_hex}/{parsed.subcode} {info.name} / {ff.name}: {ff.summary}",
            code_hex=code_hex,
            signed_decimal=signed,
            unsigned_decimal=code,
            name=info.name,
            summary=summary,
            causes=tuple(causes),
            next_steps=tuple(steps),
            capture_help=capture,
            subcode=parsed.subcode,
            subcode_name=ff.name,
            mixups=sub_mixups,
            known=info.known and ff.known,
            capture_pointer=pointer,
        )

    return Explanation(
        title=_title(code_hex, info.name, info.summary) if info.known else f"{code_hex}: {info.summary}",
        code_hex=code_hex,
        signed_decimal=signed,
        unsigned_decimal=code,
        name=info.name,
        summary=info.summary,
        causes=_exit_code_readings(code, info.causes) if code < 0x100 else info.causes,
        next_steps=info.next_steps,
        capture_help=capture,
        mixups=mixups,
        known=info.known,
        capture_pointer=pointer,
        suggestion=nearest_known_code(code) if not info.known and code >= 0x100 else None,
    )
