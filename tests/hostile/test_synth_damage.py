"""Damage made precisely with the synthetic builder (tests/support/synth_dump.py): each case
breaks one thing in an otherwise valid dump, and the reader must say so in exactly one
line and still read everything else. corpus.py keeps damaging the real sample dumps
through the CLI; these cases reach records the samples do not have (Memory64 lists,
unloaded modules, function tables, memory info, thread names, CodeView records)."""

from __future__ import annotations

import struct
import time
from typing import Callable, Optional

import pytest

from dumpkit.sources.memory import OVERLAP_COMPARE_BUDGET
from dumpkit.sources.minidump import open_dump

from tests.support.synth_dump import (
    EXCEPTION,
    FUNCTION_TABLE,
    MEMORY64_LIST,
    MEMORY_INFO_LIST,
    MEMORY_LIST,
    MISC_INFO,
    MODULE_LIST,
    THREAD_LIST,
    THREAD_NAMES,
    UNLOADED_MODULE_LIST,
    Range,
    SynthDump,
    SynthFile,
    x64_context,
)

STACK = 0x10_0000
GUID = bytes(range(16))


def _dump() -> SynthDump:
    """Two threads, two modules, every list stream: the intact dump each case damages."""
    d = SynthDump()
    d.thread(1, context=x64_context(rip=0x1_4000_1000, rsp=STACK + 0x800), stack=d.memory(STACK, b"\x11" * 0x1000))
    d.thread(2, context=x64_context(rip=0x1_4000_1010, rsp=STACK + 0x10800), stack=d.memory(STACK + 0x10000, b"\x22" * 0x1000), name="worker")  # fmt: skip
    d.module("C:\\app\\app.exe", 0x1_4000_0000, 0x5000, version=(1, 0, 0, 1), pdb=("app.pdb", GUID, 1))
    d.module("C:\\app\\lib.dll", 0x1_8000_0000, 0x9000, version=(2, 0, 0, 2))
    d.unloaded_module("C:\\app\\old.dll", 0x1_9000_0000, 0x2000)
    d.exception(1, 0xC0000005, 0x1_4000_1000, params=(0, 0), context=x64_context(rip=0x1_4000_1000, rsp=STACK + 0x800))
    d.memory_info(STACK, 0x1000)
    d.memory_info(STACK + 0x10000, 0x1000)
    d.function_table(0x2000_0000, [(0x100, 0x180, 0x1000)])
    d.memory64(0x50_0000, b"\x33" * 0x100)
    d.memory64(0x50_0100, b"\x44" * 0x100)
    return d


def _module_record(f: SynthFile, i: int) -> int:
    return f.stream(MODULE_LIST)[0] + 4 + 108 * i


def _thread_record(f: SynthFile, i: int) -> int:
    return f.stream(THREAD_LIST)[0] + 4 + 48 * i


def _past_end(f: SynthFile) -> int:
    return len(f.data) + 0x100


