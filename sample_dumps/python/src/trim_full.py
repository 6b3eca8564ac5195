"""Write a full-memory dump without the memory of Wine's own system DLLs.

A MiniDumpWithFullMemory dump of python.exe under Wine is 55-80 MB, 42 MB of it the
mapped images of Wine's PE DLLs (C:\\windows\\system32\\*.dll): 10-12 MB even with xz -9,
over the 10 MiB a committed file may have. Everything a Python-aware analysis reads (heap,
stacks, TEBs, python38.dll and the extension modules, image and data) is kept; only the
Memory64List ranges inside modules loaded from C:\\windows\\ are dropped. Every other
stream is byte-identical; thread stack locations are re-pointed at the moved bytes.

A dump of a process that loaded big third-party images can still be too big: NumPy's
OpenBLAS (numpy\\.libs\\libopenblas64_*.dll) alone is 32 MB mapped. `--also-drop TEXT`
(repeatable) also drops the ranges of every module whose path contains TEXT (case-insensitive),
e.g. `--also-drop '\\site-packages\\numpy\\'`; without it the output is as before.

Usage: trim_full.py FULL.dmp OUT.dmp [--also-drop TEXT]...   (prints what was dropped, as JSON)
"""

from __future__ import annotations

import hashlib
import json
import struct
import sys
from typing import List, Sequence, Tuple

DROP_PREFIX = "c:\\windows\\"


def u32(b: bytes, o: int) -> int:
    return int(struct.unpack_from("<I", b, o)[0])


def u64(b: bytes, o: int) -> int:
    return int(struct.unpack_from("<Q", b, o)[0])


def trim(data: bytes, also_drop: Sequence[str] = ()) -> Tuple[bytes, dict]:
    also = [t.lower() for t in also_drop]
    count, dir_rva = u32(data, 8), u32(data, 12)
    streams = [struct.unpack_from("<III", data, dir_rva + 12 * i) for i in range(count)]
    mem = [(size, rva) for kind, size, rva in streams if kind == 9]
    if len(mem) != 1:
        raise ValueError("not a full-memory dump (no single Memory64List)")
    _, mem_rva = mem[0]
    n, base_rva = u64(data, mem_rva), u64(data, mem_rva + 8)
    for kind, size, rva in streams:
        if kind not in (0, 9) and rva + size > base_rva:
            raise ValueError("stream %d lies after the memory data; layout not handled" % kind)
    dropped_spans: List[Tuple[int, int]] = []
    for kind, _, rva in streams:
        if kind == 4:
            for i in range(u32(data, rva)):
                o = rva + 4 + 108 * i
                name_rva = u32(data, o + 20)
                name = data[name_rva + 4 : name_rva + 4 + u32(data, name_rva)].decode("utf-16-le")
                if name.lower().startswith(DROP_PREFIX) or any(t in name.lower() for t in also):
                    dropped_spans.append((u64(data, o), u64(data, o) + u32(data, o + 8)))
    kept: List[Tuple[int, int, int]] = []  # (address, size, old file offset)
    offset = base_rva
    dropped_bytes = dropped_ranges = 0
    for i in range(n):
        start, size = struct.unpack_from("<QQ", data, mem_rva + 16 + 16 * i)
        if any(lo <= start < hi for lo, hi in dropped_spans):
            dropped_bytes += size
            dropped_ranges += 1
        else:
            kept.append((start, size, offset))
        offset += size
    head = bytearray(data[:base_rva])
    struct.pack_into("<Q", head, mem_rva, len(kept))
    new_offsets = {}
    pos = base_rva
    for i, (start, size, old) in enumerate(kept):
        struct.pack_into("<QQ", head, mem_rva + 16 + 16 * i, start, size)
        new_offsets[old] = pos
        pos += size
    for i in range(len(kept), n):
        struct.pack_into("<QQ", head, mem_rva + 16 + 16 * i, 0, 0)
    for k, (kind, _, rva) in enumerate(streams):
        if kind == 9:
            struct.pack_into("<I", head, dir_rva + 12 * k + 4, 16 + 16 * len(kept))
        if kind == 3:  # thread stacks point into the memory data in a full dump
            for i in range(u32(data, rva)):
                o = rva + 4 + 48 * i + 36
                old = u32(data, o)
                if old >= base_rva:
                    moved = next((new_offsets[s] + old - s for _, size, s in kept if s <= old < s + size), None)
                    if moved is None:
                        raise ValueError("a thread stack lies in dropped memory")
                    struct.pack_into("<I", head, o, moved)
    body = b"".join(data[old : old + size] for _, size, old in kept)
    info = {
        "trimmed_from_sha256": hashlib.sha256(data).hexdigest(),
        "trimmed_from_bytes": len(data),
        "dropped_modules_prefix": DROP_PREFIX,
        "dropped_modules": len(dropped_spans),
        "dropped_ranges": dropped_ranges,
        "dropped_bytes": dropped_bytes,
        "kept_ranges": len(kept),
    }
    if also:
        info["also_dropped_modules_containing"] = list(also_drop)
    return bytes(head) + body, info


def main(argv: List[str]) -> int:
    paths: List[str] = []
    also: List[str] = []
    args = iter(argv)
    for a in args:
        if a == "--also-drop":
            t = next(args, None)
            if not t:
                paths = []
                break
            also.append(t)
        else:
            paths.append(a)
    if len(paths) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(paths[0], "rb") as f:
        data = f.read()
    out, info = trim(data, also)
    with open(paths[1], "wb") as f:
        f.write(out)
    print("TRIM " + json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
