"""The x64 step on code assembled with its unwind data (tests/support/asm.py): each case
lays out real prologue/epilogue bytes, the UNWIND_INFO that describes them and the stack
a CPU running that code would have left, then checks the caller's RIP/RSP, the
nonvolatile registers the unwind recovered and how each frame was found. These are the
paths no sample dump exercises (mingw code only pushes and allocates)."""

from __future__ import annotations

from typing import List, Optional, Tuple

from dumpkit.images import ImageProvider
from dumpkit.problems import Problems
from dumpkit.target import ExceptionInfo, Module, Registers, Thread
from dumpkit.unwind.cpus import step_for
from dumpkit.unwind.frames import SCANNED, StackWalk, StopReason, Trust, unsaved_unwind
from dumpkit.unwind.walk import Walker

from tests.support.asm import (
    INT3,
    Alloc,
    Call,
    Code,
    Epilogue,
    Function,
    Image,
    Jit,
    MachFrame,
    Mark,
    Push,
    SaveReg,
    Scene,
    SetFP,
    Stack,
    UNWIND_AREA,
)

# H: the outermost caller; its own return slot holds 0, the end of the stack.
H = Function("H", [Alloc(0x28)], [INT3 * 12, Call("H.ret")])
# F: push rbp; push rbx; sub rsp, 0x40; lea rbp, [rsp+0x20]
F = Function("F", [Push("rbp"), Push("rbx"), Alloc(0x40), SetFP("rbp", 0x20)], [INT3 * 64])
# F2 saves with mov (SAVE_NONVOL, SAVE_NONVOL_FAR) rather than push; G2 calls it and keeps rbp as its frame register
F2 = Function("F2", [Alloc(0x48), SaveReg("rbp", 0x30), SaveReg("rsi", 0x38, far=True)], [INT3 * 16])
G2 = Function("G2", [Push("rbp"), Alloc(0x30), SetFP("rbp", 0x10)], [INT3 * 16, Call("G2.ret")])
# K0 / K1: an interrupt or exception handler's frame: a machine frame (without / with
# an error code) below a 0x28-byte allocation
K0 = Function("K0", [MachFrame(error_code=False), Alloc(0x28)], [INT3 * 16])
K1 = Function("K1", [MachFrame(error_code=True), Alloc(0x28)], [INT3 * 16])
# M0 ends where N begins: an interrupted IP at N's first byte looked up as ip - 1 is in M0
M0 = Function("M0", [Alloc(0x78)], [INT3 * 12])
N = Function("N", [Push("rbx")], [INT3 * 15])
N2 = Function("N2", [Push("rbx"), Alloc(0x20)], [INT3 * 11, Epilogue()])
# Q, Q2, Q3: push rbx; push rsi; sub rsp, 0x28; ...; add rsp, 0x28; pop rsi; pop rbx; END
Q = Function("Q", [Push("rbx"), Push("rsi"), Alloc(0x28)], [INT3 * 10, Epilogue()])
Q2 = Function("Q2", [Push("rbx"), Push("rsi"), Alloc(0x28)], [INT3 * 10, Epilogue(b"\xf3\xc3")])  # repz ret
Q3 = Function("Q3", [Push("rbx"), Push("rsi"), Alloc(0x28)], [INT3 * 10, Epilogue(b"\xff\xe0")])  # jmp rax
# P: push rbx; sub rsp, 0x20. P2: a separate part of P (push rsi) whose unwind info chains to P's.
P = Function("P", [Push("rbx"), Alloc(0x20)], [INT3 * 16])
P2 = Function("P2", [Push("rsi")], [INT3 * 11, Call("P2.ret")], chain="P")
# R: recursion through one call site (push rbp; sub rsp, 0x20): the walk loop's fixed frames
R = Function("R", [Push("rbp"), Alloc(0x20)], [INT3 * 8, Call("R.ret")])
# Code with no unwind entry: a stack probe like libgcc's ___chkstk_ms (push, compare,
# branch, pop, ret); an 8-byte `call [r12+0x10]` whose return site scanning must validate,
# with int3 padding after it (an IP there has no unwind data and no way to a RET); and a
# word of code that follows no CALL.
PROBE = Code(
    "probe",
    bytes.fromhex("5150"),  # push rcx; push rax
    Mark("probe.loop"),
    bytes.fromhex("483d00100000"),  # cmp rax, 0x1000
    bytes.fromhex("7700"),  # ja (the loop's exit is its fall-through)
    bytes.fromhex("5859c3"),  # pop rax; pop rcx; ret
)
LONG_CALL = Code("longcall", bytes.fromhex("41ff942410000000"), Mark("longcall.ret"), INT3 * 32)

