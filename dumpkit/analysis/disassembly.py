"""The code around the faulting instruction, as `!analyze -v` and `u` show it: a few
instructions before the IP, the one at the IP (marked), a few after.

x86 code cannot be decoded backwards, so the instructions before the IP are decoded
forwards from the function's entry (.pdata knows it) up to the IP; when no entry is known,
or that linear sweep does not land on the IP (data inside the code), from the farthest of a
few bytes back that lands on it, and the result says it is a guess."""

from __future__ import annotations

import re
from typing import Callable, List, Optional, Tuple

from dumpkit.analysis.model import Disassembly, Instruction
from dumpkit.records import replace
from dumpkit.unwind.disasm import decode_one

ReadCode = Callable[[int, int], bytes]
NameAt = Callable[[int], Optional[str]]

BEFORE = 6  # instructions shown before the faulting one
AFTER = 4  # and after it
MAX_SWEEP = 16 * 1024  # bytes decoded from a function's entry at most
GUESS_BACK = 48  # bytes back tried when there is no usable entry
MAX_INSTRUCTION = 15  # the longest x86 instruction


def _decode_run(code: bytes, base: int, start: int, stop: int, bits: int) -> Optional[List[Instruction]]:
    """Instructions from `start` while they begin before `stop`; None when one is
    undecodable or the run does not land exactly on `stop`."""
    out: List[Instruction] = []
    address = start
    while address < stop:
        offset = address - base
        got = decode_one(code[offset : offset + MAX_INSTRUCTION], address, bits)
        if got is None:
            return None
        size, mnemonic, ops = got
        out.append(Instruction(address, code[offset : offset + size].hex(), f"{mnemonic} {ops}".strip()))
        address += size
    return out if address == stop else None


def _before(
    read_code: ReadCode, ip: int, entry: Optional[int], entry_from: str, bits: int
) -> Tuple[List[Instruction], str]:
    """The instructions before `ip` and how they were found (`entry_from`, `guessed`, `none`)."""
    if entry == ip:
        return [], entry_from  # the fault is on the function's first instruction
    if entry is not None and entry < ip and ip - entry <= MAX_SWEEP:
        code = read_code(entry, ip - entry)
        if len(code) == ip - entry:
            run = _decode_run(code, entry, entry, ip, bits)
            if run is not None:
                return run[-BEFORE:], entry_from
    code = read_code(ip - GUESS_BACK, GUESS_BACK)
    if len(code) == GUESS_BACK:
        for back in range(GUESS_BACK, 0, -1):  # the farthest start that lands on the IP
            run = _decode_run(code, ip - GUESS_BACK, ip - back, ip, bits)
            if run is not None and len(run) >= min(BEFORE, 2):
                return run[-BEFORE:], "guessed"
    return [], "none"


_BRANCH = re.compile(r"^(call|jmp|j[a-z]{1,3}|loop\w*)$")
_IMMEDIATE = re.compile(r"^0x[0-9a-f]+$")


def _named(insn: Instruction, name_at: Optional[NameAt]) -> Instruction:
    """The instruction with its direct branch's destination named (`call 0x...` -> reduce)."""
    mnemonic, _, operand = insn.text.partition(" ")
    if name_at is None or not _BRANCH.match(mnemonic) or not _IMMEDIATE.match(operand):
        return insn
    name = name_at(int(operand, 16))
    return replace(insn, target_name=name) if name else insn


def disassemble_around(
    read_code: ReadCode,
    ip: int,
    entry: Optional[int],
    bits: int = 64,
    executing: bool = False,
    name_at: Optional[NameAt] = None,
    entry_from: str = "function_entry",
) -> Disassembly:
    """The code around `ip` (`entry`: the function's first byte, when known, from
    `entry_from`: `function_entry` for unwind data, `symbol` for the nearest symbol's
    address); with no instruction and a note when none can be read or decoded there. `executing`: the fault was executing the IP's
    memory (DEP / unmapped): what lies there is not code, so nothing is decoded.
    `name_at(address)`: a symbol for a direct call's or jump's destination."""
    if executing:
        return Disassembly((), "none", "the fault was an execute at the IP: the memory there is not code")
    first = read_code(ip, MAX_INSTRUCTION * (AFTER + 1))
    if not first:
        return Disassembly((), "none", "neither the dump nor an image of the module holds the code at the IP")
    at: List[Instruction] = []
    offset = 0
    while len(at) < AFTER + 1:
        got = decode_one(first[offset : offset + MAX_INSTRUCTION], ip + offset, bits)
        if got is None:
            break
        size, mnemonic, ops = got
        at.append(Instruction(ip + offset, first[offset : offset + size].hex(), f"{mnemonic} {ops}".strip()))
        offset += size
    if not at:
        return Disassembly((), "none", "the bytes at the IP do not decode as an instruction")
    at[0] = Instruction(at[0].address, at[0].bytes, at[0].text, faulting=True)
    before, start = _before(read_code, ip, entry, entry_from, bits)
    notes = {
        "guessed": "no function entry to decode from: the instructions before the IP are decoded from a few bytes "
        "back and may be wrong",
        "none": "the instructions before the IP could not be decoded",
    }
    return Disassembly(tuple(_named(i, name_at) for i in before + at), start, notes.get(start))
