"""MSVC C++ exceptions (0xE06D7363): which type was thrown.

The exception parameters on x64 are [magic 0x19930520 (or ...21/22), the thrown object,
the ThrowInfo, the image base those RVAs are relative to]. ThrowInfo -> CatchableTypeArray
-> CatchableType -> TypeDescriptor holds the decorated name (".?AVruntime_error@std@@").
The structures live in the throwing module's .rdata: readable from its image even when
the dump does not hold them."""

from __future__ import annotations

import struct
from typing import Callable, List, Optional, Sequence

MAGICS = (0x19930520, 0x19930521, 0x19930522)
MAX_CATCHABLE = 64
MAX_NAME = 1024


def undecorate_type(name: str) -> str:
    """'.?AVruntime_error@std@@' -> 'std::runtime_error'; other forms are returned as is."""
    if name.startswith((".?AV", ".?AU")) and name.endswith("@@") and "?$" not in name:
        parts = [p for p in name[4:-2].split("@") if p]
        return "::".join(reversed(parts))
    return name


def thrown_types(parameters: Sequence[int], read: Callable[[int, int], bytes]) -> List[str]:
    """Names of the catchable types of the thrown object, most derived first; empty when
    the memory is not available. `read(va, n)` returns what it has (maybe fewer bytes)."""
    if len(parameters) < 4 or parameters[0] not in MAGICS:
        return []
    throw_info, base = parameters[2], parameters[3]
    if not throw_info or not base:
        return []

    def u32(va: int) -> Optional[int]:
        raw = read(va, 4)
        return struct.unpack("<I", raw)[0] if len(raw) == 4 else None

    cta_rva = u32(throw_info + 12)
    if not cta_rva:
        return []
    count = u32(base + cta_rva)
    if not count:
        return []
    names = []
    for i in range(min(count, MAX_CATCHABLE)):
        ct_rva = u32(base + cta_rva + 4 + 4 * i)
        if not ct_rva:
            break
        td_rva = u32(base + ct_rva + 4)
        if not td_rva:
            continue
        raw = read(base + td_rva + 16, MAX_NAME)
        name = raw.split(b"\0", 1)[0].decode("ascii", "replace")
        if name:
            names.append(undecorate_type(name))
    return names
