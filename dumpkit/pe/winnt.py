"""The numbers and structure layouts of the PE format that dumpkit reads, under their
winnt.h names, declared once. Each layout is little-endian with no padding, and its fields
are listed in the SDK's order."""

from __future__ import annotations

import struct
from typing import Dict

# ----------------------------------------------------------------------------- IMAGE_FILE_HEADER.Machine
IMAGE_FILE_MACHINE_I386 = 0x014C
IMAGE_FILE_MACHINE_AMD64 = 0x8664
IMAGE_FILE_MACHINE_ARM64 = 0xAA64

# ----------------------------------------------------------------------------- optional header magic
IMAGE_NT_OPTIONAL_HDR32_MAGIC = 0x10B
IMAGE_NT_OPTIONAL_HDR64_MAGIC = 0x20B
IMAGE_NUMBEROF_DIRECTORY_ENTRIES = 16

# ----------------------------------------------------------------------------- IMAGE_SECTION_HEADER.Characteristics
IMAGE_SCN_CNT_CODE = 0x00000020
IMAGE_SCN_MEM_EXECUTE = 0x20000000
IMAGE_SCN_MEM_WRITE = 0x80000000

# ----------------------------------------------------------------------------- data directory indexes
IMAGE_DIRECTORY_ENTRY_EXPORT = 0
IMAGE_DIRECTORY_ENTRY_IMPORT = 1
IMAGE_DIRECTORY_ENTRY_RESOURCE = 2
IMAGE_DIRECTORY_ENTRY_EXCEPTION = 3
IMAGE_DIRECTORY_ENTRY_DEBUG = 6
IMAGE_DIRECTORY_ENTRY_DELAY_IMPORT = 13
# the short names the rest of dumpkit has always used
DIR_EXPORT = IMAGE_DIRECTORY_ENTRY_EXPORT
DIR_RESOURCE = IMAGE_DIRECTORY_ENTRY_RESOURCE
DIR_EXCEPTION = IMAGE_DIRECTORY_ENTRY_EXCEPTION
DIR_DEBUG = IMAGE_DIRECTORY_ENTRY_DEBUG
DIR_IMPORT = IMAGE_DIRECTORY_ENTRY_IMPORT
DIR_DELAY_IMPORT = IMAGE_DIRECTORY_ENTRY_DELAY_IMPORT

# an import thunk with this bit set imports by ordinal (the low 16 bits), else it is the RVA
# of an IMAGE_IMPORT_BY_NAME (Hint, then the name)
IMAGE_ORDINAL_FLAG64 = 1 << 63
IMAGE_ORDINAL_FLAG32 = 1 << 31
# IMAGE_DELAYLOAD_DESCRIPTOR.Attributes: the descriptor's addresses are RVAs (else VAs: VC6)
DELAYLOAD_RVA_BASED = 0x1

IMAGE_DEBUG_TYPE_CODEVIEW = 2
RT_VERSION = 16
VS_FFI_SIGNATURE = 0xFEEF04BD

# COFF symbol table (IMAGE_SYMBOL)
IMAGE_SYM_CLASS_EXTERNAL = 2
IMAGE_SYM_CLASS_STATIC = 3
IMAGE_SYM_DTYPE_FUNCTION = 2

# ----------------------------------------------------------------------------- x64 unwind data
UNW_FLAG_EHANDLER = 0x1
UNW_FLAG_UHANDLER = 0x2
UNW_FLAG_CHAININFO = 0x4

UWOP_PUSH_NONVOL = 0
UWOP_ALLOC_LARGE = 1
UWOP_ALLOC_SMALL = 2
UWOP_SET_FPREG = 3
UWOP_SAVE_NONVOL = 4
UWOP_SAVE_NONVOL_FAR = 5
UWOP_EPILOG = 6  # version 2; in version 1 this number was UWOP_SAVE_XMM (2 slots)
UWOP_SPARE_CODE = 7  # reserved; historically UWOP_SAVE_XMM_FAR (3 slots)
UWOP_SAVE_XMM128 = 8
UWOP_SAVE_XMM128_FAR = 9
UWOP_PUSH_MACHFRAME = 10
UWOP_SET_FPREG_LARGE = 11  # newer Windows unwinders only

UWOP_NAMES: Dict[int, str] = {
    UWOP_PUSH_NONVOL: "PUSH_NONVOL",
    UWOP_ALLOC_LARGE: "ALLOC_LARGE",
    UWOP_ALLOC_SMALL: "ALLOC_SMALL",
    UWOP_SET_FPREG: "SET_FPREG",
    UWOP_SAVE_NONVOL: "SAVE_NONVOL",
    UWOP_SAVE_NONVOL_FAR: "SAVE_NONVOL_FAR",
    UWOP_EPILOG: "EPILOG",
    UWOP_SPARE_CODE: "SPARE_CODE",
    UWOP_SAVE_XMM128: "SAVE_XMM128",
    UWOP_SAVE_XMM128_FAR: "SAVE_XMM128_FAR",
    UWOP_PUSH_MACHFRAME: "PUSH_MACHFRAME",
    UWOP_SET_FPREG_LARGE: "SET_FPREG_LARGE",
}

