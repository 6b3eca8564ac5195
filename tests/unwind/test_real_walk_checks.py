"""Stack walks on the real dumps of ../shared/real_dumps checked against the dumps' own
memory, against the process's other threads, and against rust-minidump's walks (issue
#18 items 2, 3 and 5). Skips when ../shared is absent; the comparison with rust-minidump
uses its committed output beside a dump, else runs the program when it is installed
(/work/shared/tools/get-peers.sh), else skips."""

from __future__ import annotations

import functools
import json
import os
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

from dumpkit.images import ImageLocator, ImageProvider
from dumpkit.sources.minidump import open_dump
from dumpkit.target import MemoryNotInDump
from dumpkit.unwind.cpus import step_for
from dumpkit.unwind.frames import Frame, StackWalk, StopReason, Trust
from dumpkit.unwind.walk import Walker
from tests.support.samples import REAL_DUMPS, real_dump, real_manifest, run_cli

X86 = sorted(REAL_DUMPS / d["file"] for d in real_manifest() if str(d.get("arch", "")).startswith("0"))
IDS = [f"{p.parent.name}/{p.name}" for p in X86]
SCANNED = (Trust.SCAN, Trust.SCAN_VALIDATED)


def every(walk: StackWalk) -> List[Frame]:
    """All a walk found: its stack, then the scanned frames nothing confirms (the peers
    show both as one list)."""
    return list(walk.frames) + list(walk.possible)


class Walked:
    """A real dump opened, with a walker that looks for no images (as the peers, which
    have none), and the thread a report leads with walked."""

    def __init__(self, path: Path, cross_check: bool = True):
        self.target = open_dump(str(path))
        images = ImageProvider(self.target, ImageLocator(use_recorded_path=False), problems=self.target.soft_errors)
        self.walker = Walker(
            self.target, images, step_for(self.target), cross_check=cross_check, problems=self.target.soft_errors
        )
        ex = self.target.exception
        self.thread = next(t for t in self.target.threads if ex is None or t.tid == ex.thread_id)
        self.walk = self.walker.walk(self.thread, ex.context if ex is not None else None)

    def word(self, address: int) -> Optional[int]:
        try:
            return struct.unpack("<I", self.target.read(address, 4))[0]
        except MemoryNotInDump:
            return None

    def is_code(self, value: Optional[int]) -> bool:
        return value is not None and value >= 0x10000 and self.target.module_at(value) is not None


@functools.lru_cache(maxsize=None)
def walked(path: Path) -> Walked:
    return Walked(path)


def outermost_link(w: Walked, walk: StackWalk) -> Optional[int]:
    """Where the EBP chain of `walk` ends, read from memory: the last frame was found by
    its callee's frame pointer E (so it sits at E + 8), its own saved EBP is [E], and the
    chain's end is two zero words there. None when the walk does not end that way."""
    last = every(walk)[-1]
    if last.trust is not Trust.FRAME_POINTER:
        return None
    link = w.word(last.sp - 8)
    if link is None or link < last.sp or (w.word(link), w.word(link + 4)) != (0, 0):
        return None
    return link


# ----------------------------------------------------------------------------- item 2
@pytest.mark.parametrize("dump", X86, ids=IDS)
def test_x86_walks_end_at_the_frame_pointer_chains_outermost_link(dump):
    """Every x86 thread whose walk ends on a return address of 0 ends there because the
    dump's memory holds the chain's outermost link (saved EBP 0 over a return slot of 0),
    and the crashing thread's walk ends so on every dump: nothing past a thread's first
    frame (its start routine's argument, the last SEH handler) is reported as a caller."""
    w = walked(dump)
    assert w.walk.stop is StopReason.RETURN_ADDRESS_ZERO and outermost_link(w, w.walk) is not None
    for t in w.target.threads:
        walk = w.walker.walk(t)
        if walk.stop is StopReason.RETURN_ADDRESS_ZERO:
            assert outermost_link(w, walk) is not None, t.tid


@pytest.mark.parametrize("rel", ["breakpad/ascii_read_av.dmp", "breakpad/minidump2.dmp", "symbolic/windows_mini.dmp"])
def test_analyze_lists_no_frame_size_past_the_thread_start(rel):
    """`analyze`'s Largest frames come from the walk: its crashing thread ends at the
    chain's outermost frame, which has no size (its caller is nobody), and no frame
    beyond it is measured."""
    dump = real_dump(rel)
    w = walked(dump)
    doc = json.loads(run_cli("analyze", dump, "--format", "json").stdout)
    crash = next(t for t in doc["threads"] if t["is_crashing"])
    ours = [(int(f["ip"], 16), int(f["sp"], 16)) for f in crash["frames"]]
    assert ours == [(f.ip, f.sp) for f in every(w.walk)]
    assert crash["stop_reason"] == "end of stack (return address 0)" and crash["frames"][-1]["size"] is None
    assert doc["frame_sizes"] and all(s["frame_index"] < len(ours) - 1 for s in doc["frame_sizes"])