# name: (damage, the one problem line (its start, or the whole), what must still be read)
Damage = Callable[[SynthFile], SynthFile]
CASES = {
    "thread_count_lies": (
        lambda f: f.lie_count(THREAD_LIST, 99),
        "ThreadList: claims 99 entries but holds only 2",
        None,
    ),
    "module_count_lies": (
        lambda f: f.lie_count(MODULE_LIST, 1000),
        "ModuleList: claims 1000 entries but holds only 2",
        None,
    ),
    "memory64_count_lies": (
        lambda f: f.lie_count(MEMORY64_LIST, (1 << 64) - 1),
        "Memory64List: claims 18446744073709551615 entries but holds only 2",
        None,
    ),
    "unloaded_count_lies": (
        lambda f: f.lie_count(UNLOADED_MODULE_LIST, 7),
        "UnloadedModuleList: claims 7 entries but holds only 1",
        None,
    ),
    "memory_info_count_lies": (
        lambda f: f.lie_count(MEMORY_INFO_LIST, 1 << 40),
        f"MemoryInfoList: claims {1 << 40} entries but holds only 2",
        None,
    ),
    "thread_names_count_lies": (
        lambda f: f.lie_count(THREAD_NAMES, 5),
        "ThreadNamesStream: claims 5 entries but holds only 1",
        None,
    ),
    "function_table_descriptors_lie": (
        lambda f: f.lie_count(FUNCTION_TABLE, 3),
        "FunctionTableStream: truncated descriptor",
        None,
    ),
    "module_list_cut_short": (
        lambda f: f.resize_stream(MODULE_LIST, 4 + 108 + 50),
        "ModuleList: claims 2 entries but holds only 1",
        "one_module",
    ),
    "exception_past_end": (  # a known stream past the end reads as a cut file: said first
        lambda f: f.move_stream(EXCEPTION, _past_end(f)),
        ("file is truncated: ", "ExceptionStream: lies past the end of the file"),
        "no_exception",
    ),
    "exception_too_short": (
        lambda f: f.resize_stream(EXCEPTION, 100),
        "ExceptionStream: unreadable (100 bytes, need 168)",
        "no_exception",
    ),
    "misc_info_too_short": (
        lambda f: f.resize_stream(MISC_INFO, 20),
        "MiscInfoStream: unreadable (20 bytes, need at least 24)",
        "no_process",
    ),
    "module_name_past_end": (
        lambda f: f.set_u32(_module_record(f, 1) + 20, _past_end(f)),
        "module 1: name points past the end of the file",
        "module_1_unnamed",
    ),
    "codeview_past_end": (
        lambda f: f.set_u32(_module_record(f, 0) + 4 + 20 + 52 + 4, _past_end(f)),
        "module app.exe CodeView record: points past the end of the file",
        "no_codeview",
    ),
    "thread_context_past_end": (
        lambda f: f.set_u32(_thread_record(f, 1) + 44, _past_end(f)),
        "thread 2: register context lies past the end of the file",
        "thread_2_no_context",
    ),
    "thread_context_empty": (
        lambda f: f.set_u32(_thread_record(f, 1) + 40, 0),
        "thread 2: no register context",
        "thread_2_no_context",
    ),
    "memory_range_past_end": (
        lambda f: f.set_u32(f.stream(MEMORY_LIST)[0] + 4 + 16 + 12, _past_end(f)),
        "MemoryList: 1 range(s) point past the end of the file (the first at 0x110000)",
        None,  # the thread record's copy of that stack still serves it
    ),
    "memory_range_wraps": (
        lambda f: f.set_u64(f.stream(MEMORY_LIST)[0] + 4 + 16, (1 << 64) - 0x10),
        "MemoryList: 1 range(s) wrap the address space (the first at 0xfffffffffffffff0)",
        None,
    ),
    "duplicate_thread_list": (
        lambda f: f.set_u32(f.entry(UNLOADED_MODULE_LIST), THREAD_LIST),
        "stream directory: 1 duplicate entry (ThreadListStream); the first of each type is used",
        "no_unloaded",
    ),
    "memory_info_entry_too_small": (
        lambda f: f.set_u32(f.stream(MEMORY_INFO_LIST)[0] + 4, 40),
        "MemoryInfoListStream: unreadable (entry size 40 too small)",
        "no_memory_info",
    ),
    "exception_parameters_lie": (
        lambda f: f.set_u32(f.stream(EXCEPTION)[0] + 32, 40),
        "ExceptionStream: claims 40 parameters; at most 15 exist",
        None,
    ),
}


def _still_read(t, what: Optional[str]) -> None:
    """Everything the damage did not touch is read as the builder wrote it."""
    assert [th.tid for th in t.threads] == [1, 2]
    assert t.threads[0].context.ip == 0x1_4000_1000
    if what != "thread_2_no_context":
        assert t.threads[1].context.sp == STACK + 0x10800
    assert t.read(STACK + 0xFFC, 4) == b"\x11" * 4 and t.read(STACK + 0x10000, 4) == b"\x22" * 4
    assert t.read(0x50_00FE, 4) == b"\x33\x33\x44\x44"
    names = [m.name for m in t.modules]
    assert names == (
        ["app.exe"] if what == "one_module" else ["app.exe", "lib.dll" if what != "module_1_unnamed" else "<module 1>"]
    )
    assert t.modules[0].file_version == "1.0.0.1"
    assert (t.modules[0].cv_record is None) == (what == "no_codeview")
    assert (t.exception is None) == (what == "no_exception")
    if t.exception is not None:
        assert t.exception.code == 0xC0000005 and t.exception.context.ip == 0x1_4000_1000
    assert (t.process is None) == (what == "no_process")
    assert len(t.unloaded_modules) == (0 if what == "no_unloaded" else 1)
    assert len(t.memory_regions) == (0 if what == "no_memory_info" else 2)
    assert t.system.is_x64


