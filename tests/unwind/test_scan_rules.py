"""Stack scanning under the x64 calling convention's rules (issue #32 item 9), on the real
sample dumps: the walk each dump gives with its modules' unwind data is the truth, the
walk of the dump alone (no images: every caller found by scanning) is what is judged.

The rules: a return address into compiled code sits 8 bytes above a 16-byte boundary
(RSP is aligned at every call made outside a prologue), and a frame that called from its
body has 32 bytes of home space above its callee's return address, which never holds its
own. A scan that passes over those words loses no true frame and shows fewer stale ones."""

from __future__ import annotations

import pytest

from dumpkit.engine import Options, crashing_thread, make_walker
from dumpkit.sources.minidump import open_dump
from dumpkit.unwind.frames import SCANNED
from dumpkit.unwind.walk import walk_thread
from tests.support.samples import SAMPLE_BIN, SAMPLES, WINPYTHON, PY_SAMPLES

pytestmark = pytest.mark.slow

KEEP = 1000  # frames compared per walk: a recursion's repetitions would otherwise be the whole score
MINGW = sorted(p.name for p in SAMPLES.glob("*.dmp"))
PYTHON = ["json_recursion.dmp.xz", "pickle_recursion.dmp.xz", "py_recursion.dmp.xz", "thread_stack_size.dmp.xz"]


def _frames(path, images, recorded):
    target = open_dump(str(path))
    try:
        walker = make_walker(target, Options(image_paths=images), problems=target.soft_errors)
        walker.code.images._locator.use_recorded_path = recorded
        thread = crashing_thread(target)
        walk = walk_thread(walker, thread, target.exception.context)
        return [(f.sp, f.ip, f.trust) for f in walk.frames[:KEEP]]
    finally:
        target.close()


def _pair(path, images):
    truth = _frames(path, images, True)
    assert all(t not in SCANNED for _, _, t in truth), "the truth walk itself scanned"
    return truth, _frames(path, [], False)


def _cases(plain):
    for name in MINGW:
        yield name, SAMPLES / name, [str(SAMPLE_BIN)]
    if WINPYTHON.is_dir():
        for name in PYTHON:
            if (PY_SAMPLES / name).exists():
                yield name, plain(PY_SAMPLES / name), [str(SAMPLE_BIN), str(PY_SAMPLES), str(WINPYTHON)]


def test_every_true_return_slot_keeps_the_alignment_the_scan_requires(plain):
    """The rule's premise, on every real sample: with unwind data, each caller frame's
    return address sits 8 bytes above a 16-byte boundary (frame 1's may not: frame 0 can be
    a stack probe called from a prologue)."""
    seen = 0
    for name, path, images in _cases(plain):
        truth = _frames(path, images, True)
        for k, (sp, _, _) in enumerate(truth[2:], start=2):
            assert (sp - 8) % 16 == 8, f"{name}: true frame {k}'s return slot {sp - 8:#x} is not aligned"
            seen += 1
    assert seen > 1000


def test_without_images_no_true_frame_is_lost_and_recursions_lose_their_stale_words(plain):
    """The dump alone: every true frame the walk reaches is still found (the rules pass over
    no real return address), and in the C recursions through json and pickle the words a
    plain scan took from the frames' locals are gone: at most 1% of the shown frames are
    not true ones (a plain scan showed a third of the json stack and a quarter of pickle's
    as stale words)."""
    if not WINPYTHON.is_dir():
        pytest.skip("../shared/winpython not here: no truth for the Python samples")
    for name, path, images in _cases(plain):
        truth, alone = _pair(path, images)
        true = {(sp, ip) for sp, ip, _ in truth}
        shown = {(sp, ip) for sp, ip, _ in alone}
        reach = max(sp for sp, _, _ in alone)
        lost = [(hex(sp), hex(ip)) for sp, ip, _ in truth if sp <= reach and (sp, ip) not in shown]
        assert not lost, f"{name}: true frames the dump-alone walk passed over: {lost[:5]}"
        if name in ("json_recursion.dmp.xz", "pickle_recursion.dmp.xz"):
            junk = len(shown - true)
            assert junk <= len(alone) // 100, f"{name}: {junk} of {len(alone)} shown frames are not true frames"
