"""A handle wait says what it waits on where the dump has handle data (procdump -ma and
.dump /ma write it; Wine's writer does not): the kind of kernel object behind the handle
found in the wait's frames."""

from __future__ import annotations

import pytest

from dumpkit.analysis.holders import waited_handle, with_owners
from dumpkit.analysis.model import ThreadWait, WaitKind
from dumpkit.analysis.waits import WORDS
from dumpkit.sources.minidump import open_dump
from dumpkit.target import Handle
from tests.support.samples import REAL_DUMPS

HANDLES = (Handle(0x1AC, "Event", None), Handle(0x1B0, "Key", "\\REGISTRY\\MACHINE"), Handle(0x40, "Thread", None))


def _wait(kind: WaitKind = WaitKind.HANDLE) -> ThreadWait:
    return ThreadWait(7, kind, WORDS[kind], 3, "app.exe!wait_for_device", wait_frame=2)


def _frames(*registers: dict):
    return [(0x1000 + i, 0x5000 + 0x40 * i, r) for i, r in enumerate(registers)]


def _no_memory(address: int, size: int) -> bytes:
    return b""


def test_the_handle_in_the_waits_registers_names_the_object():
    frames = _frames({"rcx": 0x1AC, "rbx": 0x10}, {"rbx": 0x1B0}, {}, {})
    assert waited_handle(_wait(), frames, _no_memory, HANDLES) == HANDLES[0]
    (w,) = with_owners([_wait()], lambda tid: frames, _no_memory, [], None, HANDLES)
    assert w.what == "waits on an Event (handle 0x1ac, WaitForSingleObject)"
    assert w.obj == 0x1AC and w.held == "Event" and w.owner is None
    assert any("the dump's handle data" in e for e in w.evidence)


def test_a_handle_to_what_cannot_be_waited_on_is_not_taken():
    """A registry key's handle is no wait's object: the wait stays a handle wait."""
    frames = _frames({"rcx": 0x1B0}, {}, {}, {})
    assert waited_handle(_wait(), frames, _no_memory, HANDLES) is None
    (w,) = with_owners([_wait()], lambda tid: frames, _no_memory, [], None, HANDLES)
    assert w.what == WORDS[WaitKind.HANDLE] and w.obj is None


def test_the_handle_may_be_in_the_frames_words():
    stack = {0x5000 + 8 * k: 0 for k in range(16)}
    stack[0x5018] = 0x40
    memory = b"".join(stack[a].to_bytes(8, "little") for a in sorted(stack))

    def read(address: int, size: int) -> bytes:
        return memory[address - 0x5000 : address - 0x5000 + size] if address >= 0x5000 else b""

    frames = _frames({}, {}, {}, {})
    handle = waited_handle(_wait(WaitKind.HANDLES), frames, read, HANDLES)
    assert handle == HANDLES[2]


@pytest.mark.parametrize(
    "name,handles,events",
    [("breakpad/tiny-exe-with-cet-xsave.dmp", 147, 18), ("rust-minidump/stability-report.dmp", 302, 91)],
)
def test_real_handle_data(name: str, handles: int, events: int):
    path = REAL_DUMPS / name
    if not path.exists():
        pytest.skip(f"{path} is not here")
    t = open_dump(str(path))
    assert len(t.handles) == handles
    assert sum(h.type_name == "Event" for h in t.handles) == events
    assert all(h.value % 4 == 0 for h in t.handles)
