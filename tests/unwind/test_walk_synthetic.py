"""The walker on synthetic images (tests/synth_pe.py) mapped into a small in-memory
Target: the unwind paths no sample dump exercises (mingw code only pushes and
allocates). Each case lays out real prologue/epilogue bytes, the UNWIND_INFO that
describes them, and the stack a CPU running that code would have left, then checks the
caller's RIP/RSP and the nonvolatile registers the unwind recovered."""

from __future__ import annotations

import struct
from typing import Dict, List, Optional, Sequence, Tuple

from dumpkit.images import ImageLocator, ImageProvider
from dumpkit.target import DumpInfo, MemoryNotInDump, Module, ModuleMap, Registers, SoftErrors, SystemInfo, Thread
from dumpkit.unwind.amd64 import Amd64Step
from dumpkit.unwind.walk import Walker, walk_thread

from synth_pe import TEXT_CHARS, PEBuilder, code, unwind_info

BASE = 0x7FF650000000
T, XDATA, PDATA = 0x1000, 0x2000, 0x3000
STACK_LO, STACK_HI = 0x100000, 0x104000
JIT = 0x20000000

PUSH, ASMALL, FPREG, SAVE, SAVEF, MACH = 0, 2, 3, 4, 5, 10
RBX, RBP, RSI = 3, 5, 6


def rva(offset: int) -> int:
    return T + offset


def va(offset: int) -> int:
    return BASE + T + offset


CALL = b"\xe8\0\0\0\0"  # the call before each return site (its target does not matter)

