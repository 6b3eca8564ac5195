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


def _typed_object(obj: int, kind: int, name: int, type_name: bytes) -> Memory:
    """A Python object at `obj` (ob_type at +8), its type at `kind` (tp_name at +24) and
    the name's characters at `name`, each an allocation of its own."""
    return Memory(
        [
            (obj, _words(1, kind, 0x7777) + b"\0" * 1024),
            (kind, _words(1, 0, 0, name) + b"\0" * 1024),
            (name, type_name + b"\0" * 257),
        ]
    )


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
    memory = _typed_object(lock, kind, name, b"_thread.lock")
    got = pointed_memory(_words(lock), [], memory.read_available)
    assert b"_thread.lock\0" in b"".join(data for _, data in got)
    kept_at_name = [(a, d) for a, d in got if a <= name < a + len(d)]
    assert kept_at_name and all(len(d) <= 64 + 16 for _, d in kept_at_name)


def test_an_object_only_a_register_points_to_is_kept_and_its_text_followed():
    # a function stopped with its object in a register (the lock a wait was just given, the
    # object an access violation read through): no stack word points to it
    text = b"the lock's owner\0"
    memory = Memory([(HEAP, _words(0x11, TEXT) + b"\0" * 1024), (TEXT, text + b"\0" * 256)])
    stack = _words(0, 5, MODULE + 0x10)
    assert pointed_memory(stack, [(MODULE, MODULE + 0x1000)], memory.read_available) == []
    got = pointed_memory(stack, [(MODULE, MODULE + 0x1000)], memory.read_available, registers=[0, HEAP, 1 << 63])
    assert any(a <= HEAP < a + len(d) for a, d in got)
    assert text in b"".join(d for _, d in got)


def test_each_threads_registers_go_with_its_own_stack_and_share():
    from dumpkit.capture.pointed import pointed_by_stacks

    other = HEAP + 0x100000
    memory = Memory([(HEAP, b"a" * 1024), (other, b"b" * 1024)])
    got = pointed_by_stacks([_words(0), _words(0)], [], memory.read_available, registers=[[HEAP], [other]])
    starts = sorted(a for a, _ in got)
    assert any(a <= HEAP < a + 1024 for a in starts) and any(a <= other < a + 1024 for a in starts)
    assert pointed_by_stacks([_words(0)], [], memory.read_available, registers=[]) == []


def test_an_objects_static_type_is_kept_through_its_name_even_when_the_object_was_kept_earlier():
    # 3.8's _thread.RLock: the object on the heap (kept already, by an earlier thread's
    # stack), its type in python38.dll's writable data, the name in its read-only data
    lock, kind, name = HEAP, MODULE + 0x3B52C0, MODULE + 0x32E190
    memory = _typed_object(lock, kind, name, b"_thread.RLock")
    got = pointed_memory(_words(lock), [], memory.read_available, held=[(lock, lock + 512)])
    kept = Memory(got)
    assert kept.read_available(kind + 24, 8) == _words(name)
    assert kept.read_available(name, 14) == b"_thread.RLock\0"
    assert not any(a <= lock < a + len(d) for a, d in got)  # not read again
