"""A synthetic dump through the whole engine: a built minidump (tests/support/synth_dump.py) whose
thread stack was laid out for a synthetic PE image (tests/support/synth_pe.py) with real prologue
bytes, .pdata/.xdata and exports, served through `Options(image_paths=...)`. The frames,
the function names and the verdict are known in advance, so the engine's answer is checked
against the truth, not against a snapshot."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Dict, Tuple

import pytest

from dumpkit.engine import Options, analyze
from dumpkit.sources.minidump import open_dump

from tests.support.synth_dump import SynthDump, x64_context
from tests.support.synth_pe import TEXT_CHARS, PEBuilder, code, export_table, unwind_info

BASE = 0x7FF6_1230_0000
T, XDATA, PDATA, RDATA = 0x1000, 0x2000, 0x3000, 0x4000
PUSH, ASMALL = 0, 2
RBX = 3

# name: (offset in .text, size, code bytes, UNWIND_INFO); calls are filled in below
# outer:   sub rsp, 0x28; call middle|recurse; add rsp, 0x28; ret
# middle:  push rbx; sub rsp, 0x20; call leaf; add rsp, 0x20; pop rbx; ret
# leaf:    sub rsp, 0x38; xor eax, eax; mov eax, [rax]  (reads address 0)
# recurse: push rbx; sub rsp, 0x20; call recurse; ...
FUNCS: Dict[str, Tuple[int, int, bytes, bytes]] = {
    "outer": (0x000, 0x40, bytes.fromhex("4883ec28") + b"\xe8????" + bytes.fromhex("4883c428c3"), b""),
    "middle": (0x040, 0x40, bytes.fromhex("534883ec20") + b"\xe8????" + bytes.fromhex("4883c4205bc3"), b""),
    "leaf": (0x080, 0x40, bytes.fromhex("4883ec38") + bytes.fromhex("31c0") + bytes.fromhex("8b00"), b""),
    "recurse": (0x0C0, 0x40, bytes.fromhex("534883ec20") + b"\xe8????" + bytes.fromhex("4883c4205bc3"), b""),
}
UNWIND = {
    "outer": unwind_info([code(4, ASMALL, 4)], prolog=4),  # 0x28
    "middle": unwind_info([code(5, ASMALL, 3), code(1, PUSH, RBX)], prolog=5),  # 0x20 + rbx
    "leaf": unwind_info([code(4, ASMALL, 6)], prolog=4),  # 0x38
    "recurse": unwind_info([code(5, ASMALL, 3), code(1, PUSH, RBX)], prolog=5),
}
CALL_AT = {"outer": 4, "middle": 5, "recurse": 5}  # where each E8 sits
FRAME = {"outer": 0x28, "middle": 0x28, "leaf": 0x38, "recurse": 0x28}  # bytes below the return address


def va(name: str, offset: int = 0) -> int:
    return BASE + T + FUNCS[name][0] + offset


def ret_site(name: str) -> int:
    return va(name, CALL_AT[name] + 5)


def build_image(outer_calls: str):
    text = bytearray(b"\xcc" * 0x200)
    calls = {"outer": outer_calls, "middle": "leaf", "recurse": "recurse"}
    for name, (off, _size, body, _u) in FUNCS.items():
        body = bytearray(body)
        if name in calls:
            at = CALL_AT[name]
            rel = (T + FUNCS[calls[name]][0]) - (T + off + at + 5)
            body[at : at + 5] = b"\xe8" + struct.pack("<i", rel)
        text[off : off + len(body)] = body
    xdata = bytearray()
    pdata = []
    for name, (off, size, _b, _u) in FUNCS.items():
        pdata.append(struct.pack("<III", T + off, T + off + size, XDATA + len(xdata)))
        xdata += UNWIND[name]
    b = PEBuilder(image_base=BASE, timestamp=0x61A0B0C0)
    assert b.add_section(".text", bytes(text), characteristics=TEXT_CHARS).rva == T
    assert b.add_section(".xdata", bytes(xdata)).rva == XDATA
    assert b.add_section(".pdata", b"".join(pdata)).rva == PDATA
    b.set_dir(3, PDATA, 12 * len(pdata))
    names = sorted(FUNCS)
    exports = export_table(RDATA, "app.dll", 1, [T + FUNCS[n][0] for n in names], [(n, i) for i, n in enumerate(names)])
    assert b.add_section(".rdata", exports).rva == RDATA
    b.set_dir(0, RDATA, len(exports))
    return b.build()


STACK_HI = 0x0000_00A0_0010_0000
STACK_RESERVE = 0x100000  # 1 MiB


def _dump(tmp_path: Path, image, frames, rip: int, code_: int, params=()) -> str:
    """A dump whose crashing thread stopped at `rip` with `frames` on its stack: a list of
    (bytes below the return address, return address) from the innermost frame out; the
    outermost frame (outer's) returns to 0."""
    words: Dict[int, int] = {}
    sp = STACK_HI - 0x30  # outer's frame and a zero return slot above it
    words[sp + FRAME["outer"]] = 0
    for below, ret in reversed(frames):
        sp -= below + 8
        words[sp + below] = ret
    rsp = sp
    lo = rsp & ~0xFFF
    stack = bytearray(STACK_HI - lo)
    for addr, w in words.items():
        struct.pack_into("<Q", stack, addr - lo, w)
    d = SynthDump()
    st = d.memory(lo, bytes(stack))
    regs = {"rip": rip, "rsp": rsp, "rax": 0, "rbx": 0x1234}
    d.thread(0x99, context=x64_context(**regs), stack=st, name="worker")
    d.module("C:\\build\\app.dll", BASE, image.size_of_image, timestamp=image.timestamp)
    d.exception(0x99, code_, rip, params=params, context=x64_context(**regs))
    reserve_base = STACK_HI - STACK_RESERVE  # one allocation: reserved below, committed above
    d.memory_info(reserve_base, lo - reserve_base, allocation_base=reserve_base, state=0x2000, protect=0)
    d.memory_info(lo, STACK_HI - lo, allocation_base=reserve_base)
    return d.write(tmp_path / "e2e.dmp")


@pytest.fixture()
def image_dir(tmp_path):
    def make(outer_calls: str):
        img = build_image(outer_calls)
        where = tmp_path / "images"
        where.mkdir(exist_ok=True)
        img.write(where / "app.dll")
        return img, str(where)

    return make


def test_access_violation_three_known_frames(tmp_path, image_dir):
    image, where = image_dir("middle")
    fault = va("leaf", 6)  # mov eax, [rax] with rax = 0
    # leaf's frame holds middle's return site, middle's holds outer's
    frames = [(FRAME["leaf"], ret_site("middle")), (FRAME["middle"], ret_site("outer"))]
    path = _dump(tmp_path, image, frames, fault, 0xC0000005, (0, 0))
    with open_dump(path) as target:
        report = analyze(target, Options(image_paths=[where]), problems=target.soft_errors).report
    crash = report.threads[0]
    assert crash.is_crashing and crash.tid == 0x99 and crash.name == "worker"
    got = [(f.module, f.symbol, f.function_start) for f in crash.frames]
    assert got == [
        ("app.dll", "app.dll!leaf+0x6", T + 0x80),
        ("app.dll", "app.dll!middle+0xa", T + 0x40),
        ("app.dll", "app.dll!outer+0x9", T + 0x00),
    ]
    assert [f.ip for f in crash.frames] == [fault, ret_site("middle"), ret_site("outer")]
    assert [f.trust for f in crash.frames] == ["context", "unwind_info", "unwind_info"]
    assert report.crash.access_kind == "read" and report.crash.access_address == 0
    assert report.verdict.kind == "access_violation"
    src = next(m.image_source for m in report.modules if m.name == "app.dll")
    assert src and src.startswith("image-path")
    assert report.soft_errors == ()


def test_recursion_cycle_with_checked_call_sites(tmp_path, image_dir):
    image, where = image_dir("recurse")
    depth = 300
    # The deepest call faulted on its first push: frame 0 is at recurse's entry with its
    # return address at rsp; every other recursion frame holds 0x28 bytes below it.
    size = FRAME["recurse"]
    frames = [(0, ret_site("recurse"))] + [(size, ret_site("recurse"))] * (depth - 2) + [(size, ret_site("outer"))]
    path = _dump(tmp_path, image, frames, va("recurse"), 0xC00000FD, (1, 0))
    with open_dump(path) as target:
        report = analyze(target, Options(image_paths=[where]), problems=target.soft_errors).report
    crash = report.threads[0]
    assert crash.frame_count == depth + 1  # every recursion frame and outer
    (cycle,) = crash.cycles
    assert cycle.functions == ("app.dll!recurse",) and cycle.period == 1
    assert (cycle.repetitions, cycle.first_frame, cycle.last_frame) == (depth, 0, depth - 1)
    assert cycle.bytes_per_repetition == FRAME["recurse"] + 8
    assert cycle.entry_path[0] == "app.dll!outer"
    (edge,) = cycle.call_edges
    assert (edge.call, edge.confirmed, edge.target, edge.return_address) == (
        "direct",
        True,
        va("recurse"),
        ret_site("recurse"),
    )
    assert (report.verdict.kind, report.verdict.confidence) == ("recursion", "high")
    assert f"unbounded recursion app.dll!recurse, {depth} repetitions x 48 bytes" in report.verdict.headline
    assert "of a 1 MiB stack" in report.verdict.headline
    assert report.soft_errors == ()
