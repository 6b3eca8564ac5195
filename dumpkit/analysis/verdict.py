"""The verdict: one headline, a confidence, the evidence and what to do next.

Pure over what the other analyses established; the only outside call is `read_code`, to
show the faulting instruction."""

from __future__ import annotations

import re
from typing import Callable, List, Optional, Sequence, Tuple

from dumpkit.analysis import codes
from dumpkit.analysis.access import ALL_ONES, fill_pattern, is_canonical
from dumpkit.analysis.callsites import call_summary
from dumpkit.analysis.framesizes import is_oversized
from dumpkit.analysis.recursion import call_order, outside_entry_path
from dumpkit.analysis.raiser import Raiser, find_raiser, is_runtime_frame
from dumpkit.analysis.model import (
    CrashInfo,
    Cycle,
    Environment,
    Evidence,
    Finding,
    FrameSize,
    MemoryAccess,
    ThreadReport,
    Verdict,
)
from dumpkit.unwind.disasm import decode_one
from dumpkit.unwind.frames import StackWalk
from dumpkit.words import human_bytes, plural

STACK_OVERFLOW = 0xC00000FD
FAIL_FAST = 0xC0000409
ACCESS_VIOLATION = 0xC0000005
ILLEGAL_INSTRUCTION = 0xC000001D
HEAP_CORRUPTION = 0xC0000374
CXX_EXCEPTION = 0xE06D7363
INVALID_PARAMETER = 0xC000000D
FATAL_APP_EXIT = 0x40000015


_PYTHON_DLL = re.compile(r"^python3\d*(_d)?\.dll$", re.I)


def python_interpreter_module(c: Cycle) -> Optional[str]:
    """The pythonXY.dll every member of the cycle belongs to, if they all do."""
    modules = {fn.split("!", 1)[0] if "!" in fn else fn.split("+", 1)[0] for fn in c.functions}
    if len(modules) == 1:
        (m,) = modules
        if _PYTHON_DLL.match(m):
            return m
    return None


def _cycle_text(c: Cycle) -> str:
    return " -> ".join(call_order(c))


def _top_frames(walk: Optional[StackWalk], n: int = 3) -> Tuple[str, ...]:
    if walk is None:
        return ()
    return tuple(f.symbol or f.function_name for f in walk.frames[:n])


def _instruction(read_code, ip: int, bits: int = 64) -> Optional[str]:
    if read_code is None:
        return None
    code = read_code(ip, 16)
    if not code:
        return None
    got = decode_one(code, ip, bits)
    if got is None:
        return None
    return f"{got[1]} {got[2]}".strip()


def _is_vector_instruction(text: str) -> Optional[str]:
    t = text.lower()
    if "zmm" in t or "{k" in t:
        return "AVX-512"
    if "ymm" in t:
        return "AVX/AVX2"
    if t.startswith("v"):
        return "AVX (VEX-encoded)"
    return None


