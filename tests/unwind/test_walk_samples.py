"""The walker against the true call chains of the sample dumps (sample_dumps/manifest.json,
derived from the binaries by sample_dumps/src/dumpfacts.py, independently of dumpkit)."""

from __future__ import annotations

import lzma
import shutil

import pytest

from dumpkit.engine import Options, crashing_thread, make_walker
from dumpkit.sources.minidump import open_dump
from dumpkit.unwind.walk import walk_thread
from tests.support.samples import SAMPLE_BIN, SAMPLES, sample_manifest

CASES = [d for d in sample_manifest() if d["file"].endswith(".dmp")]


def _walk(path, image_paths=(str(SAMPLE_BIN),), recorded=True):
    target = open_dump(str(path))
    walker = make_walker(target, Options(image_paths=image_paths), problems=target.soft_errors)
    walker.code.images._locator.use_recorded_path = recorded
    thread = crashing_thread(target)
    return target, walk_thread(walker, thread, target.exception.context)


def _name(frame):
    return (frame.module, frame.symbol.split("!", 1)[1].split("+", 1)[0] if frame.symbol else None)


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_crashing_thread_matches_true_call_chain(case):
    target, walk = _walk(SAMPLES / case["file"])
    chain = case["call_chain"]
    frames = walk.frames
    assert len(frames) == case["total_frames"]
    assert walk.stop_reason.startswith("end of stack")
    # Frame 0 is the exception context, exactly.
    assert frames[0].ip == case["rip"] and frames[0].sp == case["rsp"]
    assert frames[0].trust == "context"
    in_cycle = [c for c in chain if c.get("cycle")]
    tail = [c for c in chain if not c.get("cycle")]
    # The top of the stack: one repetition of the cycle (or the plain chain).
    for frame, want in zip(frames, in_cycle or chain):
        assert _name(frame) == (want["module"], want["function"])
        assert frame.rva == want["rva"]
    # The bottom: every frame down to ntdll!RtlUserThreadStart, with exact RVAs.
    for frame, want in zip(frames[-len(tail) :], tail):
        assert _name(frame) == (want["module"], want["function"]), frame
        assert frame.rva == want["rva"]
        assert frame.trust in ("unwind_info", "prologue", "context")
    # Frame sizes are caller SP - callee SP, as recorded.
    sizes = case["frame_bytes_by_function"]
    for frame in frames[:-1]:
        key = f"{frame.module}!{_name(frame)[1]}"
        if key in sizes and frame.index > 0:
            assert frame.size == sizes[key], (frame.index, key)


def test_fault_inside_stack_probe_unwinds_by_following_the_probe_to_its_ret():
    target, walk = _walk(SAMPLES / "big_frame.dmp")
    f0, f1 = walk.frames[:2]
    assert _name(f0) == ("opkernels.dll", "___chkstk_ms")
    assert f0.function_start is None  # no .pdata entry: the probe is hand-written
    assert _name(f1) == ("opkernels.dll", "conv_big_kernel") and f1.trust == "prologue"
    assert f0.size == 24  # the probe pushed rcx and rax


def test_without_images_the_walk_degrades_to_scanning_and_says_so(tmp_path):
    target, walk = _walk(SAMPLES / "recursion_cycle3.dmp", image_paths=(), recorded=False)
    trusts = {f.trust for f in walk.frames[1:]}
    # No unwind data anywhere; frame 1 may come from following frame 0's code (the dump
    # holds the bytes around the faulting IP) to its RET, the rest from scanning.
    assert "unwind_info" not in trusts
    assert trusts <= {"scan", "scan_validated", "prologue"}
    assert sum(1 for f in walk.frames if f.trust.startswith("scan")) > 1000
    assert walk.frames[0].trust == "context"
    # Scanning still finds the recursion's return addresses in opkernels.dll.
    assert sum(1 for f in walk.frames if f.module == "opkernels.dll") > 1000


