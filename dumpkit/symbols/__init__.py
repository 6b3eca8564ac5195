"""Naming: turning the names modules and PDBs hold into the names people read."""

from __future__ import annotations

from dumpkit.symbols.demangle import Demangled, demangle, display_name

__all__ = ["Demangled", "demangle", "display_name"]