# ----------------------------------------------------------------------------- item 3
@pytest.mark.parametrize("dump", X86, ids=IDS)
def test_after_a_scanned_frame_the_chain_resumes_where_memory_says(dump):
    """Each frame found by the frame pointer right after a scanned frame is the one the
    word below the scanned return address points at: a saved EBP E, with the caller's
    return address at E + 4 and its frame at E + 8."""
    w = walked(dump)
    for t in w.target.threads:
        frames = w.walker.walk(t).frames
        for a, b in zip(frames[1:], frames[2:]):
            if a.trust in SCANNED and b.trust is Trust.FRAME_POINTER:
                link = w.word(a.sp - 8)
                assert link is not None and b.sp == link + 8 and b.ip == w.word(link + 4), (t.tid, a.index)


@pytest.mark.parametrize("rel", ["symbolic/windows_mini.dmp", "breakpad/tiny-exe-with-cet-xsave-x86.dmp"])
def test_the_walk_returns_to_the_frame_pointer_chain_after_scanning(rel):
    """The dumps of issue #18 item 3: after the scanned frames the crashing thread's walk
    follows the frame-pointer chain to its outermost link, where it had stayed on scanned
    locals and handler pointers to the end."""
    w = walked(real_dump(rel))
    trust = [f.trust for f in every(w.walk)]
    last_scan = max(i for i, t in enumerate(trust) if t in SCANNED)
    tail = trust[last_scan + 1 :]
    assert len(tail) >= 3 and set(tail) == {Trust.FRAME_POINTER}
    assert outermost_link(w, w.walk) is not None


# ----------------------------------------------------------------------------- peer comparison
def _rust_minidump() -> Optional[str]:
    """rust-minidump's minidump-stackwalk where get-peers.sh puts it (DUMPKIT_PEERS, or
    ~/.cache/dumpkit-peers of the real user: the test session has a home of its own), or
    on PATH."""
    dirs = [os.environ.get("DUMPKIT_PEERS", "")]
    try:
        import pwd

        dirs.append(os.path.join(pwd.getpwuid(os.getuid()).pw_dir, ".cache", "dumpkit-peers"))
    except (ImportError, KeyError):
        pass
    for d in dirs:
        exe = os.path.join(d, "minidump-stackwalk")
        if d and os.access(exe, os.X_OK):
            return exe
    return shutil.which("minidump-stackwalk")


