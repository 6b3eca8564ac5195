"""dumpkit on real dumps written by Breakpad, Crashpad and Windows' dbghelp (../shared/
real_dumps), checked against the facts in that folder's README and against the answers
of rust-minidump and Breakpad beside each dump. Skips when ../shared is absent."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from dumpkit.sources.minidump import open_dump
from tests.support.samples import REAL_DUMPS, run_cli, real_dump, real_dumps, real_manifest

pytestmark = pytest.mark.slow  # the full run's (CI's); `-m "not slow"` leaves it out

ALL = real_dumps()
WITH_PEERS = [p for p in ALL if p.with_name(p.stem + ".peer.rust-minidump.json").exists()]
X64_WITH_PEERS = [
    p
    for p in WITH_PEERS
    if json.loads(p.with_name(p.stem + ".peer.rust-minidump.json").read_text())["system_info"]["cpu_arch"] == "amd64"
]


run = run_cli


def peer_json(dump: Path) -> dict:
    return json.loads(dump.with_name(dump.stem + ".peer.rust-minidump.json").read_text())


@pytest.mark.parametrize("dump", ALL, ids=[p.name for p in ALL])
def test_info_never_tracebacks(dump):
    r = run("info", dump, "--json")
    assert "Traceback" not in r.stderr
    if r.returncode == 2:
        # Unusable input: exactly one line naming the file.
        assert r.stderr.count("\n") == 1 and str(dump) in r.stderr
    else:
        assert r.returncode in (0, 1)
        json.loads(r.stdout)


@pytest.mark.parametrize("dump", ALL, ids=[p.name for p in ALL])
def test_analyze_never_tracebacks(dump):
    r = run("analyze", dump, "--format", "json")
    assert "Traceback" not in r.stderr
    assert r.returncode in (0, 1, 2)
    if r.returncode != 2:
        doc = json.loads(r.stdout)
        assert doc["schema_version"] == 1 and doc["verdict"]["headline"]


@pytest.mark.parametrize("dump", X64_WITH_PEERS, ids=[p.name for p in X64_WITH_PEERS])
def test_reading_layer_agrees_with_rust_minidump(dump):
    peer = peer_json(dump)
    t = open_dump(str(dump))
    assert len(t.threads) == peer["thread_count"]
    assert len(t.modules) == len(peer["modules"])
    assert {m.name.lower() for m in t.modules} == {m["filename"].lower() for m in peer["modules"]}
    version = f"{t.system.os_major}.{t.system.os_minor}.{t.system.os_build} {t.system.csd_version}"
    assert version.strip() == peer["system_info"]["os_ver"]
    for ours, theirs in zip(
        sorted(t.modules, key=lambda m: m.base), sorted(peer["modules"], key=lambda m: int(m["base_addr"], 16))
    ):
        assert ours.base == int(theirs["base_addr"], 16)
        assert ours.end == int(theirs["end_addr"], 16)
    if peer.get("crashing_thread"):
        assert t.exception is not None
        assert t.exception.thread_id == peer["crashing_thread"]["thread_id"]
        assert t.exception.context.ip == int(peer["crashing_thread"]["frames"][0]["offset"], 16)


def test_facts_from_the_real_dumps_readme():
    t = open_dump(str(real_dump("breakpad/tiny-exe-fastfail.dmp")))
    assert len(t.threads) == 4 and t.exception.code == 0xC0000409 and t.exception.parameters[0] == 7
    t = open_dump(str(real_dump("breakpad/tiny-exe-with-cet-xsave.dmp")))
    assert t.exception is None and len(t.threads) == 1 and t.system.os_build == 22000
    assert t.threads[0].context.context_size == 1407
    t = open_dump(str(real_dump("sentry-native/minidump.dmp")))
    assert {th.context.context_size for th in t.threads} == {1663}
    t = open_dump(str(real_dump("breakpad/write_av_non_canonical.dmp")))
    assert t.exception.code == 0xC0000005
    t = open_dump(str(real_dump("rust-minidump/invalid-parameter.dmp")))
    assert t.exception.code == 0xC000000D and len(t.threads) == 6
    t = open_dump(str(real_dump("rust-minidump/stability-report.dmp")))
    assert len(t.threads) == 19
    t = open_dump(str(real_dump("node-minidump/windows.dmp")))
    assert len(t.threads) == 14 and t.function_table_entries()
    t = open_dump(str(real_dump("breakpad/stack_exhaustion.dmp")))
    assert t.system.arch_name == "x86" and t.exception.code == 0xC00000FD
    assert t.exception.parameters == (0, 0x102000)


def test_fastfail_crash_reason_matches_breakpads_own_test():
    r = run("analyze", real_dump("breakpad/tiny-exe-fastfail.dmp"), "--format", "json")
    doc = json.loads(r.stdout)
    assert doc["crash"]["fastfail_name"] == "FAST_FAIL_FATAL_APP_EXIT"
    # subcode 7 is what the C runtime's abort() raises: the ending is an abort (issue #41)
    assert doc["verdict"]["kind"] == "abort"
    assert "FAST_FAIL_FATAL_APP_EXIT" in doc["verdict"]["headline"]
    assert doc["signature"]["kind"] == "ABORT"


def test_32bit_crash_address_ignores_garbage_in_the_upper_half():
    """Breakpad's minidump_32bit_crash_addr.dmp is minidump2.dmp with the access address
    recorded as 0xffffffff00000045; Breakpad's processor test expects crash address 0x45
    for it, as for minidump2.dmp. dumpkit reports the same, and `info` still shows the raw
    field."""
    for name in ("breakpad/minidump2.dmp", "breakpad/minidump_32bit_crash_addr.dmp"):
        doc = json.loads(run("analyze", real_dump(name), "--format", "json").stdout)
        assert doc["crash"]["access_kind"] == "write"
        assert doc["crash"]["access_address"] == "0x45"
        assert doc["crash"]["parameters"] == [1, 0x45]
        assert "write to 0x45 (NULL page)" in doc["verdict"]["headline"]
    raw = json.loads(run("info", real_dump("breakpad/minidump_32bit_crash_addr.dmp"), "--json").stdout)
    assert raw["crash"]["raw_parameters"] == [1, 0xFFFFFFFF00000045]
    assert "write to 0x45" in raw["crash"]["headline"]


AV_DUMPS = [REAL_DUMPS / e["file"] for e in real_manifest() if e["exception"] == "0xc0000005"]


@pytest.mark.parametrize("dump", AV_DUMPS, ids=[p.name for p in AV_DUMPS])
def test_computed_operand_agrees_with_the_reported_access(dump):
    """Where Windows recorded a page fault's address, the faulting instruction's memory
    operand computed from the exception context must land on that same address (a check
    of the operand evaluation on every real access violation)."""
    doc = json.loads(run("analyze", dump, "--format", "json").stdout)
    crash = doc.get("crash") or {}
    acc = crash.get("instruction_access")
    if (
        crash.get("code") != 0xC0000005
        or acc is None
        or crash["access_address"] in ("0xffffffffffffffff", "0xffffffff")
    ):
        pytest.skip("no page-fault access violation with a decodable memory operand")
    assert acc["address"] == crash["access_address"]
    if crash["access_kind"] == "write":
        assert acc["kind"] in ("write", "read/write")


def test_general_protection_fault_address_comes_from_the_instruction():
    """write_av_non_canonical.dmp: Windows says 'read from 0xffffffffffffffff' (a #GP); the
    instruction `mov qword ptr [rax + rcx], 0x41414141` writes at rax + rcx. rust-minidump
    computes the same access beside the dump."""
    dump = real_dump("breakpad/write_av_non_canonical.dmp")
    peer = peer_json(dump)["crash_info"]["memory_accesses"][0]
    doc = json.loads(run("analyze", dump, "--format", "json").stdout)
    acc = doc["crash"]["instruction_access"]
    assert int(acc["address"], 16) == int(peer["address"], 16)
    assert acc["kind"] == peer["access_type"] and acc["size"] == peer["size"]
    v = doc["verdict"]
    assert v["headline"].startswith(f"Access violation: write of 8 bytes at {peer['address']}, a non-canonical address")
    assert any("rax + rcx = 0x0 + 0xfefefefefefefefe" in e for e in v["evidence"])
    assert "find where rcx got its value" in v["next_steps"][0]


def test_execute_fault_on_the_stack_is_called_so():
    """Breakpad's exec_av_on_stack.dmp: an execute access violation (parameter 8) whose
    address lies in the crashing thread's own captured stack memory."""
    dump = real_dump("breakpad/exec_av_on_stack.dmp")
    with open_dump(str(dump)) as t:
        target_addr = t.exception.parameters[1]
        owner = next(th.tid for th in t.threads if th.stack_start <= target_addr < th.stack_start + th.stack_size)
    doc = json.loads(run("analyze", dump, "--format", "json").stdout)
    v = doc["verdict"]
    assert doc["crash"]["access_kind"] == "execute"
    assert v["headline"].startswith(f"Access violation: execute at {target_addr:#x}, inside thread {owner}'s stack")
    assert "stack buffer overrun" in v["next_steps"][0]
    assert doc["crash"]["instruction_access"] is None  # data at a bad IP is not decoded


def _x86_access_violations_with_code():
    """x86 access violations (not execute faults) whose dump holds the bytes at EIP, per
    ../shared/real_dumps/manifest.json and the dumps themselves."""
    out = []
    for entry in real_manifest():
        if not entry["arch"].startswith("0 ") or entry["exception"] != "0xc0000005":
            continue
        path = REAL_DUMPS / entry["file"]
        with open_dump(str(path)) as t:
            ex = t.exception
            if ex.parameters[:1] != (8,) and ex.context is not None and t.read_available(ex.context.ip, 1):
                out.append(path)
    return out


X86_DUMPS = _x86_access_violations_with_code()


@pytest.mark.parametrize("dump", X86_DUMPS, ids=[p.name for p in X86_DUMPS])
def test_x86_faulting_instruction_is_decoded_as_x86(dump):
    """32-bit code decoded in 64-bit mode turns `mov dword ptr [eax], eax` into `[rax]`
    (and 0x40-0x4F into REX prefixes): the evidence must use the dump's own CPU mode."""
    with open_dump(str(dump)) as t:
        assert t.system.arch_name == "x86"
    doc = json.loads(run("analyze", dump, "--format", "json").stdout)
    text = " ".join(doc["verdict"]["evidence"])
    assert "faulting instruction" in text
    assert not re.search(r"\br(ax|bx|cx|dx|si|di|bp|sp)\b", text), text


def test_malformed_dumps_get_a_clear_message_or_a_partial_report():
    for name in ("rust-minidump/invalid-range.dmp", "rust-minidump/invalid-record-count.dmp"):
        r = run("analyze", real_dump(name))
        assert "Traceback" not in r.stderr
        assert r.returncode in (1, 2)
        if r.returncode == 2:
            assert r.stderr.startswith("dumpkit: error: ") and r.stderr.count("\n") == 1
        else:
            assert "Problems met while reading" in r.stdout


def _peer_frames_from_text(dump: Path, tid: int):
    """(rsp, rip) of each frame of thread `tid` in rust-minidump's --human output."""
    text = dump.with_name(dump.stem + ".peer.rust-minidump.txt").read_text()
    block = re.search(rf"Thread \d+.*tid: {tid}\n(.*?)(?:\n\n|\Z)", text, re.S)
    frames = []
    for chunk in re.split(r"(?m)^(?=\s*\d+  \S)", block.group(1)):  # one chunk per frame header
        rsp = re.search(r"[re]sp = (0x[0-9a-f]+)", chunk)
        rip = re.search(r"[re]ip = (0x[0-9a-f]+)", chunk)
        if rsp and rip:
            frames.append((int(rsp.group(1), 16), int(rip.group(1), 16)))
    return frames


@pytest.mark.parametrize("dump", WITH_PEERS, ids=[p.name for p in WITH_PEERS])
def test_stack_walk_is_at_least_as_plausible_as_the_peers(dump):
    peer = peer_json(dump)
    ct = peer.get("crashing_thread") or {"thread_id": peer["threads"][0]["thread_id"]}
    r = run("stack", dump, "--json", "--thread", ct["thread_id"])
    assert r.returncode in (0, 1), r.stderr
    ours = json.loads(r.stdout)["threads"][0]["frames"]
    theirs = _peer_frames_from_text(dump, ct["thread_id"])
    assert theirs, "could not read the peer's frames"
    # Frame 0 is the thread's context for both.
    assert (int(ours[0]["sp"], 16), int(ours[0]["ip"], 16)) == theirs[0]
    # Where both walkers put a frame at the same stack address, it is the same return
    # address. Neither has unwind data for these modules (the dumps hold no images), so
    # both scan; dumpkit additionally follows frame 0's code to its RET when the dump
    # holds those bytes, which skips stale words the peers report as frames: e.g. on
    # write_av_non_canonical.dmp rust-minidump's frames 1-5 (dbgcore/rpcrt4 leftovers)
    # are passed over and both agree again at crash.exe+0x33ef.
    by_sp = {int(f["sp"], 16): int(f["ip"], 16) for f in ours}
    shared = [(sp, ip) for sp, ip in theirs if sp in by_sp]
    assert all(by_sp[sp] == ip for sp, ip in shared), [
        (hex(sp), hex(ip), hex(by_sp[sp])) for sp, ip in shared if by_sp[sp] != ip
    ]
    assert len(shared) >= min(len(theirs), len(ours)) // 2
    # Every frame dumpkit reports points into a module outside its header page, or into
    # JIT code the process registered (the dump's FunctionTable stream).
    jit = open_dump(str(dump)).function_table_entries()
    for f in ours[1:]:
        ip = int(f["ip"], 16)
        if f["module"] is None:
            assert any(lo <= ip < hi for lo, hi, _, _ in jit), f
        else:
            assert f["rva"] >= 0x1000


def test_real_x86_stack_exhaustion_is_diagnosed_as_recursion():
    """Breakpad's stack_exhaustion.dmp (x86, 0xC00000FD): the EBP chain shows one function
    calling itself, as rust-minidump's frame-pointer walk beside it does; the cycle's
    return address, its bytes per repetition and its count are the peer's."""
    dump = real_dump("breakpad/stack_exhaustion.dmp")
    peer = peer_json(dump)
    tid = peer["crashing_thread"]["thread_id"]
    theirs = _peer_frames_from_text(dump, tid)  # (esp, eip), eip = the return address
    ret, count = Counter(ip for _sp, ip in theirs[1:]).most_common(1)[0]
    module = next(m for m in peer["modules"] if int(m["base_addr"], 16) <= ret < int(m["end_addr"], 16))
    name = f"{module['filename']}+{ret - int(module['base_addr'], 16):#x}"
    sps = [sp for sp, ip in theirs if ip == ret]
    step = Counter(b - a for a, b in zip(sps, sps[1:])).most_common(1)[0][0]
    fp_frames = sum(f["trust"] == "frame_pointer" for f in peer["crashing_thread"]["frames"])
    assert count > 100 and step > 0  # the peer does see a deep recursion

    doc = json.loads(run("analyze", dump, "--format", "json").stdout)
    assert doc["verdict"]["kind"] == "recursion"
    crash = doc["threads"][0]
    assert crash["tid"] == tid
    cyc = crash["cycles"][0]
    assert cyc["period"] == 1 and cyc["functions"] == [name]
    assert cyc["bytes_per_repetition"] == step and cyc["repetitions"] == count
    assert crash["trust_counts"].get("frame_pointer", 0) >= fp_frames


def _peer_cpu(dump: Path):
    """(family, model, stepping) from rust-minidump's `system_info.cpu_info`."""
    m = re.search(r"family (\d+) model (\d+) stepping (\d+)", peer_json(dump)["system_info"]["cpu_info"])
    return tuple(int(x) for x in m.groups())


@pytest.mark.parametrize("dump", WITH_PEERS, ids=[p.name for p in WITH_PEERS])
def test_cpu_family_model_stepping_agree_with_rust_minidump(dump):
    """x64 dumps carry no CPUID signature: family/model/stepping come from ProcessorLevel
    and ProcessorRevision, as rust-minidump (and Windows) read them."""
    fms = _peer_cpu(dump)
    words = "family {} model {} stepping {}".format(*fms)
    doc = json.loads(run("info", dump, "--json").stdout)
    s = doc["system"]
    assert (s["cpu_family"], s["cpu_model"], s["cpu_stepping"]) == fms
    assert words in run("info", dump).stdout
    report = json.loads(run("analyze", dump, "--format", "json").stdout)
    assert report["system"]["cpu"].endswith(words), report["system"]["cpu"]


@pytest.mark.parametrize("dump", X64_WITH_PEERS, ids=[p.name for p in X64_WITH_PEERS])
def test_info_codeview_and_unloaded_modules_agree_with_rust_minidump(dump):
    peer = peer_json(dump)
    doc = json.loads(run("info", dump, "--json").stdout)
    ours = {int(m["base"], 16): m for m in doc["modules"]}
    for m in peer["modules"]:
        mine = ours[int(m["base_addr"], 16)]
        # rust-minidump names the PDB by its file name; the record holds the whole path
        pdb = mine["pdb"].replace("/", "\\").rsplit("\\", 1)[-1] if mine["pdb"] else None
        assert (pdb, mine["pdb_id"]) == (m["debug_file"], m["debug_id"]), m["filename"]
    unloaded = {(u["name"].lower(), int(u["base"], 16)) for u in doc["unloaded_modules"]}
    assert unloaded == {(u["filename"].lower(), int(u["base_addr"], 16)) for u in peer["unloaded_modules"]}
    text = run("info", dump).stdout
    for m in peer["modules"]:
        if m["debug_file"]:
            guid = m["debug_id"][:32]
            dashed = f"{guid[:8]}-{guid[8:12]}-{guid[12:16]}-{guid[16:20]}-{guid[20:]}"
            assert dashed in text, m["filename"]
    if peer["unloaded_modules"]:
        section = text.split("Unloaded modules", 1)[1]
        assert all(u["filename"] in section for u in peer["unloaded_modules"])
    else:
        assert "Unloaded modules: none recorded" in text


_REG = re.compile(r"\b([re]?[a-z0-9]+) = (0x[0-9a-f]+)")
X64_GPRS = (
    "rax",
    "rcx",
    "rdx",
    "rbx",
    "rsp",
    "rbp",
    "rsi",
    "rdi",
    "r8",
    "r9",
    "r10",
    "r11",
    "r12",
    "r13",
    "r14",
    "r15",
)


def _peer_frame0_registers(dump: Path):
    """{tid: {register: value}} of every thread's frame 0 in rust-minidump's --human output
    (its JSON keeps registers for the crashing thread only)."""
    text = dump.with_name(dump.stem + ".peer.rust-minidump.txt").read_text()
    out = {}
    for m in re.finditer(r"(?m)^Thread \d+.*tid: (\d+)\n\s*0  .*\n((?:\s+[re]?[a-z0-9]+ = 0x.*\n)+)", text):
        out[int(m.group(1))] = {k: int(v, 16) for k, v in _REG.findall(m.group(2))}
    return out


def _context_of(t, tid):
    """What a debugger shows for frame 0: the exception context on the crashing thread."""
    if t.exception is not None and t.exception.thread_id == tid and t.exception.context is not None:
        return t.exception.context
    return next(th.context for th in t.threads if th.tid == tid)


@pytest.mark.parametrize("dump", X64_WITH_PEERS, ids=[p.name for p in X64_WITH_PEERS])
def test_every_threads_registers_agree_with_rust_minidump(dump):
    """All 16 general-purpose registers and rip of every thread's frame 0, as rust-minidump
    reads them (plain 1232-byte and extended 1407/1663-byte contexts alike); eflags, which
    the peer does not print, must at least have its always-one bit 1 set."""
    peer = _peer_frame0_registers(dump)
    # the peer prints every thread it found frames for (it skips a thread with none)
    assert set(peer) == {th["thread_id"] for th in peer_json(dump)["threads"] if th["frames"]}
    with open_dump(str(dump)) as t:
        assert set(peer) <= {th.tid for th in t.threads}
        for tid, theirs in peer.items():
            assert set(X64_GPRS) | {"rip"} <= set(theirs), (tid, theirs)
            ctx = _context_of(t, tid)
            assert {k: ctx.values.get(k) for k in theirs} == theirs, tid
            assert ctx.values["eflags"] & 0x2 and ctx.values["eflags"] < 1 << 22, hex(ctx.values["eflags"])
        doc = json.loads(run("info", dump, "--json").stdout)
        by_tid = {th["tid"]: dict(th["registers"]) for th in doc["threads"]}
        crash = t.exception.thread_id if t.exception else None
    for tid, theirs in peer.items():
        mine = dict(doc["crash"]["registers"]) if tid == crash else by_tid[tid]
        assert {k: int(mine[k], 16) for k in theirs} == theirs, tid


def test_the_register_checks_cover_plain_and_extended_contexts():
    if not X64_WITH_PEERS:
        pytest.skip("../shared/real_dumps not present")
    sizes = set()
    for dump in X64_WITH_PEERS:
        with open_dump(str(dump)) as t:
            sizes |= {th.context.context_size for th in t.threads if th.context}
    assert {1232, 1407, 1663} <= sizes, sizes
