"""dumpkit.unwind.decoder calls capstone's library without capstone's Python package: it
must answer exactly what the package answers (text, sizes, operands, register names), on
real code and on noise, in 64- and 32-bit code, and fall back to the package when the
library is not the ABI it knows."""

from __future__ import annotations

import random
from pathlib import Path
from typing import List

import capstone
import pytest
from capstone import x86 as cx

from dumpkit.unwind import decoder
from tests.support.samples import SAMPLES

ADDRESS = 0x7FF6_1234_5000


def _pieces() -> List[bytes]:
    """16-byte windows of the sample images' code (every 7th offset) and random bytes."""
    pieces = []
    for image in sorted(Path(SAMPLES, "bin").rglob("*")):
        if image.suffix.lower() in (".exe", ".dll"):
            code = image.read_bytes()[0x400 : 0x400 + 6000]
            pieces += [code[at : at + 16] for at in range(0, len(code) - 16, 7)]
            if len(pieces) > 2000:
                break
    noise = random.Random(34)
    pieces += [bytes(noise.getrandbits(8) for _ in range(16)) for _ in range(1500)]
    return pieces


PIECES = _pieces()


def _cs(bits: int, detail: bool) -> capstone.Cs:
    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64 if bits == 64 else capstone.CS_MODE_32)
    md.detail = detail
    return md


def _operand(insn, op) -> tuple:
    """An operand's fields and its registers' names ("" for none: capstone's None)."""
    value: tuple = ()
    if op.type == cx.X86_OP_MEM:
        m = op.mem
        names = (insn.reg_name(m.base) or "", insn.reg_name(m.index) or "", insn.reg_name(m.segment) or "")
        value = (m.segment, m.base, m.index, m.scale, m.disp) + names
    elif op.type == cx.X86_OP_IMM:
        value = (op.imm,)
    elif op.type == cx.X86_OP_REG:
        value = (op.reg, insn.reg_name(op.reg))
    return (op.type, op.size, op.access, op.avx_bcast, op.avx_zero_opmask) + value


def _detailed(insns) -> list:
    return [(i.id, i.address, i.size, i.mnemonic, i.op_str, [_operand(i, op) for op in i.operands]) for i in insns]


@pytest.fixture(params=["library", "package"])
def path(request, monkeypatch):
    """Each test runs on the library through ctypes and on the fallback to the package."""
    if request.param == "library":
        assert decoder._LIB is not None, "capstone 5.0's library beside the package"
    else:
        monkeypatch.setattr(decoder, "_LIB", None)
    monkeypatch.setattr(decoder, "_ENGINES", {})
    return request.param


@pytest.mark.parametrize("bits", [64, 32])
def test_text_and_sizes_are_capstones(path, bits):
    md = _cs(bits, False)
    for code in PIECES:
        assert decoder.lite(code, ADDRESS, bits) == list(md.disasm_lite(code, ADDRESS)), code.hex()
        assert decoder.lite(code, ADDRESS, bits, 1) == list(md.disasm_lite(code, ADDRESS, 1)), code.hex()


@pytest.mark.parametrize("bits", [64, 32])
def test_operands_are_capstones(path, bits):
    md = _cs(bits, True)
    for code in PIECES:
        assert _detailed(decoder.detailed(code, ADDRESS, bits)) == _detailed(md.disasm(code, ADDRESS)), code.hex()


def test_a_caller_may_stop_early(path):
    code = bytes.fromhex("4883ec28e800000000488b0424c3")  # sub, call, mov, ret
    first = next(iter(decoder.detailed(code, ADDRESS)))
    assert (first.mnemonic, first.op_str, first.size) == ("sub", "rsp, 0x28", 4)
    assert [i.mnemonic for i in decoder.detailed(code, ADDRESS)] == ["sub", "call", "mov", "ret"]


def test_undecodable_bytes_give_nothing(path):
    assert decoder.lite(b"\x0f\x0b"[:1], ADDRESS) == []
    assert list(decoder.detailed(b"", ADDRESS)) == []


def test_the_numbers_written_down_are_capstones():
    assert decoder._API == (capstone.CS_API_MAJOR, capstone.CS_API_MINOR)
    assert (decoder._ARCH_X86, decoder._MODE[64], decoder._MODE[32]) == (
        capstone.CS_ARCH_X86,
        capstone.CS_MODE_64,
        capstone.CS_MODE_32,
    )
    assert (decoder._OPT_DETAIL, decoder._OPT_ON, decoder._SUPPORT_DIET) == (
        capstone.CS_OPT_DETAIL,
        capstone.CS_OPT_ON,
        capstone.CS_SUPPORT_DIET,
    )
    assert (decoder.OP_IMM, decoder.OP_MEM, decoder.REG_RIP) == (cx.X86_OP_IMM, cx.X86_OP_MEM, cx.X86_REG_RIP)
    assert (decoder.INS_CALL, decoder.INS_INT3, decoder.INS_LEA) == (cx.X86_INS_CALL, cx.X86_INS_INT3, cx.X86_INS_LEA)
