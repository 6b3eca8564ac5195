"""`dumpkit info` through the real CLI on the sample dumps and damaged copies of them.

The damage is done here with `struct`, independently of dumpkit's reader."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from tests.support.samples import run_cli, sample_manifest, sample_path

pytestmark = pytest.mark.slow  # the full run's (CI's); `-m "not slow"` leaves it out

EXCEPTION, SYSTEM_INFO = 6, 7


run = run_cli


def directory(data: bytes):
    """(offset of the entry, type, size, rva) of each stream directory entry."""
    n, rva = struct.unpack_from("<II", data, 8)
    return [(rva + 12 * i, *struct.unpack_from("<III", data, rva + 12 * i)) for i in range(n)]


def edited(tmp_path: Path, name: str, edit) -> Path:
    data = bytearray(sample_path(name).read_bytes())
    edit(data)
    out = tmp_path / f"edited-{name}"
    out.write_bytes(bytes(data))
    return out


def set_entry(stype: int, *, stream_type=None, rva=None):
    def edit(data: bytearray) -> None:
        at = next(off for off, t, _s, _r in directory(data) if t == stype)
        if stream_type is not None:
            struct.pack_into("<I", data, at, stream_type)
        if rva is not None:
            struct.pack_into("<I", data, at + 8, rva(data))

    return edit


def test_a_damaged_exception_stream_is_not_called_absent(tmp_path):
    dump = edited(tmp_path, "null_deref.dmp", set_entry(EXCEPTION, rva=lambda d: len(d) + 4096))
    r = run("info", dump)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("Exception"))
    assert "unreadable" in line and "lists an Exception stream" in line, line
    assert "not written for a crash" not in r.stdout
    doc = json.loads(run("info", dump, "--json").stdout)
    assert doc["crash"] is None and doc["crash_absent"].startswith("unreadable")
    entry = next(s for s in doc["dump"]["stream_details"] if s["name"] == "ExceptionStream")
    assert "past the end" in entry["problem"]


def test_a_dump_without_exception_stream_says_so(tmp_path):
    # Retype the entry to UnusedStream (0): the dump now holds no exception at all.
    dump = edited(tmp_path, "null_deref.dmp", set_entry(EXCEPTION, stream_type=0))
    r = run("info", dump)
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("Exception"))
    assert "none" in line and "no Exception stream" in line and "unreadable" not in line


def cut(tmp_path: Path, name: str, size: int) -> Path:
    out = tmp_path / f"cut{size}-{name}"
    out.write_bytes(sample_path(name).read_bytes()[:size])
    return out


def test_a_truncated_dump_says_so_once_per_stream(tmp_path):
    whole = sample_path("null_deref.dmp").read_bytes()
    expects = max(rva + size for _off, t, size, rva in directory(whole) if t)
    dump = cut(tmp_path, "null_deref.dmp", 200)  # the header, directory and SystemInfo only
    # No thread, module or exception record is left: every command rejects it in one
    # line, which leads with the truncation.
    r = run("info", dump, "--json")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "nothing usable in it" in r.stderr and "(file is truncated: 200 bytes" in r.stderr
    # What the read phase found, as info would show it, once per stream:
    from dumpkit.engine import contents
    from dumpkit.report.json_report import render_json
    from dumpkit.sources.minidump import open_dump

    with open_dump(str(dump)) as t:
        doc = json.loads(render_json(contents(t, problems=t.soft_errors)))
    errors = doc["soft_errors"]
    assert errors[0] == f"file is truncated: 200 bytes, the stream directory expects at least {expects:,}"
    assert doc["system"]["arch"] == "AMD64"  # what is there is still read
    assert not any("unpack" in e or "buffer" in e for e in errors), errors
    for s in doc["dump"]["stream_details"]:
        if s["name"] not in ("SystemInfoStream", "WineHostLibraries"):
            assert sum(e.startswith(s["name"] + ":") for e in errors) == 1, (s["name"], errors)
            assert "past the end" in s["problem"]


def test_a_stream_cut_short_is_named_in_plain_words(tmp_path):
    # The ThreadList claims 2 bytes: too short even for its count.
    def shrink(data: bytearray) -> None:
        at = next(off for off, t, _s, _r in directory(data) if t == 3)
        struct.pack_into("<I", data, at + 4, 2)

    doc = json.loads(run("info", edited(tmp_path, "null_deref.dmp", shrink), "--json").stdout)
    line = next(e for e in doc["soft_errors"] if e.startswith("ThreadListStream"))
    assert line == "ThreadListStream: unreadable (cut short: 2 bytes, a record in it needs 4)", line
    assert doc["threads"] == [] and doc["modules"]  # the other streams are read


def test_a_dump_cut_before_any_stream_is_unusable(tmp_path):
    dump = cut(tmp_path, "null_deref.dmp", 100)  # inside the directory, before every stream
    r = run("info", dump)
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and str(dump) in lines[0]
    assert "file is truncated: 100 bytes" in lines[0] and "no stream in it could be read" in lines[0]


SAMPLE_CASES = [c for c in sample_manifest() if c["file"].endswith(".dmp")]


def stream_bytes(data: bytes, stype: int) -> bytes:
    _off, _t, size, rva = next(e for e in directory(data) if e[1] == stype)
    return data[rva : rva + size]


@pytest.mark.parametrize("case", SAMPLE_CASES, ids=[c["file"] for c in SAMPLE_CASES])
def test_info_shows_flags_context_features_and_process_times(case):
    dump = sample_path(case["file"])
    raw = dump.read_bytes()
    r = run("info", dump)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    # exception flags, and the exception context's registers
    flags = case["exception_flags"]
    assert f"flags {flags:#x} ({'non-continuable' if flags & 1 else 'continuable'})" in out
    assert f"rip={case['rip']:016x}" in out and f"rsp={case['rsp']:016x}" in out
    doc = json.loads(run("info", dump, "--json").stdout)
    ctx = dict(doc["crash"]["registers"])
    assert (int(ctx["rip"], 16), int(ctx["rsp"], 16)) == (case["rip"], case["rsp"])
    # AVX / AVX2 from the PF_* bits the writer set (ProcessorFeatures[0], SystemInfo +32)
    (pf,) = struct.unpack_from("<Q", stream_bytes(raw, SYSTEM_INFO), 32)
    cpu_lines = out.split("CPU", 1)[1].split("Process", 1)[0]
    for name, bit in (("AVX", 39), ("AVX2", 40)):
        if pf >> bit & 1:
            assert f"{name} yes" in cpu_lines, cpu_lines
    # process times: Wine's MiscInfo has no MINIDUMP_MISC1_PROCESS_TIMES (flag 2)
    (misc_flags,) = struct.unpack_from("<I", stream_bytes(raw, 15), 4)
    if not misc_flags & 2:
        assert "started not recorded" in out and "None" not in out.split("Process", 1)[1].split("\n", 1)[0]


def test_info_json_gives_every_register_of_every_thread():
    case = SAMPLE_CASES[0]
    doc = json.loads(run("info", sample_path(case["file"]), "--json").stdout)
    for th in doc["threads"]:
        regs = dict(th["registers"])
        # Wine's thread contexts hold CONTROL | INTEGER (| FLOATING_POINT): every GPR, rip, eflags
        assert {"rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "r8", "r15", "rip", "eflags"} <= set(regs)
        # the thread's record, as the reader gives it: the same values under the same names
        want = next(t for t in case["threads"] if t["tid"] == th["tid"])
        assert int(regs["rip"], 16) == want["rip"]


def test_info_shows_module_checksums_from_the_module_records():
    dump = sample_path("null_deref.dmp")
    raw = dump.read_bytes()
    mods = stream_bytes(raw, 4)
    (count,) = struct.unpack_from("<I", mods, 0)
    # MINIDUMP_MODULE: BaseOfImage u64, SizeOfImage u32, CheckSum u32 (108 bytes each)
    want = {
        struct.unpack_from("<Q", mods, 4 + 108 * i)[0]: struct.unpack_from("<I", mods, 16 + 108 * i)[0]
        for i in range(count)
    }
    assert any(want.values())
    doc = json.loads(run("info", dump, "--json").stdout)
    assert {int(m["base"], 16): m["checksum"] for m in doc["modules"]} == want
    out = run("info", dump).stdout
    for base, checksum in want.items():
        row = next(line for line in out.splitlines() if line.strip().startswith(f"{base:#x} "))
        assert f" {checksum:#x} " in row, row


def test_a_zstd_compressed_dump_says_how_to_decompress_it(tmp_path):
    """Python has no zstd reader: the file is named for what it is, with the command that
    unpacks it (xz, gzip, bzip2 and zip are read: tests/sources/test_packed.py)."""
    dump = tmp_path / "crash.dmp.zst"
    dump.write_bytes(b"\x28\xb5\x2f\xfd" + sample_path("null_deref.dmp").read_bytes()[:4096])
    r = run("analyze", dump)
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1
    assert str(dump) in r.stderr and "zstd-compressed" in r.stderr and f"zstd -d {dump}" in r.stderr


@pytest.mark.parametrize("command", [("info",), ("info", "--json"), ("analyze",), ("analyze", "--format", "json")])
def test_exit_code_1_lists_the_problems_on_stderr(tmp_path, command):
    """README: exit 1 means problems were met reading the dump, listed in the report and
    on stderr, whatever the format."""
    dump = edited(tmp_path, "null_deref.dmp", set_entry(EXCEPTION, rva=lambda d: len(d) + 4096))
    problems = json.loads(run("info", dump, "--json").stdout)["soft_errors"]
    assert problems
    r = run(command[0], dump, *command[1:])
    assert r.returncode == 1, r.stderr
    lines = r.stderr.splitlines()
    assert lines[0].startswith("dumpkit: warning: ") and "problem" in lines[0] and "reading the dump" in lines[0]
    for p in problems:
        assert f"dumpkit: warning: {p}" in lines, (p, lines)


def test_a_clean_dump_writes_nothing_to_stderr():
    r = run("info", sample_path("null_deref.dmp"))
    assert r.returncode == 0 and r.stderr == ""


ALL_SAMPLES = sample_manifest()


@pytest.mark.parametrize("case", ALL_SAMPLES, ids=[c["file"] for c in ALL_SAMPLES])
def test_info_on_every_sample_dump_matches_the_manifest(case, tmp_path):
    dump = sample_path(case["file"])
    if dump.suffix == ".xz":  # what the error message tells the user to do
        import lzma
        import shutil

        plain = tmp_path / dump.stem
        with lzma.open(dump) as fin, open(plain, "wb") as fout:
            shutil.copyfileobj(fin, fout)
        dump = plain
    r = run("info", dump, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    ex = doc["crash"]
    assert ex["code"] == case["exception_code"] and ex["thread_id"] == case["crash_thread_tid"]
    assert ex["raw_parameters"] == case["exception_parameters"]
    ctx = dict(ex["registers"])
    assert int(ctx["rip"], 16) == case["rip"] and int(ctx["rsp"], 16) == case["rsp"]
    assert [t["tid"] for t in doc["threads"]] == [t["tid"] for t in case["threads"]]
    assert [int(dict(t["registers"])["rip"], 16) for t in doc["threads"]] == [t["rip"] for t in case["threads"]]
    assert sorted((int(m["base"], 16), m["size"]) for m in doc["modules"]) == sorted(
        (m["base"], m["size"]) for m in case["modules"]
    )
    text = run("info", dump)
    assert text.returncode == 0 and f"{case['exception_code']:#010x}" in text.stdout


def test_a_thread_stack_claiming_more_than_the_file_is_reported(tmp_path):
    """The stack also sits in the MemoryList, so nothing is lost, but the thread record
    is damaged: that is a problem (exit 1), named once."""

    def huge_stack(data: bytearray) -> None:
        _off, _t, _s, rva = next(e for e in directory(data) if e[1] == 3)
        struct.pack_into("<I", data, rva + 4 + 32, 0xFFFFFFFF)  # first thread's Stack.DataSize

    dump = edited(tmp_path, "null_deref.dmp", huge_stack)
    tid = struct.unpack_from(
        "<I", dump.read_bytes(), next(e for e in directory(dump.read_bytes()) if e[1] == 3)[3] + 4
    )[0]
    r = run("info", dump, "--json")
    assert r.returncode == 1
    errors = json.loads(r.stdout)["soft_errors"]
    assert sum(e.startswith(f"thread {tid}: stack memory") for e in errors) == 1, errors
