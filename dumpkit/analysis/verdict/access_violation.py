"""0xC0000005: what was touched, by which instruction, and what that says about the bug."""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from dumpkit.analysis import codes
from dumpkit.analysis.advice import Step
from dumpkit.analysis.access import ALL_ONES, fill_pattern, is_canonical
from dumpkit.analysis.framesizes import is_oversized
from dumpkit.analysis.model import Confidence, CrashInfo, FrameSize, MemoryAccess, ThreadReport, VerdictKind
from dumpkit.analysis.verdict.case import Case, Decision, conclude, instruction
from dumpkit.analysis.verdict.stack_overflow import guard_evidence
from dumpkit.words import human_bytes

_VERB = {"read": "reads", "write": "writes", "read/write": "reads and writes"}

# The next steps of an access violation, by what the operand and the address show.
STACK_BUFFER_OVERRUN = Step(
    "access_violation.stack_buffer_overrun",
    "Look for a stack buffer overrun in the functions below the fault on that thread (the frame "
    "whose return address was overwritten); build with /GS and AddressSanitizer to catch it "
    "where it happens.",
)
NULL_POINTER = Step(
    "access_violation.null_pointer",
    "A null (or near-null) pointer was dereferenced{at}{register}; check which argument or field was NULL.",
)
RAN_OFF_THE_STACK = Step(
    "access_violation.ran_off_the_stack",
    "Treat it as a stack overflow: a frame of a page or more allocated without the stack probe (probes disabled "
    "with /Gs<size> or -mno-stack-arg-probe, hand-written assembly) can step past the guard page, and a thread "
    "whose stack is already exhausted faults there too; look at the frame sizes and the depth of this stack.",
)
CORRUPTED_FUNCTION_POINTER = Step(
    "access_violation.corrupted_function_pointer",
    "The function pointer or vtable slot at {slot} was overwritten or its object freed: find what "
    "wrote it (a use-after-free of the object, a buffer overrun into it); page heap (gflags /p /enable) or "
    "AddressSanitizer catch the write where it happens.",
)
GARBAGE_POINTER = Step(
    "access_violation.garbage_pointer",
    "The pointer was corrupted, never initialised or already freed: find where "
    "{register} got its value (a use-after-free or a buffer overrun that overwrote it).",
)
MISALIGNED_BUFFER = Step(
    "access_violation.misaligned_buffer",
    "A buffer handed to vectorised code is not aligned: allocate it with _aligned_malloc / alignas / "
    "an aligned allocator, or build that code with unaligned loads and stores (movups, vmovdqu).",
)


def decide(case: Case, evidence: List[str], steps: List[Step]) -> Decision:
    crash = case.crash
    assert crash is not None
    at = case.at
    dec = codes.describe_access_violation(crash.parameters)
    # decode_exception's headline is "0xC0000005 access violation: write to ...":
    # keep the phrase, capitalised, and say where.
    phrase = crash.headline.split(" ", 1)[1] if crash.headline.startswith("0x") else crash.headline
    headline = phrase[0].upper() + phrase[1:] + at
    acc = crash.instruction_access
    better: Optional[str] = None
    more: List[str] = []
    first_step: Optional[Step] = None
    if acc is not None:
        better, more, first_step = _bad_branch_target(crash, acc, case.read_code, at) or _operand_story(crash, acc, at)
    if better is None:
        evidence.append(dec.sentence)  # else the operand story replaces "read from 0xff..ff"
    ins = instruction(case.read_code, case.frames[0].ip, case.bits) if case.frames else None
    if crash.access_kind == "execute" and crash.parameters and crash.parameters[0] == 0:
        evidence.append(
            "Windows recorded a read (parameter 0 = 0) of the instruction pointer itself: without NX (an "
            "old CPU or system) that is how running into unmapped memory is reported, so execution went there"
        )
    elif ins and not (acc is not None and acc.instruction == ins):
        evidence.append(f"faulting instruction: {ins}")
    if better is not None:
        headline = better
    owner = _stack_owner(case.stacks, crash.access_address) if crash.access_kind == "execute" else None
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
        steps = [STACK_BUFFER_OVERRUN] + steps
    evidence.extend(more)
    if first_step:
        steps = [first_step] + steps
    if dec.null_page:
        small = [name for name, value in (acc.registers if acc is not None else ()) if value < 0x10000]
        reg = f" (it came from {small[0]})" if small else ""
        steps = [NULL_POINTER.given(at=at, register=reg)] + steps
    off_stack = _ran_off_the_stack(crash, case.thread, case.sizes, case.threshold, at)
    if off_stack is not None:
        headline, more_evidence, first = off_stack
        evidence.extend(more_evidence)
        steps = [first] + steps
    return conclude(VerdictKind.ACCESS_VIOLATION, headline, Confidence.HIGH, evidence, steps, crash.thread_id)


