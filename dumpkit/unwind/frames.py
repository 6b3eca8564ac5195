"""Stack frames as the walker produces them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

# How a frame was found, weakest first. The order is the order of trust.
TRUST_LEVELS = ("scan", "scan_validated", "frame_pointer", "prologue", "unwind_info", "context")


@dataclass
class Frame:
    """One frame of a walked stack.

    `ip` is the frame's instruction pointer (for frames above 0, the return address);
    `sp` the stack pointer inside the frame; `size` the distance to the caller's frame
    (WinDbg `kf`'s Memory column), None for the outermost frame."""

    __slots__ = ("index", "ip", "sp", "module", "rva", "function_start", "symbol", "size", "trust")

    index: int
    ip: int
    sp: int
    module: Optional[str]
    rva: Optional[int]
    function_start: Optional[int]  # RVA of the function's first instruction, when known
    symbol: Optional[str]  # "module!name" or "module!name+0x1a", best available
    size: Optional[int]
    trust: str

    @property
    def function_key(self) -> str:
        """Identity of the function, for cycle detection and grouping: stable across
        repetitions even when the return address inside the function differs."""
        if self.module is not None and self.function_start is not None:
            return f"{self.module}!{self.function_start:#x}"
        if self.symbol:
            return self.symbol.split("+", 1)[0]
        return f"{self.ip:#x}"

    @property
    def function_name(self) -> str:
        """Human name of the function without the offset."""
        if self.symbol:
            return self.symbol.split("+", 1)[0]
        if self.module is not None and self.rva is not None:
            return f"{self.module}+{self.rva:#x}"
        return f"{self.ip:#x}"


@dataclass
class StackWalk:
    thread_id: int
    frames: List[Frame]
    stop_reason: str  # why the walk ended: "end of stack", "frame limit (N)", ...
    problems: List[str]

    @property
    def trust_counts(self) -> dict:
        out: dict = {}
        for f in self.frames:
            out[f.trust] = out.get(f.trust, 0) + 1
        return out