IMAGE = Image("synth.dll", 0x7FF650000000, [H, F, F2, G2, K0, K1, M0, N, N2, Q, Q2, Q3, P, P2, R, PROBE, LONG_CALL])
HI = 0x104000


def stack_ending_in_h(sp: int) -> Stack:
    """A stack whose frame at `sp` returns into H: the return address at [sp], H's frame
    above it and 0 in H's return slot. Marks H's frame SP as "H.sp"."""
    return Stack(hi=HI).at(sp).word("H.ret").mark("H.sp").skip(0x28).word(0)


def frames(result: StackWalk) -> List[Tuple[int, int, Trust]]:
    """Every frame the walk found: its stack, then the scanned frames nothing confirmed."""
    return [(f.ip, f.sp, f.trust) for f in list(result.frames) + list(result.possible)]


def starts(result: StackWalk) -> List[Optional[int]]:
    return [f.function_start for f in result.frames]


# ----------------------------------------------------------------------------- frame register
def test_frame_register_recovers_a_frame_that_alloca_moved_rsp_away_from():
    entry = HI - 0x400  # RSP at F's entry: its return address
    stack = stack_ending_in_h(entry)
    stack.at(entry - 16).word(0xCA11E5B8, 0xCA11E5B9)  # push rbp (the caller's); push rbx
    rbp = entry - 0x50 + 0x20  # lea rbp, [rsp+0x20] after sub rsp, 0x40
    rsp = entry - 0x50 - 0x100  # then alloca(0x100): RSP says nothing about the frame
    scene = Scene(stack, IMAGE)
    regs = {"rip": IMAGE["F"] + 0x30, "rsp": rsp, "rbp": rbp, "rbx": 0x5A5A}
    caller = scene.step(regs)
    assert (caller.ip, caller.sp) == (IMAGE["H.ret"], stack["H.sp"])
    assert (caller.regs["rbp"], caller.regs["rbx"]) == (0xCA11E5B9, 0xCA11E5B8)
    result = scene.walk(regs)
    assert starts(result) == [IMAGE.rva("F"), IMAGE.rva("H")]
    assert frames(result) == [(regs["rip"], rsp, Trust.CONTEXT), (IMAGE["H.ret"], stack["H.sp"], Trust.UNWIND_INFO)]
    assert result.frames[0].size == stack["H.sp"] - rsp
    assert result.stop is StopReason.RETURN_ADDRESS_ZERO


