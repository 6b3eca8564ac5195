"""Turn a real minidump into a sparse multi-GB "full-memory" dump.

    python bench/make_sparse_dump.py IN.dmp OUT.dmp [--gib 4] [--ranges 8192]

What it does, exactly (nothing of the original is rewritten or moved):
  1. copies IN byte for byte;
  2. appends a MINIDUMP_MEMORY64_LIST stream (type 9) describing RANGES memory
     ranges of varied sizes (or, when IN holds full memory already, a MINIDUMP_MEMORY_LIST,
     type 5, whose 32-bit RVAs keep the new bytes below 4 GiB of file: at most 3 GiB then) (multiples of 4 KiB, 4 KiB .. ~1 MiB, deterministic
     pseudo-random) that add up to exactly GIB GiB, placed at 0x100_0000_0000 + ...
     (1 TiB up: no module, stack or heap of the original process lives there), with a
     one-page gap between neighbours so no two ranges merge;
  3. appends a new stream directory = the original entries + the new one, and points
     the header's StreamDirectoryRva / NumberOfStreams at it (the old directory stays
     where it was, unreferenced);
  4. the ranges' bytes (BaseRva .. BaseRva + GIB GiB) are never written: the file is
     extended with truncate(), so the file's apparent size is GIB GiB larger but the
     new data is one hole (reads as zeros) and takes no disk.
Every original stream (threads, exception, modules, the MemoryList with the stacks,
Wine's 0xfff0 stream) keeps its offset and bytes, so an analysis of OUT must say the
same as an analysis of IN; the 4 GiB of extra ranges are never needed by it. This is a
stand-in for a MiniDumpWithFullMemory dump of a process with a large, mostly idle heap:
writing a real one would mean writing GIB GiB of real bytes under Wine.
"""

import argparse
import os
import random
import shutil
import struct

MEMORY_LIST = 5
MEMORY64_LIST = 9
BASE_ADDR = 0x100_0000_0000
PAGE = 0x1000


def range_sizes(total: int, count: int, seed: int = 1) -> list:
    """`count` sizes, multiples of PAGE, summing exactly to `total`."""
    rng = random.Random(seed)
    pages_total = total // PAGE
    weights = [rng.randint(1, 256) for _ in range(count)]
    wsum = sum(weights)
    pages = [max(1, (w * pages_total) // wsum) for w in weights]
    diff = pages_total - sum(pages)
    i = 0
    while diff != 0:  # spread the rounding error one page at a time
        step = 1 if diff > 0 else -1
        if pages[i % count] + step >= 1:
            pages[i % count] += step
            diff -= step
        i += 1
    return [p * PAGE for p in pages]


def make(src: str, dst: str, gib: int, nranges: int) -> dict:
    shutil.copyfile(src, dst)
    with open(dst, "r+b") as f:
        hdr = f.read(32)
        sig, ver, nstreams, dir_rva, checksum, stamp, flags = struct.unpack("<IIIIIIQ", hdr)
        if sig != 0x504D444D:
            raise SystemExit(f"{src}: not a minidump")
        f.seek(dir_rva)
        entries = [struct.unpack("<III", f.read(12)) for _ in range(nstreams)]
        types = {t for t, _, _ in entries}
        # a dump has at most one list of each kind: a full-memory one gets a MemoryList
        kind = MEMORY_LIST if MEMORY64_LIST in types else MEMORY64_LIST
        if kind in types:
            raise SystemExit(f"{src} already has a MemoryList and a Memory64List stream")
        end = f.seek(0, os.SEEK_END)
        sizes = range_sizes(gib << 30, nranges)
        # the list's header + descriptors (below 4 GiB: directory RVAs are 32-bit)
        list_rva = (end + 15) & ~15
        list_size = 16 + 16 * nranges if kind == MEMORY64_LIST else 4 + 16 * nranges
        new_dir_rva = (list_rva + list_size + 15) & ~15
        new_dir_size = 12 * (nstreams + 1)
        base_rva = (new_dir_rva + new_dir_size + PAGE - 1) & ~(PAGE - 1)
        if kind == MEMORY_LIST and base_rva + sum(sizes) > 1 << 32:
            raise SystemExit(f"{src} holds full memory: a MemoryList's ranges must end below 4 GiB of file")
        if kind == MEMORY64_LIST:
            descs = bytearray(struct.pack("<QQ", nranges, base_rva))
        else:
            descs = bytearray(struct.pack("<I", nranges))
        addr, rva = BASE_ADDR, base_rva
        for s in sizes:
            descs += struct.pack("<QQ", addr, s) if kind == MEMORY64_LIST else struct.pack("<QII", addr, s, rva)
            addr += s + PAGE
            rva += s
        f.seek(list_rva)
        f.write(descs)
        f.seek(new_dir_rva)
        for e in entries:
            f.write(struct.pack("<III", *e))
        f.write(struct.pack("<III", kind, list_size, list_rva))
        f.seek(0)
        f.write(struct.pack("<IIIIIIQ", sig, ver, nstreams + 1, new_dir_rva, checksum, stamp, flags))
        f.truncate(base_rva + sum(sizes))  # the range bytes: one hole
    st = os.stat(dst)
    return {
        "stream": "MemoryList" if kind == MEMORY_LIST else "Memory64List",
        "apparent_bytes": st.st_size,
        "disk_bytes": st.st_blocks * 512,
        "ranges": nranges,
        "range_bytes": sum(sizes),
        "first_addr": BASE_ADDR,
        "last_end": addr - PAGE,
        "min_range": min(sizes),
        "max_range": max(sizes),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--gib", type=int, default=4)
    ap.add_argument("--ranges", type=int, default=8192)
    a = ap.parse_args()
    info = make(a.src, a.dst, a.gib, a.ranges)
    print(" ".join(f"{k}={v:#x}" if "addr" in k or "end" in k else f"{k}={v}" for k, v in info.items()))


if __name__ == "__main__":
    main()