def decide(
    target,
    crash: Optional[CrashInfo],
    thread: Optional[ThreadReport],
    walk: Optional[StackWalk],
    sizes: Sequence[FrameSize],
    env: Environment,
    read_code: Optional[Callable[[int, int], bytes]] = None,
    threshold: int = 64 * 1024,
) -> Tuple[Verdict, List[Finding]]:
    findings: List[Finding] = []
    if crash is None and target is not None and target.soft_errors.items:
        return Verdict(
            "no_exception",
            f"No exception record could be read: the dump is damaged ({len(target.soft_errors.items)} problem(s) listed below)",
            "low",
            tuple(target.soft_errors.items[:5]),
            ("Get the dump again from the machine that crashed; check that the copy is complete.",),
        ), findings
    if crash is None:
        return Verdict(
            "no_exception",
            "No exception in this dump: it was written on request (a hang, a live snapshot), not by a crash",
            "high",
            ("the dump has no Exception stream",),
            ("Look at the threads' stacks for what each was waiting on.",),
        ), findings

    tid = crash.thread_id
    system = getattr(target, "system", None)
    bits = 32 if system is not None and system.processor_architecture == 0 else 64  # x86 code decodes as x86
    where = _top_frames(walk, 1)
    at = f" in {where[0]}" if where else ""
    info = codes.lookup_status(crash.code)
    evidence: List[str] = [_exception_line(crash, where[0] if where else None)]
    # the table's steps minus "get a dump and run dumpkit analyze": this is that analysis
    steps: List[str] = list(codes.steps_given_a_dump(info.next_steps))

    if crash.code == STACK_OVERFLOW and (walk is None or not walk.frames):
        headline = (
            f"Stack overflow on thread {tid}; its stack could not be walked, so the "
            "recursion and frame-size analyses have nothing to work on"
        )
        evidence.append(
            "no frames: "
            + (
                "; ".join(target.soft_errors.items[:2])
                if target is not None and target.soft_errors.items
                else "the thread's stack is not in the dump"
            )
        )
        findings.append(Finding("stack_overflow", "fatal", headline, tuple(Evidence(e) for e in evidence), tid))
        return Verdict("stack_overflow", headline, "medium", tuple(evidence), tuple(steps)), findings
    if crash.code == STACK_OVERFLOW:
        return _stack_overflow(crash, thread, walk, sizes, evidence, findings, threshold)

    if crash.code == FAIL_FAST:
        return _fail_fast(crash, walk, where, evidence, findings)

    if crash.code == ACCESS_VIOLATION:
        dec = codes.describe_access_violation(crash.parameters)
        # decode_exception's headline is "0xC0000005 access violation: write to ...":
        # keep the phrase, capitalised, and say where.
        phrase = crash.headline.split(" ", 1)[1] if crash.headline.startswith("0x") else crash.headline
        headline = phrase[0].upper() + phrase[1:] + at
        acc = crash.instruction_access
        better, more, first_step = _operand_story(crash, acc, at) if acc is not None else (None, [], None)
        if better is None:
            evidence.append(dec.sentence)  # else the operand story replaces "read from 0xff..ff"
        ins = _instruction(read_code, walk.frames[0].ip, bits) if walk and walk.frames else None
        if ins and not (acc is not None and acc.instruction == ins):
            evidence.append(f"faulting instruction: {ins}")
        if better is not None:
            headline = better
        owner = _stack_owner(target, crash.access_address) if crash.access_kind == "execute" else None
        if owner is not None:
            headline = (
                f"Access violation: execute at {crash.access_address:#x}, inside thread {owner}'s stack: "
                "code ran from the stack (DEP stopped it)"
            )
            evidence.append(
                f"{crash.access_address:#x} lies in the captured stack of thread {owner}: a return address "
                "or function pointer was overwritten with a stack address (a stack buffer overrun), or "
                "code jumped into a buffer on the stack"
            )
            steps = [
                "Look for a stack buffer overrun in the functions below the fault on that thread (the frame "
                "whose return address was overwritten); build with /GS and AddressSanitizer to catch it "
                "where it happens."
            ] + steps
        evidence.extend(more)
        if first_step:
            steps = [first_step] + steps
        if dec.null_page:
            small = [name for name, value in (acc.registers if acc is not None else ()) if value < 0x10000]
            reg = f" (it came from {small[0]})" if small else ""
            steps = [
                f"A null (or near-null) pointer was dereferenced{at}{reg}; check which argument or field was NULL."
            ] + steps
        off_stack = _ran_off_the_stack(crash, thread, sizes, threshold, at)
        if off_stack is not None:
            headline, more_evidence, first = off_stack
            evidence.extend(more_evidence)
            steps = [first] + steps
        findings.append(Finding("access_violation", "fatal", headline, tuple(Evidence(e) for e in evidence), tid))
        return Verdict("access_violation", headline, "high", tuple(evidence), tuple(steps)), findings

    if crash.code == ILLEGAL_INSTRUCTION:
        ins = _instruction(read_code, crash.address, bits) if read_code else None
        vec = _is_vector_instruction(ins) if ins else None
        feats = env.cpu_features or {}
        if ins and ins.startswith("ud2"):
            headline = f"Illegal instruction: ud2{at}, a deliberate trap (__builtin_trap / unreachable code), not a CPU feature problem"
            steps = _trap_steps(walk, crash.address)
        elif vec:
            known = {k: v for k, v in feats.items() if v is not None}
            cpu_says = (
                ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in known.items())
                or "the dump does not say which vector extensions the CPU has"
            )
            headline = f"Illegal instruction: {vec} instruction `{ins}`{at}; CPU: {cpu_says}"
            steps = [
                "Prebuilt TensorFlow wheels need AVX (and newer ones AVX2); on a CPU without them use a build without those instructions."
            ] + steps
        else:
            headline = f"Illegal instruction{at}" + (f": `{ins}`" if ins else "")
        if ins:
            evidence.append(f"faulting instruction: {ins}")
        if ins and ins.startswith("ud2"):
            evidence.append(
                "ud2 is the instruction compilers emit on purpose for __builtin_trap(), code they were "
                "told or proved unreachable, and trap-on-failure checks; it faults on every x86-64 CPU"
            )
        findings.append(Finding("illegal_instruction", "fatal", headline, tuple(Evidence(e) for e in evidence), tid))
        return Verdict(
            "illegal_instruction", headline, "high" if ins else "medium", tuple(evidence), tuple(steps)
        ), findings

    if crash.code == CXX_EXCEPTION:
        raiser = next(
            (
                f.function_name
                for f in (walk.frames if walk else ())
                if (f.module or "").lower() not in ("kernelbase.dll", "vcruntime140.dll", "ntdll.dll")
                and "CxxThrowException" not in f.function_name
            ),
            None,
        )
        what = crash.cxx_types[0] if crash.cxx_types else "of a type the dump does not show"
        headline = f"Unhandled C++ exception {what}" + (f" thrown from {raiser}" if raiser else at)
        if crash.cxx_types:
            evidence.append("catchable as: " + ", ".join(crash.cxx_types))
        steps = _cxx_steps(crash.cxx_types, raiser) + steps
        findings.append(Finding("cxx_exception", "fatal", headline, tuple(Evidence(e) for e in evidence), tid))
        return Verdict(
            "cxx_exception", headline, "high" if crash.cxx_types else "medium", tuple(evidence), tuple(steps)
        ), findings
    if crash.code == HEAP_CORRUPTION:
        return _heap_corruption(crash, walk, evidence, steps, findings, at)
    headline = f"{crash.headline}{at}"
    kind = "exception"
    if crash.code == INVALID_PARAMETER:
        steps, built = _invalid_parameter(crash, walk, evidence, read_code, bits)
        if built and where:
            headline = (
                f"Invalid parameter (0xC000000D), recorded in software by frame 0, {where[0]}: typically "
                "a crash reporter's handler for a C runtime function given a bad argument"
            )
    elif crash.code == FATAL_APP_EXIT and crash.raised_by:
        steps.append(f"The call that aborted is in {crash.raised_by}; check what it was checking.")
    if not steps:
        steps = [f"Start at frame 0{at}: read the code around the faulting instruction and what its caller passed in."]
    findings.append(Finding(kind, "fatal", headline, tuple(Evidence(e) for e in evidence), tid))
    return Verdict(kind, headline, "medium", tuple(evidence), tuple(steps)), findings


