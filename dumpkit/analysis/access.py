"""What the faulting instruction was really doing: its memory operand, computed.

When an x64 access violation comes from a general-protection fault instead of a page
fault, Windows records the address as all ones and a read/write flag that means nothing.
The CPU raises #GP for a non-canonical address (bits 63..47 not all equal: a wild or
poisoned pointer such as 0xfefefefefefefefe) and for a misaligned operand of an
instruction that requires alignment (movaps/movdqa and their VEX forms on an address that
is not 16/32-byte aligned, a classic of hand-vectorised kernels). The instruction and the
registers of the exception context tell which it was: base + index * scale + disp.
"""

from __future__ import annotations

from typing import Callable, Dict, Optional

from dumpkit.analysis.model import MemoryAccess
from dumpkit.analysis.pointers import fill_pattern, is_canonical

__all__ = ["faulting_access", "fill_pattern", "is_canonical", "operand_headline", "ALL_ONES"]

ALL_ONES = 0xFFFFFFFFFFFFFFFF

# Instructions that fault (#GP) on a memory operand not aligned to its size.
ALIGNED_MNEMONICS = frozenset(
    {
        "movaps",
        "movapd",
        "movdqa",
        "movntps",
        "movntpd",
        "movntdq",
        "movntdqa",
        "vmovaps",
        "vmovapd",
        "vmovdqa",
        "vmovdqa32",
        "vmovdqa64",
        "vmovntps",
        "vmovntpd",
        "vmovntdq",
        "vmovntdqa",
        "fxsave",
        "fxrstor",
        "fxsave64",
        "fxrstor64",
    }
)

_PARENT = {}
for _n in "abcd":
    _PARENT.update({f"e{_n}x": f"r{_n}x", f"{_n}x": f"r{_n}x", f"{_n}l": f"r{_n}x"})
for _n in ("si", "di", "bp", "sp"):
    _PARENT.update({f"e{_n}": f"r{_n}", _n: f"r{_n}", f"{_n}l": f"r{_n}"})
for _i in range(8, 16):
    _PARENT.update({f"r{_i}d": f"r{_i}", f"r{_i}w": f"r{_i}", f"r{_i}b": f"r{_i}"})


def _reg_value(name: str, regs: Dict[str, int]) -> Optional[int]:
    if name in regs:
        return regs[name]
    parent = _PARENT.get(name)
    if parent is None or parent not in regs:
        return None
    value = regs[parent]
    if name.endswith(("l", "b")):
        return value & 0xFF
    if name.startswith("e") or name.endswith("d"):
        return value & 0xFFFFFFFF
    return value & 0xFFFF


# Capstone's per-operand access flags are wrong for some VEX moves (a `vmovdqu [m], ymm0`
# store comes back as a read); the operand position settles the common instructions.
_STORES = ("mov", "vmov", "stos", "set", "fst", "fist", "fbstp", "fnst", "fxsave", "xsave", "pop")
_READS_ONLY = (
    "cmp",
    "test",
    "bt",
    "ucomis",
    "comis",
    "vucomis",
    "vcomis",
    "ptest",
    "vptest",
    "prefetch",
    "push",
    "call",
    "jmp",
    "nop",
    "lea",
)


def _kind(mnemonic: str, is_first: bool, flags: int) -> str:
    if mnemonic.startswith(_READS_ONLY):
        return "read"
    if is_first and mnemonic.startswith(_STORES):
        return "write"
    if not is_first:
        return "read"
    return {1: "read", 2: "write", 3: "read/write"}.get(flags, "read/write")


def faulting_access(
    read_code: Callable[[int, int], bytes], ip: int, regs: Dict[str, int], bits: int = 64
) -> Optional[MemoryAccess]:
    """The one explicit memory operand of the instruction at `ip`, or None when there is
    none, more than one (string moves), a segment base we do not know (fs:/gs:), or a
    register the context lacks."""
    code = read_code(ip, 16)
    if not code:
        return None
    from dumpkit.unwind.decoder import OP_MEM, detailed  # imported when first needed (it says why)

    insn = next(iter(detailed(code, ip, bits, 1)), None)
    if insn is None:
        return None
    mems = [op for op in insn.operands if op.type == OP_MEM]
    if len(mems) != 1:
        return None
    op = mems[0]
    mem = op.mem
    if mem.segment != 0 and insn.reg_name(mem.segment) not in ("ds", "ss", "es", "cs"):
        return None  # fs:/gs: are relative to the TEB, whose base the context does not hold
    mask = (1 << bits) - 1
    address = mem.disp
    terms, values = [], []
    used = []
    for reg, scale in ((mem.base, 1), (mem.index, mem.scale)):
        if reg == 0:
            continue
        name = insn.reg_name(reg)
        value = ip + insn.size if name in ("rip", "eip") else _reg_value(name, regs)
        if value is None:
            return None
        if name not in ("rip", "eip"):
            used.append((name, value))
        address += value * scale
        terms.append(name if scale == 1 else f"{name}*{scale}")
        values.append(f"{value:#x}" if scale == 1 else f"{value:#x}*{scale}")
    address &= mask
    formula = " + ".join(terms)
    shown = " + ".join(values)
    if mem.disp:
        sign = "-" if mem.disp < 0 else "+"
        formula = f"{formula} {sign} {abs(mem.disp):#x}" if terms else f"{mem.disp & mask:#x}"
        shown = f"{shown} {sign} {abs(mem.disp):#x}" if terms else ""
    formula = f"{formula} = {shown}" if shown else f"{address:#x}"
    kind = _kind(insn.mnemonic, op is insn.operands[0], op.access & 3)
    text = f"{insn.mnemonic} {insn.op_str}".strip()
    aligned_only = insn.mnemonic in ALIGNED_MNEMONICS
    return MemoryAccess(
        kind,
        address,
        op.size,
        text,
        formula,
        aligned_only,
        aligned_only and op.size > 1 and address % op.size != 0,
        tuple(used),
    )


def operand_headline(code: int, reported: int, acc: MemoryAccess) -> Optional[str]:
    """The crash headline for a general-protection fault (Windows recorded all ones as the
    address) once the faulting instruction's operand is computed: the access kind from the
    instruction, the computed address; None when the record already had a real address."""
    if reported not in (ALL_ONES, 0xFFFFFFFF) or acc.address == reported:
        return None
    if not is_canonical(acc.address) and reported == ALL_ONES:
        why = "non-canonical address"
    elif acc.misaligned:
        why = f"misaligned for {acc.instruction.split(' ', 1)[0]}, which requires {acc.size}-byte alignment"
    else:
        why = "canonical address"
    return (
        f"0x{code:08X} access violation: {acc.kind} of {acc.size} bytes at {acc.address:#x} "
        f"(general-protection fault, {why}; Windows recorded {reported:#x}, the address is computed "
        "from the faulting instruction)"
    )
