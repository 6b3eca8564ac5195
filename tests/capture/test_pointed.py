"""The memory a dying thread's stack points to, which `dumpkit capture` adds to its dumps:
windows around what the stack's words point to (and what those point to), never inside the
modules or the stacks, and never more than the budget."""

from __future__ import annotations

import struct

from dumpkit.capture.pointed import AFTER, BEFORE, pointed_memory
from tests.support.fakes.target import Memory

HEAP, TEXT, MODULE, STACK = 0x2_0000_0000, 0x3_0000_0000, 0x1_8000_0000, 0x20_0000


def _words(*values: int) -> bytes:
    return struct.pack(f"<{len(values)}Q", *values)


def test_a_heap_string_pointed_to_by_the_stack_is_kept_and_module_addresses_are_not():
    message = b"Check failed: dims == 4 (3 vs. 4)\0"
    memory = Memory([(HEAP, b"\0" * 64 + message + b"\0" * 512), (MODULE, b"\xcc" * 4096)])
    stack = _words(0, HEAP + 64, MODULE + 0x100, 5)
    got = pointed_memory(stack, [(MODULE, MODULE + 0x1000), (STACK, STACK + 0x1000)], memory.read_available)
    held = b"".join(data for _, data in got)
    assert message in held
    assert all(not (MODULE <= address < MODULE + 0x1000) for address, _ in got)
    ((address, data),) = [p for p in got if p[0] <= HEAP + 64 < p[0] + len(p[1])]
    assert address <= HEAP + 64 - BEFORE + 16 and address + len(data) >= HEAP + 64 + AFTER - 16


def test_an_object_holding_a_pointer_to_its_text_is_followed_once_more():
    # the stack points to an object (a std::string's heap buffer pointer inside it), which
    # points to the text far away: the second window has it
    text = b"OMP: Error #15: Initializing libiomp5md.dll\0"
    memory = Memory([(HEAP, _words(0x11, TEXT) + b"\0" * 2048), (TEXT, text + b"\0" * 256)])
    got = pointed_memory(_words(HEAP), [], memory.read_available)
    assert text in b"".join(data for _, data in got)


def test_unreadable_targets_and_non_pointers_add_nothing_and_the_total_is_bounded():
    memory = Memory([(HEAP, b"x" * (1 << 20))])
    stack = _words(0x10, 0xFFFF_FFFF_FFFF_FFFF, 0x7_0000_0000) + _words(*(HEAP + 1024 * i for i in range(1024)))
    got = pointed_memory(stack, [], memory.read_available, max_total=10_000)
    assert all(HEAP <= a < HEAP + (1 << 20) for a, _ in got)
    assert sum(len(d) for _, d in got) <= 10_000


def test_a_heap_objects_type_name_is_kept_three_pointers_from_the_stack():
    # 3.12's _thread.lock is a heap type: the stack points to the lock, the lock (+8) to its
    # type, the type (+24) to its name, in a third allocation far from both
    lock, kind, name = HEAP, HEAP + 0x10000, HEAP + 0x40000
    memory = Memory(
        [
            (lock, _words(1, kind, 0x7777) + b"\0" * 1024),
            (kind, _words(1, 0, 0, name) + b"\0" * 1024),
            (name, b"_thread.lock\0" + b"\0" * 256),
        ]
    )
    got = pointed_memory(_words(lock), [], memory.read_available)
    assert b"_thread.lock\0" in b"".join(data for _, data in got)
    kept_at_name = [(a, d) for a, d in got if a <= name < a + len(d)]
    assert kept_at_name and all(len(d) <= 64 + 16 for _, d in kept_at_name)
