"""A Python process with a multi-GB heap that dies of Python-level recursion.

    python.exe pyfull.py [MIB] [DEPTH]      (defaults 4096, 100000)

Holds MIB MiB in bytearrays of varied size (1-256 MiB, the shape of a model's weights and
an allocator's arenas; each gets a short header, the rest stays zero) plus a few hundred
thousand ordinary objects (a vocabulary dict, a list of records), then recurses through
two Python functions (walk -> visit -> walk ...) with the recursion limit raised far above
what the main thread's 1.9 MiB C stack can hold, so the C stack overflows. Run under
sample_dumps/bin/dumper.exe --full: the dump (MiniDumpWithFullMemory) holds every
committed byte, while a crash analyser needs the crashing thread's stack, the modules'
unwind data and the few interpreter structures that lead to the Python frames.
Lines marked "# stack" are the ones on the Python stack when it crashes.
"""

import json
import sys

MIB = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
DEPTH = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
SIZES = (1, 2, 4, 1, 8, 16, 1, 2, 64, 1, 4, 256)  # MiB, cycled (as bench/src/fullmem.c)


class Node:
    def __init__(self, index, child):
        self.index = index
        self.child = child


def hold_blocks(mib):
    blocks, done = [], 0
    while done < mib:
        want = min(SIZES[len(blocks) % len(SIZES)], mib - done)
        block = bytearray(want << 20)
        header = f"block {len(blocks)}: {want} MiB".encode()
        block[: len(header)] = header
        blocks.append(block)
        done += want
    return blocks


def hold_objects():
    vocabulary = {f"token_{i:06d}": i for i in range(200_000)}
    records = [(i, f"row {i}", float(i) / 7) for i in range(100_000)]
    return vocabulary, records


def walk(node):
    if node is None:
        return 0
    return visit(node.child) + 1  # stack


def visit(node):
    if node is None:
        return 0
    return walk(node.child) + 1  # stack


def run_job(depth, held):
    root = None
    for index in range(depth):
        root = Node(index, root)
    return walk(root)  # stack


def main():
    sys.setrecursionlimit(10_000_000)
    held = (hold_blocks(MIB), hold_objects())
    facts = {
        "scenario": "pyfull",
        "python": sys.version,
        "held_mib": sum(len(b) for b in held[0]) >> 20,
        "blocks": len(held[0]),
        "depth": DEPTH,
    }
    print("MARKER " + json.dumps(facts), flush=True)
    print("walked", run_job(DEPTH, held))  # stack


main()  # stack
