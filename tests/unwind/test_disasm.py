"""Capstone-backed code questions the walker asks, on hand-assembled x64 bytes (edge
cases the sample dumps do not show: an IP inside an epilogue, tail calls, call forms)."""

from __future__ import annotations

import struct

from dumpkit.unwind.disasm import (
    CALL_LOOKBACK,
    call_ends_at,
    call_target,
    epilogue_path,
    simulate_to_return,
    stack_allocation,
)

BASE = 0x140001000


def reader(code: bytes, base: int = BASE):
    def read(addr, n):
        off = addr - base
        return code[off : off + n] if 0 <= off < len(code) else b""

    return read


def stack(words, base=0x1000):
    mem = {base + 8 * i: w for i, w in enumerate(words)}
    return (lambda a: mem.get(a)), base


def leaves(lo, hi):
    """The function's extent, as the walker passes it: a jump outside is a tail call."""
    return lambda target: not (lo <= target < hi)


def test_ip_inside_an_epilogue_is_emulated_to_the_ret():
    # add rsp, 0x28 ; pop rbx ; pop rbp ; ret
    code = bytes.fromhex("4883c428") + b"\x5b" + b"\x5d" + b"\xc3"
    words = [0] * 5 + [0xB0B, 0xBEEF, 0x140009999]
    read_u64, sp = stack(words)
    path = epilogue_path(reader(code), read_u64, BASE, sp, {}, None, leaves(BASE - 0x100, BASE + len(code)))
    assert path is not None and not path.tail_jump
    assert path.rsp == sp + 0x28 + 16
    assert read_u64(path.rsp) == 0x140009999
    assert path.restored == {"rbx": 0xB0B, "rbp": 0xBEEF}


def test_body_code_is_not_an_epilogue():
    # mov rax, [rcx] ; add rsp, 0x28 ; ret   -> the first instruction is no epilogue's
    code = bytes.fromhex("488b01") + bytes.fromhex("4883c428") + b"\xc3"
    read_u64, sp = stack([0] * 8)
    assert epilogue_path(reader(code), read_u64, BASE, sp, {}) is None
    # but followed non-strictly (code with no unwind data) it reaches the RET
    path = simulate_to_return(reader(code), read_u64, BASE, sp, {})
    assert path is not None and path.rsp == sp + 0x28


def test_jump_inside_the_function_is_a_loop_not_a_tail_call():
    # jmp -5 (to itself: a loop back within the function)
    code = b"\xeb\xfe"
    read_u64, sp = stack([0] * 4)
    rng = leaves(BASE, BASE + 0x40)
    assert epilogue_path(reader(code), read_u64, BASE, sp, {}, None, rng) is None
    # jmp rel32 far outside: a tail call ends the epilogue with the stack as at RET
    far = b"\xe9" + struct.pack("<i", 0x10000)
    path = epilogue_path(reader(far), read_u64, BASE, sp, {}, None, rng)
    assert path is not None and path.tail_jump and path.rsp == sp


def _epilogue(code, words=(0xB0B, 0xBEEF, 0x140009999), regs=None, frame_register=None):
    """epilogue_path over `code` at BASE with the stack holding `words`."""
    read_u64, sp = stack(list(words))
    return epilogue_path(
        reader(code + b"\xcc" * 16),
        read_u64,
        BASE,
        sp,
        regs or {},
        frame_register,
        lambda target: not (BASE - 0x100 <= target < BASE + 0x100),
    ), sp


def test_epilogue_grammar_accepts_only_what_windows_unwinder_does():
    pop_rbx = b"\x5b"
    # tail calls: REX.W jmp through a register or memory, jmp [rip+disp32]
    for tail in (b"\x48\xff\xe0", b"\x49\xff\xe3", b"\x48\xff\x24\xc8", b"\xff\x25\x00\x10\x00\x00"):
        path, sp = _epilogue(pop_rbx + tail)
        assert path is not None and path.tail_jump and path.rsp == sp + 8, tail.hex()
        assert path.restored == {"rbx": 0xB0B}
    # body jumps: plain jmp reg (a computed goto), switch tables, displaced memory jumps
    for body in (b"\xff\xe0", b"\x41\xff\xe3", b"\xff\x24\xc8", b"\xff\x60\x08"):
        assert _epilogue(pop_rbx + body)[0] is None, body.hex()
    # a stack release is only the first instruction, never after a pop
    assert _epilogue(pop_rbx + bytes.fromhex("4883c428") + b"\xc3")[0] is None
    # without a frame pointer, lea rsp is no epilogue (add rsp is the only form)
    assert _epilogue(bytes.fromhex("488d642420") + b"\xc3")[0] is None
    # `leave` is not in the grammar (the frame is still intact before it runs)
    assert _epilogue(b"\xc9\xc3", regs={"rbp": 0x1008})[0] is None


