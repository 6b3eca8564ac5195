"""Build small synthetic PE images in code, for tests of edge cases no real binary shows.

`PEBuilder` lays out headers and sections (file alignment 0x200, section alignment 0x1000 by
default, so file offsets and RVAs differ as in real images); `SynthImage` holds the file
bytes and can also serve them as a process would see the image mapped at a base address
(`read_va`), with holes to imitate memory missing from a dump, and a read counter.

`make_sample_image()` builds one image exercising everything dumpkit.pe reads: a .pdata with
plain, indirect, chained and looping entries, unwind codes of every kind, exports (named,
aliased, ordinal-only, forwarded), a version resource and an RSDS debug record.
"""

from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from dumpkit.target import MemoryNotInDump

AMD64 = 0x8664
I386 = 0x014C
SCN_CODE = 0x00000020
SCN_IDATA = 0x00000040
SCN_EXEC = 0x20000000
SCN_READ = 0x40000000
SCN_WRITE = 0x80000000
TEXT_CHARS = SCN_CODE | SCN_EXEC | SCN_READ
RDATA_CHARS = SCN_IDATA | SCN_READ
DATA_CHARS = SCN_IDATA | SCN_READ | SCN_WRITE


def _align(v: int, a: int) -> int:
    return (v + a - 1) & ~(a - 1)


# ----------------------------------------------------------------------------- layout
@dataclass
class SynthSection:
    name: str
    rva: int
    data: bytearray
    virtual_size: int
    characteristics: int
    raw_offset: int = 0
    raw_size: int = 0


@dataclass
class SynthImage:
    file: bytes
    image_base: int
    size_of_image: int
    size_of_headers: int
    timestamp: int
    sections: List[SynthSection]
    info: Dict[str, int] = field(default_factory=dict)  # named RVAs for tests
    reads: int = 0  # read_va calls counted

    def memory_at(self, rva: int, size: int) -> bytes:
        """Bytes as the loader maps them (headers, section raw data, zeros elsewhere)."""
        out = bytearray(size)
        if rva < self.size_of_headers:
            n = min(size, self.size_of_headers - rva)
            out[:n] = self.file[rva : rva + n]
        for s in self.sections:
            lo = max(rva, s.rva)
            hi = min(rva + size, s.rva + min(s.raw_size, _align(s.virtual_size, 0x1000)))
            if lo < hi:
                src = s.raw_offset + (lo - s.rva)
                out[lo - rva : hi - rva] = self.file[src : src + (hi - lo)]
        return bytes(out)

    def reader(self, base: Optional[int] = None, missing: Sequence[Tuple[int, int]] = ()):
        """A read_va over the mapped image at `base` (default: its ImageBase). `missing` is
        a list of (rva_start, rva_end) ranges that raise MemoryNotInDump; so does anything
        outside the image. Every call increments `self.reads`."""
        base = self.image_base if base is None else base

        def read_va(address: int, size: int) -> bytes:
            self.reads += 1
            rva = address - base
            if rva < 0 or rva + size > self.size_of_image:
                raise MemoryNotInDump(address, size)
            for lo, hi in missing:
                if rva < hi and lo < rva + size:
                    raise MemoryNotInDump(address, size)
            return self.memory_at(rva, size)

        return read_va

    def write(self, path) -> str:
        with open(path, "wb") as fh:
            fh.write(self.file)
        return str(path)


