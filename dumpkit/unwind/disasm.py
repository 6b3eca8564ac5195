"""What the walker asks of x64 machine code, answered with capstone (`decoder`).

- `call_ends_at`: does a CALL instruction end exactly at a candidate return address?
  (validates scanned frames the way WinDbg and Breakpad do);
- `simulate_to_return`: follow code forward from an instruction pointer to its RET,
  tracking only what moves RSP; this unwinds hand-written functions without unwind data
  such as libgcc's `___chkstk_ms`;
- `epilogue_path`: is the IP inside an epilogue, by Microsoft's x64 epilogue grammar as
  Windows' own unwinder checks it, and where does that epilogue leave RSP;
- `stack_allocation`: what a prologue asks of the stack (`sub rsp, N`, or
  `mov eax, N` + call to the stack probe).
"""

from __future__ import annotations

import re
from typing import Callable, Dict, List, Optional, Tuple

from dumpkit.target import GPR_NAMES
from dumpkit.records import record

_IMM = re.compile(r"^(?:0x[0-9a-f]+|\d+)$")
# 64-bit general-purpose registers only: anything else (pop of a 16-bit reg...) is not
# something a prologue or epilogue does, and we give up.
_GPR64 = {"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"}

MAX_SIMULATED_INSTRUCTIONS = 200


def _imm(text: str) -> Optional[int]:
    text = text.strip()
    if not _IMM.match(text):
        return None
    return int(text, 16) if text.startswith("0x") else int(text)


Decoded = List[Tuple[int, int, str, str]]  # (address, size, mnemonic, op_str) each
_LITE: Optional[Callable[[bytes, int, int, int], Decoded]] = None


def _lite(code: bytes, address: int, bits: int = 64, count: int = 0) -> Decoded:
    """`decoder.lite`, imported on the first call, not with this module: it loads
    capstone's library, which only decoding needs (kept, for the many calls a scan makes)."""
    global _LITE
    if _LITE is None:
        from dumpkit.unwind.decoder import lite

        _LITE = lite
    return _LITE(code, address, bits, count)


def decode_one(code: bytes, address: int, bits: int = 64) -> Optional[Tuple[int, str, str]]:
    """(size, mnemonic, op_str) of the first instruction, or None if undecodable."""
    for insn in _lite(code[:16], address, bits, 1):
        return insn[1], insn[2], insn[3]
    return None


# Bytes below a return address that decide whether a CALL ends there. FF /2 with ModRM,
# SIB and disp32 is 7 bytes; every longer CALL is that or a shorter form behind REX,
# BND (F2), NOTRACK (3E) or segment prefixes, and the CALL without its prefixes ends
# at the same address, so 7 bytes validate every form (the length reported is then
# the unprefixed one: a byte before it may as well be the tail of another instruction).
CALL_LOOKBACK = 7
# Lengths to try, commonest first: call rel32, call [rip+disp32], call reg, REX call reg,
# [reg+disp32] (or REX [rip+disp32]), [reg+disp8].
_CALL_LENGTHS = (5, 6, 2, 3, 7, 4)
_CALL_MNEMONICS = ("call", "bnd call", "notrack call")
# Bytes a CALL can start with: E8, FF, and prefixes capstone accepts in front of them
# (REX in 64-bit code; F2/F3, segment, operand/address size). Scanning asks about many
# words that are not return addresses; this check spares most of them any decoding.
_CALL_FIRST_BYTES = frozenset(
    [0xE8, 0xFF, 0xF2, 0xF3, 0x2E, 0x3E, 0x26, 0x36, 0x64, 0x65, 0x66, 0x67] + list(range(0x40, 0x50))
)


def call_ends_at(code_before: bytes, return_address: int, bits: int = 64) -> Optional[int]:
    """If some CALL instruction ends exactly at `return_address`, return its length.

    `code_before` holds the bytes just below the return address (CALL_LOOKBACK of them
    cover every form; fewer check only the shorter ones). A length is decoded only when
    its first byte can start a CALL."""
    n = len(code_before)
    for length in _CALL_LENGTHS:
        if length > n or code_before[n - length] not in _CALL_FIRST_BYTES:
            continue
        start = return_address - length
        got = decode_one(code_before[n - length :], start, bits)
        if got and got[0] == length and got[1] in _CALL_MNEMONICS:
            return length
    return None


