"""Lazy reading of PE images (PE32+ fully, PE32 headers), from a file or from memory.

One module per part of the format, as the SDK divides it:

    winnt.py      numbers and structure layouts under their winnt.h names
    errors.py     PEError
    backing.py    where file bytes come from (mmap, bytes) and ReadVA for process memory
    headers.py    DOS/NT/optional headers, data directories, section table
    image.py      PEImage: the facade (RVA reading, lazily cached directories)
    exception.py  .pdata binary search, UNWIND_INFO decoding, dynamic function tables
    exports.py    the export directory
    imports.py    the import and delay-load import directories
    coff.py       COFF symbol table and long section names
    debug.py      the debug directory's CodeView (RSDS) record
    resources.py  the RT_VERSION resource and VS_VERSIONINFO

Everything dumpkit imports is importable from `dumpkit.pe` itself.
"""

from __future__ import annotations

from dumpkit.pe.backing import BytesBacking, FileBacking, ReadVA
from dumpkit.pe.coff import MAX_COFF_STRINGS, MAX_COFF_SYMBOLS
from dumpkit.pe.debug import MAX_DEBUG_ENTRIES, MAX_PDB_NAME
from dumpkit.pe.errors import PEError
from dumpkit.pe.exception import (
    MAX_CHAIN,
    MAX_INDIRECT,
    PDATA_ENTRY,
    MemoryUnwindData,
    RuntimeFunction,
    UnwindInfo,
    UnwindOp,
)
from dumpkit.pe.exports import MAX_EXPORT_NAME, MAX_EXPORT_NAME_BLOCK, MAX_EXPORTS
from dumpkit.pe.headers import MAX_HEADER_OFFSET, MAX_SECTIONS, DataDirectory, Section
from dumpkit.pe.image import PEImage
from dumpkit.pe.imports import (
    MAX_IMPORT_DLLS,
    MAX_IMPORT_NAME,
    MAX_IMPORT_NAME_BLOCK,
    MAX_IMPORT_NAME_BYTES,
    MAX_IMPORTED_FUNCTIONS,
    MAX_IMPORTS_PER_DLL,
    ImportedDll,
    ImportTable,
)
from dumpkit.pe.resources import (
    MAX_RESOURCE_ENTRIES,
    MAX_VERSION_BLOCKS,
    MAX_VERSION_RESOURCE,
    MAX_VERSION_STRING,
    VersionInfo,
    parse_vs_versioninfo,
)
from dumpkit.pe.winnt import (
    DIR_DEBUG,
    DIR_DELAY_IMPORT,
    DIR_EXCEPTION,
    DIR_EXPORT,
    DIR_IMPORT,
    DIR_RESOURCE,
    IMAGE_DEBUG_TYPE_CODEVIEW,
    IMAGE_FILE_MACHINE_AMD64,
    IMAGE_FILE_MACHINE_ARM64,
    IMAGE_FILE_MACHINE_I386,
    IMAGE_SCN_CNT_CODE,
    IMAGE_SCN_MEM_EXECUTE,
    RT_VERSION,
    UNW_FLAG_CHAININFO,
    UNW_FLAG_EHANDLER,
    UNW_FLAG_UHANDLER,
    UWOP_ALLOC_LARGE,
    UWOP_ALLOC_SMALL,
    UWOP_EPILOG,
    UWOP_NAMES,
    UWOP_PUSH_MACHFRAME,
    UWOP_PUSH_NONVOL,
    UWOP_SAVE_NONVOL,
    UWOP_SAVE_NONVOL_FAR,
    UWOP_SAVE_XMM128,
    UWOP_SAVE_XMM128_FAR,
    UWOP_SET_FPREG,
    UWOP_SET_FPREG_LARGE,
    UWOP_SPARE_CODE,
)

# bench/pdata_lookup.py counts the reads of a file-backed image by patching this class
_FileBacking = FileBacking
_BytesBacking = BytesBacking

__all__ = [
    "PEError",
    "Section",
    "DataDirectory",
    "RuntimeFunction",
    "UnwindOp",
    "UnwindInfo",
    "VersionInfo",
    "PEImage",
    "ImportedDll",
    "ImportTable",
    "MemoryUnwindData",
    "ReadVA",
    "parse_vs_versioninfo",
    # constants
    "IMAGE_FILE_MACHINE_I386",
    "IMAGE_FILE_MACHINE_AMD64",
    "IMAGE_FILE_MACHINE_ARM64",
    "IMAGE_SCN_CNT_CODE",
    "IMAGE_SCN_MEM_EXECUTE",
    "IMAGE_DEBUG_TYPE_CODEVIEW",
    "RT_VERSION",
    "DIR_EXPORT",
    "DIR_IMPORT",
    "DIR_DELAY_IMPORT",
    "DIR_RESOURCE",
    "DIR_EXCEPTION",
    "DIR_DEBUG",
    "UNW_FLAG_EHANDLER",
    "UNW_FLAG_UHANDLER",
    "UNW_FLAG_CHAININFO",
    "UWOP_PUSH_NONVOL",
    "UWOP_ALLOC_LARGE",
    "UWOP_ALLOC_SMALL",
    "UWOP_SET_FPREG",
    "UWOP_SAVE_NONVOL",
    "UWOP_SAVE_NONVOL_FAR",
    "UWOP_EPILOG",
    "UWOP_SPARE_CODE",
    "UWOP_SAVE_XMM128",
    "UWOP_SAVE_XMM128_FAR",
    "UWOP_PUSH_MACHFRAME",
    "UWOP_SET_FPREG_LARGE",
    "UWOP_NAMES",
    # limits on data-controlled sizes
    "MAX_SECTIONS",
    "MAX_HEADER_OFFSET",
    "MAX_EXPORTS",
    "MAX_EXPORT_NAME",
    "MAX_EXPORT_NAME_BLOCK",
    "MAX_IMPORT_DLLS",
    "MAX_IMPORTS_PER_DLL",
    "MAX_IMPORTED_FUNCTIONS",
    "MAX_IMPORT_NAME",
    "MAX_IMPORT_NAME_BYTES",
    "MAX_IMPORT_NAME_BLOCK",
    "MAX_RESOURCE_ENTRIES",
    "MAX_VERSION_RESOURCE",
    "MAX_VERSION_BLOCKS",
    "MAX_VERSION_STRING",
    "MAX_DEBUG_ENTRIES",
    "MAX_PDB_NAME",
    "MAX_COFF_SYMBOLS",
    "MAX_COFF_STRINGS",
    "MAX_CHAIN",
    "MAX_INDIRECT",
    "PDATA_ENTRY",
]
