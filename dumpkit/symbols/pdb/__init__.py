"""A focused, bounded PDB reader: the MSF container, the info and DBI streams, and the
symbol records that name code (procedures and publics). Written here because no maintained
pure-Python PDB reader works on every platform dumpkit supports; it reads only the streams
a lookup needs, by blocks, so multi-GB PDBs cost little."""

from __future__ import annotations

from dumpkit.symbols.pdb.msf import PdbError, PdbFile, PdbSource
from dumpkit.symbols.pdb.symbols import PdbFunction, PdbSymbols, SourceLine, open_pdb

__all__ = ["PdbError", "PdbFile", "PdbSource", "PdbFunction", "PdbSymbols", "SourceLine", "open_pdb"]