# ----------------------------------------------------------------------------- saved registers
def test_save_nonvol_and_far_restore_the_frame_register_the_caller_unwinds_with():
    g2_entry = HI - 0x400
    stack = stack_ending_in_h(g2_entry)
    stack.at(g2_entry - 8).word(0xB0B0)  # G2: push rbp (H's)
    g2_rbp = g2_entry - 0x38 + 0x10  # sub rsp, 0x30; lea rbp, [rsp+0x10]
    f2_entry = g2_entry - 0x38 - 0x80 - 8  # G2 alloca(0x80), then call F2
    f2_rsp = f2_entry - 0x48
    stack.at(f2_entry).word("G2.ret").mark("G2.sp")
    stack.at(f2_rsp + 0x30).word(g2_rbp, 0x51515151)  # mov [rsp+0x30], rbp; mov [rsp+0x38], rsi
    scene = Scene(stack, IMAGE)
    regs = {"rip": IMAGE["F2"] + 0x20, "rsp": f2_rsp, "rbp": 0xDEAD, "rsi": 0xDEAD}  # F2's body reused both
    caller = scene.step(regs)
    assert (caller.ip, caller.sp) == (IMAGE["G2.ret"], stack["G2.sp"])
    assert (caller.regs["rbp"], caller.regs["rsi"]) == (g2_rbp, 0x51515151)
    result = scene.walk(regs)
    # G2's frame is only found through the rbp that F2's unwind info restored
    assert starts(result) == [IMAGE.rva("F2"), IMAGE.rva("G2"), IMAGE.rva("H")]
    assert [(f.ip, f.sp) for f in result.frames] == [
        (regs["rip"], f2_rsp),
        (IMAGE["G2.ret"], stack["G2.sp"]),
        (IMAGE["H.ret"], stack["H.sp"]),
    ]
    assert result.frames[1].size == stack["H.sp"] - stack["G2.sp"]


def test_fixed_frames_restore_the_registers_they_saved():
    """Three R frames (push rbp; sub rsp, 0x20: frames the walk loop takes from a cached
    FixedFrame) between frame 0 and G2, whose frame is found only through its rbp. Each R
    saved its caller's rbp and reused the register; only if each R frame restores what it
    saved does G2 see its own rbp again."""
    g2_entry = HI - 0x400
    stack = stack_ending_in_h(g2_entry)
    stack.at(g2_entry - 8).word(0xB0B0)
    g2_rbp = g2_entry - 0x38 + 0x10
    sp = g2_entry - 0x38 - 0x80 - 8  # G2 alloca(0x80), then call R
    stack.at(sp).word("G2.ret").mark("G2.sp")
    saved = g2_rbp
    for i in range(3):  # R: push rbp (its caller's); sub rsp, 0x20; rbp = junk; call R (or H)
        stack.at(sp - 8).word(saved)
        saved = 0xBAD0 + i
        sp -= 8 + 0x20 + 8
        stack.at(sp).word("R.ret")
    result = Scene(stack, IMAGE).walk({"rip": IMAGE["H"] + 0x8, "rsp": sp - 0x28, "rbp": saved})
    assert starts(result) == [IMAGE.rva("H")] + [IMAGE.rva("R")] * 3 + [IMAGE.rva("G2"), IMAGE.rva("H")]
    assert [f.size for f in result.frames[1:4]] == [0x30, 0x30, 0x30]
    assert [f.sp for f in result.frames[4:]] == [stack["G2.sp"], stack["H.sp"]]
    assert {f.trust for f in result.frames[1:]} == {Trust.UNWIND_INFO}
    assert result.stop is StopReason.RETURN_ADDRESS_ZERO


# ----------------------------------------------------------------------------- machine frames
def machine_frame(stack: Stack, rsp: int, error_code: bool, ip: object, sp: int) -> None:
    """K0/K1's frame at rsp: 0x28 bytes of locals over [error code], RIP, CS, EFLAGS, RSP, SS."""
    stack.at(rsp + 0x28 + (8 if error_code else 0)).word(ip, 0x33, 0x246, sp, 0x2B)  # type: ignore[arg-type]


def test_machine_frame_with_error_code_gives_an_exact_ip_looked_up_as_is():
    # interrupted at N's very first instruction: nothing pushed yet, the return is at [rsp]
    n_sp = HI - 0x400
    stack = stack_ending_in_h(n_sp)
    rsp = HI - 0x800
    machine_frame(stack, rsp, True, "N", n_sp)
    result = Scene(stack, IMAGE).walk({"rip": IMAGE["K1"] + 0x10, "rsp": rsp})
    # looked up as a return address (ip - 1) it would be M0 and unwind 0x78 bytes too far
    assert IMAGE["M0.end"] == IMAGE["N"]
    assert starts(result) == [IMAGE.rva("K1"), IMAGE.rva("N"), IMAGE.rva("H")]
    assert [(f.ip, f.sp) for f in result.frames[1:]] == [(IMAGE["N"], n_sp), (IMAGE["H.ret"], stack["H.sp"])]
    assert result.frames[0].size == n_sp - rsp


