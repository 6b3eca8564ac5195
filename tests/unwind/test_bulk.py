"""The bulk walk (unwind/bulk.py) against the step-by-step walk: the same frames, frame by
frame, on every thread of every sample dump and of the real third-party dumps, and where a
recursion breaks off in the middle of the stack bytes."""

from __future__ import annotations

import lzma
import shutil
from pathlib import Path

import pytest

from dumpkit.analysis.recursion import find_cycles
from dumpkit.engine import Options, crashing_thread, make_walker
from dumpkit.sources.minidump import open_dump
from dumpkit.unwind.bulk import Frames, Member, Run, Walked
from dumpkit.unwind.frames import Frame, Trust
from tests.support.samples import PY_SAMPLES, SAMPLE_BIN, SAMPLES, real_dumps


def _dumps():
    small = sorted(SAMPLES.glob("*.dmp")) + sorted(PY_SAMPLES.glob("*.dmp"))
    packed = sorted(SAMPLES.glob("*.dmp.xz")) + sorted(PY_SAMPLES.glob("*.dmp.xz"))
    return small + packed + real_dumps()


def _open(path: Path, tmp_path_factory):
    if path.suffix == ".xz":
        out = tmp_path_factory.mktemp("xz") / path.stem
        with lzma.open(path) as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst)
        path = out
    return open_dump(str(path))


WITH_IMAGES = (str(SAMPLE_BIN), str(SAMPLE_BIN / "wine"))


def _walks(target, use_bulk, images=WITH_IMAGES):
    walker = make_walker(target, Options(image_paths=images), problems=target.soft_errors)
    walker.use_bulk = use_bulk
    crash = crashing_thread(target)
    out = []
    for t in target.threads[:64]:
        ctx = target.exception.context if crash is not None and t.tid == crash.tid and target.exception else None
        out.append(walker.walk(t, ctx))
    return out


def _same(bulk, stepped):
    assert bulk.stop == stepped.stop and bulk.problems == stepped.problems
    assert len(bulk.frames) == len(stepped.frames)
    for a, b in zip(bulk.frames, stepped.frames):
        assert a == b


@pytest.mark.slow
@pytest.mark.parametrize("images", [WITH_IMAGES, ()], ids=["images", "no-images"])
@pytest.mark.parametrize("path", _dumps(), ids=lambda p: p.name)
def test_bulk_walk_equals_step_by_step(path, images, tmp_path_factory):
    # Without images, the Python samples' recursions through python38.dll have no unwind
    # data: their callers are found by scanning, and those runs are verified in bulk too.
    target = _open(path, tmp_path_factory)
    for bulk, stepped in zip(_walks(target, True, images), _walks(target, False, images)):
        _same(bulk, stepped)


@pytest.mark.parametrize("name", ["repr_recursion.dmp.xz", "thread_stack_size.dmp.xz"])
def test_recursions_through_code_without_unwind_data_are_verified_in_bulk(name, tmp_path_factory):
    """Read without python38.dll, CPython's recursion is found by scanning, frame after
    frame: those stretches become runs (each word the scans passed over checked not to be
    a return address) with the stepped walk's frames, trust levels and all."""
    path = PY_SAMPLES / name
    if not path.exists():
        pytest.skip(f"{name} not present")
    target = _open(path, tmp_path_factory)
    crash = crashing_thread(target)
    bulk = next(w for w in _walks(target, True, ()) if w.thread_id == crash.tid)
    stepped = next(w for w in _walks(target, False, ()) if w.thread_id == crash.tid)
    scanned = [r for r in _runs(bulk) if r.scanned]
    assert scanned, "no recursion was verified in bulk"
    assert sum(len(r) for r in scanned) > len(bulk.frames) // 2
    _same(bulk, stepped)
    assert find_cycles(bulk.frames) == find_cycles(list(stepped.frames))
    assert bulk.trust_counts == stepped.trust_counts


def _sample_crash(name):
    """A sample dump and its crashing thread; skips when the sample is absent."""
    path = SAMPLES / name
    if not path.exists():
        pytest.skip(f"sample dump {name} not present")
    target = open_dump(str(path))
    return target, crashing_thread(target)


def _runs(walk):
    return [p for p in walk.frames.parts if isinstance(p, Run)] if isinstance(walk.frames, Frames) else []


