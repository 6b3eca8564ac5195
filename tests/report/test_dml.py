"""`!tfstack`'s DML says what the other formats say: the same sentences for the stack
budget and recursion, the CPU's pointer width, and links that stay WinDbg's."""

from __future__ import annotations

import dataclasses
import re

from dumpkit.report.dml import plain_text, render_dml
from tests.support.builders import budget, cycle, frame, frames, report, system, thread


def _dml(r, **kw) -> str:
    return "\n".join(render_dml(r, **kw))


def test_an_estimated_stack_reserve_is_marked_as_one():
    r = report([thread(1, frames(3), crashing=True, budget=budget(used=0x8000, source="captured+image"))])
    line = next(ln for ln in render_dml(r) if ln.startswith("<b>Stack</b>"))
    assert "used 32 KiB of ~1 MiB (3%), from captured+image" in line
    assert "the reserve is the executable's default" in line


def test_an_unknown_stack_reserve_is_said_in_words():
    r = report([thread(1, frames(3), crashing=True, budget=budget(used=None, reserve=None))])
    line = next(ln for ln in render_dml(r) if ln.startswith("<b>Stack</b>"))
    assert "used an unknown amount (reserve not known), from teb" in line
    assert "?" not in line


def test_x86_addresses_have_8_digits_like_kf():
    stack = [dataclasses.replace(f, ip=0x0040_1000 + f.index, sp=0x0019_FF00 + 0x10 * f.index) for f in frames(3)]
    r = report([thread(1, stack, crashing=True)], system_summary=system(arch="x86"))
    rows = [plain_text(ln) for ln in render_dml(r) if ".frame 0x" in ln]
    assert len(rows) == 3
    assert rows[1].split()[1:4] == ["40", "0019ff10", "00401001"]  # kf Memory, Child-SP, RetAddr/IP
    header = next(plain_text(ln) for ln in render_dml(r) if "Child-SP" in ln)
    assert header.split() == ["#", "Memory", "Child-SP", "RetAddr/IP", "Call", "site", "(found", "by)"]
    assert re.search(r"  Child-SP  RetAddr/IP", header)  # columns as wide as 8 digits


def test_system_line_says_wine_and_counts_processors_in_words():
    r = report([thread(1, frames(1), crashing=True)], system_summary=system(processors=1, wine="wine-8.0"))
    text = plain_text(_dml(r))
    assert "System     AMD64, Windows 10.0.19045 (19045), under wine-8.0" in text
    assert "CPU        Intel64 family 6, 1 processor\n" in text


def test_recursion_uses_the_reports_summary_and_says_how_long_the_entry_path_is():
    entry = [f"m.dll!caller{i}" for i in range(9)]
    cyc = cycle(["m.dll!a", "m.dll!b"], first=0, repetitions=20, entry=entry)
    stack = [frame(i, "m.dll!a" if i % 2 == 0 else "m.dll!b") for i in range(40)]
    r = report([thread(1, stack, crashing=True, cycles=[cyc])])
    text = plain_text(_dml(r))
    assert "  cycle of 2 functions in call order, 20 repetitions x 128 bytes = 2.5 KiB (50% of the used stack)" in text
    assert "  entered from: m.dll!caller0 <- m.dll!caller1" in text
    assert "m.dll!caller5 <- ... (3 more)\n" in text  # 6 shown, the rest counted
    assert "m.dll!caller6" not in text


def test_a_frame_count_of_one_is_singular():
    r = report([thread(1, frames(1), crashing=True)])
    assert "1 frame (unwind_info 1)" in plain_text(_dml(r))


def test_other_threads_group_identical_stacks_without_threads_shown_in_full():
    same = frames(2)
    threads = [
        thread(1, frames(3), crashing=True),
        thread(2, same, same=(3, 4)),
        thread(3, same, same=(2, 4)),
        thread(4, same, same=(2, 3)),
    ]
    text = plain_text(_dml(report(threads), show_threads=[3]))
    assert "Thread 3 (0x3)" in text  # shown in full
    listed = text.split("Other threads", 1)[1]
    assert "  2 (0x2): 2 frames, top m.dll!f0+0x10 (+1 with the same stack: 4 (0x4))" in listed
    assert "3 (0x3)" not in listed


def test_frame_links_take_the_numbers_the_caller_maps_each_frame_to():
    """!tfstack maps dumpkit's frames to the debugger's own numbers: a mapped frame links
    the debugger's number under dumpkit's label, an unmapped one is not linked, a thread
    without a map keeps dumpkit's numbers; each thread's map is asked for once."""
    asked = []

    def numbers(tid, crashing):
        asked.append((tid, crashing))
        return {0: 0, 1: 5} if tid == 1 else None

    r = report([thread(1, frames(3), crashing=True), thread(2, frames(2))])
    rows = [ln for ln in render_dml(r, show_threads=[2], frame_numbers=numbers) if "unwind_info)" in ln]
    assert [ln.strip().split("  ")[0] for ln in rows] == [
        '<link cmd="~~[0x1]s; .ecxr; .frame 0x0">00</link>',
        '<link cmd="~~[0x1]s; .ecxr; .frame 0x5">01</link>',
        "02",
        '<link cmd="~~[0x2]s; .frame 0x0">00</link>',
        '<link cmd="~~[0x2]s; .frame 0x1">01</link>',
    ]
    assert asked == [(1, True), (2, False)]


def test_plain_lines_are_the_dml_lines_without_their_markup():
    """`!tfstack --plain` writes the report's lines as plain text directly: exactly the DML
    lines with their tags dropped and entities decoded, on real reports (the links, the
    faulting-code arrow, the entry path's arrows, escaped dump text)."""
    from dumpkit.engine import Options
    from tests.support.samples import SAMPLE_BIN, analyse_file, sample_path

    for name in ("recursion_cycle3.dmp", "gp_wild_pointer.dmp", "fastfail_gs.dmp"):
        r = analyse_file(sample_path(name), Options(image_paths=[str(SAMPLE_BIN)]))
        for kw in ({}, {"all_threads": True}):
            dml = render_dml(r, **kw)
            plain = render_dml(r, plain=True, **kw)
            assert plain == [plain_text(line) for line in dml]
            assert not any("<b>" in line or "<link" in line or "&lt;" in line for line in plain)
            assert any("<link" in line for line in dml)