class PEBuilder:
    def __init__(
        self,
        *,
        machine: int = AMD64,
        pe32plus: bool = True,
        timestamp: int = 0x5EADBEEF,
        image_base: int = 0x180000000,
        characteristics: int = 0x2022,
        checksum: int = 0x0004D2C1,
        entry_rva: int = 0,
        stack_reserve: int = 0x200000,
        stack_commit: int = 0x2000,
        file_alignment: int = 0x200,
        section_alignment: int = 0x1000,
        size_of_image: Optional[int] = None,
        linker_version: Tuple[int, int] = (2, 40),
    ):
        self.machine = machine
        self.linker_version = linker_version
        self.pe32plus = pe32plus
        self.timestamp = timestamp
        self.image_base = image_base
        self.characteristics = characteristics
        self.checksum = checksum
        self.entry_rva = entry_rva
        self.stack_reserve = stack_reserve
        self.stack_commit = stack_commit
        self.file_alignment = file_alignment
        self.section_alignment = section_alignment
        self.size_of_image_override = size_of_image
        self.sections: List[SynthSection] = []
        self.dirs: List[Tuple[int, int]] = [(0, 0)] * 16
        self.next_rva = section_alignment

    def add_section(
        self, name: str, data: bytes = b"", *, virtual_size: Optional[int] = None, characteristics: int = RDATA_CHARS
    ) -> SynthSection:
        vsize = len(data) if virtual_size is None else virtual_size
        sec = SynthSection(name, self.next_rva, bytearray(data), vsize, characteristics)
        self.sections.append(sec)
        self.next_rva = _align(sec.rva + max(vsize, len(data), 1), self.section_alignment)
        return sec

    def set_dir(self, index: int, rva: int, size: int) -> None:
        self.dirs[index] = (rva, size)

    def build(self, info: Optional[Dict[str, int]] = None) -> SynthImage:
        e_lfanew = 0x80
        opt_size = (112 if self.pe32plus else 96) + 16 * 8
        hdr_end = e_lfanew + 24 + opt_size + 40 * len(self.sections)
        size_of_headers = _align(hdr_end, self.file_alignment)
        size_of_image = self.size_of_image_override or self.next_rva
        # raw placement
        off = size_of_headers
        for s in self.sections:
            s.raw_size = _align(len(s.data), self.file_alignment)
            s.raw_offset = off if s.raw_size else 0
            off += s.raw_size
        out = bytearray(off)
        out[0:2] = b"MZ"
        struct.pack_into("<I", out, 0x3C, e_lfanew)
        out[e_lfanew : e_lfanew + 4] = b"PE\0\0"
        struct.pack_into(
            "<HHIIIHH",
            out,
            e_lfanew + 4,
            self.machine,
            len(self.sections),
            self.timestamp,
            0,
            0,
            opt_size,
            self.characteristics,
        )
        o = e_lfanew + 24
        code_size = sum(s.raw_size for s in self.sections if s.characteristics & SCN_CODE)
        if self.pe32plus:
            struct.pack_into("<HBBIIIII", out, o, 0x20B, *self.linker_version, code_size, 0, 0, self.entry_rva, 0x1000)
            struct.pack_into("<QII", out, o + 24, self.image_base, self.section_alignment, self.file_alignment)
            struct.pack_into(
                "<HHHHHHIIIIHH",
                out,
                o + 40,
                6,
                0,
                0,
                0,
                6,
                0,
                0,
                size_of_image,
                size_of_headers,
                self.checksum,
                3,
                0x160,
            )
            struct.pack_into("<QQQQII", out, o + 72, self.stack_reserve, self.stack_commit, 0x100000, 0x1000, 0, 16)
            d = o + 112
        else:
            struct.pack_into(
                "<HBBIIIIII", out, o, 0x10B, *self.linker_version, code_size, 0, 0, self.entry_rva, 0x1000, 0
            )
            struct.pack_into("<III", out, o + 28, self.image_base, self.section_alignment, self.file_alignment)
            struct.pack_into(
                "<HHHHHHIIIIHH",
                out,
                o + 40,
                6,
                0,
                0,
                0,
                6,
                0,
                0,
                size_of_image,
                size_of_headers,
                self.checksum,
                3,
                0x140,
            )
            struct.pack_into("<IIIIII", out, o + 72, self.stack_reserve, self.stack_commit, 0x100000, 0x1000, 0, 16)
            d = o + 96
        for i, (rva, size) in enumerate(self.dirs):
            struct.pack_into("<II", out, d + 8 * i, rva, size)
        sh = o + opt_size
        for i, s in enumerate(self.sections):
            struct.pack_into(
                "<8sIIIIIIHHI",
                out,
                sh + 40 * i,
                s.name.encode()[:8],
                s.virtual_size,
                s.rva,
                s.raw_size,
                s.raw_offset,
                0,
                0,
                0,
                0,
                s.characteristics,
            )
            out[s.raw_offset : s.raw_offset + len(s.data)] = s.data
        return SynthImage(
            bytes(out), self.image_base, size_of_image, size_of_headers, self.timestamp, self.sections, dict(info or {})
        )


