"""Frame sizes and oversized frames (dumpkit.analysis.framesizes): the real big_frame dump,
whose conv_big_kernel died inside ___chkstk_ms before its 4 MiB frame existed, and
synthetic prologues."""

from __future__ import annotations

import re
import struct
from typing import Dict, List

import pytest

from tests.support.samples import sample_facts
from dumpkit.analysis.framesizes import frame_sizes, is_oversized, is_probe_name
from dumpkit.unwind.frames import Frame


def _short(name: str) -> str:
    return name.split("!", 1)[-1]


def _sizes(cw, **kw):
    return frame_sizes(cw.frames, cw.walker.code.read_code, module_base=cw.module_base, **kw)


def _prologue_sub(facts: dict, fn: str) -> int:
    for insn in facts["prologues"][fn]:
        m = re.match(r"sub\s+\$(0x[0-9a-f]+),%rsp", insn)
        if m:
            return int(m.group(1), 16)
    raise AssertionError(f"no sub rsp in {fn}'s prologue")


# ------------------------------------------------------------------ real sample dumps
def test_big_frame_died_in_the_probe(crash_walk):
    facts = sample_facts("big_frame.dmp")
    cw = crash_walk("big_frame.dmp")
    out = _sizes(cw)
    assert out, "no frames ranked"
    big = out[0]
    assert _short(big.function) == facts["oversized_function"] == "conv_big_kernel"
    assert big.requested == facts["oversized_bytes"]
    assert big.via_probe and big.not_yet_allocated
    assert big.oversized and is_oversized(big)
    assert big.frame_index == 1
    # measured size is tiny: the frame was never allocated
    assert big.size == facts["frame_bytes_by_function"]["opkernels.dll!conv_big_kernel"]
    assert big.size < 4096
    assert "call" in (big.prologue_text or "")
    # only that one is oversized; the probe's own frame is not listed as a function
    assert [f for f in out if f.oversized] == [big]
    assert all(f.frame_index != 0 for f in out)


def test_cycle3_frames_have_their_prologue_allocations(crash_walk):
    facts = sample_facts("recursion_cycle3.dmp")
    cw = crash_walk("recursion_cycle3.dmp")
    out = _sizes(cw)
    by_fn = {_short(f.function): f for f in out}
    for fn in ("expand", "visit", "reduce"):
        key = "opkernels.dll!" + fn
        fs = by_fn[fn]
        assert fs.size == facts["frame_bytes_by_function"][key]
        assert fs.requested == _prologue_sub(facts, key)
        assert not fs.via_probe and not fs.not_yet_allocated and not fs.oversized
    # one entry per function even though there are thousands of frames
    assert len(out) == len({f.function for f in out}) <= 10
    # largest first
    scores = [max(f.size, f.requested or 0) for f in out]
    assert scores == sorted(scores, reverse=True)


def test_threshold_and_top_are_configurable(crash_walk):
    cw = crash_walk("recursion_cycle3.dmp")
    out = _sizes(cw, threshold=200, top=1)
    flagged = sorted(_short(f.function) for f in out if f.oversized)
    assert "expand" in flagged and "reduce" in flagged and "visit" not in flagged
    # top=1 plus every oversized one
    assert len(out) == max(1, len(flagged))


@pytest.mark.parametrize("name", ["null_deref.dmp", "fastfail_abort.dmp"])
def test_small_stacks_have_nothing_oversized(crash_walk, name):
    sample_facts(name)
    cw = crash_walk(name)
    out = _sizes(cw)
    assert out and not any(f.oversized or f.not_yet_allocated for f in out)


# ------------------------------------------------------------------ synthetic code
BASE = 0x180000000
FN = 0x1000  # conv: push rbx; mov eax, N; call probe; sub rsp, rax; ...
PROBE = 0x2000
SMALL = 0x3000  # helper: sub rsp, 0x28; ...


def _code() -> Dict[int, bytes]:
    n = 0x400020
    fn = bytearray(b"\x53")  # push rbx
    fn += b"\xb8" + struct.pack("<I", n)  # mov eax, n
    call_at = BASE + FN + len(fn)
    fn += b"\xe8" + struct.pack("<i", (BASE + PROBE) - (call_at + 5))  # call probe
    fn += b"\x48\x29\xc4"  # sub rsp, rax
    fn += b"\x90" * 16 + b"\xc3"
    probe = b"\x51\x50\x48\x3d\x00\x10\x00\x00" + b"\x90" * 24 + b"\xc3"
    small = b"\x48\x83\xec\x28" + b"\x90" * 8 + b"\xc3"
    return {BASE + FN: bytes(fn), BASE + PROBE: probe, BASE + SMALL: small}


class _Code:
    def __init__(self):
        self.blocks = _code()
        self.calls = 0

    def __call__(self, va: int, n: int) -> bytes:
        self.calls += 1
        for start, data in self.blocks.items():
            if start <= va < start + len(data):
                off = va - start
                return data[off : off + n]
        return b""


AFTER_CALL = BASE + FN + 1 + 5 + 5


def _f(i, ip, fstart, symbol, size) -> Frame:
    rva = ip - BASE
    return Frame(i, ip, 0x10000 + 0x100 * i, "ops.dll", rva, fstart, symbol, size, "unwind_info")