# What an unnamed frame 0 of a fail-fast may be: the runtime's own code for the subcode.
_MACHINERY_FOR = {2: "__report_gsfailure", 5: "_invalid_parameter / _invoke_watson", 7: "abort()"}


def _fail_fast(
    crash: CrashInfo, walk: Optional[StackWalk], where: Tuple[str, ...], evidence: List[str], findings: List[Finding]
) -> Tuple[Verdict, List[Finding]]:
    """0xC0000409: the subcode and who raised it. Without symbols frame 0 may be the C
    runtime's abort() / __report_gsfailure linked into the module: then say so, name the
    frame below it as the other candidate, and claim no smashed function."""
    name = crash.fastfail_name or "unknown subcode"
    sub = crash.fastfail_code
    ff = codes.lookup_fastfail(sub) if sub is not None else None
    r = find_raiser(walk.frames) if walk and walk.frames else None
    raiser = crash.raised_by or (r.name if r else where[0] if where else "an unknown function")
    # only an unnamed frame with no runtime frame above it can be the static CRT's own code
    unnamed = r is not None and not r.named and r.index == walk.frames[0].index
    if sub == 7:
        what = "abort() was called (a failed CHECK / LOG(FATAL) / std::terminate in native code)"
    elif sub == 2:
        what = "a /GS stack cookie was found overwritten: a real stack buffer overrun"
    elif sub == 5:
        what = "the C runtime's invalid-parameter handler fired"
    else:
        what = ff.summary if ff else "the process ended itself with __fastfail"
    evidence.append(f"parameter[0] = {sub}: {name}")
    if unnamed:
        machinery = _MACHINERY_FOR.get(sub, "fail-fast code (abort() / __report_gsfailure)")
        caller = f", called from {r.caller}" if r.caller else ""
        headline = (
            f"Fail-fast {name} ({sub}): {what}, raised inside {r.name}{caller}; no symbols: "
            f"{r.name} may be the C runtime's {machinery} itself"
        )
        evidence.append(
            f"frame {r.index} ({r.name}) has no name, so the runtime's {machinery} cannot be told "
            "apart from the code that called it"
            + (
                f"; the next frame outside the system modules is {r.caller} (found by {r.caller_trust})"
                if r.caller
                else ""
            )
        )
        module = r.name.split("+", 1)[0]
        symbols = (
            f"Open the dump in WinDbg or Visual Studio with {module}'s PDB (`kn`) to name {r.name} and its callers"
        )
    else:
        headline = f"Fail-fast {name} ({sub}): {what}, raised by {raiser}"
        evidence.append(f"first frame outside the fail-fast machinery: {raiser}")
    if sub == 2:
        if unnamed:
            evidence.append(
                "the function whose /GS cookie was smashed is the caller of __report_gsfailure; "
                "without symbols it cannot be told which frame that is"
            )
            steps = [
                symbols + ": the first frame below __report_gsfailure is the function whose local buffer overflowed."
            ]
        else:
            evidence.append(f"the function whose cookie check failed: {raiser}")
            steps = [f"Look for writes past a local array in {raiser} (its /GS cookie was smashed)."]
        steps.append("Rebuild with AddressSanitizer (/fsanitize=address) to catch the write itself.")
    elif sub == 7:
        steps = [
            "Read the process's stderr just before the crash: TensorFlow/absl print the failed CHECK or "
            "LOG(FATAL) message there."
        ]
        steps.append(
            symbols + ": the first one outside abort() made the failed check."
            if unnamed
            else f"The call that aborted is in {raiser}; check its inputs (shapes, dtypes, device placement)."
        )
    else:
        steps = [
            symbols + "." if unnamed else f"The fail-fast was raised in {raiser}; see what it checks before failing."
        ]
    if sub is not None:
        steps.append(f"`dumpkit explain 0xC0000409/{sub}` lists what else commonly raises this subcode.")
    confidence = "high" if walk and walk.frames and not unnamed else "medium"
    findings.append(Finding("fastfail", "fatal", headline, tuple(Evidence(e) for e in evidence), crash.thread_id))
    return Verdict("fastfail", headline, confidence, tuple(evidence), tuple(steps)), findings