# ----------------------------------------------------------------------------- unwind data
def code(offset: int, op: int, info: int = 0) -> int:
    """One UNWIND_CODE slot."""
    return offset | ((op | (info << 4)) << 8)


def unwind_info(
    slots: Sequence[int],
    *,
    version: int = 1,
    flags: int = 0,
    prolog: int = 0,
    frame_reg: int = 0,
    frame_off: int = 0,
    handler: Optional[int] = None,
    handler_data: bytes = b"",
    chain: Optional[Tuple[int, int, int]] = None,
    count: Optional[int] = None,
) -> bytes:
    n = len(slots) if count is None else count
    out = bytearray([version | (flags << 3), prolog, n, frame_reg | (frame_off << 4)])
    for s in slots:
        out += struct.pack("<H", s)
    if len(slots) % 2:
        out += b"\0\0"
    if chain is not None:
        out += struct.pack("<III", *chain)
    elif handler is not None:
        out += struct.pack("<I", handler) + handler_data
    while len(out) % 4:
        out += b"\0"
    return bytes(out)


# ----------------------------------------------------------------------------- exports
def export_table(
    rva: int,
    dll_name: str,
    ordinal_base: int,
    functions: Sequence[object],
    names: Sequence[Tuple[str, int]],
    nfuncs_claim: Optional[int] = None,
    nnames_claim: Optional[int] = None,
) -> bytes:
    """An export directory placed at `rva`. `functions[i]` is an RVA (int) or a forwarder
    string ("DLL.func"); `names` maps a name to a function index."""
    names = sorted(names)
    nf, nn = len(functions), len(names)
    eat = rva + 40
    npt = eat + 4 * nf
    ot = npt + 4 * nn
    strings = bytearray()
    str_base = ot + 2 * nn
    str_base += str_base % 4 and 4 - str_base % 4

    def add(s: str) -> int:
        r = str_base + len(strings)
        strings.extend(s.encode() + b"\0")
        return r

    dll = add(dll_name)
    func_rvas = [add(f) if isinstance(f, str) else int(f) for f in functions]
    name_rvas = [add(n) for n, _ in names]
    out = bytearray(
        struct.pack(
            "<IIHHIIIIIII",
            0,
            0,
            0,
            0,
            dll,
            ordinal_base,
            nf if nfuncs_claim is None else nfuncs_claim,
            nn if nnames_claim is None else nnames_claim,
            eat,
            npt,
            ot,
        )
    )
    out += struct.pack(f"<{nf}I", *func_rvas)
    out += struct.pack(f"<{nn}I", *name_rvas)
    out += struct.pack(f"<{nn}H", *[i for _, i in names])
    out += bytes(str_base - (rva + len(out)))
    out += strings
    return bytes(out)


# ----------------------------------------------------------------------------- imports
Imported = Tuple[str, Sequence[object]]  # a DLL and what is taken from it: names (str), ordinals (int)


def import_table(
    rva: int,
    dlls: Sequence[Imported],
    *,
    pe32plus: bool = True,
    delayed: bool = False,
    name_table: bool = True,
    terminate: bool = True,
    thunks_end: bool = True,
) -> bytes:
    """An import directory (or, `delayed`, a delay-load one) placed at `rva`: the descriptors,
    then per DLL its name table and address table (a copy, as a linker writes it), then the
    hint/name entries and the DLL names. `name_table=False` leaves OriginalFirstThunk 0;
    `terminate=False` leaves out the zero descriptor, `thunks_end=False` the zero thunks."""
    size = 8 if pe32plus else 4
    flag = 1 << 63 if pe32plus else 1 << 31
    entry = 32 if delayed else 20
    descriptors = entry * (len(dlls) + (1 if terminate else 0))
    tables = rva + descriptors
    table_rvas = []
    for _dll, items in dlls:
        n = len(items) + (1 if thunks_end else 0)
        table_rvas.append((tables, tables + size * n))
        tables += 2 * size * n
    strings = bytearray()

    def add(blob: bytes) -> int:
        at = tables + len(strings)
        strings.extend(blob)
        if len(strings) % 2:
            strings.append(0)
        return at

    out = bytearray()
    thunk_blob = bytearray()
    for (dll, items), (int_rva, iat_rva) in zip(dlls, table_rvas):
        thunks = [flag | item if isinstance(item, int) else add(b"\0\0" + str(item).encode() + b"\0") for item in items]
        if thunks_end:
            thunks.append(0)
        packed = struct.pack(f"<{len(thunks)}{'Q' if pe32plus else 'I'}", *thunks)
        thunk_blob += packed + packed
        name = add(dll.encode() + b"\0")
        if delayed:
            out += struct.pack("<8I", 1, name, 0, iat_rva, int_rva, 0, 0, 0)
        else:
            out += struct.pack("<5I", int_rva if name_table else 0, 0, 0, name, iat_rva)
    out += bytes(descriptors - len(out))
    out += thunk_blob
    assert rva + len(out) == tables
    return bytes(out + strings)


