"""capstone's x86 engine, called without capstone's Python package.

Nearly every analysis decodes some code (the faulting instruction and the code around
it, the call before a scanned return address), and `import capstone` costs 12-30 ms on
the machine bench/README.md measures on, more than the analysis of a small dump: its
`__init__` imports the modules of all 18 architectures, ctypes.util (with subprocess and
tempfile), importlib.resources and sysconfig, and each `Cs` tries to import its Cython
module. dumpkit asks little of it (an instruction's size, mnemonic and operand text; for
x86, its operands), so this module calls the library that capstone's wheel ships, in the
package's folder, through ctypes: about 3 ms. Same library, same text.

That is done only for the ABI written down here, capstone 5.0's with mnemonics (not a
diet build); otherwise (another version, no library beside the package, LIBCAPSTONE_PATH
set) capstone's own package does the decoding, with the same results. Importing this
module loads the library, so import it only where code is decoded (the triage
forkserver preloads it)."""

from __future__ import annotations

import ctypes
import os
import sys
from importlib.util import find_spec
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

__all__ = ["Instruction", "lite", "detailed", "OP_IMM", "OP_MEM", "INS_CALL", "INS_INT3", "INS_LEA", "REG_RIP"]

# capstone 5.0's numbers (capstone/__init__.py, capstone/x86_const.py; a test compares)
_API = (5, 0)
_ARCH_X86 = 3
_MODE = {64: 1 << 3, 32: 1 << 2}
_OPT_DETAIL, _OPT_ON = 2, 3
_SUPPORT_DIET = 0xFFFF + 1
OP_IMM, OP_MEM = 2, 3
INS_CALL, INS_INT3, INS_LEA = 62, 240, 332
REG_RIP = 41

Lite = Tuple[int, int, str, str]  # address, size, mnemonic, operands: Cs.disasm_lite's


class _OpMem(ctypes.Structure):
    _fields_ = (
        ("segment", ctypes.c_uint),
        ("base", ctypes.c_uint),
        ("index", ctypes.c_uint),
        ("scale", ctypes.c_int),
        ("disp", ctypes.c_int64),
    )


class _OpValue(ctypes.Union):
    _fields_ = (("reg", ctypes.c_uint), ("imm", ctypes.c_int64), ("mem", _OpMem))


class Operand(ctypes.Structure):
    """An x86 operand as capstone's `X86Op` gives it (type, size, access, imm, reg, mem)."""

    _fields_ = (
        ("type", ctypes.c_uint),
        ("value", _OpValue),
        ("size", ctypes.c_uint8),
        ("access", ctypes.c_uint8),
        ("avx_bcast", ctypes.c_uint),
        ("avx_zero_opmask", ctypes.c_bool),
    )

    @property
    def imm(self) -> int:
        return self.value.imm

    @property
    def reg(self) -> int:
        return self.value.reg

    @property
    def mem(self) -> _OpMem:
        return self.value.mem


class _X86(ctypes.Structure):
    _fields_ = (
        ("prefix", ctypes.c_uint8 * 4),
        ("opcode", ctypes.c_uint8 * 4),
        ("rex", ctypes.c_uint8),
        ("addr_size", ctypes.c_uint8),
        ("modrm", ctypes.c_uint8),
        ("sib", ctypes.c_uint8),
        ("disp", ctypes.c_int64),
        ("sib_index", ctypes.c_uint),
        ("sib_scale", ctypes.c_int8),
        ("sib_base", ctypes.c_uint),
        ("xop_cc", ctypes.c_uint),
        ("sse_cc", ctypes.c_uint),
        ("avx_cc", ctypes.c_uint),
        ("avx_sae", ctypes.c_bool),
        ("avx_rm", ctypes.c_uint),
        ("flags", ctypes.c_uint64),
        ("op_count", ctypes.c_uint8),
        ("operands", Operand * 8),
        ("encoding", ctypes.c_uint8 * 5),
    )


class _Detail(ctypes.Structure):
    # cs_detail with its architecture union reduced to the x86 member: the union's
    # alignment (8) is x86's, so `x86` sits where the union does.
    _fields_ = (
        ("regs_read", ctypes.c_uint16 * 20),
        ("regs_read_count", ctypes.c_ubyte),
        ("regs_write", ctypes.c_uint16 * 20),
        ("regs_write_count", ctypes.c_ubyte),
        ("groups", ctypes.c_ubyte * 8),
        ("groups_count", ctypes.c_ubyte),
        ("writeback", ctypes.c_bool),
        ("x86", _X86),
    )


class _Insn(ctypes.Structure):
    _fields_ = (
        ("id", ctypes.c_uint),
        ("address", ctypes.c_uint64),
        ("size", ctypes.c_uint16),
        ("bytes", ctypes.c_ubyte * 24),
        ("mnemonic", ctypes.c_char * 32),
        ("op_str", ctypes.c_char * 160),
        ("detail", ctypes.POINTER(_Detail)),
    )


class Instruction:
    """One decoded instruction with its operands: the part of capstone's `CsInsn` that
    dumpkit reads (`operands` as capstone's X86Op, `reg_name` as CsInsn's)."""

    __slots__ = ("id", "address", "size", "mnemonic", "op_str", "operands", "_names")

    def __init__(
        self,
        id: int,
        address: int,
        size: int,
        mnemonic: str,
        op_str: str,
        operands: Sequence[Operand],
        names: Callable[[int], str],
    ) -> None:
        self.id = id
        self.address = address
        self.size = size
        self.mnemonic = mnemonic
        self.op_str = op_str
        self.operands = operands
        self._names = names

    def reg_name(self, reg: int) -> str:
        """The register's name; "" for none (where capstone's package says None)."""
        return self._names(reg)