# name: (offset in .text, size, code bytes at the start, UNWIND_INFO or None)
# H: the outermost caller (sub rsp, 0x28); its return slot holds 0, the end of the stack.
H = (0x000, 0x40, bytes.fromhex("4883ec28") + b"\xcc" * 12 + CALL, unwind_info([code(4, ASMALL, 4)], prolog=4))
H_RET = va(0x015)
# F: push rbp; push rbx; sub rsp, 0x40; lea rbp, [rsp+0x20] (frame register rbp, offset 0x20)
F = (
    0x040,
    0x60,
    bytes.fromhex("55534883ec40488d6c2420"),
    unwind_info(
        [code(11, FPREG), code(6, ASMALL, 7), code(2, PUSH, RBX), code(1, PUSH, RBP)],
        prolog=11,
        frame_reg=RBP,
        frame_off=2,
    ),
)
# F2: sub rsp, 0x48; mov [rsp+0x30], rbp; mov [rsp+0x38], rsi (SAVE_NONVOL, SAVE_NONVOL_FAR)
F2 = (
    0x0A0,
    0x40,
    bytes.fromhex("4883ec48") + bytes.fromhex("48896c2430") + bytes.fromhex("4889742438"),
    unwind_info([code(14, SAVEF, RSI), 0x38, 0, code(9, SAVE, RBP), 0x30 // 8, code(4, ASMALL, 8)], prolog=14),
)
# G2: push rbp; sub rsp, 0x30; lea rbp, [rsp+0x10]; ... call F2 (rbp is its frame register)
G2 = (
    0x0E0,
    0x40,
    bytes.fromhex("554883ec30488d6c2410") + b"\xcc" * 22 + CALL,
    unwind_info([code(10, FPREG), code(5, ASMALL, 5), code(1, PUSH, RBP)], prolog=10, frame_reg=RBP, frame_off=1),
)
G2_RET = va(0x0E0 + 0x25)
# K0 / K1: machine frame (without / with an error code) below a 0x28-byte allocation
K0 = (0x120, 0x20, bytes.fromhex("4883ec28"), unwind_info([code(4, ASMALL, 4), code(0, MACH, 0)], prolog=4))
K1 = (0x140, 0x20, bytes.fromhex("4883ec28"), unwind_info([code(4, ASMALL, 4), code(0, MACH, 1)], prolog=4))
# M0 ends where N begins: an interrupted IP at N's first byte looked up as ip - 1 is in M0
M0 = (0x160, 0x20, bytes.fromhex("4883ec78"), unwind_info([code(4, ASMALL, 14)], prolog=4))
N = (0x180, 0x20, b"\x53", unwind_info([code(1, PUSH, RBX)], prolog=1))
# N2: push rbx; sub rsp, 0x20; ...; epilogue at +0x10: add rsp, 0x20; pop rbx; ret
N2 = (
    0x1A0,
    0x20,
    b"\x53" + bytes.fromhex("4883ec20") + b"\xcc" * 11 + bytes.fromhex("4883c4205bc3"),
    unwind_info([code(5, ASMALL, 3), code(1, PUSH, RBX)], prolog=5),
)
# Q, Q2, Q3: push rbx; push rsi; sub rsp, 0x28; ...; at +0x10: add rsp, 0x28; pop rsi; pop rbx; END
_Q_UNWIND = unwind_info([code(6, ASMALL, 4), code(2, PUSH, RSI), code(1, PUSH, RBX)], prolog=6)
_Q_BODY = bytes.fromhex("53564883ec28") + b"\xcc" * 10 + bytes.fromhex("4883c4285e5b")
Q = (0x1C0, 0x30, _Q_BODY + b"\xc3", _Q_UNWIND)  # ret
Q2 = (0x1F0, 0x30, _Q_BODY + b"\xf3\xc3", _Q_UNWIND)  # repz ret
Q3 = (0x220, 0x30, _Q_BODY + b"\xff\xe0", _Q_UNWIND)  # jmp rax: a computed jump, not an epilogue
# P: push rbx; sub rsp, 0x20. P2: a separate part of P (push rsi) whose unwind info chains to P's.
P = (0x250, 0x20, b"\x53" + bytes.fromhex("4883ec20"), unwind_info([code(5, ASMALL, 3), code(1, PUSH, RBX)], prolog=5))
P2 = (0x280, 0x20, b"\x56" + b"\xcc" * 11 + CALL, "chain:P")  # unwind info built once P's is placed
P2_RET = va(0x280 + 0x11)

# Code with no .pdata entry: an 8-byte `call [r12+0x10]` whose return site scanning must
# validate, and int3 padding after it (an IP there has no unwind data and no way to a RET).
LONG_CALL_AT = 0x300
NO_PDATA = {LONG_CALL_AT: bytes.fromhex("41ff942410000000")}
LONG_CALL_RET = va(LONG_CALL_AT + 8)

FUNCTIONS = {
    "H": H,
    "F": F,
    "F2": F2,
    "G2": G2,
    "K0": K0,
    "K1": K1,
    "M0": M0,
    "N": N,
    "N2": N2,
    "Q": Q,
    "Q2": Q2,
    "Q3": Q3,
    "P": P,
    "P2": P2,
}


def build_image():
    text = bytearray(b"\xcc" * 0x400)
    for off, body in NO_PDATA.items():
        text[off : off + len(body)] = body
    xdata = bytearray()
    placed: Dict[str, Tuple[int, int, int]] = {}
    for name, (off, size, body, unwind) in FUNCTIONS.items():
        text[off : off + len(body)] = body
        if isinstance(unwind, str):  # chained: the parent's RUNTIME_FUNCTION follows the codes
            unwind = unwind_info([code(1, PUSH, RSI)], flags=4, prolog=1, chain=placed[unwind.split(":")[1]])
        placed[name] = (rva(off), rva(off + size), XDATA + len(xdata))
        xdata += unwind
    b = PEBuilder(image_base=BASE)
    assert b.add_section(".text", bytes(text), characteristics=TEXT_CHARS).rva == T
    assert b.add_section(".xdata", bytes(xdata)).rva == XDATA
    entries = sorted(placed.values())
    pdata = b.add_section(".pdata", b"".join(struct.pack("<III", *e) for e in entries))
    assert pdata.rva == PDATA
    b.set_dir(3, PDATA, 12 * len(entries))
    return b.build()


IMAGE = build_image()
MODULE = Module("synth.dll", "C:\\nowhere\\synth.dll", BASE, IMAGE.size_of_image, IMAGE.timestamp)


class MemoryTarget:
    """The Target seam over a few byte ranges: the mapped image, a stack, maybe JIT code."""

    def __init__(self, regions: Sequence[Tuple[int, bytes]], dynamic=()):
        self._regions = list(regions)
        self.modules = [MODULE]
        self._map = ModuleMap(self.modules)
        self._dynamic = list(dynamic)
        self.dump = DumpInfo("synthetic.dmp", 0)
        self.system = SystemInfo(processor_architecture=9)
        self.process = None
        self.threads: List[Thread] = []
        self.unloaded_modules: list = []
        self.exception = None
        self.memory_regions: list = []
        self.soft_errors = SoftErrors()

    def read(self, address: int, size: int) -> bytes:
        for start, data in self._regions:
            if start <= address and address + size <= start + len(data):
                return bytes(data[address - start : address - start + size])
        raise MemoryNotInDump(address, size)

    def read_available(self, address: int, size: int) -> bytes:
        for start, data in self._regions:
            if start <= address < start + len(data):
                return bytes(data[address - start : address - start + size])
        return b""

    def module_at(self, address: int) -> Optional[Module]:
        return self._map.find(address)

    def symbol_at(self, address: int) -> Optional[str]:
        return None

    def function_table_entries(self):
        return list(self._dynamic)


class Stack:
    def __init__(self):
        self.mem = bytearray(STACK_HI - STACK_LO)

    def put(self, address: int, *words: int) -> None:
        for i, w in enumerate(words):
            struct.pack_into("<Q", self.mem, address + 8 * i - STACK_LO, w)


def end_in_h(stack: Stack, sp: int) -> int:
    """A return into H at [sp]; H's own return slot (0x28 above its frame) holds 0.
    Returns H's frame SP."""
    stack.put(sp, H_RET)
    stack.put(sp + 8 + 0x28, 0)
    return sp + 8


def setup(stack: Stack, ip: int, sp: int, regs: Dict[str, int], extra=(), dynamic=()):
    target = MemoryTarget(
        [(BASE, IMAGE.memory_at(0, IMAGE.size_of_image)), (STACK_LO, bytes(stack.mem)), *extra], dynamic
    )
    walker = Walker(target, ImageProvider(target, ImageLocator(use_recorded_path=False)), Amd64Step)
    values = dict(regs, rip=ip, rsp=sp)
    thread = Thread(1, Registers(values), STACK_LO, STACK_HI - STACK_LO)
    return target, walker, thread


def walk(stack: Stack, ip: int, sp: int, regs: Dict[str, int], **kw):
    target, walker, thread = setup(stack, ip, sp, regs, **kw)
    result = walk_thread(walker, thread)
    assert walker.images.image(MODULE) is not None and target.soft_errors.items == []
    return result


def unwind_once(stack: Stack, ip: int, sp: int, regs: Dict[str, int], **kw):
    """One step of the walker from an exact IP: (caller ip, caller sp, caller registers)."""
    target, walker, thread = setup(stack, ip, sp, regs, **kw)

    def read_u64(address: int) -> Optional[int]:
        try:
            return struct.unpack("<Q", target.read(address, 8))[0]
        except MemoryNotInDump:
            return None

    got = walker.step.caller(walker.place(ip), ip, sp, dict(regs), read_u64, True, STACK_HI)
    assert got is not None
    return got[0], got[1], got[2]


def starts(result) -> List[Optional[int]]:
    return [f.function_start for f in result.frames]


# ----------------------------------------------------------------------------- frame pointer
def test_frame_pointer_recovers_a_frame_that_alloca_moved_rsp_away_from():
    stack = Stack()
    entry = STACK_HI - 0x400  # RSP at F's entry: its return address
    h_sp = end_in_h(stack, entry)
    stack.put(entry - 8, 0xCA11E5B9)  # push rbp (the caller's)
    stack.put(entry - 16, 0xCA11E5B8)  # push rbx
    rbp = entry - 0x50 + 0x20  # lea rbp, [rsp+0x20] after sub rsp, 0x40
    rsp = entry - 0x50 - 0x100  # then alloca(0x100): RSP says nothing about the frame
    regs = {"rbp": rbp, "rbx": 0x5A5A}
    ip = va(F[0] + 0x30)
    cip, csp, cregs = unwind_once(stack, ip, rsp, regs)
    assert (cip, csp) == (H_RET, h_sp)
    assert (cregs["rbp"], cregs["rbx"]) == (0xCA11E5B9, 0xCA11E5B8)
    result = walk(stack, ip, rsp, regs)
    assert starts(result) == [rva(F[0]), rva(H[0])]
    assert [(f.ip, f.sp) for f in result.frames] == [(ip, rsp), (H_RET, h_sp)]
    assert result.frames[0].size == h_sp - rsp and result.frames[1].trust == "unwind_info"
    assert result.stop_reason.startswith("end of stack")


# ----------------------------------------------------------------------------- saved registers
def test_save_nonvol_and_far_restore_the_frame_register_the_caller_unwinds_with():
    stack = Stack()
    g2_entry = STACK_HI - 0x400
    h_sp = end_in_h(stack, g2_entry)
    stack.put(g2_entry - 8, 0xB0B0)  # G2: push rbp (H's)
    g2_rbp = g2_entry - 0x38 + 0x10  # sub rsp, 0x30; lea rbp, [rsp+0x10]
    f2_entry = g2_entry - 0x38 - 0x80 - 8  # G2 alloca(0x80), then call F2
    stack.put(f2_entry, G2_RET)
    f2_rsp = f2_entry - 0x48
    stack.put(f2_rsp + 0x30, g2_rbp)  # mov [rsp+0x30], rbp
    stack.put(f2_rsp + 0x38, 0x51515151)  # mov [rsp+0x38], rsi
    regs = {"rbp": 0xDEAD, "rsi": 0xDEAD}  # F2's body reused both
    ip = va(F2[0] + 0x20)
    cip, csp, cregs = unwind_once(stack, ip, f2_rsp, regs)
    assert (cip, csp) == (G2_RET, f2_entry + 8)
    assert (cregs["rbp"], cregs["rsi"]) == (g2_rbp, 0x51515151)
    result = walk(stack, ip, f2_rsp, regs)
    # G2's frame is only found through the rbp that F2's unwind info restored
    assert starts(result) == [rva(F2[0]), rva(G2[0]), rva(H[0])]
    assert [(f.ip, f.sp) for f in result.frames] == [(ip, f2_rsp), (G2_RET, f2_entry + 8), (H_RET, h_sp)]
    assert result.frames[1].size == h_sp - (f2_entry + 8)


# ----------------------------------------------------------------------------- machine frames
def _machine_frame(error_code: bool, interrupted_ip: int, interrupted_sp: int, stack: Stack) -> int:
    """K0/K1's frame: 0x28 bytes of locals over [error code], RIP, CS, EFLAGS, RSP, SS."""
    rsp = STACK_HI - 0x800
    frame = rsp + 0x28 + (8 if error_code else 0)
    stack.put(frame, interrupted_ip, 0x33, 0x246, interrupted_sp, 0x2B)
    return rsp


def test_machine_frame_with_error_code_gives_an_exact_ip_looked_up_as_is():
    stack = Stack()
    # interrupted at N's very first instruction: nothing pushed yet, the return is at [rsp]
    n_sp = STACK_HI - 0x400
    h_sp = end_in_h(stack, n_sp)
    rsp = _machine_frame(True, va(N[0]), n_sp, stack)
    result = walk(stack, va(K1[0] + 0x10), rsp, {})
    # looked up as a return address (ip - 1) it would be M0 and unwind 0x78 bytes too far
    assert starts(result) == [rva(K1[0]), rva(N[0]), rva(H[0])]
    assert [(f.ip, f.sp) for f in result.frames[1:]] == [(va(N[0]), n_sp), (H_RET, h_sp)]
    assert result.frames[0].size == n_sp - rsp


def test_machine_frame_without_error_code_into_an_epilogue():
    stack = Stack()
    # interrupted in N2's epilogue at `pop rbx` (add rsp, 0x20 already ran)
    n2_sp = STACK_HI - 0x400
    stack.put(n2_sp, 0xB1B1)
    h_sp = end_in_h(stack, n2_sp + 8)
    rsp = _machine_frame(False, va(N2[0] + 0x14), n2_sp, stack)
    result = walk(stack, va(K0[0] + 0x10), rsp, {})
    assert starts(result) == [rva(K0[0]), rva(N2[0]), rva(H[0])]
    assert [(f.ip, f.sp) for f in result.frames[1:]] == [(va(N2[0] + 0x14), n2_sp), (H_RET, h_sp)]
    cip, csp, cregs = unwind_once(stack, va(N2[0] + 0x14), n2_sp, {})
    assert (cip, csp, cregs["rbx"]) == (H_RET, h_sp, 0xB1B1)


# ----------------------------------------------------------------------------- chained unwind info
def test_chained_unwind_info_applies_the_fragment_then_the_parent():
    stack = Stack()
    rsp = STACK_HI - 0x400
    stack.put(rsp, 0x5151)  # P2: push rsi
    stack.put(rsp + 8 + 0x20, 0xB0B)  # P: push rbx, below its 0x20 bytes
    h_sp = end_in_h(stack, rsp + 0x30)
    ip = va(P2[0] + 0x8)
    cip, csp, cregs = unwind_once(stack, ip, rsp, {"rsi": 1, "rbx": 2})
    assert (cip, csp) == (H_RET, h_sp) == (H_RET, rsp + 0x38)
    assert (cregs["rsi"], cregs["rbx"]) == (0x5151, 0xB0B)
    result = walk(stack, ip, rsp, {})
    assert starts(result) == [rva(P2[0]), rva(H[0])]


def test_chained_unwind_info_for_a_caller_frame():
    stack = Stack()
    rsp = STACK_HI - 0x400  # frame 0 in H's body; H returns into P2
    p2_sp = rsp + 0x30
    stack.put(rsp + 0x28, P2_RET)
    stack.put(p2_sp, 0x5151)
    stack.put(p2_sp + 0x28, 0xB0B)
    h_sp = end_in_h(stack, p2_sp + 0x30)
    result = walk(stack, va(H[0] + 0x8), rsp, {})
    assert starts(result) == [rva(H[0]), rva(P2[0]), rva(H[0])]
    assert [(f.ip, f.sp) for f in result.frames] == [(va(H[0] + 0x8), rsp), (P2_RET, p2_sp), (H_RET, h_sp)]
    assert result.frames[1].size == 0x38


# ----------------------------------------------------------------------------- epilogues
def test_ip_inside_an_epilogue_is_unwound_by_emulating_it():
    for fn in (Q, Q2):  # `ret` and `repz ret`: the pops left must be undone once
        stack = Stack()
        rsp = STACK_HI - 0x400  # at `pop rsi`: add rsp, 0x28 has run
        stack.put(rsp, 0x5151, 0xB0B)
        h_sp = end_in_h(stack, rsp + 16)
        ip = va(fn[0] + 0x14)
        cip, csp, cregs = unwind_once(stack, ip, rsp, {})
        assert (cip, csp, cregs["rsi"], cregs["rbx"]) == (H_RET, h_sp, 0x5151, 0xB0B), hex(fn[0])
        result = walk(stack, ip, rsp, {})
        assert [(f.ip, f.sp) for f in result.frames] == [(ip, rsp), (H_RET, h_sp)]
        assert result.frames[0].trust == "context" and result.frames[0].size == 0x18


def test_pops_before_a_computed_jump_are_body_code():
    # Q3 ends `pop rsi; pop rbx; jmp rax`: no epilogue, so the unwind codes apply in full
    stack = Stack()
    rsp = STACK_HI - 0x400
    stack.put(rsp + 0x28, 0x5151, 0xB0B)
    h_sp = end_in_h(stack, rsp + 0x38)
    ip = va(Q3[0] + 0x14)
    cip, csp, cregs = unwind_once(stack, ip, rsp, {})
    assert (cip, csp, cregs["rsi"], cregs["rbx"]) == (H_RET, h_sp, 0x5151, 0xB0B)


# ----------------------------------------------------------------------------- dynamic function tables
def test_function_table_stream_unwinds_jit_code():
    # J, registered with RtlAddFunctionTable: push rbx; sub rsp, 0x30; ... call; its
    # UNWIND_INFO lives in the JIT region, not in any image.
    jit = bytearray(b"\xcc" * 0x1000)
    jit[0x100:0x105] = b"\x53" + bytes.fromhex("4883ec30")
    jit[0x11B:0x120] = CALL
    info = unwind_info([code(5, ASMALL, 5), code(1, PUSH, RBX)], prolog=5)
    jit[0x800 : 0x800 + len(info)] = info
    j_ret = JIT + 0x120
    dynamic = [(JIT + 0x100, JIT + 0x140, JIT + 0x800, JIT)]
    stack = Stack()
    rsp = STACK_HI - 0x400  # frame 0 in H's body; H returns into J
    j_sp = rsp + 0x30
    stack.put(rsp + 0x28, j_ret)
    stack.put(j_sp + 0x30, 0xB0B)
    h_sp = end_in_h(stack, j_sp + 0x38)
    result = walk(stack, va(H[0] + 0x8), rsp, {}, extra=[(JIT, bytes(jit))], dynamic=dynamic)
    assert [(f.ip, f.sp) for f in result.frames] == [(va(H[0] + 0x8), rsp), (j_ret, j_sp), (H_RET, h_sp)]
    assert result.frames[1].module is None and result.frames[1].trust == "unwind_info"
    assert result.frames[1].size == 0x40
    # and from an exact IP inside J's body, with the register it saved
    cip, csp, cregs = unwind_once(stack, JIT + 0x110, j_sp, {}, extra=[(JIT, bytes(jit))], dynamic=dynamic)
    assert (cip, csp, cregs["rbx"]) == (H_RET, h_sp, 0xB0B)


# ----------------------------------------------------------------------------- scanning
def test_scan_validates_a_return_after_an_eight_byte_call():
    stack = Stack()
    rsp = STACK_HI - 0x400
    stack.put(rsp, 0x1234, LONG_CALL_RET)  # junk, then the return site of `call [r12+0x10]`
    result = walk(stack, va(0x380), rsp, {})  # int3 padding: no unwind entry, no RET ahead
    assert [(f.ip, f.sp, f.trust) for f in result.frames[:2]] == [
        (va(0x380), rsp, "context"),
        (LONG_CALL_RET, rsp + 16, "scan_validated"),
    ]


def test_indirect_function_table_entry_is_resolved_like_pdata():
    """A FunctionTable entry whose unwind field has bit 0 set points at another
    RUNTIME_FUNCTION (here: J2, a cold part of J, unwinds with J's info). Sources pass
    the field as recorded; the walker resolves it."""
    jit = bytearray(b"\xcc" * 0x1000)
    jit[0x100:0x105] = b"\x53" + bytes.fromhex("4883ec30")
    jit[0x18B:0x190] = CALL
    info = unwind_info([code(5, ASMALL, 5), code(1, PUSH, RBX)], prolog=5)
    jit[0x800 : 0x800 + len(info)] = info
    jit[0x900:0x90C] = struct.pack("<III", 0x100, 0x140, 0x800)  # J's RUNTIME_FUNCTION
    dynamic = [(JIT + 0x100, JIT + 0x140, JIT + 0x800, JIT), (JIT + 0x180, JIT + 0x1A0, JIT + 0x901, JIT)]
    stack = Stack()
    rsp = STACK_HI - 0x400
    j2_ret, j2_sp = JIT + 0x190, rsp + 0x30
    stack.put(rsp + 0x28, j2_ret)
    stack.put(j2_sp + 0x30, 0xB0B)
    h_sp = end_in_h(stack, j2_sp + 0x38)
    result = walk(stack, va(H[0] + 0x8), rsp, {}, extra=[(JIT, bytes(jit))], dynamic=dynamic)
    assert [(f.ip, f.sp, f.trust) for f in result.frames] == [
        (va(H[0] + 0x8), rsp, "context"),
        (j2_ret, j2_sp, "unwind_info"),
        (H_RET, h_sp, "unwind_info"),
    ]
