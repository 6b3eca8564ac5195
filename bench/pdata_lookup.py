"""Microbenchmark: dumpkit.pe.PEImage.lookup_function on the million-entry bigpdata.dll.

    python bench/pdata_lookup.py [DLL] [--lookups 20000]

Counts the reads the image makes (calls to the file backing's read(), and bytes read):
  - when the image is opened (headers only: must not touch .pdata);
  - for the first lookup (must be ~log2(n) entry reads, not the table);
  - per lookup, over random RVAs inside .text, checked against this script's own parse
    of the raw table (done outside the counted reads).
"""

import argparse
import bisect
import math
import os
import random
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from dumpkit.pe import PEImage  # noqa: E402


class Counter:
    def __init__(self, fn):
        self.fn, self.calls, self.bytes = fn, 0, 0

    def __call__(self, off, size):
        self.calls += 1
        self.bytes += size
        return self.fn(off, size)

    def take(self):
        c, b = self.calls, self.bytes
        self.calls = self.bytes = 0
        return c, b


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dll", nargs="?", default=os.path.join(HERE, "out", "bigpdata", "images", "bigpdata.dll"))
    ap.add_argument("--lookups", type=int, default=20000)
    a = ap.parse_args()

    # reference table: our own parse of the raw .pdata, outside the counted reads
    t0 = time.perf_counter()
    img = PEImage.from_file(a.dll)
    t_open = time.perf_counter() - t0
    n = img.pdata_count
    raw = img.read_rva(img._pdata_rva, n * 12)
    begins = [struct.unpack_from("<I", raw, 12 * i)[0] for i in range(n)]
    ends = [struct.unpack_from("<I", raw, 12 * i + 4)[0] for i in range(n)]
    img.close()

    # fresh image, counted from the start
    import dumpkit.pe as pe

    real_init = pe._FileBacking.__init__
    counters = []

    def counting_init(self, path):
        real_init(self, path)
        c = Counter(self.read)
        self.read = c
        counters.append(c)

    pe._FileBacking.__init__ = counting_init
    try:
        t0 = time.perf_counter()
        img = PEImage.from_file(a.dll)
        t_open = time.perf_counter() - t0
    finally:
        pe._FileBacking.__init__ = real_init
    cnt = counters[0]
    open_calls, open_bytes = cnt.take()

    text = next(s for s in img.sections if s.is_executable)
    rng = random.Random(7)
    first_rva = rng.randrange(text.rva, text.rva + text.mapped_size)
    t0 = time.perf_counter()
    rf = img.lookup_function(first_rva)
    t_first = time.perf_counter() - t0
    first_calls, first_bytes = cnt.take()

    rvas = [rng.randrange(text.rva, text.rva + text.mapped_size) for _ in range(a.lookups)]
    wrong = 0
    worst = 0
    t0 = time.perf_counter()
    for rva in rvas:
        before = cnt.calls
        rf = img.lookup_function(rva)
        worst = max(worst, cnt.calls - before)
        i = bisect.bisect_right(begins, rva) - 1
        want = (begins[i], ends[i]) if i >= 0 and rva < ends[i] else None
        got = (rf.begin_rva, rf.end_rva) if rf is not None else None
        wrong += want != got
    calls, nbytes = cnt.take()
    # the loop also ran the reference bisect; time lookups alone
    t0 = time.perf_counter()
    for rva in rvas:
        img.lookup_function(rva)
    t_only = time.perf_counter() - t0
    cnt.take()

    print(f"image: {a.dll} ({os.path.getsize(a.dll):,} bytes), .pdata entries: {n:,} (log2 n = {math.log2(n):.1f})")
    print(f"open (headers): {open_calls} reads, {open_bytes:,} bytes, {t_open * 1e3:.2f} ms")
    print(
        f"first lookup: {first_calls} reads, {first_bytes:,} bytes, {t_first * 1e6:.0f} us "
        f"(whole table would be {n * 12:,} bytes)"
    )
    print(
        f"{a.lookups:,} random lookups: {calls / a.lookups:.1f} reads/lookup on average, worst {worst}, "
        f"{nbytes / a.lookups:.0f} bytes/lookup, {t_only / a.lookups * 1e6:.1f} us/lookup, "
        f"mismatches vs reference: {wrong}"
    )


if __name__ == "__main__":
    main()