def call_target(code_before: bytes, return_address: int) -> Optional[int]:
    """Target of a direct `call rel32` ending at return_address, if that is what is there."""
    if len(code_before) >= 5 and code_before[-5] == 0xE8:
        rel = int.from_bytes(code_before[-4:], "little", signed=True)
        return (return_address + rel) & 0xFFFFFFFFFFFFFFFF
    return None


@record
class ReturnPath:
    """The state at the RET (or tail-call JMP) reached by running forward from an IP."""

    rsp: int  # RSP at the RET: the return address is at [rsp]
    restored: Dict[str, int]  # registers popped (or reloaded) on the way
    instructions: int
    tail_jump: bool = False


def simulate_to_return(
    read_code: Callable[[int, int], bytes],
    read_u64: Callable[[int], Optional[int]],
    ip: int,
    rsp: int,
    regs: Dict[str, int],
    max_instructions: int = MAX_SIMULATED_INSTRUCTIONS,
) -> Optional[ReturnPath]:
    """Follow code from `ip` to a RET with concrete RSP and registers; None if the path
    cannot be followed. (For code that has unwind data, `epilogue_path` is the strict
    check: only Microsoft's epilogue grammar is followed.)

    Conditional branches fall through (a probe loop's exit is its fall-through) and
    direct jumps are followed. An instruction that writes RSP in a way we do not model
    ends the attempt."""
    regs = dict(regs)
    restored: Dict[str, int] = {}
    seen = set()
    pc = ip
    buf = b""
    buf_at = pc
    for count in range(1, max_instructions + 1):
        if pc in seen:
            return None  # a loop with no exit on the fall-through path
        seen.add(pc)
        if not (buf_at <= pc and pc + 16 <= buf_at + len(buf)):
            buf = read_code(pc, 64)
            buf_at = pc
            if not buf:
                return None
        got = decode_one(buf[pc - buf_at :], pc)
        if got is None:
            return None
        size, mnem, ops = got
        nxt = pc + size
        ops = ops.replace(" ", "")
        dest = ops.split(",", 1)[0]
        if mnem in _RETURNS:
            return ReturnPath(rsp, restored, count)
        if mnem == "pop":
            if ops not in _GPR64 or ops == "rsp":
                return None
            val = read_u64(rsp)
            if val is None:
                return None
            regs[ops] = restored[ops] = val
            rsp += 8
        elif mnem == "push":
            rsp -= 8
        elif mnem in ("add", "sub") and dest == "rsp":
            val = _imm(ops[4:])
            if val is None:
                return None
            rsp += val if mnem == "add" else -val
        elif mnem == "lea" and dest == "rsp":
            m = re.match(r"^rsp,(?:qword ptr )?\[(r[a-z0-9]+)([+-]0x[0-9a-f]+|[+-]\d+)?\]$", ops)
            if not m or m.group(1) not in regs:
                return None
            rsp = regs[m.group(1)] + (int(m.group(2), 0) if m.group(2) else 0)
        elif mnem == "leave":
            if "rbp" not in regs:
                return None
            rsp = regs["rbp"]
            val = read_u64(rsp)
            if val is None:
                return None
            regs["rbp"] = restored["rbp"] = val
            rsp += 8
        elif mnem == "jmp":
            target = _imm(ops)
            if target is None:
                return None
            nxt = target
        elif mnem == "mov" and dest == "rsp":
            src = ops[4:]
            if src not in regs:
                return None
            rsp = regs[src]
        elif mnem.startswith(("j", "loop")):
            pass  # conditional: take the fall-through
        elif mnem == "call":
            pass  # returns to the next instruction with the stack as it was
        elif dest in ("rsp", "esp", "sp") or mnem in ("enter", "pushfq", "popfq", "iretq"):
            return None  # writes RSP in a way not modelled
        elif mnem in ("int3", "ud2", "hlt") or mnem.startswith("int"):
            return None
        elif dest in _GPR64:
            regs.pop(dest, None)  # value now unknown; a later lea/mov rsp from it fails
        pc = nxt
    return None


# RET and its prefixed forms: `repz ret` (F3 C3, emitted for an old AMD branch
# predictor) and `bnd ret` (F2 C3, MPX).
_RETURNS = ("ret", "retn", "repz ret", "rep ret", "bnd ret")

