"""The per-thread analyses and the fault site (analysis/threads.py, analysis/faultsite.py),
on real sample dumps walked as the engine walks them."""

from __future__ import annotations

from dumpkit.analysis.budget import guard_fault_address
from dumpkit.analysis.environment.versions import Versions
from dumpkit.analysis.faultsite import function_entry, with_fault_site
from dumpkit.analysis.crash import decode_crash
from dumpkit.analysis.threads import analyse_thread, identical_stacks
from dumpkit.engine import Options, crashing_thread, make_walker, walk_all
from dumpkit.sources.minidump import open_dump
from tests.support.samples import SAMPLE_BIN, sample_facts, sample_path


def _walked(name: str):
    target = open_dump(str(sample_path(name)))
    options = Options(image_paths=[str(SAMPLE_BIN)])
    walker = make_walker(target, options, problems=target.soft_errors)
    return target, walker, walk_all(target, walker, options, target.soft_errors)


def test_threads_waiting_in_the_same_frames_are_grouped():
    target, _, walks = _walked("big_frame.dmp")
    same = identical_stacks(walks)
    # three pool workers parked in one wait share a stack; the crashing thread shares none
    assert same[424] == (428, 432) and same[428] == (424, 432) and same[432] == (424, 428)
    assert crashing_thread(target).tid not in same


def test_the_guard_check_uses_the_fault_address_of_an_overflow_or_a_page_fault_only():
    overflow = open_dump(str(sample_path("recursion_cycle3.dmp")))
    assert guard_fault_address(overflow) == 0x1AA1F3B
    null = open_dump(str(sample_path("null_deref.dmp")))
    assert guard_fault_address(null) == 0x10  # [rcx + 0x10] with rcx = 0
    # a #GP reports all ones, no address: nothing to compare with a guard page
    assert guard_fault_address(open_dump(str(sample_path("gp_wild_pointer.dmp")))) is None


def test_the_crashing_threads_findings_are_its_cycle_budget_and_frame_sizes():
    facts = sample_facts("recursion_cycle3.dmp")
    target, walker, walks = _walked("recursion_cycle3.dmp")
    crash = crashing_thread(target)
    found = analyse_thread(target, walker.code, crash, walks[crash.tid], True, 64 * 1024, None, target.soft_errors)
    (cycle,) = found.cycles
    assert (cycle.period, cycle.repetitions) == (3, facts["cycle_repetitions"])
    assert all(edge is not None for edge in cycle.call_edges)  # checked at every call site
    assert found.budget is not None and found.budget.used == 1_040_640
    assert found.sizes  # the crashing thread's frame sizes
    other = next(t for t in target.threads if t.tid != crash.tid and t.tid in walks)
    idle = analyse_thread(target, walker.code, other, walks[other.tid], False, 64 * 1024, None, target.soft_errors)
    assert idle.cycles == () and idle.sizes == ()


def test_the_fault_site_is_the_module_and_the_code_at_the_faulting_instruction():
    target, walker, walks = _walked("null_deref.dmp")
    frames = walks[crashing_thread(target).tid].frames
    crash = decode_crash(target.exception, target.system, frames, walker.code.read_code)
    sited = with_fault_site(target, walker.code, crash, frames, Versions(None), walker.step is not None)
    assert sited.module == "opkernels.dll"
    first = sited.disassembly.instructions[0]
    assert first.faulting and first.text == "mov rax, qword ptr [rcx + 0x10]"
    entry, source = function_entry(walker.code, frames[0].ip)
    assert source == "function_entry" and entry is not None and entry <= frames[0].ip
