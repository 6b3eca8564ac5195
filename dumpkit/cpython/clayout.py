"""C structure layout for Windows x64 (LLP64), so CPython's structures can be written down
here as they are in its headers (field order and C types) and their offsets computed by the
same rules MSVC applies, instead of typed in as bare numbers.

LLP64: `long` and `unsigned long` are 4 bytes (on Linux x64 they are 8, which is why offsets
taken from a Linux build are wrong on Windows wherever such a field sits). Every field is
aligned to its own alignment; a struct is aligned to its widest member and padded to it."""

from __future__ import annotations

from typing import Dict, Sequence, Tuple, Union

# size (= alignment) of the scalar C types that occur in the structures read here
SCALARS: Dict[str, int] = {
    "char": 1,
    "bool": 1,
    "uint8_t": 1,
    "short": 2,
    "uint16_t": 2,
    "int": 4,
    "unsigned int": 4,  # also a group of `unsigned int x:N` bit-fields that fits in 32 bits
    "long": 4,  # LLP64
    "unsigned long": 4,  # LLP64
    "int32_t": 4,
    "uint32_t": 4,
    "int64_t": 8,
    "uint64_t": 8,
    "size_t": 8,
    "Py_ssize_t": 8,
    "Py_hash_t": 8,
    "uintptr_t": 8,
    "ptr": 8,  # any pointer: PyObject *, struct _ts *, function pointers, locks (void *)
}

# A field is (name, type) where type is a scalar name, ("array", type, count) or a nested
# struct given as a tuple of fields.
Field = Tuple[str, Union[str, tuple]]


def _size_align(ctype) -> Tuple[int, int]:
    if isinstance(ctype, str):
        n = SCALARS[ctype]
        return n, n
    if ctype and ctype[0] == "array":
        size, align = _size_align(ctype[1])
        return size * ctype[2], align
    offsets, size, align = _layout(ctype)
    return size, align


def _layout(fields: Sequence[Field]) -> Tuple[Dict[str, int], int, int]:
    offsets: Dict[str, int] = {}  # name -> offset; "name:end" -> offset + size
    at = 0
    widest = 1
    for name, ctype in fields:
        size, align = _size_align(ctype)
        at = (at + align - 1) // align * align
        offsets[name] = at
        offsets[f"{name}:end"] = at + size
        if not isinstance(ctype, str) and ctype and ctype[0] != "array":
            inner, _, _ = _layout(ctype)
            for sub, off in inner.items():
                offsets[f"{name}.{sub}"] = at + off
        at += size
        widest = max(widest, align)
    return offsets, (at + widest - 1) // widest * widest, widest


def offsets(fields: Sequence[Field]) -> Dict[str, int]:
    """Offset of every field (nested ones as `outer.inner`), where each ends (`name:end`),
    and `sizeof` for the whole."""
    found, size, _ = _layout(fields)
    found["sizeof"] = size
    return found
