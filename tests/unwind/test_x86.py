"""The x86 step on assembled 32-bit code (tests/support/asm.py): the saved-EBP chain, its
end, and scanning with call-site checks in 32-bit mode when the chain is not usable."""

from __future__ import annotations

from typing import List, Tuple

from dumpkit.unwind.frames import StackWalk, StopReason, Trust
from tests.support.synth_pe import I386
from tests.support.asm import INT3, Call, Code, Image, Scene, Stack

# start -> main -> worker -> leaf; main and worker keep EBP frames (push ebp; mov ebp, esp),
# leaf omits its frame pointer.
START = Code("start", INT3 * 8, Call("start.ret"), INT3 * 8)
MAIN = Code("main", bytes.fromhex("5589e5"), INT3 * 8, Call("main.ret"), INT3 * 8)
WORKER = Code("worker", bytes.fromhex("5589e583ec20"), INT3 * 8, Call("worker.ret"), INT3 * 8)
LEAF = Code("leaf", INT3 * 16)
IMAGE = Image("app.exe", 0x400000, [START, MAIN, WORKER, LEAF], machine=I386)
LO, HI = 0x100000, 0x104000


def frames(result: StackWalk) -> List[Tuple[int, int, Trust]]:
    """Every frame the walk found: its stack, then the scanned frames nothing confirmed."""
    return [(f.ip, f.sp, f.trust) for f in list(result.frames) + list(result.possible)]


def ebp_frames(start_frame: bool = False) -> Stack:
    """The stack as start -> main -> worker left it, worker's frame innermost:
    marks "M" and "W" are main's and worker's EBP, "worker.esp" its ESP. Without
    `start_frame` start keeps no frame pointer (main saved EBP 0); with it, start's frame
    ("S") is the chain's outermost link, saved EBP 0 over a return slot of 0 as a thread's
    first frame is, and above it lie code addresses a thread start leaves (its routine's
    address, an exception handler's)."""
    stack = Stack(LO, HI, word_size=4)
    top, saved = HI - 0x100, 0
    if start_frame:
        stack.at(HI - 0x40).mark("S").word(0, 0, "main.ret", "start.ret")  # the link; stale code words
        top, saved = stack["S"] - 0x20, "S"
    stack.at(top).word("start.ret")  # start called main
    stack.at(top - 4).mark("M").word(saved)  # main: push ebp
    stack.at(stack["M"] - 0x10 - 4).word("main.ret")  # main's locals, then call worker
    stack.at(stack["M"] - 0x10 - 8).mark("W").word("M")  # worker: push ebp
    return stack.at(stack["W"] - 0x20).mark("worker.esp")


def walk_from_worker(stack: Stack) -> StackWalk:
    return Scene(stack, IMAGE, arch=0).walk(
        {"eip": IMAGE["worker"] + 10, "esp": stack["worker.esp"], "ebp": stack["W"]}
    )


def test_ebp_chain_is_followed_to_its_end():
    stack = ebp_frames()
    result = walk_from_worker(stack)
    assert frames(result) == [
        (IMAGE["worker"] + 10, stack["worker.esp"], Trust.CONTEXT),
        (IMAGE["main.ret"], stack["W"] + 8, Trust.FRAME_POINTER),
        (IMAGE["start.ret"], stack["M"] + 8, Trust.FRAME_POINTER),
    ]
    assert [f.size for f in result.frames] == [0x28, stack["M"] - stack["W"], None]
    assert [(f.module, f.rva) for f in result.frames[1:]] == [
        ("app.exe", IMAGE.rva("main.ret")),
        ("app.exe", IMAGE.rva("start.ret")),
    ]
    # the chain ends at start's saved EBP of 0, and nothing above start is a return address
    assert result.stop is StopReason.NO_CALLER and result.problems == []


def test_without_a_frame_pointer_the_walk_scans_for_words_after_a_call():
    # leaf reused EBP as a plain register; on its stack: junk, an address of code that no
    # CALL precedes (leaf's own entry), then worker's return site
    stack = ebp_frames()
    leaf_esp = stack["worker.esp"] - 16
    stack.at(leaf_esp).word(0x1234, "leaf", "worker.ret")
    result = Scene(stack, IMAGE, arch=0).walk({"eip": IMAGE["leaf"] + 4, "esp": leaf_esp, "ebp": 0x1234})
    assert frames(result)[:3] == [
        (IMAGE["leaf"] + 4, leaf_esp, Trust.CONTEXT),
        (IMAGE["worker.ret"], leaf_esp + 12, Trust.SCAN_VALIDATED),
        # worker's EBP is unknown after a scan, so main is found by scanning too
        (IMAGE["main.ret"], stack["W"] + 8, Trust.SCAN_VALIDATED),
    ]