@functools.lru_cache(maxsize=None)
def peer_walk(dump: Path) -> dict:
    committed = dump.with_name(dump.stem + ".peer.rust-minidump.json")
    if committed.exists():
        return json.loads(committed.read_text())
    exe = _rust_minidump()
    if exe is None:
        pytest.skip("rust-minidump's minidump-stackwalk is not installed (/work/shared/tools/get-peers.sh)")
    out = subprocess.run([exe, "--json", str(dump)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-500:]
    return json.loads(out.stdout)


def peer_ips(doc: dict) -> Tuple[int, List[int]]:
    """(thread id, instruction pointers) of the thread rust-minidump leads with. Its
    `offset` of a caller frame is the return address minus 1 (an address inside the
    call), dumpkit's the return address."""
    thread = doc.get("crashing_thread") or doc["threads"][0]
    ips = [int(f["offset"], 16) + (f["trust"] != "context") for f in thread["frames"]]
    return thread["thread_id"], ips


def explain(w: Walked, ours: List[int], theirs: List[int]) -> str:
    """Why dumpkit's frames differ from rust-minidump's, each reason checked against the
    dump's memory (an assertion fails when a difference is not explained)."""
    k = len(theirs) - 1
    assert ours[: k + 1] == theirs, "the walks part ways: not explained"
    # rust-minidump follows [ebp + 4] whatever it holds and ends the walk when that is
    # not an address; dumpkit takes EBP as a frame pointer only when it is one, and the
    # chain ends only on two zero words.
    frame = every(w.walk)[k]
    if k == 0:
        ebp = w.thread.context.values["ebp"] if w.target.exception is None else w.target.exception.context.values["ebp"]
    else:
        assert frame.trust is Trust.FRAME_POINTER, "the peer stopped after a frame dumpkit scanned for"
        ebp = w.word(frame.sp - 8)
    saved, ret = w.word(ebp), w.word(ebp + 4)
    assert not w.is_code(ret) and (saved, ret) != (0, 0), "the peer stopped where EBP is a frame pointer"
    nxt = every(w.walk)[k + 1]
    assert nxt.trust in SCANNED and w.word(nxt.sp - 4) == nxt.ip and w.is_code(nxt.ip)
    # ... and what dumpkit found beyond is anchored: the walk ends on the chain's last link
    assert outermost_link(w, w.walk) is not None
    return f"frame {k}: [ebp+4] = {ret:#x} is no return address; frame {k + 1} found by scanning"


@pytest.mark.parametrize("dump", X86, ids=IDS)
def test_x86_crashing_thread_frames_agree_with_rust_minidump(dump):
    """dumpkit's frames of the thread a report leads with (the crashing one) are
    rust-minidump's, instruction pointer for instruction pointer, or every difference is
    explained by the dump's memory (see `explain`)."""
    tid, theirs = peer_ips(peer_walk(dump))
    w = walked(dump)
    assert w.thread.tid == tid
    ours = [f.ip for f in every(w.walk)]
    if ours != theirs:
        explain(w, ours, theirs)


# ----------------------------------------------------------------------------- item 5
SENTRY = "sentry-native/minidump.dmp"


def _raw_walks(path: Path) -> Tuple[Walked, Dict[int, StackWalk]]:
    """Every thread's walk as stepping and scanning alone find it (no cross-check)."""
    raw = Walked(path, cross_check=False)
    return raw, {t.tid: raw.walker.walk(t) for t in raw.target.threads if t.tid != raw.thread.tid}


def _agreed_spans(walks: Dict[int, StackWalk]) -> Dict[int, Tuple[int, int]]:
    """Return address -> (its frame's size, the caller there) where at least two threads
    show it and none shows another."""
    seen: Dict[int, Dict[Tuple[int, int], set]] = {}
    for tid, walk in walks.items():
        for f, nxt in zip(every(walk)[1:], every(walk)[2:]):
            seen.setdefault(f.ip, {}).setdefault((nxt.sp - f.sp, nxt.ip), set()).add(tid)
    return {ip: next(iter(v)) for ip, v in seen.items() if len(v) == 1 and len(next(iter(v.values()))) >= 2}


def test_scanned_frames_that_other_threads_prove_stale_are_not_reported():
    """sentry-native's crashing thread (x64, no images: every frame after the first is
    scanned for). Every other thread ends at the same return address (the thread start
    routine) at the same depth below its stack's top, and goes through kernel32's thunk
    whose frame all of them show as 0x30 bytes up to that routine. The stack-only walk
    of the crashing thread has a stale word inside the thunk's frame and one past the
    start routine; the reported walk has neither, and everything else is the same."""
    dump = real_dump(SENTRY)
    raw, others = _raw_walks(dump)
    spans = _agreed_spans(others)
    tops = {t.tid: t.stack_end for t in raw.target.threads}
    ends = {(every(w)[-1].ip, tops[tid] - every(w)[-1].sp) for tid, w in others.items()}
    assert len(others) >= 2 and len(ends) == 1  # every other thread starts the same way
    ((start_ip, depth),) = ends

    def contradictions(walk: StackWalk) -> List[int]:
        bad = []
        for n, (f, nxt) in enumerate(zip(every(walk)[1:], every(walk)[2:]), 1):
            if f.ip in spans and f.sp + spans[f.ip][0] != nxt.sp:
                bad.append(n + 1)  # the frame found inside f's frame
        return bad

    top = raw.thread.stack_end
    raw_start = next(i for i, f in enumerate(every(raw.walk)) if (f.ip, top - f.sp) == (start_ip, depth))
    assert contradictions(raw.walk) and raw_start < len(every(raw.walk)) - 1  # what the evidence proves wrong

    reported = walked(dump).walk
    assert contradictions(reported) == []
    assert (every(reported)[-1].ip, top - every(reported)[-1].sp) == (start_ip, depth)
    assert reported.stop is StopReason.THREAD_START
    dropped = {f.ip for f in every(raw.walk)} - {f.ip for f in every(reported)}
    assert len(every(raw.walk)) - len(every(reported)) == len(dropped) == 2
    assert [f.index for f in every(reported)] == list(range(len(every(reported))))
    # the frames kept are the raw walk's, in order, found the same way
    kept = [(f.ip, f.sp, f.trust) for f in every(raw.walk) if f.ip not in dropped]
    assert kept == [(f.ip, f.sp, f.trust) for f in every(reported)]