@pytest.mark.slow
def test_million_frame_recursion_walks_completely(tmp_path):
    src = SAMPLES / "deep_recursion_1m.dmp.xz"
    if not src.exists():
        pytest.skip("deep_recursion_1m.dmp.xz not present")
    dump = tmp_path / "deep.dmp"
    with lzma.open(src) as fin, open(dump, "wb") as fout:
        shutil.copyfileobj(fin, fout)
    case = next(c for c in sample_manifest() if c["file"] == "deep_recursion_1m.dmp.xz")
    target, walk = _walk(dump)
    assert len(walk.frames) == case["total_frames"] == 1_048_444
    assert _name(walk.frames[-1]) == ("ntdll.dll", "RtlUserThreadStart")
    assert all(f.size == 64 for f in walk.frames[1:1000])


PLAIN_SAMPLES = sorted(p for p in SAMPLES.glob("*.dmp"))


@pytest.mark.parametrize("path", PLAIN_SAMPLES, ids=[p.name for p in PLAIN_SAMPLES])
def test_every_thread_walks_to_its_start_from_unwind_data(path):
    """With the Wine system DLLs of sample_dumps/bin/wine (ntdll, kernel32, kernelbase,
    msvcrt), no thread of a sample needs scanning: each one, crashing or waiting, unwinds
    from .pdata (or a read prologue) down to ntdll!RtlUserThreadStart. The idle workers'
    source calls WaitForSingleObject directly, so that is the frame above them."""
    target = open_dump(str(path))
    walker = make_walker(target, Options(image_paths=(str(SAMPLE_BIN),)), problems=target.soft_errors)
    crashing = crashing_thread(target)
    idle = 0
    for thread in target.threads:
        ctx = target.exception.context if thread is crashing else None
        walk = walk_thread(walker, thread, ctx)
        assert walk.stop_reason.startswith("end of stack"), (thread.tid, walk.stop_reason)
        assert _name(walk.frames[-1]) == ("ntdll.dll", "RtlUserThreadStart"), thread.tid
        assert [f.index for f in walk.frames if f.trust.startswith("scan")] == [], thread.tid
        names = [_name(f) for f in walk.frames]
        if ("tfhost.exe", "idle_worker_main") in names:
            at = names.index(("tfhost.exe", "idle_worker_main"))
            assert names[at - 1] == ("kernelbase.dll", "WaitForSingleObject")
            assert names[at + 1 :] == [("kernel32.dll", "BaseThreadInitThunk"), ("ntdll.dll", "RtlUserThreadStart")]
            idle += 1
    if any(m.name == "tfhost.exe" for m in target.modules):
        assert idle == 3


def _copy_without_coff_symbols(src, dst):
    """The image as an MSVC build would be: no COFF symbol table (FileHeader's
    PointerToSymbolTable and NumberOfSymbols zeroed), names only from exports."""
    data = bytearray(src.read_bytes())
    e_lfanew = int.from_bytes(data[0x3C:0x40], "little")
    data[e_lfanew + 12 : e_lfanew + 20] = bytes(8)
    dst.write_bytes(bytes(data))


def test_code_without_pdata_entry_does_not_borrow_the_export_below_it(tmp_path):
    """___chkstk_ms has no .pdata entry and no export; the nearest lower export
    (manifest's nearest_export) is another function whose .pdata entry ends before it.
    Without COFF symbols the frame is named module+rva, never after that export."""
    for name in ("opkernels.dll", "tfhost.exe"):
        _copy_without_coff_symbols(SAMPLE_BIN / name, tmp_path / name)
    case = next(c for c in sample_manifest() if c["file"] == "big_frame.dmp")
    target, walk = _walk(
        SAMPLES / "big_frame.dmp", image_paths=(str(tmp_path), str(SAMPLE_BIN / "wine")), recorded=False
    )
    chain = case["call_chain"]
    f0, f1 = walk.frames[:2]
    assert f0.rva == chain[0]["rva"] and f0.function_start is None
    assert chain[0]["nearest_export"] and chain[0]["nearest_export"].split("+")[0] not in (f0.symbol or "")
    assert f0.function_name == f"{chain[0]['module']}+{chain[0]['rva']:#x}"
    # an exported kernel is still named from the export table
    assert _name(f1) == (chain[1]["module"], chain[1]["function"]) and f1.rva == chain[1]["rva"]
    assert len(walk.frames) == case["total_frames"]