def test_machine_frame_without_error_code_into_an_epilogue():
    # interrupted in N2's epilogue at `pop rbx` (add rsp, 0x20 already ran)
    n2_sp = HI - 0x400
    stack = stack_ending_in_h(n2_sp + 8)
    stack.at(n2_sp).word(0xB1B1)
    rsp = HI - 0x800
    machine_frame(stack, rsp, False, "N2.pop", n2_sp)
    scene = Scene(stack, IMAGE)
    result = scene.walk({"rip": IMAGE["K0"] + 0x10, "rsp": rsp})
    assert starts(result) == [IMAGE.rva("K0"), IMAGE.rva("N2"), IMAGE.rva("H")]
    assert [(f.ip, f.sp) for f in result.frames[1:]] == [(IMAGE["N2.pop"], n2_sp), (IMAGE["H.ret"], stack["H.sp"])]
    caller = scene.step({"rip": IMAGE["N2.pop"], "rsp": n2_sp})
    assert (caller.ip, caller.sp, caller.regs["rbx"]) == (IMAGE["H.ret"], stack["H.sp"], 0xB1B1)


# ----------------------------------------------------------------------------- chained unwind info
def test_chained_unwind_info_applies_the_fragment_then_the_parent():
    rsp = HI - 0x400
    stack = stack_ending_in_h(rsp + 0x30)
    stack.at(rsp).word(0x5151)  # P2: push rsi
    stack.at(rsp + 8 + 0x20).word(0xB0B)  # P: push rbx, above its 0x20 bytes
    scene = Scene(stack, IMAGE)
    regs = {"rip": IMAGE["P2"] + 0x8, "rsp": rsp, "rsi": 1, "rbx": 2}
    caller = scene.step(regs)
    assert (caller.ip, caller.sp) == (IMAGE["H.ret"], stack["H.sp"]) == (IMAGE["H.ret"], rsp + 0x38)
    assert (caller.regs["rsi"], caller.regs["rbx"]) == (0x5151, 0xB0B)
    # the fragment is part of P: its frame is P's function, named from P's entry
    result = scene.walk(regs)
    assert starts(result) == [IMAGE.rva("P"), IMAGE.rva("H")]
    assert result.frames[0].symbol == f"synth.dll!func_{IMAGE.rva('P'):x}+{IMAGE['P2'] + 8 - IMAGE['P']:#x}"


def test_chained_unwind_info_for_a_caller_frame():
    rsp = HI - 0x400  # frame 0 in H's body; H returns into P2
    p2_sp = rsp + 0x30
    stack = stack_ending_in_h(p2_sp + 0x30)
    stack.at(rsp + 0x28).word("P2.ret").word(0x5151)
    stack.at(p2_sp + 0x28).word(0xB0B)
    result = Scene(stack, IMAGE).walk({"rip": IMAGE["H"] + 0x8, "rsp": rsp})
    assert starts(result) == [IMAGE.rva("H"), IMAGE.rva("P"), IMAGE.rva("H")]
    assert [(f.ip, f.sp) for f in result.frames] == [
        (IMAGE["H"] + 0x8, rsp),
        (IMAGE["P2.ret"], p2_sp),
        (IMAGE["H.ret"], stack["H.sp"]),
    ]
    assert result.frames[1].size == 0x38


