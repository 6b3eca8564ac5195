"""CPU context records (Windows CONTEXT) as found in minidumps.

x64 CONTEXT is 1232 bytes; writers that save XSAVE/CET state append a CONTEXT_EX and the
extended area (1407 and 1663 bytes are seen in real dumps), but the first 1232 bytes keep
the plain layout, so only those are read here. x86 CONTEXT is 716 bytes.
"""

from __future__ import annotations

import struct
from typing import Dict, Optional, Tuple

from dumpkit.target import GPR_NAMES, PROCESSOR_ARCHITECTURE_AMD64, PROCESSOR_ARCHITECTURE_INTEL, Registers

X64_CONTEXT_SIZE = 0x4D0
X86_CONTEXT_SIZE = 0x2CC

_X64_GPR_OFFSET = 0x78  # Rax; the 16 GPRs follow in GPR_NAMES order, then Rip

# ContextFlags (winnt.h): an architecture bit plus one bit per register group the writer
# saved. A register outside the saved groups holds whatever was in the buffer, so it is
# left out rather than reported as a value.
CONTEXT_AMD64 = 0x00100000
CONTEXT_I386 = 0x00010000
CONTROL, INTEGER, SEGMENTS, FLOATING_POINT = 0x1, 0x2, 0x4, 0x8

_X64_GROUPS = (  # group bit, registers
    (CONTROL, ("rip", "rsp", "eflags", "cs", "ss")),
    (INTEGER, tuple(n for n in GPR_NAMES if n != "rsp")),
    (SEGMENTS, ("ds", "es", "fs", "gs")),
    (FLOATING_POINT, ("mxcsr",)),
)
_X86_GROUPS = (  # x86 keeps EBP with the control registers
    (CONTROL, ("ebp", "eip", "cs", "eflags", "esp", "ss")),
    (INTEGER, ("edi", "esi", "ebx", "edx", "ecx", "eax")),
    (SEGMENTS, ("gs", "fs", "es", "ds")),
)
_X64_SEGS = ("cs", "ds", "es", "fs", "gs", "ss")

_X86_REGS = (  # name, offset
    ("gs", 0x8C),
    ("fs", 0x90),
    ("es", 0x94),
    ("ds", 0x98),
    ("edi", 0x9C),
    ("esi", 0xA0),
    ("ebx", 0xA4),
    ("edx", 0xA8),
    ("ecx", 0xAC),
    ("eax", 0xB0),
    ("ebp", 0xB4),
    ("eip", 0xB8),
    ("cs", 0xBC),
    ("eflags", 0xC0),
    ("esp", 0xC4),
    ("ss", 0xC8),
)


def _saved(values: Dict[str, int], flags: int, arch_bit: int, groups) -> Tuple[Dict[str, int], Optional[str]]:
    """Only the registers of the groups `flags` says were saved, and a problem, if any."""
    if not flags & arch_bit:
        # No architecture bit: the flags say nothing usable; keep everything, say so.
        return (
            values,
            f"context flags {flags:#x} lack the architecture bit {arch_bit:#x}; every register taken as saved",
        )
    keep = set()
    for bit, names in groups:
        if flags & bit:
            keep.update(names)
    problem = None
    if not flags & CONTROL:
        problem = f"context flags {flags:#x} lack CONTEXT_CONTROL: no instruction or stack pointer was saved"
    return {k: v for k, v in values.items() if k in keep}, problem


def parse_x64(raw: bytes) -> Tuple[Registers, Optional[str]]:
    flags, mxcsr = struct.unpack_from("<II", raw, 0x30)
    segs = struct.unpack_from("<6H", raw, 0x38)
    (eflags,) = struct.unpack_from("<I", raw, 0x44)
    gprs = struct.unpack_from("<17Q", raw, _X64_GPR_OFFSET)
    values = dict(zip(GPR_NAMES, gprs[:16]))
    values["rip"] = gprs[16]
    values["eflags"] = eflags
    values["mxcsr"] = mxcsr
    values.update(zip(_X64_SEGS, segs))
    kept, problem = _saved(values, flags, CONTEXT_AMD64, _X64_GROUPS)
    return Registers(kept, flags, len(raw)), problem


def parse_x86(raw: bytes) -> Tuple[Registers, Optional[str]]:
    (flags,) = struct.unpack_from("<I", raw, 0)
    values = {name: struct.unpack_from("<I", raw, off)[0] for name, off in _X86_REGS}
    kept, problem = _saved(values, flags, CONTEXT_I386, _X86_GROUPS)
    return Registers(kept, flags, len(raw)), problem


def parse_context(raw: bytes, arch: Optional[int]) -> Tuple[Optional[Registers], Optional[str]]:
    """(registers, problem): only the registers the record's ContextFlags say were saved,
    or None and why not; `problem` is worth a soft error even when registers came out.
    `arch` is the SystemInfo processor architecture (PROCESSOR_ARCHITECTURE_*) or None
    when unknown (then guessed by size)."""
    n = len(raw)
    if arch is None:
        if n >= X64_CONTEXT_SIZE:
            arch = PROCESSOR_ARCHITECTURE_AMD64
        else:
            arch = PROCESSOR_ARCHITECTURE_INTEL if n >= X86_CONTEXT_SIZE else -1
    if arch == PROCESSOR_ARCHITECTURE_AMD64:
        if n < X64_CONTEXT_SIZE:
            return None, f"x64 context is {n} bytes, need {X64_CONTEXT_SIZE}"
        return parse_x64(raw)
    if arch == PROCESSOR_ARCHITECTURE_INTEL:
        if n < X86_CONTEXT_SIZE:
            return None, f"x86 context is {n} bytes, need {X86_CONTEXT_SIZE}"
        return parse_x86(raw)
    return None, f"context of {n} bytes for processor architecture {arch} is not supported"