def make_import_image(
    dlls: Sequence[Imported],
    *,
    delayed: Sequence[Imported] = (),
    linker_version: Tuple[int, int] = (14, 40),
    pe32plus: bool = True,
    **table: bool,
) -> SynthImage:
    """A DLL whose only content is an import directory (and a delay-load one), in .rdata:
    what an extension linked by MSVC `linker_version` shows of its imports. `table` is
    passed to `import_table` for the plain directory."""
    b = PEBuilder(linker_version=linker_version, pe32plus=pe32plus, image_base=0x180000000 if pe32plus else 0x10000000)
    b.add_section(".text", b"\xc3" * 0x10, characteristics=TEXT_CHARS)
    rdata_rva = b.next_rva
    plain = import_table(rdata_rva, dlls, pe32plus=pe32plus, **table)
    delay_rva = rdata_rva + ((len(plain) + 0xF) & ~0xF)
    late = import_table(delay_rva, delayed, pe32plus=pe32plus, delayed=True) if delayed else b""
    b.add_section(".rdata", plain + bytes(delay_rva - rdata_rva - len(plain)) + late)
    b.set_dir(1, rdata_rva, 20 * (len(dlls) + 1))
    if delayed:
        b.set_dir(13, delay_rva, 32 * (len(delayed) + 1))
    return b.build({"rdata": rdata_rva, "delay": delay_rva})


# ----------------------------------------------------------------------------- version resource
def _vs_block(key: str, value: bytes, wtype: int, children: Sequence[bytes], value_len: Optional[int] = None) -> bytes:
    body = bytearray(6)
    body += key.encode("utf-16-le") + b"\0\0"
    while len(body) % 4:
        body += b"\0"
    body += value
    for c in children:
        while len(body) % 4:
            body += b"\0"
        body += c
    vlen = len(value) if value_len is None else value_len
    struct.pack_into("<HHH", body, 0, len(body), vlen, wtype)
    return bytes(body)


def version_resource(
    file_version: Tuple[int, int, int, int],
    product_version: Tuple[int, int, int, int],
    strings: Dict[str, str],
    lang: str = "040904b0",
) -> bytes:
    fv, pv = file_version, product_version
    fixed = struct.pack(
        "<13I",
        0xFEEF04BD,
        0x10000,
        (fv[0] << 16) | fv[1],
        (fv[2] << 16) | fv[3],
        (pv[0] << 16) | pv[1],
        (pv[2] << 16) | pv[3],
        0x3F,
        0,
        0x40004,
        2,
        0,
        0,
        0,
    )
    str_blocks = []
    for k, v in strings.items():
        val = v.encode("utf-16-le") + b"\0\0"
        str_blocks.append(_vs_block(k, val, 1, [], value_len=len(v) + 1))
    table = _vs_block(lang, b"", 1, str_blocks)
    sfi = _vs_block("StringFileInfo", b"", 1, [table])
    var = _vs_block("Translation", struct.pack("<HH", 0x409, 1200), 0, [])
    vfi = _vs_block("VarFileInfo", b"", 1, [var])
    return _vs_block("VS_VERSION_INFO", fixed, 0, [sfi, vfi])


