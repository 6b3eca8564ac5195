"""The CPU-neutral walker: what it does before and around a step (no context, no step for
the CPU), and the call-site check every step's scanning relies on."""

from __future__ import annotations

import pytest

from dumpkit.images import ImageLocator, ImageProvider
from dumpkit.target import Module, Registers, Thread
from dumpkit.unwind.cpus import step_for
from dumpkit.unwind.frames import StopReason, Trust
from dumpkit.unwind import walk as walk_module
from dumpkit.unwind.walk import StackWindow, Walker
from tests.support.asm import INT3, Alloc, Call, Code, Function, Image, Stack, target_of

IMAGE = Image(
    "calls.dll",
    0x7FF650000000,
    [
        Function("A", [Alloc(0x28)], [INT3 * 8, Call("A.ret"), INT3 * 8]),
        Code("B", bytes.fromhex("ffd0"), Call("B.ret")),
    ],
)


# a module whose image is nowhere: not in the dump, no file
GONE = Module("gone.dll", "C:\\nowhere\\gone.dll", 0x7FF700000000, 0x20000)


def walker(arch: int = 9) -> Walker:
    target = target_of([IMAGE.region(), (0x100000, Stack().build())], [IMAGE.module, GONE], arch=arch)
    return Walker(
        target,
        ImageProvider(target, ImageLocator(use_recorded_path=False), problems=target.soft_errors),
        step_for(target),
        problems=target.soft_errors,
    )


def test_a_thread_without_context_is_not_walked():
    result = walker().walk(Thread(5, None, 0x100000, 0x4000))
    assert result.frames == [] and result.stop is StopReason.NO_CONTEXT
    assert result.stop_reason == "no register context" and result.problems == ["thread has no register context"]


def test_a_cpu_without_a_step_gets_no_walk_but_still_places_and_code():
    w = walker(arch=12)  # ARM64
    assert w.step is None and w.code.bits == 64
    assert w.code.place(IMAGE["A.ret"], True).function_start == IMAGE.rva("A")
    with pytest.raises(ValueError):
        w.walk(Thread(5, Registers({"pc": 0, "sp": 0x100100}), 0x100000, 0x4000))


def test_plausible_return_checks_the_call_site():
    w = walker()
    assert w.code.plausible_return(IMAGE["A.ret"]) is Trust.SCAN_VALIDATED  # call rel32 before it
    assert w.code.plausible_return(IMAGE["B.ret"]) is Trust.SCAN_VALIDATED
    assert w.code.plausible_return(IMAGE["B"] + 2) is Trust.SCAN_VALIDATED  # call rax (ff d0)
    assert w.code.plausible_return(IMAGE["A"]) is None  # code, but no CALL ends there
    assert w.code.plausible_return(IMAGE.module.base + 0x100) is None  # the headers page is never code
    # code that cannot be checked is plain scan, but never in a module's first page
    assert w.code.plausible_return(GONE.base + 0x1100) is Trust.SCAN
    assert w.code.plausible_return(GONE.base + 0x100) is None
    assert w.code.plausible_return(0x100100) is None  # the stack
    assert w.code.bits == 64 and walker(arch=0).code.bits == 32


def test_the_stack_window_moves_forward_past_its_end_and_reads_the_dump_elsewhere(monkeypatch):
    monkeypatch.setattr(walk_module, "MAX_STACK_BYTES", 64)
    stack = b"".join(k.to_bytes(8, "little") for k in range(32))  # word k holds k
    target = target_of([(0x100000, stack)], [])
    window = StackWindow(target, 0x100010, 0x100000, 0x100100, 8, as_words=True)
    assert (window.lo, window.hi) == (0x100010, 0x100050) and list(window.words or []) == list(range(2, 10))
    assert window.read(0x100018) == 3
    assert window.read(0x100008) == 1  # below the window: from the dump; the window stays
    assert (window.lo, window.hi) == (0x100010, 0x100050)
    assert window.read(0x100060) == 12  # past it, in the stack: the window moves there
    assert (window.lo, window.hi) == (0x100060, 0x1000A0) and (window.words or [])[0] == 12
    assert window.read(0x100100) is None  # past the stack and the dump
    assert StackWindow(target, 0x100010, 0x100000, 0x100100, 8, as_words=False).words is None


def _scans(path, image_paths, plain):
    """(window scan, word-by-word scan) from 48 words spread over each thread's stack,
    aligned and not, on one dump: what `Walker.scan` finds reading a StackWindow's
    copy, and reading the same words one call at a time (any other reader)."""
    import functools

    from dumpkit.engine import Options, make_walker
    from dumpkit.sources.minidump import open_dump

    target = open_dump(str(plain(path)))
    walker = make_walker(target, Options(image_paths=image_paths), problems=target.soft_errors)
    assert walker.step is not None
    word = walker.step.word_size
    found = []
    for thread in target.threads:
        lo, hi = thread.stack_start, thread.stack_end
        if thread.context is None or hi <= lo:
            continue
        window = StackWindow(target, lo, lo, hi, word, as_words=False)
        by_word = functools.partial(StackWindow.read, StackWindow(target, lo, lo, hi, word, as_words=False))
        step = max(word, (hi - lo) // 48 // word * word)
        for start in range(lo, hi, step):
            for aligned in (False, True):
                found.append(
                    (walker.scan(start, window.read, hi, word, aligned), walker.scan(start, by_word, hi, word, aligned))
                )
    target.close()
    return found


@pytest.mark.parametrize(
    "name, images",
    [
        ("recursion_cycle3.dmp", []),
        ("null_deref.dmp", ["bin"]),
        ("real:rust-minidump/stability-report.dmp", []),
        ("real:breakpad/stack_exhaustion.dmp", []),
    ],
)
def test_a_scan_of_the_window_copy_finds_what_reading_word_by_word_finds(name, images, plain, monkeypatch):
    from tests.support.samples import SAMPLES, real_dump

    # a small window, so that scans run past its end and move it, as on deep stacks
    monkeypatch.setattr(walk_module, "MAX_STACK_BYTES", 1024)
    path = real_dump(name[5:]) if name.startswith("real:") else SAMPLES / name
    pairs = _scans(path, [str(SAMPLES / i) for i in images], plain)
    assert sum(1 for a, _ in pairs if a is not None) > 100
    assert [a for a, _ in pairs] == [b for _, b in pairs]