def _exception_line(crash: CrashInfo, frame0: Optional[str]) -> str:
    """The first evidence line: code, thread, and where. An exception address of 0 is
    "not given" (a record built in software), not a location."""
    line = f"exception {crash.code:#010x} {crash.code_name} on thread {crash.thread_id}"
    if crash.address == 0:
        return line + "; the exception record gives no address (0)" + (f"; frame 0 is {frame0}" if frame0 else "")
    return line + f" at {crash.address:#x}" + (f" in {frame0}" if frame0 else "")


# The C runtime's invalid-parameter path: above the CRT function that got the bad argument.
_INVALID_PARAMETER_PATH = frozenset(
    {
        "invalid_parameter",
        "invalid_parameter_noinfo",
        "invalid_parameter_noinfo_noreturn",
        "invoke_watson",
        "call_reportfault",
        "crt_fast_fail",
        "fastfail",
    }
)


def _crt_call(frames, raiser: Raiser) -> Optional[str]:
    """The C runtime function the raiser called (the runtime frame just above it that is
    not the invalid-parameter path itself), when the stack shows one."""
    if not raiser.outside_machinery:
        return None
    above = [f for f in frames[: raiser.index] if is_runtime_frame(f)]
    for f in reversed(above):  # nearest to the raiser first
        short = f.function_name.split("!", 1)[-1].lstrip("_")
        if short not in _INVALID_PARAMETER_PATH:
            return f.function_name
    return None


def _stores_the_code(read_code, crash: CrashInfo, walk: Optional[StackWalk], bits: int) -> Optional[str]:
    """Frame 0's instruction when it writes the exception code itself (`mov [mem], code`):
    the exception record was built by code, not raised by the CPU or the CRT."""
    if not walk or not walk.frames:
        return None
    ins = _instruction(read_code, walk.frames[0].ip, bits)
    if not ins or not ins.startswith("mov") or "[" not in ins.split(",", 1)[0]:
        return None
    imm = ins.rsplit(",", 1)[-1].strip()
    try:
        value = int(imm, 0) & 0xFFFFFFFF
    except ValueError:
        return None
    return ins if value == crash.code else None