# ----------------------------------------------------------------------------- epilogues
def test_ip_inside_an_epilogue_is_unwound_by_emulating_it():
    for fn in ("Q", "Q2"):  # `ret` and `repz ret`: the pops left must be undone once
        rsp = HI - 0x400  # at `pop rsi`: add rsp, 0x28 has run
        stack = stack_ending_in_h(rsp + 16)
        stack.at(rsp).word(0x5151, 0xB0B)
        scene = Scene(stack, IMAGE)
        regs = {"rip": IMAGE[f"{fn}.pop"], "rsp": rsp}
        caller = scene.step(regs)
        assert (caller.ip, caller.sp, caller.regs["rsi"], caller.regs["rbx"]) == (
            IMAGE["H.ret"],
            stack["H.sp"],
            0x5151,
            0xB0B,
        ), fn
        result = scene.walk(regs)
        assert frames(result) == [(regs["rip"], rsp, Trust.CONTEXT), (IMAGE["H.ret"], stack["H.sp"], Trust.UNWIND_INFO)]
        assert result.frames[0].size == 0x18


def test_pops_before_a_computed_jump_are_body_code():
    # Q3 ends `pop rsi; pop rbx; jmp rax`: no epilogue, so the unwind codes apply in full
    rsp = HI - 0x400
    stack = stack_ending_in_h(rsp + 0x38)
    stack.at(rsp + 0x28).word(0x5151, 0xB0B)
    caller = Scene(stack, IMAGE).step({"rip": IMAGE["Q3.pop"], "rsp": rsp})
    assert (caller.ip, caller.sp, caller.regs["rsi"], caller.regs["rbx"]) == (
        IMAGE["H.ret"],
        stack["H.sp"],
        0x5151,
        0xB0B,
    )


# ----------------------------------------------------------------------------- dynamic function tables
JIT = Jit(0x20000000, [Function("J", [Push("rbx"), Alloc(0x30)], [INT3 * 16, Call("J.ret"), INT3 * 16])])


def _h_called_from_jit(jit: Jit, return_label: str) -> Tuple[Scene, int, int]:
    """(scene, rsp, J's sp): frame 0 in H's body, H returning into JIT code at
    `return_label`, whose frame (rbx pushed, 0x30 allocated) returns into H's caller."""
    rsp = HI - 0x400
    j_sp = rsp + 0x30
    stack = stack_ending_in_h(j_sp + 0x38)
    stack.at(rsp + 0x28).word(return_label)
    stack.at(j_sp + 0x30).word(0xB0B)
    return Scene(stack, IMAGE, jit), rsp, j_sp


def test_function_table_stream_unwinds_jit_code():
    # J, registered with RtlAddFunctionTable; its UNWIND_INFO lives in the JIT region
    scene, rsp, j_sp = _h_called_from_jit(JIT, "J.ret")
    stack = scene.stack
    result = scene.walk({"rip": IMAGE["H"] + 0x8, "rsp": rsp})
    assert frames(result) == [
        (IMAGE["H"] + 0x8, rsp, Trust.CONTEXT),
        (JIT["J.ret"], j_sp, Trust.UNWIND_INFO),
        (IMAGE["H.ret"], stack["H.sp"], Trust.UNWIND_INFO),
    ]
    assert result.frames[1].module is None and result.frames[1].size == 0x40
    # and from an exact IP inside J's body, with the register it saved
    caller = scene.step({"rip": JIT["J"] + 0x10, "rsp": j_sp})
    assert (caller.ip, caller.sp, caller.regs["rbx"]) == (IMAGE["H.ret"], stack["H.sp"], 0xB0B)


