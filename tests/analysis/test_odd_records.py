"""Headlines that read right on the odd exception records other people's dumps carry
(issue #32 items 2, 5, 6), on dumps built with tests/support/synth_dump.py: a record with code 0,
execution jumping to an address outside every module, a code the SDK names but dumpkit has
no notes on."""

from __future__ import annotations

import pytest

from dumpkit.analysis.codes import lookup_status
from dumpkit.engine import Options, analyze
from dumpkit.sources.minidump import open_dump

from tests.support.synth_dump import SynthDump, x64_context

EXE = 0x1_4000_0000
STACK = 0x10000
NOWHERE = 0x4141_4141


def _report(tmp_path, code: int, rip: int, params=()):
    d = SynthDump()
    stack = d.memory(STACK, bytes(0x1000))
    ctx = x64_context(rip=rip, rsp=STACK + 0x800)
    d.thread(7, context=ctx, stack=stack, name="main")
    d.module("C:\\app\\app.exe", EXE, 0x5000)
    d.exception(7, code, rip, params=params, context=ctx)
    path = d.build().write(tmp_path / "odd.dmp")
    target = open_dump(str(path))
    try:
        return analyze(target, Options(use_recorded_paths=False), problems=target.soft_errors).report
    finally:
        target.close()


def test_a_record_with_code_0_is_no_crash_and_says_success_once(tmp_path):
    report = _report(tmp_path, 0, EXE + 0x1000)
    verdict = report.verdict
    assert verdict.kind == "no_exception"
    assert "code 0 (STATUS_SUCCESS)" in verdict.headline and "made the record up" in verdict.headline
    assert "exited normally" not in verdict.headline and "success: success" not in verdict.headline.lower()
    assert "success: success" not in report.crash.headline.lower()


def test_execution_outside_every_module_does_not_name_the_address_twice(tmp_path):
    report = _report(tmp_path, 0xC0000005, NOWHERE, params=(8, NOWHERE))
    headline = report.verdict.headline
    assert f"execute at {NOWHERE:#x}" in headline and "outside every module" in headline
    assert headline.count(f"{NOWHERE:#x}") == 1, headline


def _a_code_without_notes() -> int:
    for code in range(0xC0000100, 0xC0000200):
        info = lookup_status(code)
        if info.known and "no notes" in info.summary:
            return code
    pytest.skip("every code in the range has notes")


def test_where_comes_before_what_a_code_without_notes_means(tmp_path):
    code = _a_code_without_notes()
    report = _report(tmp_path, code, EXE + 0x1000)
    headline = report.verdict.headline
    name = lookup_status(code).name
    assert headline.startswith(f"0x{code:08X} ")
    assert (
        " in app.exe+0x1000: " in headline and name.lower().replace("status_", "").replace("_", " ") in headline.lower()
    )
    assert not headline.endswith("app.exe+0x1000"), headline  # not '...no notes on what causes it in app.exe+0x1000'


def test_a_read_of_the_instruction_pointer_without_nx_is_execution_gone_astray(tmp_path):
    """Issue #32 item 4: XP-era systems report running into unmapped memory as a read
    (parameter 0 = 0) of the IP itself."""
    report = _report(tmp_path, 0xC0000005, NOWHERE, params=(0, NOWHERE))
    assert report.crash.access_kind == "execute"
    headline = report.verdict.headline
    assert f"execute at {NOWHERE:#x}" in headline and "read from" not in headline, headline
    assert any("without NX" in e for e in report.verdict.evidence)


def test_a_read_elsewhere_stays_a_read(tmp_path):
    report = _report(tmp_path, 0xC0000005, EXE + 0x1000, params=(0, 0x10))
    assert report.crash.access_kind == "read" and "read from 0x10" in report.verdict.headline


def test_a_gp_fault_on_a_call_through_a_canonical_slot_is_a_corrupted_function_pointer(tmp_path):
    """Issue #32 item 3: `call qword ptr [rax]` with rax canonical faults with #GP (address
    all ones) when the pointer it loads is non-canonical: the load worked, the branch did not."""
    code_at, slot_at, garbage = 0x2000_0000, 0x3000_0000, 0xDEAD_BEEF_DEAD_BEEF
    d = SynthDump()
    stack = d.memory(STACK, bytes(0x1000))
    d.memory(code_at, bytes.fromhex("ff10") + b"\x90" * 30)  # call qword ptr [rax]
    d.memory(slot_at, garbage.to_bytes(8, "little") + bytes(24))
    ctx = x64_context(rip=code_at, rsp=STACK + 0x800, rax=slot_at)
    d.thread(7, context=ctx, stack=stack, name="main")
    d.module("C:\\app\\app.exe", EXE, 0x5000)
    d.exception(7, 0xC0000005, code_at, params=(0, 0xFFFFFFFFFFFFFFFF), context=ctx)
    target = open_dump(d.build().write(tmp_path / "gp.dmp"))
    try:
        report = analyze(target, Options(use_recorded_paths=False), problems=target.soft_errors).report
    finally:
        target.close()
    headline = report.verdict.headline
    assert "call through a corrupted function pointer" in headline, headline
    assert f"{slot_at:#x}" in headline and f"{garbage:#x}" in headline
    assert "segment or privilege" not in " ".join(report.verdict.evidence)
    assert any("use-after-free" in step for step in report.verdict.next_steps)