def _invalid_parameter(
    crash: CrashInfo, walk: Optional[StackWalk], evidence: List[str], read_code, bits: int
) -> Tuple[List[str], bool]:
    """0xC000000D: which C runtime call rejected its argument, and how to see the handler's
    arguments. Evidence lines are appended; returns the next steps, and whether frame 0
    built the exception record itself."""
    frames = walk.frames if walk else []
    raiser = find_raiser(frames) if frames else None
    built = _stores_the_code(read_code, crash, walk, bits)
    if built is not None:
        evidence.append(
            f"frame 0 writes the code itself (`{built}`): the exception record was built in software, "
            "typically by a crash reporter's invalid-parameter handler (installed with "
            "_set_invalid_parameter_handler) that then wrote this dump"
        )
    steps: List[str] = []
    crt = _crt_call(frames, raiser) if raiser is not None else None
    if crt is not None:
        evidence.append(f"the C runtime call that rejected its argument: {crt}, called from {raiser.name}")
        steps.append(
            f"Check what {raiser.name} passed to {crt}: a NULL pointer, a closed or invalid file "
            "descriptor, a buffer size too small, a bad format string."
        )
    else:
        named = raiser is not None and raiser.named
        steps.append(
            "Find the C runtime call that rejected its argument: "
            + ("the stack does not show it" if named else "the frames have no names")
            + "; open the dump in WinDbg or Visual Studio with the modules' PDBs (`kp`) and look for the "
            "CRT function below the invalid-parameter handler and the code that called it."
        )
    steps.append(
        "Run it under a debugger with the debug C runtime (/MDd, ucrtbased.dll): its invalid-parameter "
        "handler receives the failed expression, function, file and line (the release CRT passes "
        "NULLs); or install a handler with _set_invalid_parameter_handler that logs them."
    )
    return steps, built is not None


def _trap_steps(walk: Optional[StackWalk], ip: int) -> List[str]:
    """What to do about a ud2: find the check that led to it (never CPU advice)."""
    fn = walk.frames[0].function_name if walk and walk.frames else "the faulting function"
    steps = [
        f"Read the code just before the ud2 in {fn} (WinDbg `ub {ip:#x}`, or objdump): the branch that "
        "jumps to it is the check that failed (an assertion or bounds check in optimized code) or the path "
        "the compiler considered unreachable (__builtin_unreachable(), a non-void function falling off its "
        "end, other undefined behaviour).",
        "Rebuild that code with -O0 -g (or /Od /Zi) and, with GCC/Clang, -fsanitize=undefined: the trap then "
        "shows as a named check with its source line.",
    ]
    names = " ".join(f.function_name.lower() for f in (walk.frames[:2] if walk else ()))
    if "chk_fail" in names:
        steps.insert(
            0,
            "This is GCC's stack protector / _FORTIFY_SOURCE failure path (libssp's __stack_chk_fail "
            "or __chk_fail ends in this trap after printing '*** stack smashing detected ***' or "
            "'*** buffer overflow detected ***'): look for a buffer overrun in its caller.",
        )
    return steps


def _cxx_steps(types: Sequence[str], raiser: Optional[str]) -> List[str]:
    """Next steps for an unhandled C++ exception: where it should have been caught, and
    how to stop at the throw."""
    what = types[0] if types else "the exception"
    steps = [
        f"Find why {raiser or 'the code'} throws {what} and where it should have been caught: a C++ exception "
        'must not leave a function called from C or Python (a callback, a thread entry, an extern "C" or '
        "CPython entry point); catch it there and turn it into an error (pybind11 translates the std:: types "
        "into Python exceptions)."
    ]
    if "std::bad_alloc" in types:
        steps.append(
            "std::bad_alloc means an allocation failed: check the process's commit size and the size "
            "that was asked for (a negative or huge size computed from bad input is common)."
        )
    steps.append("To stop at the throw itself, run it under WinDbg with `sxe eh` (break on every C++ exception).")
    return steps


def _heap_operation(walk: Optional[StackWalk], caller: Optional[str]) -> Optional[str]:
    """'freeing' / 'allocating' / 'resizing': what the heap was asked to do when it noticed,
    from the runtime frames above the caller."""
    for f in walk.frames[:32] if walk else ():
        name = f.function_name
        if caller is not None and name == caller:
            break
        short = name.split("!", 1)[-1].lower()
        if "realloc" in short:
            return "resizing"
        if "free" in short:
            return "freeing"
        if "alloc" in short:
            return "allocating"
    return None