def resource_section(rva: int, version_blob: bytes) -> bytes:
    """A .rsrc holding one RT_VERSION (16) / ID 1 / language 0x409 entry."""

    def directory(entry_id: int, target: int, subdir: bool) -> bytes:
        return struct.pack("<IIHHHH", 0, 0, 0, 0, 0, 1) + struct.pack(
            "<II", entry_id, target | (0x80000000 if subdir else 0)
        )

    # root @0 (24 bytes), level2 @24, level3 @48, data entry @72, data @88
    out = bytearray()
    out += directory(16, 24, True)
    out += directory(1, 48, True)
    out += directory(0x409, 72, False)
    out += struct.pack("<IIII", rva + 88, len(version_blob), 1200, 0)
    out += version_blob
    return bytes(out)


def debug_directory(rva: int, guid: bytes, age: int, pdb: str) -> bytes:
    """One IMAGE_DEBUG_DIRECTORY (CODEVIEW) followed by its RSDS record, placed at `rva`."""
    rsds = b"RSDS" + guid + struct.pack("<I", age) + pdb.encode() + b"\0"
    return struct.pack("<IIHHIIII", 0, 0, 0, 0, 2, len(rsds), rva + 28, 0) + rsds


# ----------------------------------------------------------------------------- sample image
SAMPLE_GUID = bytes(range(0x10, 0x20))
SAMPLE_STRINGS = {
    "CompanyName": "Synthetic Corp",
    "FileDescription": "dumpkit synthetic image",
    "FileVersion": "1.2.3.4",
    "ProductName": "Synth",
    "ProductVersion": "5.6.7.8",
}


