#!/usr/bin/env python3
"""Write a normalised copy of a Wine minidump: every stream directory entry of
Wine's private stream type 0xfff0 (host/Unix libraries) is retyped to 0
(UnusedStream) and its data zeroed.  Nothing else changes (same size, same
offsets), so every RVA in the file stays valid."""
import struct
import sys

WINE_STREAM = 0xFFF0


def normalize(data: bytearray) -> int:
    sig, ver, nstreams, dir_rva = struct.unpack_from("<4sIII", data, 0)
    if sig != b"MDMP":
        raise SystemExit("not a minidump")
    changed = 0
    for i in range(nstreams):
        off = dir_rva + 12 * i
        stype, size, rva = struct.unpack_from("<III", data, off)
        if stype == WINE_STREAM:
            struct.pack_into("<I", data, off, 0)
            data[rva:rva + size] = bytes(size)
            changed += 1
    return changed


if __name__ == "__main__":
    src, dst = sys.argv[1], sys.argv[2]
    buf = bytearray(open(src, "rb").read())
    n = normalize(buf)
    open(dst, "wb").write(buf)
    print(f"{dst}: {n} stream(s) of type 0x{WINE_STREAM:x} retyped to UnusedStream and zeroed")