def _heap_corruption(crash, walk, evidence, steps, findings, at):
    caller = crash.raised_by
    op = _heap_operation(walk, caller)
    doing = f" while {op} a block" if op else ""
    headline = f"Heap corruption (0xC0000374): the Windows heap found its structures damaged{doing}" + (
        f", called from {caller}" if caller else at
    )
    if caller:
        evidence.append(f"first frame outside the heap and C runtime: {caller}")
        evidence.append(
            "the heap notices damage when a block next to the damaged one is freed or allocated; the "
            "code that overran the block, freed it twice or used it after free ran earlier"
        )
        steps = [
            f"Look at what {caller} frees or allocates and who wrote to that memory before; enable full page "
            "heap (gflags /p /enable python.exe /full) so the next overrun faults at the bad write."
        ] + [s for s in steps if "gflags" not in s]
    findings.append(
        Finding("heap_corruption", "fatal", headline, tuple(Evidence(e) for e in evidence), crash.thread_id)
    )
    return Verdict("heap_corruption", headline, "high" if caller else "medium", tuple(evidence), tuple(steps)), findings


_VERB = {"read": "reads", "write": "writes", "read/write": "reads and writes"}


def _stack_owner(target, address: Optional[int]) -> Optional[int]:
    """The id of the thread whose captured stack holds `address`, if any."""
    if address is None or target is None:
        return None
    for t in getattr(target, "threads", ())[:4096]:
        if t.stack_size and t.stack_start <= address < t.stack_end:
            return t.tid
    return None


def _ran_off_the_stack(
    crash: CrashInfo, thread: Optional[ThreadReport], sizes: Sequence[FrameSize], threshold: int, at: str
) -> Optional[Tuple[str, List[str], str]]:
    """An access violation in the crashing thread's guard region (or just below its
    committed limit), established from independent stack bounds: a stack overflow that
    surfaced as 0xC0000005. Returns (headline, evidence, first step) or None."""
    budget = thread.budget if thread is not None else None
    if budget is None or not budget.guard_hit or crash.access_address is None:
        return None
    kind = crash.access_kind or "access"
    headline = (
        f"Stack overflow seen as an access violation: {kind} at {crash.access_address:#x}, in thread "
        f"{crash.thread_id}'s stack guard region{at}"
    )
    evidence = [_guard_evidence(budget, crash) or ""]
    big = next((s for s in sizes if is_oversized(s, threshold)), None)
    if big is not None:
        evidence.append(
            f"frame {big.frame_index}: {big.function} uses {human_bytes(max(big.size, big.requested or 0))} of stack"
        )
    step = (
        "Treat it as a stack overflow: a frame of a page or more allocated without the stack probe (probes disabled "
        "with /Gs<size> or -mno-stack-arg-probe, hand-written assembly) can step past the guard page, and a thread whose stack is already exhausted faults there too; look at the frame sizes "
        "and the depth of this stack."
    )
    return headline, [e for e in evidence if e], step