# An epilogue is at most one add/lea, a pop of each of the 16 registers and its end.
MAX_EPILOGUE_INSTRUCTIONS = 18
EPILOGUE_BYTES = 64  # 7 + 16 * 2 + 7 fit


@record
class EpilogueStep:
    kind: str  # "add" (value = bytes), "lea" (rsp = register + value), "pop", "ret", "tail"
    register: Optional[str] = None
    value: int = 0


def match_epilogue(
    code: bytes,
    address: int,
    frame_register: Optional[str] = None,
    leaves_function: Optional[Callable[[int], bool]] = None,
) -> Optional[Tuple[EpilogueStep, ...]]:
    """The remaining steps of the epilogue `code` (at `address`) is in, or None when it
    is not in one.

    Microsoft's x64 epilogue grammar, checked the way Windows' unwinder checks it:
    an optional `add rsp, imm8/imm32` or, only with a frame register, `lea rsp,
    [frame_register + disp8/disp32]` (either only as the first instruction), then zero
    or more `pop reg64`, then `ret` (also `ret imm16`, `repz ret`, `bnd ret`) or a tail
    call: a direct `jmp` whose target `leaves_function` (unknown when it is None: not an
    epilogue), `jmp [rip+disp32]` (FF 25), or a REX.W-prefixed `jmp` through a register
    or memory. The documented grammar also allows other mod-00 memory JMPs; the
    unwinder does not, and a plain `jmp [rax+rcx*8]` is a switch table, so neither do
    we."""
    steps = []
    pos = 0
    for index in range(MAX_EPILOGUE_INSTRUCTIONS):
        got = decode_one(code[pos:], address + pos)
        if got is None:
            return None
        size, mnem, ops = got
        raw = code[pos : pos + size]
        if _is_return(raw):
            steps.append(EpilogueStep("ret"))
            return tuple(steps)
        if mnem == "jmp":
            if not _is_tail_jump(raw, ops, leaves_function):
                return None
            steps.append(EpilogueStep("tail"))
            return tuple(steps)
        if mnem == "pop":
            reg = _popped_register(raw)
            if reg is None:
                return None
            steps.append(EpilogueStep("pop", reg))
        elif index == 0 and mnem in ("add", "lea"):
            step = _stack_release(raw, frame_register)
            if step is None:
                return None
            steps.append(step)
        else:
            return None
        pos += size
    return None


def _is_return(raw: bytes) -> bool:
    return raw in (b"\xc3", b"\xf3\xc3", b"\xf2\xc3") or (len(raw) == 3 and raw[0] == 0xC2)


def _is_tail_jump(raw: bytes, ops: str, leaves_function: Optional[Callable[[int], bool]]) -> bool:
    if raw[0] in (0xEB, 0xE9):
        target = _imm(ops)
        return target is not None and leaves_function is not None and leaves_function(target)
    if raw[:2] == b"\xff\x25":
        return True  # jmp [rip+disp32]: an import thunk's tail call
    # REX.W on an indirect JMP changes nothing for the CPU; compilers add it to mark the
    # jump as leaving the function.
    return len(raw) >= 3 and raw[0] & 0xF8 == 0x48 and raw[1] == 0xFF and (raw[2] >> 3) & 7 == 4


def _popped_register(raw: bytes) -> Optional[str]:
    if len(raw) == 1 and raw[0] & 0xF8 == 0x58:
        number = raw[0] & 7
    elif len(raw) == 2 and raw[0] & 0xF0 == 0x40 and raw[1] & 0xF8 == 0x58:
        number = ((raw[0] & 1) << 3) | (raw[1] & 7)
    else:
        return None  # a 16-bit pop (66 prefix) is no epilogue's
    return None if number == 4 else GPR_NAMES[number]


