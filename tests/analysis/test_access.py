"""The faulting instruction's memory operand, computed from the context registers."""

from __future__ import annotations

import pytest

from dumpkit.analysis.access import faulting_access, fill_pattern, is_canonical

IP = 0x7FF600001000


def _reader(code: bytes):
    return lambda addr, n: code[addr - IP : addr - IP + n] if addr >= IP else b""


def _at(code_hex: str, regs, bits=64):
    return faulting_access(_reader(bytes.fromhex(code_hex)), IP, regs, bits)


def test_base_index_scale_displacement():
    # mov eax, dword ptr [rcx + rdx*4 + 0x10]
    acc = _at("8b449110", {"rcx": 0x1000, "rdx": 3})
    assert acc.address == 0x1000 + 12 + 0x10 and acc.kind == "read" and acc.size == 4
    assert acc.formula == "rcx + rdx*4 + 0x10 = 0x1000 + 0x3*4 + 0x10"
    assert acc.registers == (("rcx", 0x1000), ("rdx", 3))


def test_negative_displacement_and_store():
    # mov qword ptr [rbx - 0x8], rax
    acc = _at("488943f8", {"rbx": 0x2000, "rax": 5})
    assert acc.address == 0x1FF8 and acc.kind == "write"
    assert acc.formula == "rbx - 0x8 = 0x2000 - 0x8"


def test_32_bit_registers_in_64_bit_code_are_truncated():
    # mov eax, dword ptr [ecx]  (address-size prefix 0x67)
    acc = _at("678b01", {"rcx": 0xFFFFFFFF00001234})
    assert acc.address == 0x1234


def test_rip_relative_uses_the_next_instruction():
    # mov rax, qword ptr [rip + 0x100]  (7 bytes)
    acc = _at("488b0500010000", {})
    assert acc.address == IP + 7 + 0x100 and acc.registers == ()


def test_segment_relative_and_string_moves_are_not_guessed():
    assert _at("65488b042530000000", {"rax": 0}) is None  # gs:[0x30]: TEB-relative
    assert _at("f3a4", {"rsi": 0x1000, "rdi": 0x2000, "rcx": 4}) is None  # two memory operands


def test_register_missing_from_the_context_gives_no_answer():
    assert _at("8b01", {}) is None


def test_vex_store_is_a_write_whatever_capstone_flags_say():
    # vmovdqu ymmword ptr [rcx + r9 - 0x60], ymm0: a store (capstone 5 flags the operand as read)
    acc = _at("c4a17e7f4409a0", {"rcx": 0x20, "r9": 0x60})
    assert acc.kind == "write" and acc.address == 0x20 and acc.size == 32


def test_compare_with_memory_first_is_a_read():
    # cmp dword ptr [rax], 0
    assert _at("833800", {"rax": 0x10}).kind == "read"


@pytest.mark.parametrize("offset,misaligned", [(0, False), (8, True)])
def test_movaps_alignment(offset, misaligned):
    # movaps xmm0, xmmword ptr [rax]
    acc = _at("0f2800", {"rax": 0x10000 + offset})
    assert acc.requires_alignment and acc.size == 16 and acc.misaligned is misaligned


def test_32_bit_code():
    # mov dword ptr [eax + 0x14], ebx (32-bit mode)
    acc = _at("895814", {"eax": 0xF0FF0, "ebx": 1}, bits=32)
    assert acc.address == 0xF1004 and acc.kind == "write"


def test_canonical_and_fill_patterns():
    assert is_canonical(0x00007FFFFFFFFFFF) and is_canonical(0xFFFF800000000000)
    assert not is_canonical(0x0000800000000000) and not is_canonical(0xFEFEFEFEFEFEFEFE)
    assert "freed through the debug CRT" in fill_pattern(0xDDDDDDDDDDDDDDDD)
    assert "repeated" in fill_pattern(0xFEFEFEFEFEFEFEFE)
    assert fill_pattern(0x00007FF612345678) is None


# ------------------------------------------------- real #GP dumps (sample_dumps/gp_*)
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

from tests.support.samples import SAMPLE_BIN, sample_manifest, sample_path  # noqa: E402

GP_SAMPLES = [e for e in sample_manifest() if e.get("fault_instruction")]


def _analyze(name):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "dumpkit",
            "analyze",
            str(sample_path(name)),
            "--image-path",
            str(SAMPLE_BIN),
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("entry", GP_SAMPLES, ids=[e["file"] for e in GP_SAMPLES])
def test_gp_fault_operand_matches_the_recorded_facts(entry):
    """Wine, like Windows, records [0, 0xffffffffffffffff] for a #GP; the operand dumpkit
    computes equals the one objdump + the exception context give in manifest.json."""
    facts = entry["fault_instruction"]
    assert entry["exception_parameters"] == [0, 0xFFFFFFFFFFFFFFFF]
    doc = _analyze(entry["file"])
    acc = doc["crash"]["instruction_access"]
    assert int(acc["address"], 16) == facts["effective_address"]
    assert acc["registers"][0] == [facts["base_register"], f"{facts['base_value']:#x}"]
    assert acc["misaligned"] is (acc["requires_alignment"] and not facts["aligned_16"])
    v = doc["verdict"]
    where = f"in {entry['call_chain'][0]['module']}!{entry['call_chain'][0]['nearest_export']}"
    assert v["kind"] == "access_violation" and v["confidence"] == "high" and v["headline"].endswith(where)
    if facts["att"].startswith("mov") and facts["att"].endswith(facts["memory_operand"]):
        assert acc["kind"] == "write"  # AT&T: the memory operand is the destination (Wine says "read")
    if not facts["canonical"]:
        assert f"{acc['kind']} of 8 bytes at {facts['effective_address']:#x}, a non-canonical address" in v["headline"]
        assert any("freed through the debug CRT" in e for e in v["evidence"])
        assert f"find where {facts['base_register']} got its value" in v["next_steps"][0]
    else:
        assert v["headline"].startswith(
            f"Access violation: misaligned 16-byte read at {facts['effective_address']:#x} by `movaps`"
        )
        assert "_aligned_malloc" in v["next_steps"][0]