def test_the_intact_dump_has_no_problems(tmp_path):
    t = open_dump(_dump().write(tmp_path / "intact.dmp"))
    assert t.soft_errors.items == []
    _still_read(t, None)
    assert t.threads[1].name == "worker" and len(t.function_table_entries()) == 1


@pytest.mark.parametrize("case", sorted(CASES))
def test_one_damage_one_line_and_the_rest_still_read(tmp_path, case):
    damage, lines, what = CASES[case]
    f = damage(_dump().build())
    t = open_dump(f.write(tmp_path / f"{case}.dmp"))
    lines = (lines,) if isinstance(lines, str) else lines
    got = t.soft_errors.items
    assert len(got) == len(lines) and all(g.startswith(w) for g, w in zip(got, lines)), got
    _still_read(t, what)


def test_a_file_cut_inside_the_memory64_bytes_keeps_what_is_there(tmp_path):
    built = _dump().build()
    cut = built.cut(built.where["memory 0x500100"] + 0x10)  # 16 of the last range's 256 bytes left
    t = open_dump(cut.write(tmp_path / "cut.dmp"))
    assert t.soft_errors.items == [
        "Memory64List: 1 range(s) are truncated by the end of the file (the first at 0x500100)"
    ]
    assert t.read(0x500100, 0x10) == b"\x44" * 0x10 and t.read_available(0x500100, 0x100) == b"\x44" * 0x10
    _still_read(t, None)


def test_a_stack_range_outside_the_file_says_so_once(tmp_path):
    d = SynthDump()
    d.module("C:\\app\\app.exe", 0x1_4000_0000, 0x5000)
    d.thread(1, context=x64_context(rip=1, rsp=STACK), stack=Range(STACK, b"\x55" * 0x100))
    f = d.build()
    f.set_u32(_thread_record(f, 0) + 36, _past_end(f))
    t = open_dump(f.write(tmp_path / "stack.dmp"))
    assert len(t.soft_errors.items) == 1 and "stack memory (256 bytes at offset" in t.soft_errors.items[0]
    assert t.read_available(STACK, 1) == b"" and t.threads[0].stack_size == 0x100


def test_overlap_comparing_stays_within_its_budget(tmp_path):
    """One 8 MiB region listed 200 times, each copy a different stretch of the file (all
    zeros, so they agree): 1.6 GB of comparing if nothing bounded it."""
    d = SynthDump()
    d.module("C:\\app\\app.exe", 0x1_4000_0000, 0x5000)
    d.thread(1, context=x64_context(rip=1, rsp=STACK), stack=d.memory(STACK, bytes(8 << 20)))
    for _ in range(199):
        d.memory(STACK, b"\0")  # descriptors to repoint below
    f = d.build()
    zeros_at = f.where[f"memory {STACK:#x}"]
    rva = f.stream(MEMORY_LIST)[0]
    for k in range(1, 200):  # the same region again from k bytes further into the zeros
        struct.pack_into("<QII", f.data, rva + 4 + 16 * k, STACK, (8 << 20) - k, zeros_at + k)
    started = time.monotonic()
    t = open_dump(f.write(tmp_path / "budget.dmp"))
    took = time.monotonic() - started
    (line,) = t.soft_errors.items
    compared = OVERLAP_COMPARE_BUDGET // (8 << 20)  # ranges the budget lets through whole
    unchecked = int(line.split(": ")[1].split()[0])
    assert 199 - compared <= unchecked <= 199 - compared + 1, line  # the last one compared may run out
    assert "not compared" in line and took < 5, took
    assert t.read(STACK, 16) == bytes(16)