def _operand_story(crash: CrashInfo, acc: MemoryAccess, at: str) -> Tuple[Optional[str], List[str], Optional[str]]:
    """What the faulting instruction's computed operand adds: a better headline when
    Windows could not say the address (a general-protection fault), evidence, a first step."""
    reported = crash.access_address
    gp = reported in (ALL_ONES, 0xFFFFFFFF) and acc.address != reported
    # the register holding the bad pointer: a non-canonical one, else the base
    culprit = next((r for r in acc.registers if not is_canonical(r[1])), acc.registers[0] if acc.registers else None)
    pattern = fill_pattern(acc.address) or (fill_pattern(culprit[1]) if culprit else None)
    pattern_text = f"; the value is {pattern}" if pattern else ""
    if not gp:
        return None, [f"faulting instruction: {acc.instruction}, memory operand {acc.formula}{pattern_text}"], None
    if reported == ALL_ONES and not is_canonical(acc.address):
        headline = (
            f"Access violation: {acc.kind} of {acc.size} bytes at {acc.address:#x}, a non-canonical "
            f"address (general-protection fault){at}"
        )
        return (
            headline,
            [
                f"Windows recorded {reported:#x} because the CPU raised a general-protection fault; the faulting "
                f"instruction `{acc.instruction}` {_VERB[acc.kind]} at {acc.formula}, which is non-canonical (bits 63-47 "
                f"differ): nothing can be mapped there, so the pointer is garbage{pattern_text}"
            ],
            (
                "The pointer was corrupted, never initialised or already freed: find where "
                f"{culprit[0] if culprit else 'it'} got its value (a use-after-free or a buffer overrun that overwrote it)."
            ),
        )
    if acc.misaligned:
        mnemonic = acc.instruction.split(" ", 1)[0]
        headline = (
            f"Access violation: misaligned {acc.size}-byte {acc.kind} at {acc.address:#x} by `{mnemonic}`, "
            f"which requires {acc.size}-byte alignment (general-protection fault){at}"
        )
        return (
            headline,
            [
                f"Windows recorded {reported:#x} because the CPU raised a general-protection fault; `{acc.instruction}` "
                f"accesses {acc.formula}, {acc.address % acc.size} bytes past a {acc.size}-byte boundary"
            ],
            (
                "A buffer handed to vectorised code is not aligned: allocate it with _aligned_malloc / alignas / "
                "an aligned allocator, or build that code with unaligned loads and stores (movups, vmovdqu)."
            ),
        )
    return (
        None,
        [
            f"Windows recorded {reported:#x} (a general-protection fault); the faulting instruction `{acc.instruction}` "
            f"accesses {acc.formula}, a canonical{' and aligned' if acc.requires_alignment else ''} address, so the "
            "fault has another cause (a segment or privilege violation)"
        ],
        None,
    )


_LIMIT = re.compile(r"frame limit \((\d+)\)")


def frame_limit(walk: Optional[StackWalk]) -> Optional[int]:
    """The frame limit the walk stopped at (--max-frames), or None when it ended on its own."""
    m = _LIMIT.search(walk.stop_reason) if walk is not None else None
    return int(m.group(1)) if m else None


def _guard_evidence(budget, crash: CrashInfo) -> Optional[str]:
    """The guard-region fact, claimed only from independent stack bounds."""
    if budget is None or crash.access_address is None:
        return None
    if budget.guard_hit:
        return (
            f"the fault at {crash.access_address:#x} is in the stack's guard region (bounds from the "
            f"{'TEB' if budget.source == 'teb' else 'memory map'})"
        )
    # Bounds estimated from the fault itself prove nothing about it: the budget's note says
    # so where the budget is shown; the evidence list keeps only facts that carry weight.
    return None