def _stack_owner(stacks: Sequence[Tuple[int, int, int]], address: Optional[int]) -> Optional[int]:
    """The id of the thread whose captured stack holds `address`, if any."""
    if address is None:
        return None
    for tid, low, high in stacks[:4096]:
        if low <= address < high:
            return tid
    return None


def _ran_off_the_stack(
    crash: CrashInfo, thread: Optional[ThreadReport], sizes: Sequence[FrameSize], threshold: int, at: str
) -> Optional[Tuple[str, List[str], Step]]:
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
    evidence = [guard_evidence(budget, crash) or ""]
    big = next((s for s in sizes if is_oversized(s, threshold)), None)
    if big is not None:
        evidence.append(
            f"frame {big.frame_index}: {big.function} uses {human_bytes(max(big.size, big.requested or 0))} of stack"
        )
    return headline, [e for e in evidence if e], RAN_OFF_THE_STACK


def _bad_branch_target(
    crash: CrashInfo, acc: MemoryAccess, read_code, at: str
) -> Optional[Tuple[str, List[str], Step]]:
    """A #GP on `call`/`jmp` through memory whose operand is canonical: the load worked, and
    the target it loaded is what the CPU refused (non-canonical): a corrupted function
    pointer or vtable slot, the common cause, not a segment or privilege violation."""
    mnemonic = acc.instruction.split(" ", 1)[0]
    if crash.access_address not in (ALL_ONES, 0xFFFFFFFF) or mnemonic not in ("call", "jmp"):
        return None
    if not is_canonical(acc.address):
        return None  # the operand itself was garbage: _operand_story says so
    raw = read_code(acc.address, acc.size) if read_code is not None else b""
    value = int.from_bytes(raw, "little") if len(raw) == acc.size else None
    if value is not None and is_canonical(value):
        return None  # a canonical target would have faulted as a page fault, not a #GP
    loaded = f"{value:#x}, a non-canonical address" if value is not None else "not in the dump"
    kind = "call" if mnemonic == "call" else "jump"
    headline = (
        f"Access violation: a {kind} through a corrupted function pointer: `{acc.instruction}` loaded its "
        f"target from {acc.address:#x}, and that target is "
        + (f"{value:#x}, non-canonical" if value is not None else "not a valid address")
        + f" (general-protection fault){at}"
    )
    evidence = [
        f"Windows recorded {crash.access_address:#x} because the CPU raised a general-protection fault; "
        f"`{acc.instruction}` reads its target from {acc.formula}, a canonical address, so the load itself "
        f"worked; the 8 bytes there are {loaded}: the branch is what faulted"
    ]
    return headline, evidence, CORRUPTED_FUNCTION_POINTER.given(slot=f"{acc.address:#x}")


def _operand_story(crash: CrashInfo, acc: MemoryAccess, at: str) -> Tuple[Optional[str], List[str], Optional[Step]]:
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
            GARBAGE_POINTER.given(register=culprit[0] if culprit else "it"),
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
            MISALIGNED_BUFFER,
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