def make_sample_image(
    *,
    timestamp: int = 0x5EADBEEF,
    name: str = "synth.dll",
    nnames_claim: Optional[int] = None,
    nfuncs_claim: Optional[int] = None,
) -> SynthImage:
    b = PEBuilder(timestamp=timestamp)
    text = b.add_section(".text", b"\xcc" * 0x400, characteristics=TEXT_CHARS)
    T = text.rva  # 0x1000
    f = {  # function ranges
        "f0": (T + 0x000, T + 0x030),
        "f1": (T + 0x040, T + 0x080),
        "f2": (T + 0x080, T + 0x0C0),
        "f3": (T + 0x0C0, T + 0x0E0),  # chained to f1
        # gap T+0xE0..T+0x100: no entry
        "f4": (T + 0x100, T + 0x120),  # indirect -> f0's entry
        "f5": (T + 0x120, T + 0x140),  # chain loop
        "f6": (T + 0x140, T + 0x160),  # chain through an indirect entry to f0
    }
    handler = T + 0x300
    xdata_rva = b.next_rva
    pdata_rva = xdata_rva + 0x1000  # .xdata is < 0x1000 bytes
    entry = lambda i: pdata_rva + 12 * i  # noqa: E731
    x = bytearray()
    u: Dict[str, int] = {}

    def put(key: str, blob: bytes) -> None:
        u[key] = xdata_rva + len(x)
        x.extend(blob)

    PUSH, ALARGE, ASMALL, FPREG, SAVE, SAVEF, EPI, XMM, XMMF, MACH = 0, 1, 2, 3, 4, 5, 6, 8, 9, 10
    put("u0", unwind_info([code(5, ASMALL, 4), code(1, PUSH, 3)], prolog=5))
    # every op kind (v1), with an exception handler
    u1_slots = [
        code(0x40, MACH, 1),
        code(0x38, XMMF, 7),
        0x0010,
        0x0010,  # xmm7 at 0x100010
        code(0x30, XMM, 6),
        0x0003,  # xmm6 at 3*16
        code(0x28, SAVEF, 7),
        0x0000,
        0x0009,  # rdi at 0x90000
        code(0x20, SAVE, 6),
        0x0009,  # rsi at 9*8
        code(0x18, ALARGE, 1),
        0x3458,
        0x0012,  # 0x123458
        code(0x10, ALARGE, 0),
        0x0200,  # 0x200*8
        code(0x08, FPREG, 0),
        code(0x04, ASMALL, 15),  # 128
        code(0x01, PUSH, 5),  # rbp
    ]
    put(
        "u1",
        unwind_info(u1_slots, flags=1, prolog=0x40, frame_reg=5, frame_off=2, handler=handler, handler_data=b"LSDA"),
    )
    # version 2 with epilog descriptors
    put(
        "u2",
        unwind_info(
            [code(0x06, EPI, 1), 0x0000, code(0x20, EPI, 0), 0x0000, code(0x04, ASMALL, 4)], version=2, prolog=4
        ),
    )
    # chained (odd count of codes, so the chain entry follows one slot of padding)
    put("u3", unwind_info([code(0x02, PUSH, 3)], flags=4, prolog=2, chain=(*f["f1"], 0)))
    # chain loop: u5 -> u5b -> u5
    u5 = xdata_rva + len(x)
    u5b = u5 + 16
    put("u5", unwind_info([], flags=4, chain=(*f["f5"], u5b)))
    assert u["u5"] + 16 == u5b
    put("u5b", unwind_info([], flags=4, chain=(*f["f5"], u5)))
    # chain through an indirect RUNTIME_FUNCTION (entry index 0 = f0)
    put("u6", unwind_info([], flags=4, chain=(0, 0, entry(0) | 1)))
    # fix up u3's chain target (f1's unwind info)
    struct.pack_into("<I", x, u["u3"] - xdata_rva + 4 + 2 + 2 + 8, u["u1"])
    b.add_section(".xdata", bytes(x))
    pd = [
        (*f["f0"], u["u0"]),
        (*f["f1"], u["u1"]),
        (*f["f2"], u["u2"]),
        (*f["f3"], u["u3"]),
        (*f["f4"], entry(0) | 1),
        (*f["f5"], u["u5"]),
        (*f["f6"], u["u6"]),
    ]
    pdata = b.add_section(".pdata", b"".join(struct.pack("<III", *e) for e in pd))
    assert pdata.rva == pdata_rva
    b.set_dir(3, pdata.rva, 12 * len(pd))

    rdata_rva = b.next_rva
    exp = export_table(
        rdata_rva,
        name,
        10,
        [f["f0"][0], f["f1"][0], f["f2"][0], "OTHER.forwarded", 0, f["f5"][0]],
        [("alpha", 0), ("beta", 1), ("beta_alias", 1), ("forwarded", 3), ("epsilon", 5)],
        nfuncs_claim=nfuncs_claim,
        nnames_claim=nnames_claim,
    )
    exp += bytes(-len(exp) % 4)
    dbg = debug_directory(rdata_rva + len(exp), SAMPLE_GUID, 3, "C:\\build\\synth.pdb")
    rdata = b.add_section(".rdata", exp + dbg)
    b.set_dir(0, rdata.rva, len(exp))
    b.set_dir(6, rdata.rva + len(exp), 28)

    rsrc_rva = b.next_rva
    rsrc = b.add_section(
        ".rsrc", resource_section(rsrc_rva, version_resource((1, 2, 3, 4), (5, 6, 7, 8), SAMPLE_STRINGS))
    )
    b.set_dir(2, rsrc.rva, len(rsrc.data))
    # .bss-like section: virtual only
    b.add_section(".bss", b"", virtual_size=0x800, characteristics=DATA_CHARS)
    info = dict(u.items())
    for k, (lo, hi) in f.items():
        info[k] = lo
        info[k + "_end"] = hi
    info.update(
        text=T, xdata=xdata_rva, pdata=pdata_rva, rdata=rdata_rva, rsrc=rsrc_rva, handler=handler, pdata_count=len(pd)
    )
    return b.build(info)


def make_big_pdata_image(n: int, func_size: int = 16) -> SynthImage:
    """An image whose .pdata has `n` entries (function i at text + i*func_size), all sharing
    one UNWIND_INFO; .text is virtual-only so the file stays ~12*n bytes."""
    b = PEBuilder()
    text = b.add_section(".text", b"\xc3" * 0x200, virtual_size=n * func_size, characteristics=TEXT_CHARS)
    xd = b.add_section(".xdata", unwind_info([code(4, 2, 4)], prolog=4))
    arr = array("I", bytes(12 * n))
    starts = array("I", range(text.rva, text.rva + n * func_size, func_size))
    arr[0::3] = starts
    arr[1::3] = array("I", (s + func_size - 4 for s in starts))
    arr[2::3] = array("I", [xd.rva]) * n
    pd = b.add_section(".pdata", arr.tobytes())
    b.set_dir(3, pd.rva, 12 * n)
    return b.build({"text": text.rva, "xdata": xd.rva, "pdata": pd.rva})