def _stack_overflow(crash, thread, walk, sizes, evidence, findings, threshold):
    tid = crash.thread_id
    budget = thread.budget if thread else None
    reserve = budget.reserve_size if budget else None
    cycles = thread.cycles if thread else ()
    probe_victim = next((s for s in sizes if s.not_yet_allocated), None)
    oversized = [s for s in sizes if max(s.size, s.requested or 0) >= threshold]
    if budget is not None and budget.used is not None:
        evidence.append(f"stack used {human_bytes(budget.used)} of {human_bytes(reserve)} reserved ({budget.source})")
    guard = _guard_evidence(budget, crash)
    if guard:
        evidence.append(guard)
    limit = frame_limit(walk)
    if walk is not None:
        evidence.append(
            f"{plural(len(walk.frames), 'frame')} on the crashing thread"
            + (f" (the walk stopped at its frame limit, {limit:,}: --max-frames)" if limit else "")
        )

    main = cycles[0] if cycles else None
    if main is not None and (probe_victim is None or main.repetitions >= 8):
        used = budget.used if budget is not None else None
        if limit:
            # the walked frames are a prefix: the stack used, not the cycle's bytes, is the share
            share = used / reserve if used and reserve else None
            reps = (
                f"at least {main.repetitions:,} repetitions x {main.bytes_per_repetition:,} bytes "
                f"(walk stopped at --max-frames {limit:,})"
            )
            share_txt = f"; {human_bytes(used)} used = {share:.0%} of" if share is not None else "; on"
        else:
            share = main.total_bytes / reserve if reserve else main.stack_share
            reps = f"{main.repetitions:,} repetitions x {main.bytes_per_repetition:,} bytes"
            share_txt = f" = {share:.0%} of" if share is not None else " on"
        headline = (
            f"Stack overflow: unbounded recursion {_cycle_text(main)}, {reps}{share_txt} a {human_bytes(reserve)} stack"
        )
        evidence.append(
            f"cycle of period {main.period}: {_cycle_text(main)} "
            f"(frames {main.first_frame}-{main.last_frame}, {main.total_bytes:,} bytes)"
        )
        if limit and walk is not None and main.last_frame >= len(walk.frames) - 1:
            evidence.append(
                f"the cycle runs to the last walked frame: it goes on below frame {main.last_frame:,}, so "
                "its full depth and the code that entered it are not known; rerun with a larger --max-frames"
            )
        elif limit:
            evidence.append(
                "the frames below the walked ones were not walked (frame limit): rerun with a larger "
                "--max-frames to see the whole stack"
            )
        entry = outside_entry_path(main)
        if entry:
            evidence.append("entered from: " + " <- ".join(entry[:5]))
        calls_text, calls_contradict = call_summary(main.call_edges)
        if calls_text:
            evidence.append(calls_text)
        interpreter = python_interpreter_module(main)
        if interpreter is not None:
            # Every member is the interpreter's own C code: the recursion is in Python.
            headline = (
                f"Stack overflow: Python code recursed until the C stack ran out "
                f"({interpreter} interpreter frames, {reps}{share_txt} a {human_bytes(reserve)} stack)"
            )
            evidence.append(
                f"every function in the cycle is in {interpreter}: each repetition is one Python-level call"
            )
            steps = [
                "A Python function recursed deeper than the thread's C stack holds: sys.setrecursionlimit() was "
                "raised (by your code or a library) above what the stack can take (python.exe's main thread "
                "reserves about 2 MB on Windows, other threads 1 MB, against 8 MB on Linux).",
                "Find the recursive Python function: run with `python -X faulthandler` (it prints the Python stack "
                "on a stack overflow) or `py-spy dump --native` on the live process.",
                "Make it iterative, or run it in a threading.Thread started after threading.stack_size(128 * 1024 * 1024).",
            ]
        else:
            steps = [
                f"Find why the recursion in {call_order(main)[0]} does not terminate (a cyclic structure, a missing base case, input deeper than expected).",
                "If the depth is legitimate, make it iterative, or run the work on a thread with a bigger stack (threading.stack_size(), or a larger /STACK reserve).",
            ]
        if calls_contradict:
            steps.insert(
                0,
                "The code contradicts these frames: check the stack by hand in a debugger "
                "(`kf` and `ub <return address>`) before trusting this verdict.",
            )
        findings.append(Finding("recursion", "fatal", headline, tuple(Evidence(e) for e in evidence), tid))
        return Verdict(
            "recursion", headline, "medium" if calls_contradict or limit else "high", tuple(evidence), tuple(steps)
        ), findings

    big = probe_victim or (oversized[0] if oversized else None)
    if big is not None:
        asked = big.requested or big.size
        how = f" ({big.prologue_text})" if big.prologue_text else ""
        died = " and died in the stack probe before its frame existed" if big.not_yet_allocated else ""
        headline = (
            f"Stack overflow: {big.function} asked for {human_bytes(asked)} of stack{how}"
            f"{died}, on a {human_bytes(reserve)} stack"
        )
        evidence.append(
            f"frame {big.frame_index}: {big.function} requests {asked:,} bytes"
            + (" via the stack probe" if big.via_probe else "")
        )
        steps = [
            f"Move the large local buffer in {big.function} to the heap (malloc/new/std::vector) or a static.",
            "Or give the thread a bigger stack (CreateThread / std::thread stack size, /STACK linker option).",
        ]
        findings.append(Finding("oversized_frame", "fatal", headline, tuple(Evidence(e) for e in evidence), tid))
        return Verdict("oversized_frame", headline, "high", tuple(evidence), tuple(steps)), findings

    headline = f"Stack overflow on thread {tid}: no repeating cycle and no oversized frame found"
    if sizes:
        top = sizes[0]
        headline += f"; the largest frame is {top.function} ({human_bytes(max(top.size, top.requested or 0))})"
    steps = [
        "The stack is deep without one dominant cause: look at the frame sizes and the entry path.",
        "Run the work on a thread with a bigger stack to confirm it is depth, not corruption.",
    ]
    findings.append(Finding("stack_overflow", "fatal", headline, tuple(Evidence(e) for e in evidence), tid))
    return Verdict("stack_overflow", headline, "medium", tuple(evidence), tuple(steps)), findings
