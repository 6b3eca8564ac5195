"""Do the calls in a recursion cycle really go where the frames say?

A walked stack claims that the function of frame i+1 called the function of frame i.
The return address in frame i+1 is right after that CALL; when the CALL is a direct
`call rel32`, its target is in the code bytes, so the claim can be checked: the target
must be the callee's entry point, possibly through a jump thunk (`jmp rel32`, an
incremental-linking table, or `jmp [rip+x]` through the import table). A mismatch means
the frames are not what they seem (a scanned stale return address, a forged stack, a
walker mistake), which matters before anyone trusts a "recursion" verdict. Indirect calls
(`call rax`, virtual calls) cannot be checked statically and are reported as such.

Bounded: at most `max_frames` frames of the cycle are looked at and `max_edges` distinct
(return address, callee) pairs are decoded; repetitions of a recursion share them.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

from dumpkit.analysis.model import CallEdge, CallKind, Cycle
from dumpkit.unwind.disasm import CALL_LOOKBACK, call_ends_at, decode_one
from dumpkit.unwind.frames import Frame

__all__ = ["cycle_call_edges", "call_summary"]

MAX_THUNK_HOPS = 3
# Instructions read of a function a CALL enters when looking for its tail jump to the
# callee: thunks and small wrappers do it in a handful.
TAIL_JUMP_INSTRUCTIONS = 24
# Without unwind data the callee's entry is unknown; its IP must still lie after the entry
# the call leads to, and within a function's reach of it.
PLAUSIBLE_FUNCTION_SIZE = 1 << 20

ReadCode = Callable[[int, int], bytes]
ReadPointer = Callable[[int], Optional[int]]


def _follow_thunks(
    target: int, read_code: ReadCode, read_pointer: Optional[ReadPointer], mask: int
) -> Tuple[List[int], bool]:
    """`target` and where the jumps that start there lead (a bounded chain), and whether
    the chain ends on readable code that is not a jump (a real function entry)."""
    chain = [target]
    at = target
    for _ in range(MAX_THUNK_HOPS):
        code = read_code(at, 6)
        if len(code) >= 5 and code[0] == 0xE9:  # jmp rel32
            at = (at + 5 + int.from_bytes(code[1:5], "little", signed=True)) & mask
        elif len(code) >= 2 and code[0] == 0xEB:  # jmp rel8
            at = (at + 2 + int.from_bytes(code[1:2], "little", signed=True)) & mask
        elif len(code) >= 6 and code[0] == 0xFF and code[1] == 0x25:
            disp = int.from_bytes(code[2:6], "little", signed=True)
            # x64: jmp [rip+disp32]; x86: jmp [disp32] (an absolute address)
            slot = (at + 6 + disp) & mask if mask > 0xFFFFFFFF else disp & mask
            ptr = read_pointer(slot) if read_pointer is not None else None
            if ptr is None:
                return chain, False
            at = ptr & mask
        else:
            return chain, len(code) > 0
        if at in chain:
            return chain, False
        chain.append(at)
    return chain, False


def _tail_jumps(
    entry: int, read_code: ReadCode, read_pointer: Optional[ReadPointer], mask: int, bits: int
) -> List[int]:
    """Where the small function at `entry` jumps out to: the targets of its jumps (direct,
    or through a pointer slot) met in its first TAIL_JUMP_INSTRUCTIONS instructions,
    following its own conditional branches; a path ends at a return. A function that
    finishes with a tail call (`jmp next_function`, after its epilogue) has no frame left
    when the callee runs, so a walked stack shows the callee right below its caller."""
    targets: List[int] = []
    todo = [entry]
    seen = set()
    budget = TAIL_JUMP_INSTRUCTIONS
    while todo and budget > 0:
        at = todo.pop()
        while budget > 0 and at not in seen:
            seen.add(at)
            budget -= 1
            code = read_code(at, 16)
            got = decode_one(code, at, bits) if code else None
            if got is None:
                break
            size, mnemonic, ops = got
            if mnemonic.startswith("ret"):
                break
            if mnemonic == "jmp" or (mnemonic.startswith("j") and mnemonic not in ("jmp",)):
                dest: Optional[int] = None
                if ops.startswith("0x"):
                    dest = int(ops, 16) & mask
                elif ops.startswith("qword ptr [rip") and read_pointer is not None:
                    slot = (at + size + int.from_bytes(code[size - 4 : size], "little", signed=True)) & mask
                    dest = read_pointer(slot)
                if dest is not None:
                    targets.append(dest & mask)
                    todo.append(dest & mask)
                if mnemonic == "jmp":
                    break
            at = (at + size) & mask
    return targets


def _edge(
    caller: Frame,
    callee: Frame,
    callee_entry: Optional[int],
    read_code: ReadCode,
    read_pointer: Optional[ReadPointer],
    bits: int,
) -> CallEdge:
    mask = (1 << bits) - 1
    ret = caller.ip
    names = (caller.function_name, callee.function_name)
    before = read_code(ret - CALL_LOOKBACK, CALL_LOOKBACK)
    if len(before) < CALL_LOOKBACK:
        return CallEdge(*names, ret, CallKind.UNAVAILABLE, None, None)
    length = call_ends_at(before, ret, bits)
    if length is None:
        return CallEdge(*names, ret, CallKind.NOT_A_CALL, None, False)
    if length != 5 or before[-5] != 0xE8:
        return CallEdge(*names, ret, CallKind.INDIRECT, None, None)
    target = (ret + int.from_bytes(before[-4:], "little", signed=True)) & mask
    chain, settled = _follow_thunks(target, read_code, read_pointer, mask)
    lands = None if callee_entry is None else callee_entry in chain
    if lands is False and callee_entry is not None:
        # a small function that tail-jumps to the callee (CPython's call_unbound_noarg:
        # test/mov/je, then `jmp PyObject_CallOneArg`), possibly through a thunk
        for out in _tail_jumps(chain[-1], read_code, read_pointer, mask, bits):
            if callee_entry in _follow_thunks(out, read_code, read_pointer, mask)[0]:
                return CallEdge(*names, ret, CallKind.DIRECT, target, True, callee_entry, tail_jump=chain[-1])
    if lands is None and settled and not (chain[-1] <= callee.ip < chain[-1] + PLAUSIBLE_FUNCTION_SIZE):
        lands = False  # the callee's IP cannot be inside the function the call enters
    return CallEdge(*names, ret, CallKind.DIRECT, target, lands, chain[-1] if len(chain) > 1 else None)


def cycle_call_edges(
    frames: Sequence[Frame],
    cycle: Cycle,
    read_code: ReadCode,
    module_base: Callable[[str], Optional[int]],
    read_pointer: Optional[ReadPointer] = None,
    bits: int = 64,
    max_frames: int = 4096,
    max_edges: int = 32,
) -> Tuple[CallEdge, ...]:
    """The distinct calls inside `cycle` (each caller -> callee pair of adjacent frames
    that both belong to it), checked against the code; in stack order from the top."""
    start = cycle.frames_above
    end = min(start + cycle.repetitions * cycle.period, len(frames), start + max_frames)
    seen: Dict[Tuple[int, str], CallEdge] = {}
    for i in range(start, end - 1):
        callee, caller = frames[i], frames[i + 1]
        key = (caller.ip, callee.function_key)
        if key in seen:
            continue
        if len(seen) >= max_edges:
            break
        entry = None
        if callee.module is not None and callee.function_start is not None:
            base = module_base(callee.module)
            entry = base + callee.function_start if base is not None else None
        seen[key] = _edge(caller, callee, entry, read_code, read_pointer, bits)
    return tuple(seen.values())


def call_summary(edges: Sequence[CallEdge]) -> Tuple[Optional[str], bool]:
    """One evidence sentence about the cycle's calls, and whether any contradicts the
    frames (None when there is nothing to say)."""
    if not edges:
        return None, False
    bad = [e for e in edges if e.confirmed is False]
    good = [e for e in edges if e.confirmed is True]
    if bad:
        e = bad[0]
        what = (
            f"calls {e.resolved or e.target:#x}, not {e.callee}"
            if e.call == CallKind.DIRECT
            else "is not preceded by a CALL"
        )
        more = f" ({len(bad)} of {len(edges)} call sites disagree)" if len(bad) > 1 else ""
        return (
            f"call-site check FAILED: the return address {e.return_address:#x} in {e.caller} "
            f"{what}; these frames may not be a real call chain{more}"
        ), True
    n = len(edges)
    tails = sum(1 for e in good if e.tail_jump is not None)
    through = (
        f" ({tails} of them through a small function that tail-jumps to the callee)"
        if tails > 1
        else " (one through a small function that tail-jumps to the callee)"
        if tails
        else ""
    )
    if good and len(good) == n:
        if n == 1:
            return (
                "call site checked: the one call in the cycle is a direct CALL that lands on the next function's "
                f"entry{through}"
            ), False
        return (
            f"call sites checked: every call in the cycle ({n} distinct) is a direct CALL "
            f"that lands on the next function's entry{through}"
        ), False
    open_ = [e for e in edges if e.confirmed is None]
    parts = []
    direct = [e for e in open_ if e.call == CallKind.DIRECT and e.target is not None]
    unknown_entry = sorted({t for t in (e.resolved or e.target for e in direct) if t is not None})
    if unknown_entry:
        parts.append(
            ("a direct CALL to " if len(direct) == 1 else "direct CALLs to ")
            + ", ".join(f"{t:#x}" for t in unknown_entry[:4])
            + " (the callee's entry is not known from unwind data to compare)"
        )
    kinds = sorted({e.call for e in open_ if e.call != CallKind.DIRECT})
    if kinds:
        parts.append(f"{', '.join(kinds)} calls (not checkable from code)")
    what = "; ".join(parts)
    rest = n - len(good)
    if not good:
        lead = (
            "call site checked: the one call in the cycle could not be confirmed: it is "
            if n == 1
            else f"call sites checked: none of the {n} calls in the cycle could be confirmed: they are "
        )
        return lead + what, False
    return (
        f"call sites checked: {len(good)} of {n} confirmed by a direct CALL{through}; "
        + ("the other is " if rest == 1 else f"the other {rest} are ")
        + what
    ), False