def test_indirect_function_table_entry_is_resolved_like_pdata():
    """A FunctionTable entry whose unwind field has bit 0 set points at another
    RUNTIME_FUNCTION (here: J2, a cold part of J, unwinds with J's info). Sources pass
    the field as recorded; the walker resolves it."""
    jit = Jit(
        0x20000000,
        [Function("J", [Push("rbx"), Alloc(0x30)], [INT3 * 16]), Code("J2", INT3 * 11, Call("J2.ret"), INT3 * 16)],
    )
    scene, rsp, j2_sp = _h_called_from_jit(jit, "J2.ret")
    stack = scene.stack
    scene.more_entries.append(jit.indirect("J", jit["J2"], jit["J2.end"]))
    assert frames(scene.walk({"rip": IMAGE["H"] + 0x8, "rsp": rsp})) == [
        (IMAGE["H"] + 0x8, rsp, Trust.CONTEXT),
        (jit["J2.ret"], j2_sp, Trust.UNWIND_INFO),
        (IMAGE["H.ret"], stack["H.sp"], Trust.UNWIND_INFO),
    ]


def test_jit_unwind_data_the_dump_did_not_save_comes_back_with_the_walk():
    """J's unwind data lies in JIT memory the dump writer did not save: the step scans past
    J and says so in the walk's result (once per walker: its caches meet it once), not in
    the problems, since that is how the dump was written."""
    scene, rsp, _ = _h_called_from_jit(JIT, "J.ret")
    walker = scene.walker()
    memory = walker.target.memory
    memory.drop(JIT.base)
    memory.put(JIT.base, bytes(JIT.memory[:UNWIND_AREA]))  # the code, not its unwind data
    thread = scene.thread({"rip": IMAGE["H"] + 0x8, "rsp": rsp})
    first = walker.walk(thread)
    assert first.unsaved_jit_unwind == {JIT.entries[0][2]}
    assert (first.frames[1].ip, first.frames[1].trust) == (JIT["J.ret"], Trust.UNWIND_INFO)
    # J's caller, H, is found by scanning past J's frame (a scanned frame that nothing
    # confirms stays a possible frame)
    assert [(f.ip, f.trust in SCANNED) for f in list(first.frames[2:]) + list(first.possible)][:1] == [
        (IMAGE["H.ret"], True)
    ]
    again = walker.walk(thread)
    assert again.unsaved_jit_unwind == frozenset()
    assert unsaved_unwind([first, again]) == {JIT.entries[0][2]}
    assert walker.target.soft_errors.items == []


def test_unusable_jit_unwind_data_is_a_problem_of_the_run_that_walks():
    """Unwind data that is there but cannot be read (an unknown UNWIND_INFO version) is
    damage: the step adds it to the problems collector the run handed the walker."""
    scene, rsp, _ = _h_called_from_jit(JIT, "J.ret")
    target = scene.walker().target
    unwind = JIT.entries[0][2]
    target.memory.patch(unwind, b"\x07")  # version 7
    problems = Problems()
    walker = Walker(target, ImageProvider(target, problems=problems), step_for(target), problems=problems)
    result = walker.walk(scene.thread({"rip": IMAGE["H"] + 0x8, "rsp": rsp}))
    assert len(problems.items) == 1 and problems.items[0].startswith(f"unwind data at {unwind:#x} unusable: ")
    assert "unsupported version 7" in problems.items[0]
    assert target.soft_errors.items == [] and result.unsaved_jit_unwind == frozenset()


# ----------------------------------------------------------------------------- no unwind entry
def test_code_without_unwind_entry_is_followed_to_its_ret():
    # frame 0 in the probe's loop: rcx and rax pushed; the RET is found by running forward
    rsp = HI - 0x400
    stack = stack_ending_in_h(rsp + 16)
    stack.at(rsp).word(0xAAAA, 0xCCCC)  # rax, rcx as the probe pushed them
    scene = Scene(stack, IMAGE)
    regs = {"rip": IMAGE["probe.loop"], "rsp": rsp}
    caller = scene.step(regs)
    assert (caller.ip, caller.sp, caller.trust) == (IMAGE["H.ret"], stack["H.sp"], Trust.PROLOGUE)
    assert (caller.regs["rax"], caller.regs["rcx"]) == (0xAAAA, 0xCCCC)
    result = scene.walk(regs)
    assert result.frames[0].function_start is None and result.frames[0].size == 24
    assert frames(result)[1:] == [(IMAGE["H.ret"], stack["H.sp"], Trust.PROLOGUE)]


