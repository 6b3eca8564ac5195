"""Every stream the reader parses, round-tripped: values chosen here, written by the
synthetic builder (tests/support/synth_dump.py), read back by `open_dump`. The real sample dumps
(test_minidump.py) show the reader on what writers really produce; these show each field
lands where the SDK layout puts it, including what no sample holds (x86 contexts, XSAVE
contexts, Memory64 lists, function tables, unloaded modules, version records)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from minidump.minidumpfile import MinidumpFile

from dumpkit.sources.minidump import open_dump
from dumpkit.target import MemoryNotInDump

from tests.support.synth_dump import X86, Range, SynthDump, x64_context, x86_context

GUID = bytes.fromhex("00112233445566778899aabbccddeeff")
STACK = 0x7FF7_0000_0000
REGS = {
    "rax": 0x1111,
    "rbx": 0x2222,
    "rcx": 0x3333,
    "rdx": 0x4444,
    "rsi": 0x5555,
    "rdi": 0x6666,
    "rbp": STACK + 0x800,
    "rsp": STACK + 0x700,
    "r8": 8,
    "r9": 9,
    "r10": 10,
    "r11": 11,
    "r12": 12,
    "r13": 13,
    "r14": 14,
    "r15": 15,
    "rip": 0x1_4000_1234,
    "eflags": 0x10246,
}


def _open(d: SynthDump, tmp_path: Path, name: str = "synth.dmp"):
    return open_dump(d.write(tmp_path / name))


def _full_dump() -> SynthDump:
    d = SynthDump(flags=0x1826, version_high=0x1234)
    d.system_info(
        os_version=(10, 0, 22631),
        processors=16,
        level=6,
        revision=0x9A03,
        csd="Service Pack 9",
        cpuid=(0x000906A3, 0xBFEBFBFF, 0x2C100800),
        wine=("wine-8.0 (Debian 8.0~repack-4)", "Linux", "6.1.0"),
    )
    d.misc_info(
        pid=5150,
        times=(1_700_000_000, 12, 3),
        mhz=(3600, 2400),
        build_string="10.0.22621.1 (WinBuild.160101.0800)",
        xstate_features=0x2E7,
    )
    main_stack = d.memory(STACK, bytes(range(256)) * 16)
    d.thread(0x1A4, context=x64_context(**REGS), stack=main_stack, teb=0x7FFDE000, name="MainThread", priority=2)
    d.thread(
        0x2B0,
        context=x64_context(rip=0x1_4000_2000, rsp=STACK + 0x10F00, xstate=True),
        stack=d.memory(STACK + 0x10000, b"\xab" * 0x1000),
        suspend_count=1,
    )
    d.module(
        "C:\\Program Files\\Python38\\python.exe",
        0x1_4000_0000,
        0x1A000,
        timestamp=0x5DFAA2E4,
        checksum=0x1F1B3,
        version=(3, 8, 1150, 1013),
        product_version=(3, 8, 1150, 0),
        pdb=("D:\\a\\1\\s\\PCbuild\\amd64\\python.pdb", GUID, 2),
    )
    d.module("C:\\Windows\\System32\\ntdll.dll", 0x7FFA_0000_0000, 0x1F8000, timestamp=0x12345678)
    d.unloaded_module("C:\\Windows\\System32\\gone.dll", 0x7FF9_0000_0000, 0x3000, timestamp=0x600D, checksum=7)
    d.exception(
        0x1A4,
        0xC0000005,
        0x1_4000_1234,
        params=(1, 0xDEAD0000),
        flags=1,
        context=x64_context(**REGS),
        nested_record=0x1000,
    )
    d.memory_info(STACK, 0x1000, allocation_base=STACK - 0xF000, allocation_protect=0x04, protect=0x104)
    d.memory_info(0x1_4000_0000, 0x1000, protect=0x02, type=0x1000000, allocation_protect=0x80)
    d.function_table(0x2000_0000, [(0x100, 0x180, 0x1000), (0x200, 0x240, 0x1008 | 1)])
    d.raw_stream(0xFFF0, b"Wine host libraries, skipped")
    return d


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    return _open(_full_dump(), tmp_path_factory.mktemp("synth"))


def test_header_and_directory(full):
    assert full.soft_errors.items == []
    assert full.dump.version == 0x1234A793 and full.dump.flags == 0x1826 and full.dump.timestamp == 0x65000000
    listed = {s.type: s for s in full.dump.streams}
    assert set(listed) == {7, 15, 3, 24, 4, 14, 5, 16, 6, 13, 0xFFF0}
    assert not listed[0xFFF0].known and listed[0xFFF0].name == "WineHostLibraries"
    assert full.dump.unreadable == ()


def test_system_info_with_the_cpu_union_and_wine_marker(full):
    s = full.system
    assert (s.processor_architecture, s.processor_level, s.processor_revision) == (9, 6, 0x9A03)
    assert (s.number_of_processors, s.product_type, s.platform_id) == (16, 1, 2)
    assert (s.os_major, s.os_minor, s.os_build, s.csd_version) == (10, 0, 22631, "Service Pack 9")
    assert s.cpu_vendor == "GenuineIntel"
    assert (s.cpuid_version, s.cpuid_features, s.amd_extended_features) == (0x000906A3, 0xBFEBFBFF, 0x2C100800)
    assert (s.cpu_family, s.cpu_model, s.cpu_stepping) == (6, 0x9A, 3)
    assert s.wine_version == "wine-8.0 (Debian 8.0~repack-4) / Linux / 6.1.0"


def test_system_info_of_a_non_x86_cpu_keeps_processor_features(tmp_path):
    d = SynthDump(arch=12)
    d.system_info(vendor=None, processor_features=(0x1234, 0x5678))
    t = _open(d, tmp_path)
    assert t.system.arch_name == "ARM64" and t.system.cpu_vendor is None
    assert t.system.processor_features == (0x1234, 0x5678) and t.system.wine_version is None


def test_misc_info_up_to_version_5(full):
    p = full.process
    assert (p.pid, p.create_time, p.user_time, p.kernel_time) == (5150, 1_700_000_000, 12, 3)
    assert (p.processor_max_mhz, p.processor_current_mhz) == (3600, 2400)
    assert full.build_string == "10.0.22621.1 (WinBuild.160101.0800)"
    assert full.xstate_enabled_features == 0x2E7


@pytest.mark.parametrize(
    "kwargs, want",
    [
        ({"pid": None}, (None, None, None)),  # MINIDUMP_MISC_INFO, no flags set
        ({"pid": 9, "times": (5, 6, 7)}, (9, 5, None)),  # 24 bytes: no MHz fields to read
        ({"pid": 9, "mhz": (1000, 900)}, (9, None, 1000)),  # MINIDUMP_MISC_INFO_2
    ],
)
def test_misc_info_fields_follow_its_flags(tmp_path, kwargs, want):
    d = SynthDump()
    d.misc_info(**kwargs)
    t = _open(d, tmp_path)
    assert (t.process.pid, t.process.create_time, t.process.processor_max_mhz) == want
    assert t.build_string is None and t.xstate_enabled_features is None


def test_threads_contexts_and_names(full):
    main, worker = full.threads
    assert (main.tid, main.teb, main.priority, main.suspend_count, main.name) == (0x1A4, 0x7FFDE000, 2, 0, "MainThread")
    assert (main.stack_start, main.stack_size) == (STACK, 0x1000)
    assert main.context.values["rip"] == REGS["rip"] and main.context.sp == REGS["rsp"]
    for name, value in REGS.items():
        assert main.context.values[name] == value, name
    assert main.context.context_size == 1232 and main.context.values["cs"] == 0x33
    # the XSAVE context: CONTEXT_XSTATE set, CONTEXT_EX and the XSAVE area after the 1232 bytes
    assert (worker.tid, worker.suspend_count, worker.name) == (0x2B0, 1, None)
    assert worker.context.context_size == 1600 and worker.context.context_flags & 0x40
    assert worker.context.ip == 0x1_4000_2000 and worker.context.sp == STACK + 0x10F00


def test_x86_dump_threads_and_exception(tmp_path):
    d = SynthDump(arch=X86)
    d.system_info(vendor="AuthenticAMD", cpuid=(0x00A20F10, 0x178BFBFF, 0x2FD3FBFF))
    regs = {"eip": 0x401234, "esp": 0x19FF00, "ebp": 0x19FF40, "eax": 1, "ecx": 2, "edi": 7, "eflags": 0x202}
    d.thread(11, context=x86_context(**regs), stack=d.memory(0x19F000, bytes(0x1000)))
    d.module("C:\\app\\app32.exe", 0x400000, 0x10000)
    d.exception(11, 0xC0000094, 0x401234, context=x86_context(**regs))
    t = _open(d, tmp_path)
    assert t.soft_errors.items == []
    assert t.system.arch_name == "x86" and t.system.cpu_vendor == "AuthenticAMD"
    assert (t.system.cpu_family, t.system.cpu_model) == (0x19, 0x21)
    ctx = t.threads[0].context
    assert ctx.context_size == 716 and ctx.ip == 0x401234 and ctx.sp == 0x19FF00
    assert {k: ctx.values[k] for k in regs} == regs
    assert t.exception.code == 0xC0000094 and t.exception.context.ip == 0x401234


def test_modules_versions_and_codeview(full):
    py, nt = full.modules
    assert (py.name, py.path) == ("python.exe", "C:\\Program Files\\Python38\\python.exe")
    assert (py.base, py.size, py.timestamp, py.checksum) == (0x1_4000_0000, 0x1A000, 0x5DFAA2E4, 0x1F1B3)
    assert (py.file_version, py.product_version) == ("3.8.1150.1013", "3.8.1150.0")
    cv = py.cv_record
    assert cv.pdb_name == "D:\\a\\1\\s\\PCbuild\\amd64\\python.pdb" and cv.age == 2
    # the GUID's first three fields are little-endian, the last eight bytes as stored
    assert cv.guid == "33221100-5544-7766-8899-AABBCCDDEEFF"
    assert cv.symbol_id == "33221100554477668899AABBCCDDEEFF2"
    assert (nt.file_version, nt.cv_record) == (None, None)
    assert full.module_at(0x1_4000_0000 + 0x19FFF) is py and full.module_at(0x1_4000_0000 + 0x1A000) is None


def test_unloaded_modules(full):
    (u,) = full.unloaded_modules
    assert (u.name, u.base, u.size, u.timestamp) == ("gone.dll", 0x7FF9_0000_0000, 0x3000, 0x600D)


def test_exception_record_and_context(full):
    e = full.exception
    assert (e.thread_id, e.code, e.flags, e.address) == (0x1A4, 0xC0000005, 1, 0x1_4000_1234)
    assert e.parameters == (1, 0xDEAD0000) and e.nested
    assert e.context.ip == REGS["rip"] and e.context.values["rbx"] == REGS["rbx"]


def test_memory_info_list(full):
    image, stack = full.memory_regions  # sorted by base
    assert (stack.base, stack.allocation_base, stack.size, stack.state) == (STACK, STACK - 0xF000, 0x1000, 0x1000)
    assert (stack.protect, stack.allocation_protect, stack.type) == (0x104, 0x04, 0x20000)
    assert (image.base, image.protect, image.type, image.allocation_protect) == (0x1_4000_0000, 2, 0x1000000, 0x80)


def test_function_table_entries_keep_the_indirect_bit(full):
    base = 0x2000_0000
    assert full.function_table_entries() == [
        (base + 0x100, base + 0x180, base + 0x1000, base),
        (base + 0x200, base + 0x240, base + 0x1009, base),
    ]


def test_memory_reads_in_and_across_memory_list_ranges(full):
    assert full.read(STACK + 0x10, 4) == bytes([0x10, 0x11, 0x12, 0x13])
    assert full.read(STACK + 0x10FFC, 4) == b"\xab" * 4
    with pytest.raises(MemoryNotInDump):
        full.read(STACK + 0xFFE, 4)  # the gap between the two stacks
    assert full.read_available(STACK + 0xFFE, 4) == bytes([0xFE, 0xFF])
    assert full.memory_ranges() == [(STACK, STACK + 0x1000), (STACK + 0x10000, STACK + 0x11000)]


def test_adjacent_ranges_whose_bytes_lie_apart_in_the_file_read_as_one(tmp_path):
    d = SynthDump()
    d.memory(0x5000, b"A" * 16)
    d.memory(0x9000, b"gap")  # written between the two in the file
    d.memory(0x5010, b"B" * 16)
    built = d.build()
    assert built.where["memory 0x5010"] != built.where["memory 0x5000"] + 16
    t = open_dump(built.write(tmp_path / "adj.dmp"))
    assert t.read(0x500C, 8) == b"AAAABBBB" and t.read(0x5000, 32) == b"A" * 16 + b"B" * 16


def test_memory64_list_offsets_run_on_from_the_base_rva(tmp_path):
    d = SynthDump(flags=0x2)  # MiniDumpWithFullMemory
    chunks = [(0x10000, b"\x01" * 0x1000), (0x11000, b"\x02" * 0x2000), (0x20000, b"\x03" * 0x10)]
    stacks = [d.memory64(address, data) for address, data in chunks]
    d.thread(1, context=x64_context(rip=0x10, rsp=0x11800), stack=stacks[1])
    d.module("C:\\app\\app.exe", 0x1_4000_0000, 0x5000)
    built = d.build()
    assert struct.unpack_from("<QII", built.data, built.stream(3)[0] + 4 + 24) == (
        0x11000,
        0x2000,
        built.where["memory 0x11000"],
    )  # the thread record points at the Memory64 bytes, as full-memory writers do
    rva, _size = built.stream(9)
    count, base_rva = struct.unpack_from("<QQ", built.data, rva)
    assert count == 3 and base_rva == built.where["memory 0x10000"]
    assert built.where["memory 0x11000"] == base_rva + 0x1000 and built.where["memory 0x20000"] == base_rva + 0x3000
    t = open_dump(built.write(tmp_path / "full.dmp"))
    assert t.soft_errors.items == []
    assert t.read(0x10FFE, 4) == b"\x01\x01\x02\x02"  # across the seam of two Memory64 ranges
    assert t.read(0x20000, 0x10) == b"\x03" * 0x10
    assert t.memory_range_count == 3  # adjacent ranges stay apart in the list and join on reads
    assert t.threads[0].stack_start == 0x11000


def test_a_stack_only_the_thread_record_has_is_still_readable(tmp_path):
    d = SynthDump()
    d.thread(3, context=x64_context(rip=1, rsp=0x3000), stack=Range(0x3000, b"S" * 64))  # not in the MemoryList
    d.module("C:\\app\\app.exe", 0x1_4000_0000, 0x5000)
    t = _open(d, tmp_path)
    assert t.read(0x3000, 64) == b"S" * 64 and t.soft_errors.items == []


def test_an_independent_reader_sees_the_same_dump(tmp_path):
    """The `minidump` package's own file parser (not dumpkit's) agrees with what the
    builder meant; it raises on stream types it does not know, so none are added."""
    d = SynthDump()
    d.misc_info(pid=77, times=(1_700_000_000, 3, 4), mhz=(3000, 2900))
    d.thread(7, context=x64_context(rip=0x1_4000_1000, rsp=0x100F00), stack=d.memory(0x100000, bytes(0x1000)))
    d.module("C:\\app\\app.exe", 0x1_4000_0000, 0x5000, timestamp=0x5EADBEEF, version=(1, 2, 3, 4))
    d.unloaded_module("C:\\x\\gone.dll", 0x1_8000_0000, 0x1000)
    d.exception(7, 0xC0000005, 0x1_4000_1000, params=(0, 0x10))
    d.memory_info(0x100000, 0x1000)
    d.memory64(0x300000, b"a" * 16)
    m = MinidumpFile.parse(d.write(tmp_path / "indep.dmp"))
    assert m.sysinfo.BuildNumber == 19045 and m.sysinfo.NumberOfProcessors == 8
    (th,) = m.threads.threads
    assert th.ThreadId == 7 and th.ContextObject.Rip == 0x1_4000_1000 and th.ContextObject.Rsp == 0x100F00
    (mod,) = m.modules.modules
    assert (mod.name, mod.baseaddress, mod.size, mod.timestamp) == (
        "C:\\app\\app.exe",
        0x1_4000_0000,
        0x5000,
        0x5EADBEEF,
    )
    assert mod.versioninfo.dwFileVersionMS == 0x10002 and mod.versioninfo.dwFileVersionLS == 0x30004
    rec = m.exception.exception_records[0]
    assert rec.ThreadId == 7 and rec.ExceptionRecord.ExceptionAddress == 0x1_4000_1000
    assert rec.ExceptionRecord.ExceptionInformation == [0, 0x10]
    assert [(s.start_virtual_address, s.size) for s in m.memory_segments.memory_segments] == [(0x100000, 0x1000)]
    assert [(s.start_virtual_address, s.size) for s in m.memory_segments_64.memory_segments] == [(0x300000, 16)]
    assert (m.misc_info.ProcessId, m.misc_info.ProcessorMaxMhz) == (77, 3000)
    assert [u.name for u in m.unloaded_modules.modules] == ["C:\\x\\gone.dll"]
    assert m.memory_info.infos[0].RegionSize == 0x1000


def _commented(*streams):
    d = SynthDump().system_info().no_misc_info()
    d.thread(0x1A4, context=x64_context(**REGS), stack=Range(STACK + 0x700, b"\0" * 0x100))
    for stype, payload in streams:
        d.raw_stream(stype, payload)
    return d


def test_comment_streams_say_what_the_writer_said(tmp_path):
    """CommentStreamW (dumpkit capture: why it stopped the process; ProcDump: its command
    line and trigger) and CommentStreamA are read, up to their NUL, printable only."""
    wide = "dumpkit capture: the process ended itself: ntdll!RtlExitUserProcess was called with exit code 3\0junk"
    t = _open(_commented((11, wide.encode("utf-16-le")), (10, b"*** procdump -ma -t\x07 python.exe\0")), tmp_path)
    assert t.comment is not None
    lines = t.comment.splitlines()
    assert "dumpkit capture: the process ended itself: ntdll!RtlExitUserProcess was called with exit code 3" in lines
    assert "*** procdump -ma -t? python.exe" in lines
    assert "junk" not in t.comment
    assert not [p for p in t.soft_errors.items if "comment" in p.lower()]


def test_a_dump_without_comments_has_none(full):
    assert full.comment is None


def _handle_data(count: int, claimed: int, size: int = 32) -> bytes:
    descriptors = b"".join(
        struct.pack("<QIIIIII", 0x4 * (i + 1), 0, 0, 0, 0x1F0003, 1, 2)[:size].ljust(size, b"\0") for i in range(count)
    )
    return struct.pack("<IIII", 16, size, claimed, 0) + descriptors


def test_handle_data_gives_each_handle_and_says_what_is_missing(tmp_path):
    """HandleDataStream (procdump -ma writes it): every descriptor present, of either size;
    a count past the stream's end is a soft error naming the stream, not a failure."""
    t = _open(_commented((12, _handle_data(3, 3, size=40))), tmp_path)
    assert [h.value for h in t.handles] == [0x4, 0x8, 0xC]
    assert all(h.type_name is None and h.object_name is None for h in t.handles)
    t = _open(_commented((12, _handle_data(2, 9))), tmp_path, name="short.dmp")
    assert [h.value for h in t.handles] == [0x4, 0x8]
    assert any("HandleDataStream: claims 9 entries but holds only 2" in p for p in t.soft_errors.items)


def test_a_dump_without_handle_data_has_no_handles(full):
    assert full.handles == ()
