"""What dumpkit says about the codes that matter in Python/TensorFlow crashes: hand-written
summaries, causes and next steps for NTSTATUS codes, and a summary and likely raiser for
every fail-fast subcode. The one place this prose lives.

Each row carries the SDK name and value it is about; tests check both against the table
generated from the SDK headers (ntstatus.tsv), so a typo in a value cannot hide here.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple, Union

from dumpkit.analysis.advice import EXE, THREAD_STACK_SIZE_ON_WINDOWS, Step
from dumpkit.analysis.codes.model import (
    STATUS_ACCESS_VIOLATION,
    STATUS_CPP_EH_EXCEPTION,
    STATUS_GUARD_PAGE_VIOLATION,
    STATUS_IN_PAGE_ERROR,
    STATUS_STACK_BUFFER_OVERRUN,
    STATUS_STACK_OVERFLOW,
    CodeInfo,
)

# --------------------------------------------------------------------------------------
# Fail-fast subcodes
# --------------------------------------------------------------------------------------
# One row per FAST_FAIL_* constant of winnt.h; test_codes checks every row's name and
# value against ntstatus.tsv (mingw-w64's and Wine's winnt.h, plus the SDK's newer 71..78
# declared in tools/status_codes_extra.h). Values 15, 16 and 17 are not defined in any
# header. FAST_FAIL_UNHANDLED_LSS_EXCEPTON is spelled that way in the SDK. The SDK marks
# 31, 41, 42, 43, 45, 52 and 55 as telemetry (non-fatal) codes.


_TELEMETRY = " (a telemetry code the SDK marks non-fatal; seeing it as a crash is unusual)"
_HEAP = "the ntdll heap manager, on the first heap call after the damage (not the code that did it)"
_CFG = "the Control Flow Guard check in ntdll, on behalf of the function making the indirect call"

# (subcode, name without the FAST_FAIL_ prefix, summary, likely raiser)
FAST_FAIL_ROWS: Tuple[Tuple[int, str, str, Optional[str]], ...] = (
    (
        0,
        "LEGACY_GS_VIOLATION",
        "legacy /GS stack-cookie failure, as reported by older C runtimes",
        "__report_gsfailure in an old C runtime",
    ),
    (
        1,
        "VTGUARD_CHECK_FAILURE",
        "a C++ virtual-table guard check failed: an object's vtable pointer was overwritten",
        "compiler-inserted vtguard check in the calling function",
    ),
    (
        2,
        "STACK_COOKIE_CHECK_FAILURE",
        "a /GS stack cookie was overwritten: a real stack buffer overrun",
        "__report_gsfailure, called from the epilogue of the function whose local buffer "
        "overflowed (frame 1 of the stack is that function)",
    ),
    (
        3,
        "CORRUPT_LIST_ENTRY",
        "a doubly linked list entry failed its integrity check (memory corruption, often "
        "use-after-free or double free)",
        "an inline list helper (RemoveEntryList and friends) in ntdll or in the module that owns the list",
    ),
    (4, "INCORRECT_STACK", "the stack pointer was outside the thread's stack (stack pivot or corrupted rsp)", None),
    (
        5,
        "INVALID_ARG",
        "the C runtime's invalid-parameter handler fired: a CRT function got a bad argument",
        "_invalid_parameter / _invoke_watson in the C runtime (ucrtbase.dll or a static CRT), "
        "called from the CRT function that was given the bad argument",
    ),
    (6, "GS_COOKIE_INIT", "the /GS security cookie was initialised wrongly or too late", "__security_init_cookie"),
    (
        7,
        "FATAL_APP_EXIT",
        "abort() was called",
        "abort() in the C runtime, typically reached from a failed CHECK / LOG(FATAL) in "
        "native code, std::terminate() (an uncaught C++ exception or a throw out of a "
        "noexcept function), or Py_FatalError",
    ),
    (8, "RANGE_CHECK_FAILURE", "a compiler- or library-inserted bounds check failed", None),
    (9, "UNSAFE_REGISTRY_ACCESS", "an unsafe registry access was detected", None),
    (
        10,
        "GUARD_ICALL_CHECK_FAILURE",
        "Control Flow Guard rejected an indirect call to an address that is not a valid call "
        "target (corrupted or dangling function pointer, or hooking code)",
        _CFG,
    ),
    (11, "GUARD_WRITE_CHECK_FAILURE", "a Control Flow Guard write check failed", None),
    (12, "INVALID_FIBER_SWITCH", "a switch to an invalid fiber was attempted", None),
    (
        13,
        "INVALID_SET_OF_CONTEXT",
        "restoring a thread context with an invalid instruction or stack pointer was blocked "
        "(bad unwind or longjmp target)",
        "ntdll's context-restore checks",
    ),
    (
        14,
        "INVALID_REFERENCE_COUNT",
        "a reference count overflowed or went below zero (over-release, use-after-free)",
        None,
    ),
    (18, "INVALID_JUMP_BUFFER", "longjmp() was given a corrupted jump buffer", "longjmp in the C runtime"),
    (19, "MRDATA_MODIFIED", "ntdll's protected read-mostly data (.mrdata) was modified", "ntdll"),
    (20, "CERTIFICATION_FAILURE", "a certification or code-integrity check failed", None),
    (
        21,
        "INVALID_EXCEPTION_CHAIN",
        "the SEH handler chain was corrupted (SEHOP; 32-bit processes)",
        "ntdll exception dispatch",
    ),
    (22, "CRYPTO_LIBRARY", "a Windows cryptographic library detected an internal failure", None),
    (
        23,
        "INVALID_CALL_IN_DLL_CALLOUT",
        "a forbidden call was made while the loader ran a DLL callout (e.g. from DllMain)",
        "the loader in ntdll",
    ),
    (24, "INVALID_IMAGE_BASE", "an image was mapped at an invalid base address", "the loader in ntdll"),
    (
        25,
        "DLOAD_PROTECTION_FAILURE",
        "the protected delay-load import table could not be updated safely",
        "the delay-load helper",
    ),
    (26, "UNSAFE_EXTENSION_CALL", "an unsafe call into an extension point was blocked", None),
    (27, "DEPRECATED_SERVICE_INVOKED", "a deprecated system service was invoked", None),
    (28, "INVALID_BUFFER_ACCESS", "a checked buffer helper detected an access outside the buffer", None),
    (
        29,
        "INVALID_BALANCED_TREE",
        "a balanced (red-black/AVL) tree failed its integrity check (memory corruption)",
        "an ntdll tree helper, on behalf of its owner (often the heap or the loader)",
    ),
    (30, "INVALID_NEXT_THREAD", "the scheduler was handed an invalid next thread", None),
    (
        31,
        "GUARD_ICALL_CHECK_SUPPRESSED",
        "an indirect call went to a suppressed Control Flow Guard target" + _TELEMETRY,
        _CFG,
    ),
    (32, "APCS_DISABLED", "asynchronous procedure calls were disabled when they must not be", None),
    (33, "INVALID_IDLE_STATE", "invalid processor idle state", None),
    (34, "MRDATA_PROTECTION_FAILURE", "the protection of ntdll's .mrdata section could not be changed", "ntdll"),
    (
        35,
        "UNEXPECTED_HEAP_EXCEPTION",
        "the heap manager hit an unexpected exception while working on a heap (heap corruption)",
        _HEAP,
    ),
    (
        36,
        "INVALID_LOCK_STATE",
        "a lock was found in an invalid state: released twice, released by a thread that "
        "does not own it, or overwritten",
        None,
    ),
    (37, "GUARD_JUMPTABLE", "a Control Flow Guard switch jump-table check failed", None),
    (
        38,
        "INVALID_LONGJUMP_TARGET",
        "longjmp() targeted an address that is not a valid longjmp target",
        "longjmp / the Control Flow Guard longjmp check",
    ),
    (39, "INVALID_DISPATCH_CONTEXT", "exception dispatch found an invalid context record", "ntdll exception dispatch"),
    (40, "INVALID_THREAD", "an operation was attempted on an invalid thread", None),
    (41, "INVALID_SYSCALL_NUMBER", "an invalid system call number was used" + _TELEMETRY, None),
    (42, "INVALID_FILE_OPERATION", "an invalid file operation was attempted" + _TELEMETRY, None),
    (43, "LPAC_ACCESS_DENIED", "a less-privileged AppContainer was denied access" + _TELEMETRY, None),
    (
        44,
        "GUARD_SS_FAILURE",
        "the CET shadow stack caught a return address that does not match the call "
        "(stack corruption, or code that rewrites return addresses)",
        "the processor's shadow-stack check, reported by the kernel",
    ),
    (45, "LOADER_CONTINUITY_FAILURE", "loader continuity policy blocked a DLL" + _TELEMETRY, "the loader in ntdll"),
    (
        46,
        "GUARD_EXPORT_SUPPRESSION_FAILURE",
        "Control Flow Guard export suppression blocked an indirect call to a suppressed export",
        _CFG,
    ),
    (47, "INVALID_CONTROL_STACK", "the control (shadow) stack was invalid", None),
    (48, "SET_CONTEXT_DENIED", "setting a thread context was denied by shadow-stack (CET) policy", None),
    (49, "INVALID_IAT", "the import address table was invalid", "the loader in ntdll"),
    (
        50,
        "HEAP_METADATA_CORRUPTION",
        "the heap found its own bookkeeping corrupted: heap buffer overflow, double free or use-after-free",
        _HEAP,
    ),
    (51, "PAYLOAD_RESTRICTION_VIOLATION", "an exploit-protection payload restriction fired", None),
    (52, "LOW_LABEL_ACCESS_DENIED", "a low-integrity access was denied" + _TELEMETRY, None),
    (53, "ENCLAVE_CALL_FAILURE", "a call into an enclave failed", None),
    (54, "UNHANDLED_LSS_EXCEPTON", "an exception was not handled inside an isolated (LSS) component", None),
    (55, "ADMINLESS_ACCESS_DENIED", "an adminless-mode access was denied" + _TELEMETRY, None),
    (56, "UNEXPECTED_CALL", "a function that must never be called was called", None),
    (57, "CONTROL_INVALID_RETURN_ADDRESS", "a return-address check failed", None),
    (58, "UNEXPECTED_HOST_BEHAVIOR", "the virtualisation host behaved unexpectedly", None),
    (59, "FLAGS_CORRUPTION", "corrupted flags were detected", None),
    (60, "VEH_CORRUPTION", "the vectored exception handler list was corrupted", "ntdll exception dispatch"),
    (61, "ETW_CORRUPTION", "Event Tracing for Windows data was corrupted", None),
    (62, "RIO_ABORT", "a Registered I/O (RIO) socket operation aborted the process", None),
    (63, "INVALID_PFN", "an invalid page frame number was seen (kernel memory management)", None),
    (
        64,
        "GUARD_ICALL_CHECK_FAILURE_XFG",
        "eXtended Flow Guard rejected an indirect call whose target has the wrong function signature",
        _CFG,
    ),
    (65, "CAST_GUARD", "a CastGuard check failed (an invalid C++ object cast)", None),
    (66, "HOST_VISIBILITY_CHANGE", "memory visibility to the virtualisation host changed unexpectedly", None),
    (67, "KERNEL_CET_SHADOW_STACK_ASSIST", "the kernel's CET shadow-stack assist failed", None),
    (68, "PATCH_CALLBACK_FAILED", "a hot-patch callback failed", None),
    (69, "NTDLL_PATCH_FAILED", "applying a hot patch to ntdll failed", None),
    (70, "INVALID_FLS_DATA", "fiber-local storage data was invalid", None),
    (
        71,
        "ASAN_ERROR",
        "AddressSanitizer found a memory error; its report on stderr has the details",
        "the AddressSanitizer runtime linked into the module built with /fsanitize=address",
    ),
    (72, "CLR_EXCEPTION_AOT", "a .NET Native AOT runtime failure", None),
    (73, "POINTER_AUTH_INVALID_RETURN_ADDRESS", "ARM64 pointer authentication rejected a return address", None),
    (74, "INVALID_THREAD_STATE", "a thread was found in an invalid state", None),
    (75, "CORRUPT_WOW64_STATE", "the WOW64 (32-bit on 64-bit Windows) state of a thread was corrupted", None),
    (76, "INVALID_EXTENDED_STATE", "the extended processor state (XSAVE area) was invalid", None),
    (
        77,
        "KERNEL_POINTER_EXPECTED",
        "a kernel pointer was expected but a user pointer was passed (kernel-side check)",
        None,
    ),
    (78, "INVALID_SME_STATE", "the ARM64 Scalable Matrix Extension state was invalid", None),
    (0xFFFFFFFF, "INVALID_FAST_FAIL_CODE", "__fastfail was called with a code that is not itself valid", None),
)

# --------------------------------------------------------------------------------------
# NTSTATUS / exception codes
# --------------------------------------------------------------------------------------

# Steps for a reader without a dump, or who has not analysed it yet: a verdict, which is
# that analysis, leaves them out (lookup.steps_given_a_dump); `dumpkit explain` keeps them.
ANALYZE = Step("analyze_a_dump", "Get a dump of the crash (see 'capturing a dump') and run `dumpkit analyze` on it")
_ACCESS_PARAMETERS = Step(
    "access_violation.parameters",
    "The access parameters say read/write/execute and the address; a small address "
    "is a NULL pointer plus a field offset, and 0xffffffffffffffff means a "
    "general-protection fault (a non-canonical pointer or a misaligned vector access), "
    "whose real address `dumpkit analyze` computes from the faulting instruction",
)
_DECODES_THE_INSTRUCTION = Step(
    "illegal_instruction.decode",
    "`dumpkit analyze` on a dump decodes the faulting instruction (a ud2 trap is not "
    "a CPU feature problem) and reports AVX/AVX2/AVX-512 support from the dump's "
    "CPUID data",
)
_FIND_THE_RECURSION = Step(
    "stack_overflow.find_the_recursion",
    "Find the recursion: `dumpkit analyze` shows the repeating cycle of frames and "
    "the bytes each repetition costs; fix the recursion or make it iterative",
)
_GET_THE_SUBCODE = Step(
    "fastfail.get_the_subcode",
    "Get the subcode: it is the first exception parameter in a dump "
    "(`dumpkit analyze` shows it and the function that raised it); "
    "then `dumpkit explain 0xC0000409/<subcode>`",
)
_CXX_TYPE = Step(
    "cxx_exception.type",
    "The exception object's type is found through the third parameter (ThrowInfo); "
    "`dumpkit analyze` names it when the memory is in the dump",
)
_DELAY_LOAD_INFO = Step(
    "delay_load.info",
    "The DLL's and the function's names are in the DelayLoadInfo the first parameter points to, "
    "on the crashing thread's stack; `dumpkit analyze` reads them from the dump",
)
BEFORE_A_DUMP = frozenset(
    s.id
    for s in (
        ANALYZE,
        _ACCESS_PARAMETERS,
        _DECODES_THE_INSTRUCTION,
        _FIND_THE_RECURSION,
        _GET_THE_SUBCODE,
        _CXX_TYPE,
        _DELAY_LOAD_INFO,
    )
)

# Steps the verdict fits to the process (verdict/__init__.py selects them by id): rerunning
# under faulthandler needs a Python process; TensorFlow advice needs TensorFlow loaded;
# page heap is enabled for the process's own executable.
FAULTHANDLER_ACCESS_VIOLATION = Step(
    "access_violation.faulthandler",
    "Run with `python -X faulthandler`: for an access violation it prints the Python stack of every thread",
)
FAULTHANDLER_DIVIDE_BY_ZERO = Step(
    "integer_divide_by_zero.faulthandler", "faulthandler reports it ('int divide by zero') with the Python stack"
)
BUILD_FOR_THE_CPU = Step(
    "illegal_instruction.build_for_the_cpu",
    "If a vector instruction faulted, install a build made for your CPU (e.g. a "
    "TensorFlow version or wheel built without AVX) or move to a machine with AVX2",
)
WOW64_DEBUGGER = Step(
    "wx86_breakpoint.debugger",
    "Use a 32-bit debugger or `.effmach x86` in WinDbg; consider a 64-bit Python (TensorFlow has no 32-bit builds)",
)
PAGE_HEAP = Step(
    "heap_corruption.page_heap",
    "Enable full page heap for {exe} so the overrun faults where it happens: "
    "gflags /p /enable {exe} /full (Debugging Tools for Windows), then get a "
    "dump of the new crash",
    ((EXE, "python.exe"),),
)

_FLOAT_CAUSES = (
    "Floating-point exceptions are masked by default on Windows, so this only happens when "
    "something unmasked them (_controlfp / _control87, numpy.seterr does not do this): "
    "typically a third-party DLL (old Fortran or Delphi runtimes, some GPU/driver or "
    "plug-in DLLs) that changes the FPU/SSE control word and leaves it changed",
)
_FLOAT_STEPS = (
    "Find the module that unmasked the exceptions: the faulting frame is where the "
    "arithmetic happened, not who changed the control word",
    ANALYZE,
)


def _ci(
    code: int, name: str, summary: str, causes: Sequence[str] = (), steps: Sequence[Union[str, Step]] = ()
) -> CodeInfo:
    """A row; a step given as words is named after the code and its place ("STATUS_NO_MEMORY.1")."""
    return CodeInfo(
        code,
        name,
        summary,
        tuple(causes),
        tuple(s if isinstance(s, Step) else Step(f"{name}.{i}", s) for i, s in enumerate(steps)),
    )


STATUS_ROWS: Tuple[CodeInfo, ...] = (
    _ci(0x00000000, "STATUS_SUCCESS", "success: the process exited normally (exit code 0)"),
    _ci(
        0x40000015,
        "STATUS_FATAL_APP_EXIT",
        "the program asked to be terminated after a fatal error (the pre-fail-fast way abort() ends a process)",
        (
            "abort() on a system or C runtime where __fastfail is not available; on current "
            "Windows abort() ends with 0xC0000409 / FAST_FAIL_FATAL_APP_EXIT instead",
            "FatalAppExit() called by the program",
        ),
        (
            "Read stderr just before the exit: abort() callers (CHECK failures, LOG(FATAL), "
            "std::terminate) usually print the reason there",
            ANALYZE,
        ),
    ),
    _ci(
        0x4000001F,
        "STATUS_WX86_BREAKPOINT",
        "a breakpoint in 32-bit x86 code of a WOW64 process, as seen by a 64-bit debugger",
        (
            "A 64-bit debugger or dump writer attached to a 32-bit python.exe: the initial "
            "debugger breakpoint or a __debugbreak() in 32-bit code",
        ),
        (WOW64_DEBUGGER,),
    ),
    _ci(
        0x406D1388,
        "MS_VC_EXCEPTION",
        "the Visual C++ 'set thread name' exception, raised deliberately and caught: harmless",
        (
            "Code naming a thread the old way (RaiseException with 0x406D1388), which a "
            "debugger or dump writer records as a first-chance exception",
        ),
        ("Not a crash cause: look for the real exception (another thread, or a later event)",),
    ),
    _ci(
        STATUS_GUARD_PAGE_VIOLATION,
        "STATUS_GUARD_PAGE_VIOLATION",
        "a guard page was touched (normally the stack growing by one page; only a problem if it is unhandled)",
        (
            "Normal stack growth recorded as a first-chance exception by a debugger",
            "Code that uses PAGE_GUARD memory itself (some JITs, memory checkers)",
        ),
        (
            "If this is the exception in a dump, check whether a later second-chance "
            "exception (often 0xC00000FD) is the real crash",
        ),
    ),
    _ci(
        0x80000002,
        "STATUS_DATATYPE_MISALIGNMENT",
        "a misaligned data access that the processor or code path does not allow",
        (
            "Misaligned access with alignment checking enabled, or in code that requires "
            "alignment (some SIMD instructions report access violations instead)",
        ),
        (ANALYZE,),
    ),
    _ci(
        0x80000003,
        "STATUS_BREAKPOINT",
        "a breakpoint instruction (int 3) was executed with no debugger to handle it",
        (
            "__debugbreak()/DebugBreak() left in a library, or a debug-build assertion",
            "Py_FatalError when a debugger is attached calls DebugBreak() before abort()",
            "A corrupted code pointer that landed in the int 3 (0xCC) padding between functions",
            "A dump taken by attaching a debugger (the attach breakpoint, not a crash)",
        ),
        (
            "If frame 0 is a DebugBreak / __debugbreak, read the code around it; if it is in "
            "the middle of padding, treat it as a bad jump and look at the caller",
            ANALYZE,
        ),
    ),
    _ci(
        0x80000004,
        "STATUS_SINGLE_STEP",
        "a single-step or hardware-breakpoint trap fired with no debugger to handle it",
        (
            "A hardware breakpoint (debug registers) left set by a debugger, an anti-cheat or a profiler",
            "The trap flag set by code that expected a debugger",
        ),
        (ANALYZE,),
    ),
    _ci(
        STATUS_ACCESS_VIOLATION,
        "STATUS_ACCESS_VIOLATION",
        "the program read, wrote or executed memory it may not touch",
        (
            "A NULL or dangling pointer in native code (a .pyd extension, TensorFlow op, CUDA/cuDNN library or driver)",
            "An extension module built against a different Python, numpy or TensorFlow "
            "ABI than the one loaded (e.g. a wheel for another numpy major version)",
            "Use-after-free or a buffer overrun that later corrupts a pointer",
            "Calling native code from several threads without the GIL or locks it needs",
            "A mismatch between the CUDA/cuDNN DLLs found on PATH and the ones the TensorFlow build expects",
            "An aligned SSE/AVX instruction (movaps, vmovdqa) on a buffer that is not 16/32-byte "
            "aligned, e.g. Eigen types in memory from a plain malloc",
            "A read of address 0 inside msvcp140.dll's mutex lock (_Mtx_lock): an extension built with "
            "Visual Studio 2022 17.10 or later (MSVC 14.40+, whose std::mutex no longer calls "
            "_Mtx_init_in_situ) running on an older msvcp140.dll that another package, or Python's own "
            "folder, loaded first; `dumpkit analyze` names both DLLs and their versions",
        ),
        (FAULTHANDLER_ACCESS_VIOLATION, _ACCESS_PARAMETERS, ANALYZE),
    ),
    _ci(
        STATUS_IN_PAGE_ERROR,
        "STATUS_IN_PAGE_ERROR",
        "a page of a mapped file or of the page file could not be read from disk",
        (
            "A DLL, .pyd or memory-mapped model/checkpoint file on a network share or "
            "removable drive that went away or hiccupped",
            "A failing disk, or a file truncated while it was mapped",
            "Antivirus or storage filter drivers failing reads",
        ),
        (
            "The third exception parameter is the NTSTATUS of the failed I/O; it says why",
            "Copy models, datasets and the Python environment to a local disk",
        ),
    ),
    _ci(
        0xC0000008,
        "STATUS_INVALID_HANDLE",
        "an invalid handle was used while strict handle checking was on",
        (
            "Closing a handle twice, or using a closed handle, under a debugger or "
            "Application Verifier (which turn the error into an exception)",
        ),
        ("Look for a double CloseHandle in the native frames", ANALYZE),
    ),
    _ci(
        0xC000000D,
        "STATUS_INVALID_PARAMETER",
        "a function was given an invalid parameter",
        (
            "Usually a returned error, not a crash; as an exception it comes from code that "
            "raises it explicitly, or from the C runtime's invalid-parameter path",
            "Current C runtimes report a bad CRT argument as 0xC0000409 with FAST_FAIL_INVALID_ARG (5) instead",
        ),
        (ANALYZE,),
    ),
    _ci(
        0xC0000017,
        "STATUS_NO_MEMORY",
        "not enough virtual memory or page-file quota to complete an allocation",
        (
            "Large CPU-side tensors or datasets exhausting RAM plus page file",
            "A page file too small for the commit charge (Windows commits memory up front, unlike Linux overcommit)",
            "A memory leak over a long training run",
        ),
        (
            "Watch the process's commit size in Task Manager (Details -> Commit size)",
            "Enlarge the page file or reduce batch / dataset / prefetch buffer sizes",
        ),
    ),
    _ci(
        0xC000001D,
        "STATUS_ILLEGAL_INSTRUCTION",
        "the CPU met an instruction it does not support or that is invalid",
        (
            "The classic TensorFlow case: a wheel built with AVX/AVX2 (or AVX-512) "
            "instructions running on a CPU without them (older or low-end CPUs, some "
            "virtual machines that hide AVX)",
            "Another native library compiled for a newer CPU (-march/-arch:AVX2)",
            "GCC's -fstack-protector on mingw-w64 10 and older (GCC's libssp): a smashed "
            "stack ends in a ud2 trap, i.e. this code; mingw-w64 11 and later ship their "
            "own __stack_chk_fail, which raises 0xC0000409 subcode 2 "
            "(FAST_FAIL_STACK_COOKIE_CHECK_FAILURE) instead",
            "A jump into data or into the middle of an instruction (corrupted code pointer)",
        ),
        (
            "Check the CPU flags on the machine that crashed: `coreinfo -f` (Sysinternals) or "
            "`python -m cpuinfo` (py-cpuinfo) list AVX, AVX2 and AVX512F",
            _DECODES_THE_INSTRUCTION,
            BUILD_FOR_THE_CPU,
            ANALYZE,
        ),
    ),
    _ci(
        0xC0000022,
        "STATUS_ACCESS_DENIED",
        "access was denied",
        (
            "As a process exit code: the process could not start or open something it needs "
            "(antivirus or application control blocking python.exe or a DLL, a locked "
            "file, missing permissions on the environment folder)",
        ),
        (
            "Check antivirus / Windows Defender / application-control logs",
            "Check permissions on the Python environment and the working directory",
        ),
    ),
    _ci(
        0xC0000025,
        "STATUS_NONCONTINUABLE_EXCEPTION",
        "an exception handler tried to continue after an exception that cannot be continued",
        (
            "A handler returning 'continue execution' for a fatal exception (buggy "
            "vectored handler or SEH filter in native code)",
        ),
        (ANALYZE,),
    ),
    _ci(
        0xC0000026,
        "STATUS_INVALID_DISPOSITION",
        "an exception handler returned a value the dispatcher does not accept",
        (
            "A corrupted exception handler or stack (the dispatcher read garbage where a handler result was expected)",
            "Mixing incompatible exception-handling runtimes in one process",
        ),
        (ANALYZE,),
    ),
    _ci(
        0xC0000028,
        "STATUS_BAD_STACK",
        "an invalid or unaligned stack was found while unwinding",
        ("Stack corruption, or native code with wrong unwind data",),
        (ANALYZE,),
    ),
    _ci(
        0xC0000034,
        "STATUS_OBJECT_NAME_NOT_FOUND",
        "a named object (file, registry key, section...) was not found",
        (
            "Normally an error code returned to the caller; as a process exit code, a "
            "program that exits with the status of a failed lookup (often a missing file)",
        ),
        ("Check that the files and paths the program expects exist",),
    ),
    _ci(
        0xC000007B,
        "STATUS_INVALID_IMAGE_FORMAT",
        "an executable or DLL is not a valid image for this process",
        (
            "A 32-bit DLL in a 64-bit process or the reverse (a 32-bit Python with 64-bit "
            "CUDA DLLs, or a stray 32-bit DLL earlier on PATH)",
            "A corrupted or truncated DLL",
        ),
        ("Check the bitness of python.exe and of the DLLs on PATH (dumpbin /headers or `dumpkit info`)",),
    ),
    _ci(
        0xC000008C,
        "STATUS_ARRAY_BOUNDS_EXCEEDED",
        "a hardware array-bounds check failed",
        ("Rare on x64: raised by code that checks bounds in hardware or raises it explicitly",),
        (ANALYZE,),
    ),
    _ci(
        0xC000008D,
        "STATUS_FLOAT_DENORMAL_OPERAND",
        "a floating-point operation had a denormal operand with that exception unmasked",
        _FLOAT_CAUSES,
        _FLOAT_STEPS,
    ),
    _ci(
        0xC000008E,
        "STATUS_FLOAT_DIVIDE_BY_ZERO",
        "a floating-point division by zero with that exception unmasked",
        _FLOAT_CAUSES,
        _FLOAT_STEPS,
    ),
    _ci(
        0xC000008F,
        "STATUS_FLOAT_INEXACT_RESULT",
        "an inexact floating-point result with that exception unmasked",
        _FLOAT_CAUSES,
        _FLOAT_STEPS,
    ),
    _ci(
        0xC0000090,
        "STATUS_FLOAT_INVALID_OPERATION",
        "an invalid floating-point operation (e.g. producing NaN) with that exception unmasked",
        _FLOAT_CAUSES,
        _FLOAT_STEPS,
    ),
    _ci(
        0xC0000091,
        "STATUS_FLOAT_OVERFLOW",
        "a floating-point overflow with that exception unmasked",
        _FLOAT_CAUSES,
        _FLOAT_STEPS,
    ),
    _ci(
        0xC0000092,
        "STATUS_FLOAT_STACK_CHECK",
        "the x87 floating-point register stack overflowed or underflowed",
        ("x87 code with unbalanced pushes and pops, or calling-convention mismatches in 32-bit code",),
        (ANALYZE,),
    ),
    _ci(
        0xC0000093,
        "STATUS_FLOAT_UNDERFLOW",
        "a floating-point underflow with that exception unmasked",
        _FLOAT_CAUSES,
        _FLOAT_STEPS,
    ),
    _ci(
        0xC0000094,
        "STATUS_INTEGER_DIVIDE_BY_ZERO",
        "an integer division by zero (or INT_MIN / -1) in native code",
        (
            "An integer division or modulo by zero in a native op or extension, often from "
            "an empty input, a zero batch size or a zero-sized dimension reaching a kernel "
            "that does not check",
            "Overclocking / GPU tuning tools injecting into the process have been reported to cause it",
        ),
        (FAULTHANDLER_DIVIDE_BY_ZERO, ANALYZE),
    ),
    _ci(
        0xC0000095,
        "STATUS_INTEGER_OVERFLOW",
        "an integer overflow trap (the x86 INTO instruction or equivalent)",
        ("Rare: code compiled to trap on integer overflow",),
        (ANALYZE,),
    ),
    _ci(
        0xC0000096,
        "STATUS_PRIVILEGED_INSTRUCTION",
        "user-mode code executed an instruction reserved for the kernel",
        (
            "A jump into data or a corrupted code pointer (random bytes decode as a privileged instruction)",
            "Code written for a different CPU mode",
        ),
        (ANALYZE,),
    ),
    _ci(
        STATUS_STACK_OVERFLOW,
        "STATUS_STACK_OVERFLOW",
        "a thread ran out of stack (this is a stack overflow, not a buffer overrun)",
        (
            "Deep recursion in Python after sys.setrecursionlimit() was raised: the Python "
            "limit no longer protects the C stack (Python 3.11 and older especially)",
            "Recursive model or graph structures: deeply nested Keras layers, recursive "
            "tf.function / AutoGraph conversion, deepcopy / pickle / json / repr of a deeply "
            "nested object",
            "Native recursion in a library (graph optimisers, protobuf, parsers) on a deeply nested input",
            "Large arrays on the stack in a native op or extension (big local buffers, "
            "alloca, fixed-size Eigen matrices): the frame that dies is often in "
            "__chkstk / ___chkstk_ms",
            "Windows stacks are small: python.exe reserves about 2 MB for its main thread "
            "(most programs keep the linker default of 1 MiB) and new threads get the same, "
            "while Linux typically gives the main thread 8 MiB, so code that works on Linux "
            "overflows on Windows",
        ),
        (
            "Run the work in a thread with a bigger stack: call threading.stack_size(128 * "
            "1024 * 1024) before creating the threading.Thread that runs it ("
            + THREAD_STACK_SIZE_ON_WINDOWS
            + "; CPython on Windows accepts up to just under 256 MiB)",
            _FIND_THE_RECURSION,
            "If one frame is huge, move its buffer to the heap",
            ANALYZE,
        ),
    ),
    _ci(
        0xC000012D,
        "STATUS_COMMITMENT_LIMIT",
        "the system commit limit (RAM plus page file) was reached",
        (
            "Large allocations on a machine with a small or fixed-size page file",
            "Several processes (data-loader workers) each committing a copy of the data",
        ),
        ("Enlarge the page file or reduce memory use",),
    ),
    _ci(
        0xC0000135,
        "STATUS_DLL_NOT_FOUND",
        "a DLL the executable imports could not be found, so the process never started",
        (
            "python.exe (or another .exe started by the script) cannot find one of its "
            "DLLs: the Visual C++ runtime (vcruntime140.dll, vcruntime140_1.dll, "
            "msvcp140.dll) or python3X.dll",
            "A .pyd whose DLL is missing shows up as ImportError ('DLL load failed'), not "
            "as this exit code; this code means an executable failed to start",
        ),
        (
            "Install the latest Microsoft Visual C++ Redistributable (x64)",
            "Run the executable from a console to see which DLL is named, or use a "
            "dependency walker (e.g. Dependencies / dumpbin /dependents)",
        ),
    ),
    _ci(
        0xC0000138,
        "STATUS_ORDINAL_NOT_FOUND",
        "a DLL was found but lacks an export ordinal the executable imports",
        ("An older or different build of a DLL earlier on PATH than the right one",),
        ("Check which copy of the DLL is loaded (PATH order, the application folder)",),
    ),
    _ci(
        0xC0000139,
        "STATUS_ENTRYPOINT_NOT_FOUND",
        "a DLL was found but lacks a function the executable imports",
        (
            "A different version of a DLL shadows the right one: an old msvcp140.dll / "
            "vcruntime140.dll shipped by another program, or mismatched CUDA / cuDNN / zlib "
            "DLLs on PATH",
            "For a .pyd the same problem appears as ImportError 'The specified procedure could not be found'",
        ),
        (
            "List the DLLs the process loaded (`dumpkit info` on a dump, or Process "
            "Explorer) and compare their paths and versions",
            "Put the right directories first, or use os.add_dll_directory() from Python 3.8 on",
        ),
    ),
    _ci(
        0xC000013A,
        "STATUS_CONTROL_C_EXIT",
        "the process was ended by Ctrl+C, Ctrl+Break or its console closing",
        (
            "Ctrl+C while the main thread was blocked in native code that never returned "
            "to Python to raise KeyboardInterrupt",
            "The console window was closed, or the parent (IDE, job runner) sent a console control event",
        ),
        ("Not a crash: check what stopped the process",),
    ),
    _ci(
        0xC0000142,
        "STATUS_DLL_INIT_FAILED",
        "a DLL's initialisation (DllMain) failed, so the process could not start",
        (
            "A DLL whose DllMain returned FALSE: missing dependencies of its own, a security product refusing it",
            "Out of desktop heap when starting many processes (e.g. many data-loader workers from a service)",
        ),
        (
            "Start the program from a console to see which DLL fails",
            "Check antivirus logs and the Application event log",
        ),
    ),
    _ci(
        0xC0000144,
        "STATUS_UNHANDLED_EXCEPTION",
        "an exception was not handled and ended the process",
        (
            "The generic 'unhandled exception' status; the original exception code is "
            "in the dump's exception record or the event log",
        ),
        ("Look in the Application event log (Event ID 1000) for the real exception code", ANALYZE),
    ),
    _ci(
        0xC0000194,
        "STATUS_POSSIBLE_DEADLOCK",
        "a wait on a critical section timed out and was reported as a possible deadlock",
        (
            "A thread held a critical section for a very long time (deadlock, or a thread "
            "suspended/killed while holding it), with the timeout check enabled (e.g. "
            "Application Verifier or a lowered CriticalSectionTimeout)",
            "The loader lock held while DllMain waits for another thread",
        ),
        ("Look at all threads' stacks in the dump for the owner of the lock", ANALYZE),
    ),
    _ci(
        0xC00002B4,
        "STATUS_FLOAT_MULTIPLE_FAULTS",
        "several floating-point faults at once (SSE) with those exceptions unmasked",
        _FLOAT_CAUSES,
        _FLOAT_STEPS,
    ),
    _ci(
        0xC00002B5,
        "STATUS_FLOAT_MULTIPLE_TRAPS",
        "several floating-point traps at once (SSE) with those exceptions unmasked",
        _FLOAT_CAUSES,
        _FLOAT_STEPS,
    ),
    _ci(
        0xC0000374,
        "STATUS_HEAP_CORRUPTION",
        "the Windows heap found its data structures corrupted",
        (
            "A heap buffer overrun, double free or use-after-free in native code; the code "
            "that notices is rarely the code that did it",
            "Memory allocated by one C runtime or heap and freed by another (an extension "
            "built with a different compiler or a static CRT passing ownership across a "
            "DLL boundary)",
            "Extension modules or custom ops built against a different numpy / TensorFlow ABI",
        ),
        (PAGE_HEAP, ANALYZE),
    ),
    _ci(
        STATUS_STACK_BUFFER_OVERRUN,
        "STATUS_STACK_BUFFER_OVERRUN",
        "the process ended itself with __fastfail; the subcode says why (despite the name, "
        "usually not a buffer overrun)",
        (
            "Since Windows 8 every __fastfail ends with this code: abort() (subcode 7), "
            "the C runtime's invalid-parameter handler (5), a real /GS stack-cookie "
            "failure (2), Control Flow Guard (10), heap and list corruption checks, ...",
            "In TensorFlow, subcode 7 from a failed CHECK / LOG(FATAL) is by far the most "
            "common: the reason is printed on stderr just before the exit",
            "Python itself: 'Fatal Python error: ...' ends in abort(), so subcode 7",
        ),
        ("Read the last lines of stderr first: abort() callers print why", _GET_THE_SUBCODE),
    ),
    _ci(
        0xC0000417,
        "STATUS_INVALID_CRUNTIME_PARAMETER",
        "the C runtime's invalid-parameter handler ended the process (older runtimes)",
        (
            "A CRT function given a bad argument (bad file descriptor, NULL string, buffer "
            "too small) in a library linked against an older C runtime",
        ),
        ("Find the CRT call in the stack and the argument it was given", ANALYZE),
    ),
    _ci(
        0xC0000420,
        "STATUS_ASSERTION_FAILURE",
        "an assertion raised with the kernel's assertion mechanism (int 0x2C) failed",
        ("NT_ASSERT-style assertions in system or driver-like code, typically on checked or debug builds",),
        (ANALYZE,),
    ),
    _ci(
        0xC000041D,
        "STATUS_FATAL_USER_CALLBACK_EXCEPTION",
        "an exception escaped a callback that Windows called into user mode (a window "
        "procedure or hook) and could not be passed on",
        (
            "A crash inside a GUI callback: a window procedure or hook in a plotting or GUI "
            "toolkit (Tk, Qt, matplotlib backends), or a crash in a native library called "
            "from such a callback",
        ),
        (ANALYZE,),
    ),
    _ci(
        0xC0000602,
        "STATUS_FAIL_FAST_EXCEPTION",
        "the program ended itself with RaiseFailFastException",
        (
            "A runtime that fails fast through RaiseFailFastException, e.g. the .NET "
            "runtime's Environment.FailFast (pythonnet) or other managed hosts",
        ),
        ("Check stderr and the Application event log for the runtime's own message", ANALYZE),
    ),
    _ci(
        STATUS_CPP_EH_EXCEPTION,
        "CPP_EH_EXCEPTION",
        "a C++ exception thrown by MSVC-compiled code ('msc'); fatal only when nobody caught it",
        (
            "A C++ exception (std::bad_alloc, std::runtime_error, a library's own type) "
            "thrown in native code and not caught before the boundary to Python; an "
            "unhandled one goes to std::terminate() and the process then exits with "
            "0xC0000409 / FAST_FAIL_FATAL_APP_EXIT (7)",
            "Dump writers that stop at the second-chance exception record this code rather than the final fail-fast",
        ),
        (_CXX_TYPE, ANALYZE),
    ),
    # The delay-load helper's exceptions (tools/status_codes_extra.h): a DLL linked with
    # /DELAYLOAD is loaded at the first call into it, so a missing one ends the process there
    # rather than failing the import that loaded the module.
    _ci(
        0xC06D007E,
        "DELAYLOAD_MOD_NOT_FOUND",
        "a delay-loaded DLL could not be loaded at the first call into it "
        "(VcppException(ERROR_SEVERITY_ERROR, ERROR_MOD_NOT_FOUND))",
        (
            "A native module linked with /DELAYLOAD (CUDA, cuDNN, TensorRT, DirectML, a vendor SDK) "
            "called into a DLL that is not on the machine, or not where LoadLibrary looks: python.exe's "
            "folder, the system folders, the current folder and PATH; not the extension's own folder, "
            "nor (unless the process called SetDefaultDllDirectories) the folders given to "
            "os.add_dll_directory, which count for extension modules' import-time dependencies and ctypes",
            "The DLL is there but one of its own dependencies is missing, or it is a 32-bit build "
            "(the error in the DelayLoadInfo says which: 126, 193)",
        ),
        (_DELAY_LOAD_INFO, ANALYZE),
    ),
    _ci(
        0xC06D007F,
        "DELAYLOAD_PROC_NOT_FOUND",
        "a delay-loaded DLL was loaded but lacks the function called "
        "(VcppException(ERROR_SEVERITY_ERROR, ERROR_PROC_NOT_FOUND))",
        (
            "The DLL found first is another version than the module was built against (an older CUDA "
            "runtime or cuDNN earlier on PATH, or already loaded by another package)",
        ),
        (_DELAY_LOAD_INFO, ANALYZE),
    ),
    _ci(
        0xC06D0057,
        "DELAYLOAD_INVALID_PARAMETER",
        "the delay-load helper was given a delay-import descriptor it does not support "
        "(VcppException(ERROR_SEVERITY_ERROR, ERROR_INVALID_PARAMETER))",
        ("A damaged or mis-linked image: its delay-import table is not in the format the helper reads",),
        (_DELAY_LOAD_INFO, ANALYZE),
    ),
    # Statuses that show up as the third parameter of an in-page error.
    _ci(0xC000000E, "STATUS_NO_SUCH_DEVICE", "the device does not exist (any more)"),
    _ci(0xC000003F, "STATUS_CRC_ERROR", "a data error (CRC) was reported by the disk"),
    _ci(0xC000009C, "STATUS_DEVICE_DATA_ERROR", "the device reported a data error"),
    _ci(0xC000009D, "STATUS_DEVICE_NOT_CONNECTED", "the device is not connected"),
    _ci(0xC00000B5, "STATUS_IO_TIMEOUT", "an I/O operation timed out"),
    _ci(0xC0000102, "STATUS_FILE_CORRUPT_ERROR", "the file or directory is corrupt"),
    _ci(0xC0000120, "STATUS_CANCELLED", "the I/O request was cancelled"),
    _ci(0xC0000185, "STATUS_IO_DEVICE_ERROR", "the device reported an I/O error"),
    _ci(0xC000020C, "STATUS_CONNECTION_DISCONNECTED", "the network connection was dropped"),
    _ci(0xC000026E, "STATUS_VOLUME_DISMOUNTED", "the volume was dismounted"),
    _ci(
        0xE0434352,
        "CLR_EXCEPTION",
        "a .NET (CLR) exception ('CCR')",
        ("A managed exception in a .NET component loaded into the process (pythonnet, a vendor SDK)",),
        ("Look at the .NET side's logs; in WinDbg use SOS (!pe) to print it",),
    ),
)

# Win32 errors that Python users meet as a DLL that would not load: "ImportError: DLL load
# failed while importing X: <FormatMessage's text>", ctypes' "Could not find module ...",
# "OSError: [WinError N] ...". Each row's name and value are checked against winerror.tsv.
_DEPENDENCIES = Step(
    "dll_load.find_the_missing_one",
    "Find which DLL it is: open the .pyd or DLL the traceback names in the Dependencies tool (or run "
    "`dumpbin /dependents` on it) and look for the import that does not resolve: the message names the "
    "module being loaded, not the dependency that is missing",
)
WIN32_ROWS: Tuple[CodeInfo, ...] = (
    _ci(
        126,
        "ERROR_MOD_NOT_FOUND",
        "a DLL, or a DLL it depends on, was not found: what 'DLL load failed ... The specified module could "
        "not be found' and ctypes' 'Could not find module ... (or one of its dependencies)' mean",
        (
            "An extension module (.pyd) or a ctypes DLL needs a DLL that is not where Windows looks: since "
            "Python 3.8 (python.org's builds) an extension's dependencies are searched in its own folder, the "
            "folders given to os.add_dll_directory and the system folders, not in PATH or the current folder",
            "The Microsoft Visual C++ Redistributable is missing or older than the package needs "
            "(msvcp140.dll, msvcp140_1.dll, vcruntime140_1.dll)",
            "A GPU build whose CUDA or cuDNN DLLs are not installed, or not in a folder the search covers",
            "The DLL named is there, but one of its own dependencies is not",
        ),
        (
            _DEPENDENCIES,
            "Install the Visual C++ Redistributable for Visual Studio 2015-2022 (x64) if a msvcp140 or "
            "vcruntime140 DLL is among the missing",
            "Add the folder that holds the missing DLL with os.add_dll_directory(folder) before the import "
            "(PATH no longer counts for extension modules), or install the package that ships it",
        ),
    ),
    _ci(
        127,
        "ERROR_PROC_NOT_FOUND",
        "a DLL was found and loaded but lacks a function the importer needs: what 'DLL load failed ... The "
        "specified procedure could not be found' means",
        (
            "Another version of a dependency was found first: an older DLL of the same name earlier in the "
            "search, or one another package already loaded (a common clash for msvcp140.dll, the CUDA runtime, "
            "MKL and OpenMP DLLs)",
            "A wheel built for a newer Windows or runtime than the machine has",
        ),
        (
            _DEPENDENCIES,
            "Find which copy of that DLL was loaded (Process Explorer, or `tasklist /m NAME.dll`) and put the "
            "version the package was built against first, or upgrade the package that brought the old copy",
        ),
    ),
    _ci(
        193,
        "ERROR_BAD_EXE_FORMAT",
        "the file is not a DLL this process can load: usually a 32-bit DLL in a 64-bit Python (or the "
        "reverse), or a truncated download",
        (
            "A 32-bit build of a DLL or package on the search path of a 64-bit Python",
            "A damaged or partly downloaded file",
        ),
        (
            "Check both sides: `python -c \"import struct; print(struct.calcsize('P') * 8)\"` for Python, "
            "`dumpbin /headers` (machine x64 or x86) for the DLL; install the build that matches",
        ),
    ),
    _ci(
        1114,
        "ERROR_DLL_INIT_FAILED",
        "a DLL's initialization routine (DllMain) failed while it was being loaded",
        (
            "The DLL's start-up failed: a runtime it initialises is missing, too old or present twice (the "
            "Visual C++ runtime, an OpenMP runtime, a GPU driver)",
            "The import order: another package loaded a conflicting copy of a shared runtime first",
        ),
        (
            "Update the Visual C++ Redistributable; import the failing package first in a fresh interpreter "
            "to see whether another package's DLLs are the conflict",
        ),
    ),
)
WIN32_NOTES: Dict[int, CodeInfo] = {info.code: info for info in WIN32_ROWS}


# Names users type that no SDK header defines (the EXCEPTION_* spellings of winbase.h come
# from the generated table instead).
INFORMAL_ALIASES: Dict[str, int] = {
    "STATUS_MSC_EXCEPTION": STATUS_CPP_EH_EXCEPTION,
    "MSC_EXCEPTION": STATUS_CPP_EH_EXCEPTION,
    "CPP_EXCEPTION": STATUS_CPP_EH_EXCEPTION,
}

# What people call a crash in words, for `dumpkit explain "stack overflow"`: (code,
# subcode). Words that are a code's name with spaces (stack overflow, access violation,
# heap corruption) need no row: the parser tries every name spelled with spaces too. No
# key may read as hex (a test keeps it so), or it would be taken for a number.
PLAIN_WORDS: Dict[str, Tuple[int, Optional[int]]] = {
    # faulthandler's and ctypes' own words for codes (parse.py reads their lines)
    "int divide by zero": (0xC0000094, None),
    "page error": (0xC0000006, None),
    "stack over underflow": (0xC0000092, None),
    "float inexact": (0xC000008F, None),
    "floating point operand denormal": (0xC000008D, None),
    "nocontinuable": (0xC0000025, None),
    "breakpoint encountered": (0x80000003, None),
    "abort": (0xC0000409, 7),
    "abort()": (0xC0000409, 7),
    "sigabrt": (0xC0000409, 7),
    "assertion failed": (0xC0000409, 7),
    "check failed": (0xC0000409, 7),
    "std::terminate": (0xC0000409, 7),
    "terminate": (0xC0000409, 7),
    "fatal python error": (0xC0000409, 7),
    "py fatalerror": (0xC0000409, 7),
    "omp error 15": (3, None),
    "omp: error 15": (3, None),
    "openmp": (3, None),
    "libiomp5md": (3, None),
    "libiomp5md dll": (3, None),
    "msvcp140": (0xC0000005, None),
    "msvcp140 dll": (0xC0000005, None),
    "mtx lock": (0xC0000005, None),
    "buffer overflow": (0xC0000409, None),
    "buffer overrun": (0xC0000409, None),
    "fail fast": (0xC0000409, None),
    "fastfail": (0xC0000409, None),
    "segfault": (0xC0000005, None),
    "segmentation fault": (0xC0000005, None),
    "sigsegv": (0xC0000005, None),
    "null pointer": (0xC0000005, None),
    "stackoverflow": (0xC00000FD, None),
    "too much recursion": (0xC00000FD, None),
    "recursion": (0xC00000FD, None),
    "out of memory": (0xC0000017, None),
    "divide by zero": (0xC0000094, None),
    "division by zero": (0xC0000094, None),
    "c++ exception": (0xE06D7363, None),
    "uncaught exception": (0xE06D7363, None),
    "ctrl c": (0xC000013A, None),
    "ctrl+c": (0xC000013A, None),
    "keyboardinterrupt": (0xC000013A, None),
    "dll not found": (0xC0000135, None),
    "missing dll": (0xC0000135, None),
    "entry point not found": (0xC0000139, None),
}
