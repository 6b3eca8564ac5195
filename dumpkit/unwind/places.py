"""What is known about one instruction pointer independently of any stack: its module,
RVA, the unwind entry covering it and the best name for it. CPU-neutral; the walker
caches one `Place` per address."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from dumpkit.pe import PEError, PEImage, RuntimeFunction
from dumpkit.target import MemoryNotInDump, Module

# A FunctionTable stream entry (JIT code registered with RtlAddFunctionTable):
# (begin VA, end VA, unwind-info VA as recorded, base the RVAs are relative to).
DynamicEntry = Tuple[int, int, int, int]


@dataclass(frozen=True)
class Place:
    module: Optional[Module]
    rva: Optional[int]
    image: Optional[PEImage]
    function: Optional[RuntimeFunction]  # covering .pdata entry (image-relative)
    dynamic: Optional[DynamicEntry]  # covering FunctionTable stream entry, when no .pdata entry
    symbol: Optional[str]

    @property
    def function_start(self) -> Optional[int]:
        """RVA of the covering function's first instruction, when an entry gives it."""
        return self.function.begin_rva if self.function is not None else None


def symbol_for(
    debugger_name: Optional[str],
    module: Optional[Module],
    rva: Optional[int],
    image: Optional[PEImage],
    function: Optional[RuntimeFunction],
) -> Optional[str]:
    """The best name for a place: the debugger's, else the nearest export or COFF symbol
    that can name it, else `func_<start>` from its unwind entry."""
    if debugger_name:
        return debugger_name
    if module is None or rva is None:
        return None
    start = function.begin_rva if function is not None else None
    if image is not None:
        near = nearest_name(image, rva, start)
        if near is not None:
            name, at = near
            return f"{module.name}!{name}" + (f"+{rva - at:#x}" if rva != at else "")
    if start is not None:
        return f"{module.name}!func_{start:x}" + (f"+{rva - start:#x}" if rva != start else "")
    return None


def nearest_name(image: PEImage, rva: int, start: Optional[int]) -> Optional[Tuple[str, int]]:
    """(name, rva) of the nearest-lower export or COFF function symbol (mingw keeps
    them) that can name code at `rva`: not below the function's own start (a name
    from an earlier function would mislabel this one), and, with no .pdata entry
    covering `rva`, not a function whose entry ends before it. An export at the
    function's start is taken as is: the COFF table, at the end of the file (the
    whole of a compressed image away), is read only when exports do not name it."""
    best: Optional[Tuple[str, int]] = None
    for lookup in (image.nearest_export, image.nearest_function_symbol):
        try:
            near = lookup(rva)
        except (PEError, MemoryNotInDump):
            near = None
        if near is None or (start is not None and near[1] < start):
            continue
        if start is None and _ends_before(image, near[1], rva):
            continue
        if best is None or near[1] > best[1]:
            best = near
        if start is not None and best[1] == start:
            break
    return best


def _ends_before(image: PEImage, name_rva: int, rva: int) -> bool:
    """Does the function at `name_rva` have a .pdata entry that ends at or before `rva`?
    Then `rva` (covered by no entry) is code after it, such as a hand-written
    ___chkstk_ms, and must not borrow its name."""
    try:
        rf = image.lookup_function(name_rva)
    except (PEError, MemoryNotInDump):
        return False
    if rf is None:
        return False
    covering = rf.indirect_from or rf
    return covering.end_rva <= rva
