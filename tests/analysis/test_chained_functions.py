"""A function MSVC split into a primary part and chained fragments (UNW_FLAG_CHAININFO) is
one function: frames in a fragment are named and keyed by the primary entry, so the
call-site check, recursion cycles and frame sizes see the function the CALL entered.

On an assembled image (tests/support/asm.py) and on the real CPython 3.8 dumps in
sample_dumps/python with the genuine python38.dll (skipped without ../shared)."""

from __future__ import annotations

from typing import Dict, Optional

import pytest

from dumpkit.analysis.callsites import call_summary, cycle_call_edges
from dumpkit.analysis.framesizes import frame_sizes
from dumpkit.analysis.recursion import find_cycles
from dumpkit.analysis.threads import cycle_code_facts
from dumpkit.pe import PEImage
from tests.support.samples import WINPYTHON, python_manifest
from tests.support.asm import INT3, Alloc, Call, Function, Image, Push, Scene, Stack


# W's primary part allocates its frame; W2, a fragment placed after another function X,
# pushes rsi, calls HELP and calls W again (a recursion whose return sites are all in
# the fragment). H calls W.
def functions():
    return [
        Function("H", [Alloc(0x28)], [INT3 * 12, Call("H.ret", to="W")]),
        Function("W", [Push("rbx"), Alloc(0x200)], [INT3 * 16]),
        Function("X", [Alloc(0x28)], [INT3 * 16]),
        Function(
            "W2", [Push("rsi")], [INT3 * 2, Call("W2.help", to="HELP"), Call("W2.ret", to="W"), INT3 * 4], chain="W"
        ),
        Function("HELP", [Alloc(0x28)], [INT3 * 8]),
    ]


# W exported under an MSVC-decorated name, X and HELP under plain ones; in UNNAMED, W has no name.
IMAGE = Image(
    "synth.dll",
    0x7FF650000000,
    functions(),
    exports={"?Walk@tree@@YAHPEAX@Z": "W", "Xfunc": "X", "Py_ReprEnter": "HELP"},
)
UNNAMED = Image("plain.dll", 0x7FF660000000, functions(), exports={"Xfunc": "X", "Py_ReprEnter": "HELP"})
W_FRAME = 8 + 0x200 + 8 + 8  # push rsi (the fragment), W's allocation and push rbx, the return address
DEPTH = 5


def recursion_through_the_fragment(image: Image = IMAGE):
    """Frame 0 inside W2 (its prologue done), DEPTH-1 frames returning into W2, then H."""
    stack = Stack(lo=0x100000, hi=0x110000)
    sp = 0x108000
    for i in range(DEPTH):
        stack.at(sp).word(0x5151).skip(0x200).word(0xB0B).word("W2.ret" if i < DEPTH - 1 else "H.ret")
        sp += W_FRAME
    stack.at(sp).skip(0x28).word(0)
    scene = Scene(stack, image)
    walker = scene.walker()
    walk = walker.walk(scene.thread({"rip": image["W2"] + 2, "rsp": 0x108000}))
    return walker, walk.frames


def test_frames_in_a_fragment_are_the_primary_function_named_from_its_entry():
    _, frames = recursion_through_the_fragment()
    assert len(frames) == DEPTH + 1
    w = IMAGE.rva("W")
    assert [f.function_start for f in frames] == [w] * DEPTH + [IMAGE.rva("H")]
    # the demangled name at W's entry, not X's (nearer below the fragment), nor func_<W2>
    assert frames[0].symbol == f"synth.dll!tree::Walk+{IMAGE['W2'] + 2 - IMAGE['W']:#x}"
    assert {f.function_name for f in frames[:DEPTH]} == {"synth.dll!tree::Walk"}
    assert frames[1].symbol == f"synth.dll!tree::Walk+{IMAGE['W2.ret'] - IMAGE['W']:#x}"
    assert all(f.size == W_FRAME for f in frames[:DEPTH])


