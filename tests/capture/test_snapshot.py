"""`dumpkit capture --attach PID --now`, the parts that hold anywhere: what every thread's
stack points to is kept within one budget shared fairly, a DLL's writable globals are
followed like the heap, the one line it says, and its refusals. The dump itself is written
for real in the capture lane (tests/capture_lane, under Wine)."""

from __future__ import annotations

import struct

import pytest

from dumpkit.capture.pointed import IMAGE_SCN_MEM_WRITE, pointed_by_stacks, unchanging_image_spans
from dumpkit.capture.snapshot import Snapshot
from dumpkit.commands.capture import NOW_WITHOUT_ATTACH, snapshot_line
from tests.support.fakes.target import Memory
from tests.support.samples import run_cli

HEAP, DLL = 0x2_0000_0000, 0x1_8000_0000
CODE, DATA = 0x1000, 0x3000  # section RVAs
READ_CODE, READ_WRITE = 0x60000020, 0xC0000040  # .text, .data characteristics


def _words(*values: int) -> bytes:
    return struct.pack(f"<{len(values)}Q", *values)


def test_every_threads_stack_gets_its_share_of_the_budget():
    """A thread whose stack is full of pointers cannot take it all: the second thread's lock
    is kept too, and no byte is kept twice."""
    lock = b"the lock the second thread waits on\0"
    memory = Memory([(HEAP, b"x" * (1 << 20)), (HEAP + (2 << 20), lock + b"\0" * 512)])
    busy = _words(*(HEAP + 4096 * i for i in range(256)))
    waiting = _words(0, HEAP + (2 << 20))
    got = pointed_by_stacks([busy, waiting], [], memory.read_available, max_total=40_000)
    assert lock in b"".join(d for _, d in got)
    assert sum(len(d) for _, d in got) <= 40_000
    spans = sorted((a, a + len(d)) for a, d in got)
    assert all(hi <= lo for (_, hi), (lo, _) in zip(spans, spans[1:]))


def test_what_an_earlier_stack_brought_is_not_read_again():
    memory = Memory([(HEAP, b"y" * 8192)])
    got = pointed_by_stacks([_words(HEAP + 256), _words(HEAP + 256)], [], memory.read_available)
    assert len(got) == 1


def test_a_dlls_writable_sections_are_followed_and_the_rest_of_its_image_is_not():
    """A CRITICAL_SECTION in a DLL's .bss changes as the process runs; its code is the file's."""
    sections = [(CODE, 0x1800, READ_CODE), (DATA, 0x234, READ_WRITE)]
    unchanging = unchanging_image_spans(DLL, 0x6000, sections)
    assert unchanging == [(DLL, DLL + DATA), (DLL + DATA + 0x1000, DLL + 0x6000)]
    section = DLL + DATA + 0x40
    memory = Memory([(DLL + CODE, b"\xcc" * 0x2000), (DLL + DATA, b"\0" * 0x40 + b"OWNER" + b"\0" * 0xFBB)])
    got = pointed_by_stacks([_words(section, DLL + CODE + 0x10)], unchanging, memory.read_available)
    assert [a for a, _ in got if not (DLL + DATA <= a < DLL + DATA + 0x1000)] == []
    assert b"OWNER" in b"".join(d for _, d in got)
    assert IMAGE_SCN_MEM_WRITE & READ_WRITE and not IMAGE_SCN_MEM_WRITE & READ_CODE


def _snapshot(**changes) -> Snapshot:
    fields = {
        "path": r"C:\dumps\python.4242.20261128-181500.dmp",
        "pid": 4242,
        "image": "python.exe",
        "full": False,
        "threads": 5,
        "python": None,
        "added_after": 300_000,
        "pointed": 120_000,
        "suspended_seconds": 0.61,
    }
    fields.update(changes)
    return Snapshot(**fields)


def test_the_one_line_says_what_was_written_and_that_the_process_runs_on():
    line = snapshot_line(_snapshot(), 1_400_000)
    assert line == (
        r"dumpkit capture: process 4242 (python.exe) dumped as it runs: C:\dumps\python.4242.20261128-181500.dmp "
        "(1.3 MiB, 5 threads); suspended for 0.6 s, running again"
    )
    full = snapshot_line(_snapshot(full=True, suspended_seconds=2.04), 80 << 20)
    assert "(80 MiB, full memory, 5 threads); suspended for 2.0 s, running again" in full


def test_a_process_windows_would_not_resume_is_said_so():
    line = snapshot_line(_snapshot(resume_error="NTSTATUS 0xc0000022"), 1 << 20)
    assert line.endswith("; it could not be resumed (NTSTATUS 0xc0000022) and stays suspended")
    assert "\n" not in line


@pytest.mark.parametrize(
    "args", [["capture", "--now"], ["capture", "--now", "--", "python", "x.py"], ["capture", "--now", "--full"]]
)
def test_now_without_attach_is_refused_in_one_line_anywhere(args):
    done = run_cli(*args)
    assert done.returncode == 2 and done.stderr == f"dumpkit: error: {NOW_WITHOUT_ATTACH}\n"
    assert "--attach PID" in NOW_WITHOUT_ATTACH


def test_on_exit_with_now_is_refused():
    done = run_cli("capture", "--attach", "4242", "--now", "--on-exit", "never")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--on-exit" in done.stderr