def _library() -> Optional[ctypes.CDLL]:
    """capstone 5.0's library from capstone's package folder, or None (use the package)."""
    if os.getenv("LIBCAPSTONE_PATH"):
        return None  # capstone's package looks there first: let it
    spec = find_spec("capstone")
    folders = spec.submodule_search_locations if spec is not None else None
    if not folders:
        return None
    name = {"darwin": "libcapstone.dylib", "win32": "capstone.dll", "cygwin": "capstone.dll"}.get(
        sys.platform, "libcapstone.so"
    )
    path = os.path.join(list(folders)[0], "lib", name)
    if not os.path.exists(path):
        return None
    try:
        lib = ctypes.CDLL(path, mode=getattr(os, "RTLD_DEEPBIND", 0) if name.endswith(".so") else 0)
        lib.cs_version.restype = ctypes.c_int
        lib.cs_version.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)]
        lib.cs_support.restype = ctypes.c_bool
        lib.cs_support.argtypes = [ctypes.c_int]
    except (OSError, AttributeError):
        return None
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.cs_version(ctypes.byref(major), ctypes.byref(minor))
    if (major.value, minor.value) != _API or lib.cs_support(_SUPPORT_DIET):
        return None
    lib.cs_open.restype = ctypes.c_int
    lib.cs_open.argtypes = [ctypes.c_uint, ctypes.c_uint, ctypes.POINTER(ctypes.c_size_t)]
    lib.cs_option.restype = ctypes.c_int
    lib.cs_option.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_size_t]
    lib.cs_disasm.restype = ctypes.c_size_t
    lib.cs_disasm.argtypes = [
        ctypes.c_size_t,
        ctypes.c_char_p,
        ctypes.c_size_t,
        ctypes.c_uint64,
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.POINTER(_Insn)),
    ]
    lib.cs_free.restype = None
    lib.cs_free.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    lib.cs_reg_name.restype = ctypes.c_char_p
    lib.cs_reg_name.argtypes = [ctypes.c_size_t, ctypes.c_uint]
    return lib


_LIB = _library()


class _Engine:
    """One capstone handle (x86, 32 or 64 bits, with or without details)."""

    def __init__(self, lib: ctypes.CDLL, bits: int, detail: bool) -> None:
        self.lib = lib
        self.handle = ctypes.c_size_t()
        if lib.cs_open(_ARCH_X86, _MODE[bits], ctypes.byref(self.handle)) != 0:
            raise OSError("capstone: cs_open failed")
        if detail and lib.cs_option(self.handle, _OPT_DETAIL, _OPT_ON) != 0:
            raise OSError("capstone: cs_option(detail) failed")

    def lite(self, code: bytes, address: int, count: int) -> List[Lite]:
        found = ctypes.POINTER(_Insn)()
        n = self.lib.cs_disasm(self.handle, bytes(code), len(code), address, count, ctypes.byref(found))
        try:
            return [_lite(found[i]) for i in range(n)]
        finally:
            if n:
                self.lib.cs_free(found, n)

    def run(self, code: bytes, address: int, count: int) -> Iterator[_Insn]:
        """The decoded instructions, each valid until the next is asked for (the
        library's array is freed when the generator ends or is dropped)."""
        found = ctypes.POINTER(_Insn)()
        n = self.lib.cs_disasm(self.handle, bytes(code), len(code), address, count, ctypes.byref(found))
        try:
            for i in range(n):
                yield found[i]
        finally:
            if n:
                self.lib.cs_free(found, n)

    def reg_name(self, reg: int) -> str:
        name = self.lib.cs_reg_name(self.handle, reg)
        return name.decode("ascii") if name is not None else ""


_ENGINES: Dict[Tuple[int, bool], Any] = {}


def _engine(bits: int, detail: bool) -> Any:
    """This module's engine, or capstone's `Cs` when the library is not the one above."""
    key = (bits, detail)
    got = _ENGINES.get(key)
    if got is None:
        if _LIB is not None:
            got = _Engine(_LIB, bits, detail)
        else:
            import capstone

            got = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64 if bits == 64 else capstone.CS_MODE_32)
            got.detail = detail
        got = _ENGINES.setdefault(key, got)
    return got


def _lite(insn: _Insn) -> Lite:
    return insn.address, insn.size, insn.mnemonic.decode("ascii"), insn.op_str.decode("ascii")


def lite(code: bytes, address: int, bits: int = 64, count: int = 0) -> List[Lite]:
    """The instructions of `code` (at most `count`; 0: all), decoded at `address` until
    the first undecodable byte: (address, size, mnemonic, operands) as `Cs.disasm_lite`."""
    engine = _engine(bits, False)
    if isinstance(engine, _Engine):
        return engine.lite(code, address, count)
    return list(engine.disasm_lite(bytes(code), address, count))


def detailed(code: bytes, address: int, bits: int = 64, count: int = 0) -> Iterator[Instruction]:
    """As `lite`, with each instruction's operands; made as they are asked for (as
    `Cs.disasm` makes them: a caller may stop early)."""
    engine = _engine(bits, True)
    if not isinstance(engine, _Engine):

        def names(reg: int) -> str:
            return engine.reg_name(reg) or ""

        for i in engine.disasm(bytes(code), address, count):
            yield Instruction(i.id, i.address, i.size, i.mnemonic, i.op_str, i.operands, names)
        return
    for insn in engine.run(code, address, count):
        x86 = _X86.from_buffer_copy(insn.detail.contents.x86)
        _, size, mnemonic, op_str = _lite(insn)
        yield Instruction(insn.id, insn.address, size, mnemonic, op_str, x86.operands[: x86.op_count], engine.reg_name)