@pytest.mark.parametrize("name", ["recursion_one.dmp", "recursion_cycle3.dmp", "tree_free.dmp"])
def test_recursions_are_verified_in_bulk_with_the_same_frames(name):
    target, crash = _sample_crash(name)
    bulk = next(w for w in _walks(target, True) if w.thread_id == crash.tid)
    stepped = next(w for w in _walks(target, False) if w.thread_id == crash.tid)
    runs = _runs(bulk)
    assert runs, "the recursion was walked frame by frame"
    assert sum(len(r) for r in runs) > len(bulk.frames) // 2
    _same(bulk, stepped)
    # the view answers indexing, negative indexing and slices like the list
    for i in (0, 1, 63, 64, 65, len(stepped.frames) // 2, -1, -5):
        assert bulk.frames[i] == stepped.frames[i]
    assert bulk.frames[100:140] == stepped.frames[100:140]
    # the analyses that read a run per member find what they find in the plain list
    assert find_cycles(bulk.frames) == find_cycles(list(stepped.frames))
    assert bulk.trust_counts == stepped.trust_counts


class _Tampered:
    """A target whose memory has one stack word overwritten: a recursion whose return
    address slot no longer holds the cycle's address (what a corrupted or re-entered
    stack shows). Everything else is the real dump's."""

    def __init__(self, target, address: int, value: bytes):
        self._target, self._address, self._value = target, address, value

    def __getattr__(self, name):
        return getattr(self._target, name)

    def _patch(self, address: int, data: bytes) -> bytes:
        lo, hi = self._address, self._address + len(self._value)
        if address < hi and lo < address + len(data):
            buf = bytearray(data)
            for a in range(max(lo, address), min(hi, address + len(data))):
                buf[a - address] = self._value[a - lo]
            return bytes(buf)
        return data

    def read(self, address: int, size: int) -> bytes:
        return self._patch(address, self._target.read(address, size))

    def read_available(self, address: int, size: int) -> bytes:
        return self._patch(address, self._target.read_available(address, size))


@pytest.mark.parametrize("depth", [0.3, 0.7])
def test_a_cycle_broken_mid_stack_falls_back_at_the_first_mismatch(depth):
    real, crash = _sample_crash("recursion_one.dmp")
    stepped = next(w for w in _walks(real, False) if w.thread_id == crash.tid)
    # the return-address slot of a frame deep in the recursion, pointed at the frame's
    # own function instead of its caller: the walk must go on by other means there
    victim = stepped.frames[int(len(stepped.frames) * depth)]
    slot = victim.sp + victim.size - 8
    tampered = _Tampered(real, slot, (victim.ip + 1).to_bytes(8, "little"))
    bulk = next(w for w in _walks(tampered, True) if w.thread_id == crash.tid)
    again = next(w for w in _walks(tampered, False) if w.thread_id == crash.tid)
    assert _runs(bulk)
    _same(bulk, again)
    assert find_cycles(bulk.frames) == find_cycles(list(again.frames))
    assert len(again.frames) != len(stepped.frames) or any(a != b for a, b in zip(again.frames, stepped.frames)), (
        "the tampered word changed nothing"
    )


@pytest.mark.parametrize("limit", [1, 64, 65, 66, 130, 5000, 10835, 10836, 10837])
def test_the_frame_limit_cuts_a_bulk_walk_where_it_cuts_the_stepped_one(limit):
    target, crash = _sample_crash("recursion_one.dmp")
    walks = []
    for use_bulk in (True, False):
        walker = make_walker(target, Options(image_paths=(str(SAMPLE_BIN),)), problems=target.soft_errors)
        walker.use_bulk = use_bulk
        walks.append(walker.walk(crash, target.exception.context, max_frames=limit))
    bulk, stepped = walks
    _same(bulk, stepped)
    assert bulk.frame_limit == stepped.frame_limit
    assert len(bulk.frames) == min(limit, 10836)


@pytest.mark.slow
def test_a_deep_recursion_ending_in_scanned_frames_keeps_its_runs(tmp_path_factory, monkeypatch):
    """Read without images (the dump's own memory holds the program's unwind data, not
    Wine's DLLs'), the million-frame recursion ends in frames found by scanning, which the other threads' walks are asked about (unwind/evidence.py). That
    check must give the stepped walk's frames without expanding the runs into a million
    Frame objects (it made two million, and the analysis took 4.3 s instead of 0.35 s)."""
    path = SAMPLES / "deep_recursion_1m.dmp.xz"
    if not path.exists():
        pytest.skip("deep_recursion_1m.dmp.xz not present")
    target = _open(path, tmp_path_factory)
    crash = crashing_thread(target)
    made = []
    frame = Run.frame
    monkeypatch.setattr(Run, "frame", lambda run, i: made.append(i) or frame(run, i))
    walks = []
    for use_bulk in (True, False):
        walker = make_walker(target, Options(image_paths=()), problems=target.soft_errors)
        walker.use_bulk = use_bulk
        walks.append(walker.walk(crash, target.exception.context))
        if use_bulk:
            assert len(made) < 10_000, f"the bulk walk and its check made {len(made):,} frames of its runs"
    bulk, stepped = walks
    every = list(stepped.frames) + list(stepped.possible)  # the scanned frames nothing confirms come last
    assert every[-1].trust.value == "scan", "the walk no longer ends in scanned frames"
    assert _runs(bulk)
    _same(bulk, stepped)


def _planted_in_a_scanned_run(tmp_path_factory, alignment: int):
    """repr_recursion's crashing thread walked without images, and again with its largest
    scanned member's own return address planted in a word of that member's frame, mid-run,
    at `alignment` mod 16: (the walk before, the planted word, bulk walk, stepped walk)."""
    path = PY_SAMPLES / "repr_recursion.dmp.xz"
    if not path.exists():
        pytest.skip("repr_recursion.dmp.xz not present")
    real = _open(path, tmp_path_factory)
    crash = crashing_thread(real)
    before = next(w for w in _walks(real, True, ()) if w.thread_id == crash.tid)
    run = max((r for r in _runs(before) if r.scanned), key=len)
    member = max(run.members, key=lambda m: m.size)
    assert member.size > 16, "no word between a member's SP and its return slot"
    first = run.sp + (run.repetitions // 2) * run.span + member.offset
    word = first if first & 15 == alignment else first + 8
    assert word + 8 < first + member.size
    tampered = _Tampered(real, word, member.ip.to_bytes(8, "little"))
    bulk = next(w for w in _walks(tampered, True, ()) if w.thread_id == crash.tid)
    stepped = next(w for w in _walks(tampered, False, ()) if w.thread_id == crash.tid)
    _same(bulk, stepped)
    return before, word, bulk, stepped


def test_a_return_address_left_between_scanned_frames_ends_the_run_there(tmp_path_factory):
    """A code address in a word that the scans of a verified stretch passed over (a stale
    return address in a local) makes the scan stop there: the bulk walk must see it too.
    (The word is 8 above a 16-byte boundary, where x64 return slots sit: the scan asks no
    other word.)"""
    before, word, bulk, stepped = _planted_in_a_scanned_run(tmp_path_factory, 8)
    assert any(f.sp == word + 8 for f in stepped.frames), "the planted address was not taken as a return"
    assert not any(f.sp == word + 8 for f in before.frames)


def test_a_code_address_in_a_misaligned_word_is_passed_over_by_both_walks(tmp_path_factory):
    """The same planted address one word off the 16-byte rhythm of return slots: the x64
    calling convention puts no return address there, the scan passes it over, and the
    bulk walk, which skips such words unasked, agrees frame for frame."""
    _, word, bulk, stepped = _planted_in_a_scanned_run(tmp_path_factory, 0)
    assert not any(f.sp == word + 8 for f in stepped.frames), "a misaligned word was taken as a return slot"
    assert _runs(bulk), "the bulk walk no longer verifies the recursion"


def test_walked_splices_a_run_after_its_frames_and_keeps_its_list():
    walked = Walked()
    append = walked.frames.append
    for i in range(3):
        append(Frame(i, 0x1000, 0x2000 + 0x40 * i, "m.dll", 0x1000, 0x1000, "m.dll!f", 0x40, Trust.UNWIND_INFO, None))
    assert walked.walk() == walked.frames and len(walked) == 3
    member = Member(0x1000, "m.dll", 0x1000, 0x1000, "m.dll!f", 0x40, 0)
    run = Run(3, 0x20C0, (member,), 0x40, 5)
    walked.splice(run)
    assert len(walked) == 8 and walked.frames == [] and run.end == 0x2200
    append(Frame(8, 0x3000, 0x2200, None, None, None, None, None, Trust.SCAN, None))  # the list bound before
    frames = walked.walk()
    assert isinstance(frames, Frames) and len(frames) == 9
    assert [f.sp for f in frames] == [0x2000 + 0x40 * i for i in range(9)]
    assert frames[8].ip == 0x3000 and frames[5] == run.frame(2)