def test_a_call_to_the_primary_entry_confirms_a_return_into_its_fragment():
    walker, frames = recursion_through_the_fragment()
    cycles = find_cycles(frames)
    assert [(c.functions, c.period, c.repetitions) for c in cycles] == [(("synth.dll!tree::Walk",), 1, DEPTH)]
    edges = cycle_call_edges(frames, cycles[0], walker.code.read_code, lambda name: IMAGE.base)
    assert [(e.call, e.target, e.confirmed) for e in edges] == [("direct", IMAGE["W"], True)]
    summary, contradicted = call_summary(edges)
    assert not contradicted and summary is not None and "lands on the next function's entry" in summary


def test_the_frame_size_is_the_functions_and_its_request_the_primary_prologue():
    walker, frames = recursion_through_the_fragment()
    sizes = frame_sizes(frames, walker.code.read_code, module_base=lambda name: IMAGE.base)
    top = sizes[0]
    assert (top.function, top.size, top.requested) == ("synth.dll!tree::Walk", W_FRAME, 0x200)
    assert top.prologue_text == "sub rsp, 0x200"


def test_an_unnamed_members_code_facts_come_from_its_fragments_too():
    walker, frames = recursion_through_the_fragment(UNNAMED)
    cycle = find_cycles(frames)[0]
    member = f"plain.dll!func_{UNNAMED.rva('W'):x}"
    assert cycle.functions == (member,)
    # W's primary part calls nothing; the fragment the stack is in calls HELP and W
    facts = cycle_code_facts(walker.code, frames, cycle)
    assert facts[member].callees == ("plain.dll!Py_ReprEnter", member)


# ----------------------------------------------------------------------------- real dumps
SAMPLES = [d for d in python_manifest() if d.get("crash_thread_tid")]
_IMAGES: Dict[str, Optional[PEImage]] = {}


def _image(module: str) -> Optional[PEImage]:
    """The genuine image of a CPython module, opened here to tell fragments apart."""
    if module not in _IMAGES:
        path = WINPYTHON / module
        _IMAGES[module] = PEImage.from_file(str(path)) if path.is_file() else None
    return _IMAGES[module]


@pytest.mark.parametrize("facts", SAMPLES, ids=[d["file"] for d in SAMPLES])
@pytest.mark.slow
def test_no_crash_frame_is_named_after_a_fragment_of_python38(facts, python_report):
    if _image("python38.dll") is None:  # a bundled sample analyses without it; this check reads it
        pytest.skip("python38.dll of ../shared/winpython not here")
    report = python_report(facts)
    crash = next(t for t in report.threads if t.is_crashing)
    fragments = 0
    for f in crash.frames:
        image = _image(f.module) if f.module else None
        if image is None or f.rva is None:
            continue
        entry = image.lookup_function(f.rva - (1 if f.index else 0))
        if entry is None:
            continue
        chain = image.unwind_chain(entry.unwind_rva)
        if len(chain) == 1:
            continue
        fragments += 1
        primary = chain[-2].chained
        assert primary is not None
        assert f.function_start == primary.begin_rva, (f.index, f.symbol)
        assert f"func_{entry.begin_rva:x}" not in (f.symbol or ""), (f.index, f.symbol)
    # every one of these stacks runs through the interpreter's split functions: the
    # check above had work to do
    assert fragments > 0


RECURSIONS = [d for d in SAMPLES if d.get("expected_class") == "recursion"]


@pytest.mark.parametrize("facts", RECURSIONS, ids=[d["file"] for d in RECURSIONS])
def test_recursion_call_sites_check_out_and_the_verdict_is_confident(facts, python_report):
    report = python_report(facts)
    crash = next(t for t in report.threads if t.is_crashing)
    edges = crash.cycles[0].call_edges
    assert [e for e in edges if e.confirmed is False] == []
    assert any(e.confirmed for e in edges)
    assert not any("call-site check FAILED" in e for e in report.verdict.evidence)
    assert report.verdict.confidence == "high", report.verdict.evidence
