"""The hash CPython gives a str, computed here so a dict in a dump can be searched the way the
interpreter searches it: by probing its index table, touching a few entries instead of
reading every key (sys.modules of a TensorFlow process holds thousands).

Python/pyhash.c hashes a str's bytes in its compact form (latin-1, UCS-2 or UCS-4, by its
widest character) with SipHash keyed by `_Py_HashSecret.siphash` (k0, k1: the first 16
bytes of the exported `_Py_HashSecret`, random per process unless PYTHONHASHSEED is set):
SipHash-2-4 up to 3.10, SipHash-1-3 from 3.11 (bpo-29410), the PSF's Windows builds as
every other 64-bit build. The empty str hashes to 0 and -1 is never a hash (it becomes -2).
Pure; the result is the hash as an unsigned 64-bit value, as a dict probe uses it."""

from __future__ import annotations

from typing import Tuple

_MASK = (1 << 64) - 1


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & _MASK


def siphash(key: Tuple[int, int], data: bytes, c_rounds: int, d_rounds: int) -> int:
    """SipHash-c-d of `data` under the 128-bit key (k0, k1), as a 64-bit unsigned int."""
    k0, k1 = key
    v0, v1 = k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D
    v2, v3 = k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573

    def rounds(n: int) -> None:
        nonlocal v0, v1, v2, v3
        for _ in range(n):
            v0 = (v0 + v1) & _MASK
            v1 = _rotl(v1, 13) ^ v0
            v0 = _rotl(v0, 32)
            v2 = (v2 + v3) & _MASK
            v3 = _rotl(v3, 16) ^ v2
            v0 = (v0 + v3) & _MASK
            v3 = _rotl(v3, 21) ^ v0
            v2 = (v2 + v1) & _MASK
            v1 = _rotl(v1, 17) ^ v2
            v2 = _rotl(v2, 32)

    whole = len(data) // 8 * 8
    for at in range(0, whole, 8):
        m = int.from_bytes(data[at : at + 8], "little")
        v3 ^= m
        rounds(c_rounds)
        v0 ^= m
    last = ((len(data) & 0xFF) << 56) | int.from_bytes(data[whole:], "little")
    v3 ^= last
    rounds(c_rounds)
    v0 ^= last
    v2 ^= 0xFF
    rounds(d_rounds)
    return v0 ^ v1 ^ v2 ^ v3


def str_hash(text: str, secret: Tuple[int, int], version: Tuple[int, int]) -> int:
    """hash(text) in a CPython `version` process whose _Py_HashSecret.siphash is `secret`
    (unsigned 64-bit)."""
    if not text:
        return 0
    widest = max(map(ord, text))
    data = text.encode("latin-1" if widest < 0x100 else "utf-16-le" if widest < 0x10000 else "utf-32-le")
    found = siphash(secret, data, 2, 4) if version < (3, 11) else siphash(secret, data, 1, 3)
    return _MASK - 1 if found == _MASK else found  # -1 is not a hash: CPython makes it -2
