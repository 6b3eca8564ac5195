"""What a pointer-sized value says by itself, before anything is known about the memory
it points at: whether an x64 address can exist at all (canonical form), and whether the
value is a recognisable fill pattern (debug-heap and debug-CRT fills, /RTC stack fill, a
repeated byte) rather than a pointer. One table, used for exception addresses
(analysis/codes) and for the registers of a faulting instruction (analysis/access)."""

from __future__ import annotations

from typing import Dict, Optional

__all__ = ["FILL_PATTERNS", "fill_pattern", "is_canonical"]

MASK64 = 0xFFFFFFFFFFFFFFFF

FILL_PATTERNS: Dict[int, str] = {
    0xFEEEFEEE: "memory released by HeapFree (the debug heap's freed-block fill)",
    0xDDDDDDDD: "memory freed through the debug CRT (its freed-block fill)",
    0xCDCDCDCD: "heap memory allocated but never initialised (debug CRT fill)",
    0xCCCCCCCC: "an uninitialised stack variable (/RTC fill)",
    0xBAADF00D: "heap memory allocated but never initialised (debug heap fill)",
    0xABABABAB: "the guard bytes after a heap block (read past its end)",
    0xFDFDFDFD: "the debug CRT's no-man's-land guard around a block (an overrun)",
    0xDEADBEEF: "a 'dead' marker some code writes into freed or invalid objects",
}


def is_canonical(address: int) -> bool:
    """x64 with 48-bit virtual addresses: bits 63..47 are copies of bit 47."""
    top = (address & MASK64) >> 47
    return top == 0 or top == (1 << 17) - 1


def fill_pattern(value: int, min_run: int = 4) -> Optional[str]:
    """What a pointer-sized value that is really a fill says, if it is one: a table value
    in either 32-bit half, or one byte repeated over the whole value when that covers at
    least `min_run` bytes (4: a 32-bit word counts; 8: only a full 64-bit run, which can
    never be an address, while a 32-bit run can be one in a 32-bit process)."""
    value &= MASK64
    for half in (value & 0xFFFFFFFF, value >> 32):
        if half in FILL_PATTERNS:
            return f"{half:#010x}: {FILL_PATTERNS[half]}"
    b = value & 0xFF
    for width in (8, 4):  # a 64-bit or a 32-bit value made of one repeated byte
        if width >= min_run and value > 0xFF and value == int.from_bytes(bytes([b]) * width, "little"):
            text = f" ({chr(b) * 4!r}...)" if 0x20 < b < 0x7F else ""
            return f"the byte {b:#04x} repeated{text}: memory filled with a pattern or overwritten with data, not a pointer"
    return None