def test_leaf_rule_takes_the_return_address_at_rsp_when_a_call_precedes_it():
    # int3 padding: no unwind entry, no RET ahead; [rsp] returns right after a CALL
    rsp = HI - 0x400
    stack = stack_ending_in_h(rsp)
    result = Scene(stack, IMAGE).walk({"rip": IMAGE["longcall.ret"] + 4, "rsp": rsp})
    assert frames(result) == [
        (IMAGE["longcall.ret"] + 4, rsp, Trust.CONTEXT),
        (IMAGE["H.ret"], stack["H.sp"], Trust.PROLOGUE),
    ]


# ----------------------------------------------------------------------------- scanning
def test_scan_takes_the_first_word_that_follows_a_call():
    rsp = HI - 0x400
    stack = Stack(hi=HI).at(rsp)
    # junk, code that no CALL precedes (H's entry), then the return site of the 8-byte
    # `call [r12+0x10]`
    stack.word(0x1234, "H", "longcall.ret")
    result = Scene(stack, IMAGE).walk({"rip": IMAGE["longcall.ret"] + 4, "rsp": rsp})
    assert frames(result)[:2] == [
        (IMAGE["longcall.ret"] + 4, rsp, Trust.CONTEXT),
        (IMAGE["longcall.ret"], rsp + 24, Trust.SCAN_VALIDATED),
    ]


def test_scan_takes_code_it_cannot_check_as_plain_scan():
    # a module whose image is nowhere (not in the dump, no file): a word pointing into it
    # is taken, unvalidated, as the peers take it
    gone = Module("gone.dll", "C:\\nowhere\\gone.dll", 0x7FF700000000, 0x20000)
    rsp = HI - 0x400
    stack = Stack(hi=HI).at(rsp).word(0x1234, gone.base + 0x5678)
    result = Scene(stack, IMAGE, modules=[gone]).walk({"rip": IMAGE["longcall.ret"] + 4, "rsp": rsp}, clean=False)
    assert frames(result)[1] == (gone.base + 0x5678, rsp + 16, Trust.SCAN)
    assert result.possible[0].module == "gone.dll"  # nothing confirms it: a possible frame


def test_nothing_to_scan_ends_the_walk_with_no_caller():
    rsp = HI - 0x400
    result = Scene(Stack(hi=HI), IMAGE).walk({"rip": IMAGE["longcall.ret"] + 4, "rsp": rsp})
    assert len(result.frames) == 1 and result.stop is StopReason.NO_CALLER
    assert result.stop_reason == "no caller found (end of stack or unrecoverable)"


# ----------------------------------------------------------------------------- bounds
def recursion(depth: int) -> Tuple[Stack, int]:
    """H's body at SP with `depth` R frames above it, the outermost returning into H."""
    entry = HI - 0x400
    stack = stack_ending_in_h(entry)
    sp = entry
    for _ in range(depth):
        sp -= 0x30
        stack.at(sp).word("R.ret")
    return stack, sp - 0x28


def test_frame_limit_stops_the_walk_and_says_at_what():
    stack, sp = recursion(10)
    scene = Scene(stack, IMAGE)
    assert len(scene.walk({"rip": IMAGE["H"] + 8, "rsp": sp}).frames) == 12
    result = scene.walk({"rip": IMAGE["H"] + 8, "rsp": sp}, max_frames=5)
    assert len(result.frames) == 5
    assert result.stop is StopReason.FRAME_LIMIT and result.frame_limit == 5
    assert result.stop_reason == "frame limit (5) reached"


