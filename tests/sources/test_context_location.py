"""A thread whose register context location is 0 (issue #32 item 7): some writers leave the
context out that way. Offset 0 is the file header; decoded as registers it read as eip 0xa,
esp 0x2, silently. The thread is listed without registers, and the report says why."""

from __future__ import annotations

from dumpkit.engine import Options, analyze
from dumpkit.sources.minidump import open_dump

from tests.support.synth_dump import THREAD_LIST, SynthDump, x64_context

STACK = 0x10000
CONTEXT_RVA_IN_THREAD = 44  # MINIDUMP_THREAD.ThreadContext.Rva


def test_a_context_at_offset_0_is_no_context(tmp_path):
    d = SynthDump()
    stack = d.memory(STACK, bytes(0x1000))
    d.thread(7, context=x64_context(rip=0x1_4000_1000, rsp=STACK + 0x800), stack=stack, name="main")
    d.thread(8, context=x64_context(rip=0x1_4000_1000, rsp=STACK + 0x900), stack=stack, name="worker")
    d.module("C:\\app\\app.exe", 0x1_4000_0000, 0x5000)
    built = d.build()
    rva, _ = built.stream(THREAD_LIST)
    built.set_u32(rva + 4 + 48 + CONTEXT_RVA_IN_THREAD, 0)  # the second thread's context: offset 0
    target = open_dump(built.write(tmp_path / "ctx0.dmp"))
    try:
        worker = next(t for t in target.threads if t.tid == 8)
        main = next(t for t in target.threads if t.tid == 7)
        assert worker.context is None and main.context is not None
        assert any("thread 8: no register context" in e and "file header" in e for e in target.soft_errors.items)
        report = analyze(target, Options(use_recorded_paths=False), problems=target.soft_errors).report
        row = next(t for t in report.threads if t.tid == 8)
        assert row.frame_count == 0 and "context" in row.stop_reason
    finally:
        target.close()
