"""What is known about one instruction pointer independently of any stack: its module,
RVA, the unwind entry covering it, the function it belongs to and the best name for it.
CPU-neutral; the walker caches one `Place` per address.

MSVC splits a function into its primary part and fragments (hot/cold separation, shrink
wrapping) whose unwind info chains back to the primary entry (UNW_FLAG_CHAININFO). A
fragment is not a function: a place inside one belongs to the function whose entry point
is the primary entry's start, and is named after it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Tuple

from dumpkit.pe import PEError, PEImage, RuntimeFunction
from dumpkit.pe.pynames import is_python_image
from dumpkit.symbols import display_name
from dumpkit.function_tables import DynamicEntry
from dumpkit.target import MemoryNotInDump, Module
from dumpkit.records import record

if TYPE_CHECKING:  # the PDB reader is imported only when a PDB is found
    from dumpkit.symbols.pdb import PdbFunction


@record
class Place:
    module: Optional[Module]
    rva: Optional[int]
    image: Optional[PEImage]
    function: Optional[RuntimeFunction]  # covering .pdata entry (image-relative): what unwinding uses
    dynamic: Optional[DynamicEntry]  # covering FunctionTable stream entry, when no .pdata entry
    symbol: Optional[str]
    # The primary entry of the function `function` is part of: `function` itself unless
    # that is a chained fragment. None when the chain could not be read.
    primary: Optional[RuntimeFunction] = None
    source: Optional[str] = None  # "FILE:LINE" of the code, from the module's PDB

    @property
    def function_start(self) -> Optional[int]:
        """RVA of the function's entry point (its primary entry's start, for a fragment),
        when an entry gives it: what names, cycles, frame sizes and call sites key on."""
        entry = self.primary or self.function
        return entry.begin_rva if entry is not None else None

    @property
    def in_fragment(self) -> bool:
        """Is the place in a chained fragment, away from its function's primary entry?"""
        return self.primary is not None and self.function is not None and self.primary != self.function


def symbol_for(
    debugger_name: Optional[str],
    module: Optional[Module],
    rva: Optional[int],
    image: Optional[PEImage],
    function: Optional[RuntimeFunction],
    primary: Optional[RuntimeFunction] = None,
    pdb: Optional[PdbFunction] = None,
) -> Optional[str]:
    """The best name for a place: the debugger's, else the PDB's procedure (or public
    symbol, when not below the function's start), else the nearest export or COFF symbol
    that can name it (demangled when MSVC-decorated), else `func_<start>` from its unwind
    entry. `primary`: the function's primary entry when `function` is a chained fragment;
    the place is then named after the function's entry point, the offset measured from it."""
    if debugger_name:
        return debugger_name
    if module is None or rva is None:
        return None
    entry = primary or function
    start = entry.begin_rva if entry is not None else None
    if pdb is not None and (pdb.size is not None or start is None or pdb.rva >= start):
        return f"{module.name}!{pdb.name}{_offset(rva - pdb.rva)}"
    if image is not None:
        # A fragment takes only the name at its function's entry: MSVC places fragments far
        # from it (PGO cold code), past other functions whose names are nearer below.
        fragment = primary is not None and primary != function
        near = nearest_name(image, start if fragment and start is not None else rva, start)
        if near is not None:
            name, at = near
            return f"{module.name}!{display_name(name)}{_offset(rva - at)}"
    if start is not None:
        if image is not None and is_python_image(module.name):
            # a static function of python3X.dll or an extension: the name CPython's own
            # method and type tables give it (`list.__repr__`), when they hold it
            python = image.python_name(start)
            if python is None and module.name.lower().endswith(".pyd"):
                python = image.cython_name(start)  # most of a Cython module's functions
                if python is None:
                    python = image.pybind11_name(start)  # a pybind11 module's m.def bindings
            if python is not None:
                return f"{module.name}!{python}{_offset(rva - start)}"
        return f"{module.name}!func_{start:x}{_offset(rva - start)}"
    return None


def _offset(delta: int) -> str:
    """`+0x1a` after a name; nothing at its address. A fragment placed below its
    function's entry is `-0x..` from it."""
    if delta == 0:
        return ""
    return f"+{delta:#x}" if delta > 0 else f"-{-delta:#x}"


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