def test_caller_sp_not_above_the_callee_stops_the_walk():
    # F's frame register points below RSP: its unwind puts the caller under the callee
    rsp = HI - 0x400
    rbp = rsp - 0x100
    stack = Stack(hi=HI).at(rbp - 0x20 + 0x40 + 16).word("H.ret")
    result = Scene(stack, IMAGE).walk({"rip": IMAGE["F"] + 0x30, "rsp": rsp, "rbp": rbp})
    assert len(result.frames) == 1 and result.stop is StopReason.SP_NOT_INCREASING
    caller_sp = rbp - 0x20 + 0x40 + 24
    assert result.problems == [f"frame 0: caller SP {caller_sp:#x} not above {rsp:#x}; stopped"]


def test_caller_past_the_top_of_the_stack_ends_it():
    # the thread's stack ends at HI - 0x1000; the memory above it is readable all the same
    top = HI - 0x1000
    stack = Stack(hi=HI).at(top - 0x10 + 0x28).word("H.ret")
    scene = Scene(stack, IMAGE, stack_range=(stack.lo, top))
    result = scene.walk({"rip": IMAGE["H"] + 8, "rsp": top - 0x10})
    assert len(result.frames) == 1 and result.stop is StopReason.END_OF_STACK
    assert result.frames[0].size is None


def test_no_stack_range_assumes_a_mebibyte_above_sp():
    stack, sp = recursion(2)
    scene = Scene(stack, IMAGE, stack_range=(0, 0))
    result = scene.walk({"rip": IMAGE["H"] + 8, "rsp": sp})
    assert len(result.frames) == 4 and result.stop is StopReason.RETURN_ADDRESS_ZERO
    assert result.problems == ["stack range unknown; assuming 1 MiB above SP"]


def test_an_exception_context_in_another_threads_stack_is_walked_there():
    """The exception record names one thread, but its context's SP lies in another thread's
    recorded stack (an Unreal Engine crash reporter's record: the walk used to stop after
    frame 0): the exception ran there, and is walked there, saying so. The other thread's
    own copy of a context there (Wine's in-process dumps park the crash context in the
    writer's thread) is still not walked as a stack of its own."""
    stack, sp = recursion(2)
    regs = {"rip": IMAGE["H"] + 8, "rsp": sp}
    scene = Scene(stack, IMAGE, stack_range=(stack.lo - 0x20000, stack.lo - 0x10000))  # the named thread's own
    walker = scene.walker()
    named = scene.thread(regs)
    owner = Thread(2, Registers({"rip": IMAGE["H"], "rsp": stack.lo + 0x100}), stack.lo, stack.hi - stack.lo)
    parked = Thread(3, Registers(dict(regs)), stack.lo - 0x40000, 0x8000)
    walker.target.threads = [named, owner, parked]
    walker.target.exception = ExceptionInfo(0xC0000005, 0, regs["rip"], (0, 0), named.tid, Registers(dict(regs)))
    result = walker.walk(named, Registers(dict(regs)))
    assert len(result.frames) == 4 and result.stop is StopReason.RETURN_ADDRESS_ZERO
    assert any("lies in thread 2's recorded stack" in p and "walked there" in p for p in result.problems)
    assert len(walker.walk(parked).frames) == 1  # not the exception's thread: not walked on thread 2's stack


def test_an_exception_context_above_the_recorded_stack_is_walked_there():
    """Issue #32 item 1: the exception ran on another stack (a crash handler's): its SP lies
    above the thread's recorded range, the memory there is in the dump, and the walk goes on
    from it, saying so (the walk used to stop after frame 0 with no problem listed)."""
    stack, sp = recursion(2)
    recorded = (stack.lo - 0x10000, stack.lo - 0x8000)  # a range wholly below SP
    result = Scene(stack, IMAGE, stack_range=recorded).walk({"rip": IMAGE["H"] + 8, "rsp": sp})
    assert len(result.frames) == 4 and result.stop is StopReason.RETURN_ADDRESS_ZERO
    assert any("lies above the thread's recorded stack" in p for p in result.problems), result.problems