def test_epilogue_with_frame_pointer_lea_and_prefixed_returns():
    # lea rsp, [rbp+0x10] ; pop rbp ; ret   with the unwind info's frame register rbp
    code = bytes.fromhex("488d6510") + b"\x5d\xc3"
    words = (0, 0, 0xBEEF, 0x140009999)
    assert _epilogue(code, words, regs={"rbp": 0x1000})[0] is None  # no frame register
    assert _epilogue(code, words, regs={"rbp": 0x1000}, frame_register="rsi")[0] is None
    path, sp = _epilogue(code, words, regs={"rbp": 0x1000}, frame_register="rbp")
    assert path.rsp == 0x1018 and path.restored == {"rbp": 0xBEEF}
    # lea rsp, [r12+0x8] needs its SIB byte; the frame register is r12
    path, sp = _epilogue(bytes.fromhex("498d642408") + b"\xc3", regs={"r12": 0x1000}, frame_register="r12")
    assert path is not None and path.rsp == 0x1008
    # repz ret (F3 C3) and bnd ret (F2 C3) end an epilogue like ret: the pop is undone once
    for ret in (b"\xf3\xc3", b"\xf2\xc3", b"\xc2\x08\x00"):
        path, sp = _epilogue(b"\x5b\x5d" + ret)
        assert path is not None and not path.tail_jump and path.rsp == sp + 16, ret.hex()
        assert path.restored == {"rbx": 0xB0B, "rbp": 0xBEEF}


def test_stack_probe_loop_falls_through_to_its_ret():
    # libgcc ___chkstk_ms, entered with rcx/rax pushed, IP at the probing `or`:
    # or qword [rcx], 0 ; sub rax, 0x1000 ; cmp rax, 0x1000 ; ja back ; sub rcx, rax ;
    # or qword [rcx], 0 ; pop rax ; pop rcx ; ret
    code = (
        bytes.fromhex("48830900")
        + bytes.fromhex("482d00100000")
        + bytes.fromhex("483d00100000")
        + b"\x77\xee"
        + bytes.fromhex("4829c1")
        + bytes.fromhex("48830900")
        + b"\x58\x59\xc3"
    )
    read_u64, sp = stack([0x11, 0x22, 0x276781590])
    path = simulate_to_return(reader(code), read_u64, BASE, sp, {"rcx": 0, "rax": 0})
    assert path is not None and path.rsp == sp + 16 and read_u64(path.rsp) == 0x276781590


def test_call_sites_are_recognised_in_every_common_form():
    ret = 0x140002000
    direct = b"\x90\x90" + b"\xe8" + struct.pack("<i", -0x1000)  # call rel32
    assert call_ends_at(direct, ret) == 5
    assert call_target(direct, ret) == ret - 0x1000
    assert call_ends_at(b"\x90" + bytes.fromhex("ff15") + struct.pack("<i", 0x100), ret) == 6  # call [rip+x]
    assert call_ends_at(b"\x90\x90\x90\x90\x90" + b"\xff\xd0", ret) == 2  # call rax
    assert call_ends_at(b"\x90\x90\x90\x90" + b"\x41\xff\xd3", ret) in (2, 3)  # call r11 (its tail decodes as call rbx)
    # forms longer than 7 bytes (REX + FF /2 + ModRM + SIB + disp32, with a NOTRACK or BND
    # prefix in front) validate through their last 7 bytes, which are the same CALL without
    # its prefixes
    r12_disp32 = bytes.fromhex("41ff9424") + struct.pack("<i", 0x100)  # call [r12+0x100]: 8 bytes
    for longer in (
        r12_disp32,
        b"\x3e" + r12_disp32,
        b"\xf2" + r12_disp32,
        bytes.fromhex("4aff94c0") + struct.pack("<i", 8),
    ):  # call [rax+r8*8+8]
        assert call_ends_at(longer[-CALL_LOOKBACK:], ret) == 7, longer.hex()
    assert call_ends_at(b"\x90" * 7, ret) is None
    assert call_ends_at(b"\x48\x83\xc4\x28\x5b\x5d\xc3", ret) is None


def test_prologue_allocations_are_decoded():
    sub = bytes.fromhex("53") + bytes.fromhex("4881ec00000100") + b"\xc3"  # push rbx; sub rsp, 0x10000
    got = stack_allocation(reader(sub), BASE)
    assert got.size == 0x10000 and not got.via_probe
    # push rbx ; mov eax, 0x400020 ; call probe ; sub rsp, rax
    probe = BASE + 0x100
    code = (
        b"\x53"
        + b"\xb8"
        + struct.pack("<I", 0x400020)
        + b"\xe8"
        + struct.pack("<i", probe - (BASE + 11))
        + bytes.fromhex("4829c4")
    )
    got = stack_allocation(reader(code), BASE, is_probe=lambda t: t == probe)
    assert got.size == 0x400020 and got.via_probe
    # the call's target unconfirmed as the probe: `sub rsp, rax` after it still says the
    # function allocated what `mov eax` loaded, through a probe
    got = stack_allocation(reader(code), BASE, is_probe=lambda t: False)
    assert (got.size, got.via_probe, got.instruction_address) == (0x400020, True, BASE + 1)
    # without that `sub rsp, rax`, a call to something else after `mov eax, N` allocates nothing
    other = code[:-3] + b"\xc3"
    assert stack_allocation(reader(other), BASE, is_probe=lambda t: False) is None
    assert stack_allocation(reader(other), BASE, is_probe=lambda t: t == probe).size == 0x400020


def test_32_bit_code_decodes_in_32_bit_mode():
    from dumpkit.unwind.disasm import decode_one

    # 0x48 is a REX.W prefix in 64-bit mode but `dec eax` in 32-bit mode.
    assert decode_one(b"\x48\xff\xd0", 0x401000, bits=64)[1:] == ("call", "rax")
    assert decode_one(b"\x48\xff\xd0", 0x401000, bits=32)[1:] == ("dec", "eax")
    ret = 0x00401000
    assert call_ends_at(b"\x90\x90\x90\x90\x90\xff\xd0", ret, bits=32) == 2  # call eax
    assert call_ends_at(b"\x90\x90" + b"\xe8" + struct.pack("<i", -0x100), ret, bits=32) == 5