def _stack(frame0_start=None, frame0_symbol="ops.dll!something_else+0xd96", frame1_ip=AFTER_CALL) -> List[Frame]:
    return [
        _f(0, BASE + PROBE + 0x10, frame0_start, frame0_symbol, 24),
        _f(1, frame1_ip, FN, "ops.dll!conv+0xb", 16),
        _f(2, BASE + SMALL + 0x9, SMALL, "ops.dll!helper+0x9", 48),
        _f(3, BASE + SMALL + 0x9, SMALL, "ops.dll!helper+0x9", 48),
    ]


def _base(name):
    return BASE if name == "ops.dll" else None


def test_synthetic_probe_fault_is_reported_before_allocation():
    out = frame_sizes(_stack(), _Code(), module_base=_base)
    top = out[0]
    assert top.function == "ops.dll!conv" and top.frame_index == 1
    assert top.requested == 0x400020 and top.via_probe and top.not_yet_allocated
    assert top.oversized and top.size == 16
    assert [f.function for f in out] == ["ops.dll!conv", "ops.dll!helper"]
    assert out[1].requested == 0x28 and not out[1].via_probe


def test_synthetic_named_probe_with_unwind_entry():
    out = frame_sizes(_stack(frame0_start=PROBE, frame0_symbol="ops.dll!___chkstk_ms+0x10"), _Code(), module_base=_base)
    assert out[0].not_yet_allocated and out[0].requested == 0x400020


def test_synthetic_no_probe_fault_when_frame0_is_an_ordinary_function():
    out = frame_sizes(_stack(frame0_start=PROBE, frame0_symbol="ops.dll!memset+0x10"), _Code(), module_base=_base)
    conv = next(f for f in out if f.function == "ops.dll!conv")
    # the prologue still says what it asks for, and it is oversized by request
    assert conv.requested == 0x400020 and conv.via_probe and conv.oversized
    assert not conv.not_yet_allocated


def test_synthetic_no_probe_fault_when_return_address_is_elsewhere():
    out = frame_sizes(_stack(frame1_ip=AFTER_CALL + 3), _Code(), module_base=_base)
    conv = next(f for f in out if f.function == "ops.dll!conv")
    assert conv.via_probe and not conv.not_yet_allocated


def test_synthetic_unknown_module_base_leaves_request_unknown():
    out = frame_sizes(_stack(), _Code(), module_base=lambda name: None)
    assert all(f.requested is None and not f.not_yet_allocated for f in out)


def test_decoding_is_memoized_per_function():
    code = _Code()
    frames = [_f(i, BASE + SMALL + 0x9, SMALL, "ops.dll!helper+0x9", 48) for i in range(5000)]
    out = frame_sizes(frames, code, module_base=_base)
    assert len(out) == 1 and out[0].frame_index == 0 and out[0].requested == 0x28
    assert code.calls <= 2


def test_top_bounds_the_list_but_keeps_oversized():
    frames = [
        Frame(
            i, 0x1000 * (i + 1), 0x10000 + i, None, None, None, f"x!f{i}", (70_000 if i in (7, 9) else 100 + i), "scan"
        )
        for i in range(20)
    ]
    out = frame_sizes(frames, lambda va, n: b"", module_base=lambda n: None, top=1)
    assert [f.frame_index for f in out] == [7, 9]  # ties: nearer the top first
    out = frame_sizes(frames, lambda va, n: b"", module_base=lambda n: None, top=3)
    assert [f.frame_index for f in out] == [7, 9, 19]
    out = frame_sizes(frames, lambda va, n: b"", module_base=lambda n: None, top=0, threshold=1 << 20)
    assert out == []


def test_probe_names():
    assert is_probe_name("opkernels.dll!___chkstk_ms+0x10")
    assert is_probe_name("ntdll.dll!__chkstk")
    assert is_probe_name("_chkstk") and is_probe_name("msvcrt!__alloca_probe+0x3")
    assert not is_probe_name("opkernels.dll!illegal_instruction+0xd96")
    assert not is_probe_name(None)


def test_probe_call_is_named_from_the_walker_or_frame_0_else_said_to_be_the_probe():
    probe = BASE + PROBE
    named = frame_sizes(
        _stack(), _Code(), module_base=_base, name_at=lambda va: "ops.dll!__chkstk" if va == probe else None
    )
    assert named[0].prologue_text == "mov eax, 0x400020; call ops.dll!__chkstk"
    # no walker name: frame 0's own name, when it starts exactly at the call target
    from_frame0 = frame_sizes(_stack(frame0_symbol="ops.dll!___chkstk_ms+0x10"), _Code(), module_base=_base)
    assert from_frame0[0].prologue_text == "mov eax, 0x400020; call ops.dll!___chkstk_ms"
    # a name that belongs to another function (an offset from elsewhere) is not used
    unnamed = frame_sizes(_stack(), _Code(), module_base=_base, name_at=lambda va: "ops.dll!other+0x40")
    assert unnamed[0].prologue_text == f"mov eax, 0x400020; call to the stack probe at {probe:#x}"