def test_a_saved_ebp_below_the_frame_is_not_followed():
    # worker's saved EBP points down the stack: a loop, not a chain; scanning takes over
    stack = ebp_frames()
    stack.at(stack["W"]).word(stack["W"] - 0x40)
    result = walk_from_worker(stack)
    assert frames(result)[1] == (IMAGE["main.ret"], stack["W"] + 8, Trust.SCAN_VALIDATED)


def test_frame_limit_and_a_stack_range_that_misses_esp():
    stack = ebp_frames()
    regs = {"eip": IMAGE["worker"] + 10, "esp": stack["worker.esp"], "ebp": stack["W"]}
    result = Scene(stack, IMAGE, arch=0).walk(regs, max_frames=2)
    assert len(result.frames) == 2 and result.stop is StopReason.FRAME_LIMIT
    assert result.stop_reason == "frame limit (2) reached" and result.frame_limit == 2
    # a recorded range that does not hold ESP is replaced by a mebibyte above it
    result = Scene(stack, IMAGE, arch=0, stack_range=(LO, LO + 0x100)).walk(regs)
    assert len(result.frames) == 3
    assert result.problems == ["stack range does not contain ESP; assuming 1 MiB above it"]


def test_the_walk_stops_at_the_chains_outermost_link():
    stack = ebp_frames(start_frame=True)
    result = walk_from_worker(stack)
    # start's frame is the last: the code addresses above its link are not callers
    assert frames(result) == [
        (IMAGE["worker"] + 10, stack["worker.esp"], Trust.CONTEXT),
        (IMAGE["main.ret"], stack["W"] + 8, Trust.FRAME_POINTER),
        (IMAGE["start.ret"], stack["M"] + 8, Trust.FRAME_POINTER),
    ]
    assert result.stop is StopReason.RETURN_ADDRESS_ZERO and result.frames[-1].size is None


def test_a_zero_saved_ebp_over_a_return_address_is_not_the_end():
    # only both words zero end the chain: a saved EBP of 0 under a real return address is
    # a caller without a frame pointer (start in ebp_frames), whose caller is scanned for
    stack = ebp_frames()
    stack.at(HI - 0x100 + 0x20).word("main.ret")
    result = walk_from_worker(stack)
    assert frames(result)[3] == (IMAGE["main.ret"], HI - 0x100 + 0x24, Trust.SCAN_VALIDATED)


def test_after_a_scanned_frame_the_saved_ebp_below_its_return_address_resumes_the_chain():
    # leaf pushed worker's EBP ("W") on entry, then used EBP for data: the context's EBP
    # is junk, worker's return address is found by scanning, and the word below it is
    # worker's frame
    stack = ebp_frames(start_frame=True)
    leaf_esp = stack["worker.esp"] - 16
    stack.at(leaf_esp).word(0x1234, 0x5678, "W", "worker.ret")
    result = Scene(stack, IMAGE, arch=0).walk({"eip": IMAGE["leaf"] + 4, "esp": leaf_esp, "ebp": 0x1234})
    assert frames(result) == [
        (IMAGE["leaf"] + 4, leaf_esp, Trust.CONTEXT),
        (IMAGE["worker.ret"], leaf_esp + 16, Trust.SCAN_VALIDATED),
        (IMAGE["main.ret"], stack["W"] + 8, Trust.FRAME_POINTER),  # back on the chain
        (IMAGE["start.ret"], stack["M"] + 8, Trust.FRAME_POINTER),
    ]
    assert result.stop is StopReason.RETURN_ADDRESS_ZERO


def test_a_word_below_the_return_address_that_points_at_no_frame_is_not_taken():
    # the word below worker.ret points up the stack, but at zeroed locals (no saved EBP
    # and return address there): taking it would end the walk at a false "chain end"
    stack = ebp_frames(start_frame=True)
    leaf_esp = stack["worker.esp"] - 16
    stale = stack["worker.esp"] + 8  # zeros in worker's locals
    stack.at(leaf_esp).word(0x1234, 0x5678, stale, "worker.ret")
    result = Scene(stack, IMAGE, arch=0).walk({"eip": IMAGE["leaf"] + 4, "esp": leaf_esp, "ebp": 0x1234})
    assert frames(result)[2] == (IMAGE["main.ret"], stack["W"] + 8, Trust.SCAN_VALIDATED)
    # ... nor one further above its slot than a frame plausibly spans (128 KiB), which a
    # nearer one with the same frame there is
    for gap, third in ((0x1000, [Trust.FRAME_POINTER]), (0x30000, [])):
        far = Stack(LO, 0x140000, word_size=4)
        far.at(0x100100).word(0x1234, 0x100108 + gap, "worker.ret")
        far.at(0x100108 + gap).word(0, "main.ret")
        result = Scene(far, IMAGE, arch=0).walk({"eip": IMAGE["leaf"] + 4, "esp": 0x100100, "ebp": 0})
        assert [f.trust for f in result.frames] == [Trust.CONTEXT, Trust.SCAN_VALIDATED] + third