# ----------------------------------------------------------------------------- structure layouts
# e_magic .. e_lfanew: only these two fields are read from IMAGE_DOS_HEADER (0x40 bytes)
IMAGE_DOS_HEADER_SIZE = 0x40
E_LFANEW_OFFSET = 0x3C

# Signature "PE\0\0" then IMAGE_FILE_HEADER: Machine, NumberOfSections, TimeDateStamp,
# PointerToSymbolTable, NumberOfSymbols, SizeOfOptionalHeader, Characteristics
IMAGE_FILE_HEADER = struct.Struct("<HHIIIHH")
NT_SIGNATURE_AND_FILE_HEADER_SIZE = 4 + IMAGE_FILE_HEADER.size

# IMAGE_DATA_DIRECTORY: VirtualAddress, Size
IMAGE_DATA_DIRECTORY = struct.Struct("<II")

# IMAGE_SECTION_HEADER: Name[8], VirtualSize, VirtualAddress, SizeOfRawData,
# PointerToRawData, PointerToRelocations, PointerToLinenumbers, NumberOfRelocations,
# NumberOfLinenumbers, Characteristics
IMAGE_SECTION_HEADER = struct.Struct("<8sIIIIIIHHI")

# RUNTIME_FUNCTION (x64 .pdata): BeginAddress, EndAddress, UnwindInfoAddress
RUNTIME_FUNCTION = struct.Struct("<III")

# IMAGE_EXPORT_DIRECTORY: Characteristics, TimeDateStamp, MajorVersion, MinorVersion, Name,
# Base, NumberOfFunctions, NumberOfNames, AddressOfFunctions, AddressOfNames,
# AddressOfNameOrdinals
IMAGE_EXPORT_DIRECTORY = struct.Struct("<IIHHIIIIIII")

# IMAGE_IMPORT_DESCRIPTOR: OriginalFirstThunk (the name table), TimeDateStamp (nonzero:
# bound), ForwarderChain, Name, FirstThunk (the address table the loader fills in)
IMAGE_IMPORT_DESCRIPTOR = struct.Struct("<IIIII")

# IMAGE_DELAYLOAD_DESCRIPTOR: Attributes, DllNameRVA, ModuleHandleRVA,
# ImportAddressTableRVA, ImportNameTableRVA, BoundImportAddressTableRVA,
# UnloadInformationTableRVA, TimeDateStamp
IMAGE_DELAYLOAD_DESCRIPTOR = struct.Struct("<IIIIIIII")

# IMAGE_DEBUG_DIRECTORY: Characteristics, TimeDateStamp, MajorVersion, MinorVersion, Type,
# SizeOfData, AddressOfRawData, PointerToRawData
IMAGE_DEBUG_DIRECTORY = struct.Struct("<IIHHIIII")

# IMAGE_SYMBOL (COFF): ShortName[8] (or 0, string-table offset), Value, SectionNumber,
# Type, StorageClass, NumberOfAuxSymbols
IMAGE_SYMBOL = struct.Struct("<8sIhHBB")

# IMAGE_RESOURCE_DIRECTORY: Characteristics, TimeDateStamp, MajorVersion, MinorVersion,
# NumberOfNamedEntries, NumberOfIdEntries; followed by its entries
IMAGE_RESOURCE_DIRECTORY = struct.Struct("<IIHHHH")
# IMAGE_RESOURCE_DIRECTORY_ENTRY: Name (or id), OffsetToData (high bit: a subdirectory)
IMAGE_RESOURCE_DIRECTORY_ENTRY = struct.Struct("<II")
# IMAGE_RESOURCE_DATA_ENTRY: OffsetToData (an RVA), Size (CodePage, Reserved not read)
IMAGE_RESOURCE_DATA_ENTRY = struct.Struct("<II")

# VS_FIXEDFILEINFO: dwSignature, dwStrucVersion, dwFileVersionMS, dwFileVersionLS,
# dwProductVersionMS, dwProductVersionLS, dwFileFlagsMask, dwFileFlags, dwFileOS,
# dwFileType, dwFileSubtype, dwFileDateMS, dwFileDateLS
VS_FIXEDFILEINFO = struct.Struct("<13I")

# The header of every VS_VERSIONINFO block: wLength, wValueLength, wType (then a key)
VS_BLOCK_HEADER = struct.Struct("<HHH")

# CV_INFO_PDB70 (CodeView "RSDS"): signature, GUID (16 bytes), Age, then the PDB path
CV_INFO_PDB70_HEADER_SIZE = 24