def _stack_release(raw: bytes, frame_register: Optional[str]) -> Optional[EpilogueStep]:
    """`add rsp, imm` (REX.W 83/81 /0 with ModRM C4) or `lea rsp, [fp + disp]`."""
    if len(raw) == 4 and raw[:3] == b"\x48\x83\xc4":
        return EpilogueStep("add", value=int.from_bytes(raw[3:], "little", signed=True))
    if len(raw) == 7 and raw[:3] == b"\x48\x81\xc4":
        return EpilogueStep("add", value=int.from_bytes(raw[3:], "little", signed=True))
    if len(raw) < 4 or raw[0] & 0xFE != 0x48 or raw[1] != 0x8D or frame_register is None:
        return None  # lea needs REX.W (REX.B allowed: r8-r15), no REX.R/X
    modrm = raw[2]
    mod, reg, rm = modrm >> 6, (modrm >> 3) & 7, modrm & 7
    if reg != 4 or mod not in (1, 2):
        return None
    disp_at = 3
    if rm == 4:  # SIB: only the plain [r12 + disp] form
        if raw[3] != 0x24:
            return None
        disp_at = 4
    base = GPR_NAMES[((raw[0] & 1) << 3) | rm]
    if base != frame_register or base == "rsp":
        return None
    disp = raw[disp_at:]
    if len(disp) != (1 if mod == 1 else 4):
        return None
    return EpilogueStep("lea", base, int.from_bytes(disp, "little", signed=True))


def epilogue_path(
    read_code: Callable[[int, int], bytes],
    read_u64: Callable[[int], Optional[int]],
    ip: int,
    rsp: int,
    regs: Dict[str, int],
    frame_register: Optional[str] = None,
    leaves_function: Optional[Callable[[int], bool]] = None,
) -> Optional[ReturnPath]:
    """Emulate the rest of the epilogue `ip` is in (see `match_epilogue`) to its RET or
    tail-call JMP; None when `ip` is not in an epilogue or the stack cannot be read."""
    steps = match_epilogue(read_code(ip, EPILOGUE_BYTES), ip, frame_register, leaves_function)
    if steps is None:
        return None
    restored: Dict[str, int] = {}
    for step in steps:
        if step.kind == "add":
            rsp = (rsp + step.value) & _MASK64
        elif step.kind == "lea":
            base = regs.get(step.register) if step.register is not None else None
            if base is None:
                return None
            rsp = (base + step.value) & _MASK64
        elif step.kind == "pop" and step.register is not None:  # (a pop always names one)
            val = read_u64(rsp)
            if val is None:
                return None
            restored[step.register] = val
            rsp += 8
    return ReturnPath(rsp, restored, len(steps), tail_jump=steps[-1].kind == "tail")


_MASK64 = (1 << 64) - 1


@record
class StackAllocation:
    size: int  # bytes the prologue asks for (the immediate of sub rsp / mov eax before the probe)
    via_probe: bool  # allocated through __chkstk / ___chkstk_ms
    instruction_address: int
    text: str  # the instruction(s), for evidence


def stack_allocation(
    read_code: Callable[[int, int], bytes],
    function_start: int,
    is_probe: Optional[Callable[[int], bool]] = None,
    max_instructions: int = 32,
) -> Optional[StackAllocation]:
    """Read a prologue: the first `sub rsp, imm` (or `mov eax, imm` followed by a call,
    the `__chkstk` pattern) before any branch. `is_probe(target)` may confirm that a
    call's target is the stack probe; when it is None any call right after the mov counts."""
    code = read_code(function_start, 256)
    if not code:
        return None
    pending_eax: Optional[Tuple[int, int, str]] = None
    for _, (addr, _size, mnem, ops) in zip(range(max_instructions), _lite(code, function_start)):
        ops_c = ops.replace(" ", "")
        text = f"{mnem} {ops}".strip()
        if mnem == "sub" and ops_c.startswith("rsp,"):
            val = _imm(ops_c[4:])
            if val is not None:
                return StackAllocation(val, False, addr, text)
            if ops_c == "rsp,rax" and pending_eax:
                return StackAllocation(pending_eax[0], True, pending_eax[1], pending_eax[2])
        if mnem == "mov" and (ops_c.startswith(("eax,", "rax,"))):
            val = _imm(ops_c[4:])
            if val is not None:
                pending_eax = (val, addr, text)
                continue
        if mnem == "call" and pending_eax:
            target = _imm(ops_c)
            if is_probe is None or (target is not None and is_probe(target)):
                return StackAllocation(pending_eax[0], True, pending_eax[1], f"{pending_eax[2]}; call {ops}")
        if mnem in ("ret", "jmp") or (mnem.startswith("j") and mnem != "jmp"):
            break
    return None
