"""Fill in the Delay Import Directory entry of a PE32+ image linked by GNU ld with dlltool delay libraries.

GNU ld (binutils 2.40) links dlltool's `--output-delaylib` objects correctly - each library
brings its ImgDelayDescr (`__DELAY_IMPORT_DESCRIPTOR_<lib>`, 32 bytes in `.text$2`), its
delay IAT/INT in `.idata$5`/`.idata$4`, the load stubs and `__tailMerge_<lib>`, and the
calls work at run time - but it leaves the optional header's DataDirectory[13]
(IMAGE_DIRECTORY_ENTRY_DELAY_IMPORT) zero, so no tool (objdump, dbghelp, a dump analyzer)
sees the delay imports. This
script reads the image's own COFF symbol table, checks that the descriptors are contiguous
and followed by a zero descriptor (`_NULL_DELAY_IMPORT_DESCRIPTOR`, linked in `.text$3`),
sets DataDirectory[13] = (RVA of the first, 32 * (count + 1)) and recomputes the PE checksum.
The Windows loader never reads this entry; the code and every other byte stay as linked.

Usage: set_delay_dir.py [--check] IMAGE   (--check: only verify that the entry is set, write nothing)
"""

from __future__ import annotations

import struct
import sys


def checksum(data: bytearray, at: int) -> int:
    """The PE image checksum (imagehlp's CheckSumMappedFile), the field at `at` taken as 0."""
    total = 0
    padded = bytes(data) + b"\0" * (len(data) % 2)
    for i, (word,) in enumerate(struct.iter_unpack("<H", padded)):
        if i * 2 in (at, at + 2):
            continue
        total += word
        total = (total & 0xFFFF) + (total >> 16)
    total = (total & 0xFFFF) + (total >> 16)
    return (total + len(data)) & 0xFFFFFFFF


def main(path: str, check: bool = False) -> int:
    with open(path, "rb") as f:
        d = bytearray(f.read())
    pe = struct.unpack_from("<I", d, 0x3C)[0]
    assert d[pe:pe + 4] == b"PE\0\0", "not a PE file"
    nsections, _, symtab, nsyms, opt_size = struct.unpack_from("<HIIIH", d, pe + 6)
    opt = pe + 24
    assert struct.unpack_from("<H", d, opt)[0] == 0x20B, "not PE32+"
    image_base = struct.unpack_from("<Q", d, opt + 24)[0]
    sections = []
    for i in range(nsections):
        o = opt + opt_size + 40 * i
        vsize, va, rawsize, rawptr = struct.unpack_from("<IIII", d, o + 8)
        sections.append((va, max(vsize, rawsize), rawptr))
    assert symtab and nsyms, "no COFF symbol table (linked with -s?)"
    strings = symtab + 18 * nsyms
    found = {}
    i = 0
    while i < nsyms:
        o = symtab + 18 * i
        raw = d[o:o + 8]
        if raw[:4] == b"\0\0\0\0":
            at = strings + struct.unpack_from("<I", raw, 4)[0]
            name = d[at:d.index(b"\0", at)].decode()
        else:
            name = raw.rstrip(b"\0").decode()
        value, section = struct.unpack_from("<Ih", d, o + 8)
        if section > 0 and ("__DELAY_IMPORT_DESCRIPTOR_" in name
                            or name == "_NULL_DELAY_IMPORT_DESCRIPTOR"):
            # ld writes a PE image's symbol values as offsets in their section
            found[name] = sections[section - 1][0] + value
        i += 1 + d[o + 17]
    null = found.pop("_NULL_DELAY_IMPORT_DESCRIPTOR", None)
    assert found, "no __DELAY_IMPORT_DESCRIPTOR_ symbol"
    rvas = sorted(found.values())
    assert null == rvas[-1] + 32, "the zero descriptor does not follow the last one"
    assert rvas == list(range(rvas[0], rvas[0] + 32 * len(rvas), 32)), "not contiguous"

    def offset(rva: int) -> int:
        for va, size, rawptr in sections:
            if va <= rva < va + size:
                return rawptr + rva - va
        raise ValueError("RVA 0x%x in no section" % rva)

    for rva in rvas:
        attrs, name_rva = struct.unpack_from("<II", d, offset(rva))
        assert attrs == 1, "descriptor at 0x%x is not RVA-based" % rva
        at = offset(name_rva)
        print("set_delay_dir: 0x%x %s" % (rva, d[at:d.index(b"\0", at)].decode()))
    assert d[offset(null):offset(null) + 32] == b"\0" * 32, "the zero descriptor is not zero"
    entry = opt + 112 + 8 * 13
    old = struct.unpack_from("<II", d, entry)
    want = (rvas[0], 32 * (len(rvas) + 1))
    if check:
        ok = old == want and struct.unpack_from("<I", d, opt + 64)[0] == checksum(d, opt + 64)
        print("set_delay_dir: %s DataDirectory[13] = 0x%x, %d bytes: %s"
              % (path, old[0], old[1], "set" if ok else "NOT SET (or checksum stale)"))
        return 0 if ok else 1
    assert old in ((0, 0), want), "DataDirectory[13] already %r" % (old,)
    struct.pack_into("<II", d, entry, rvas[0], 32 * (len(rvas) + 1))
    struct.pack_into("<I", d, opt + 64, checksum(d, opt + 64))
    with open(path, "wb") as f:
        f.write(d)
    print("set_delay_dir: %s DataDirectory[13] = 0x%x, %d bytes (image base 0x%x)"
          % (path, rvas[0], 32 * (len(rvas) + 1), image_base))
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(main(args[-1], check="--check" in args[:-1]))
