"""dumpkit.pe on synthetic images (tests/synth_pe.py), on a real mingw-w64 binary built here
when the cross toolchain is installed (cross-checked against objdump's .pdata/.xdata
decode), and on the sample program binaries when they exist."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

from dumpkit import pe
from dumpkit.pe import PEError, PEImage, RuntimeFunction
from dumpkit.target import MemoryNotInDump

import synth_pe
from synth_pe import PEBuilder, code, make_big_pdata_image, make_sample_image, unwind_info

REPO = Path(__file__).resolve().parent.parent
SAMPLE_BIN = REPO / "sample_dumps" / "bin"
GCC = shutil.which("x86_64-w64-mingw32-gcc")
WINDRES = shutil.which("x86_64-w64-mingw32-windres")
OBJDUMP = shutil.which("x86_64-w64-mingw32-objdump")


# ----------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def sample():
    return make_sample_image()


@pytest.fixture(scope="module")
def sample_file(sample, tmp_path_factory):
    return sample.write(tmp_path_factory.mktemp("synth") / "synth.dll")


@pytest.fixture(params=["file", "memory"])
def img(request, sample, sample_file):
    if request.param == "file":
        image = PEImage.from_file(sample_file)
    else:
        image = PEImage.from_memory(sample.reader(), sample.image_base)
    yield image
    image.close()


# ----------------------------------------------------------------------------- headers
def test_headers(img, sample):
    assert img.machine == pe.IMAGE_FILE_MACHINE_AMD64
    assert img.is_pe32plus
    assert img.timestamp == 0x5EADBEEF
    assert img.size_of_image == sample.size_of_image
    assert img.checksum == 0x0004D2C1
    assert img.image_base == 0x180000000
    assert img.size_of_stack_reserve == 0x200000
    assert img.size_of_stack_commit == 0x2000
    assert [s.name for s in img.sections] == [".text", ".xdata", ".pdata", ".rdata", ".rsrc", ".bss"]
    text = img.sections[0]
    assert (text.rva, text.virtual_size, text.raw_offset, text.raw_size) == (0x1000, 0x400, 0x400, 0x400)
    assert img.directory(3).rva == sample.info["pdata"]
    assert img.directory(4) is None
    assert len(img.data_directories) == 16


def test_pe32_headers():
    b = PEBuilder(
        machine=synth_pe.I386,
        pe32plus=False,
        image_base=0x400000,
        timestamp=0x11223344,
        entry_rva=0x1010,
        stack_reserve=0x100000,
        stack_commit=0x1000,
    )
    b.add_section(".text", b"\x90" * 16, characteristics=synth_pe.TEXT_CHARS)
    s = b.build()
    image = PEImage.from_memory(s.reader(), 0x400000)
    assert not image.is_pe32plus
    assert image.machine == pe.IMAGE_FILE_MACHINE_I386
    assert (image.image_base, image.timestamp, image.entry_point_rva) == (0x400000, 0x11223344, 0x1010)
    assert (image.size_of_stack_reserve, image.size_of_stack_commit) == (0x100000, 0x1000)
    assert image.pdata_count == 0 and image.lookup_function(0x1000) is None


def test_read_rva_maps_sections_and_zero_fills(img, sample):
    assert img.read_rva(0x1000, 4) == b"\xcc" * 4
    # .xdata has 0x90 bytes of data; the rest of its page reads as zeros
    assert img.read_rva(sample.info["xdata"] + 0x100, 8) == bytes(8)
    # a virtual-only section reads as zeros from a file, as mapped memory does
    assert img.read_rva(img.sections[-1].rva, 16) == bytes(16)
    # headers
    assert img.read_rva(0, 2) == b"MZ"
    with pytest.raises(PEError):
        img.read_rva(img.size_of_image - 2, 4)


def test_is_code_rva(img, sample):
    assert img.is_code_rva(0x1000)
    assert img.is_code_rva(0x13FF)
    assert not img.is_code_rva(0x1400)  # past the section's virtual size
    assert not img.is_code_rva(sample.info["pdata"])
    assert not img.is_code_rva(0)
    assert not img.is_code_rva(0x7FFFFFFF)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda b: b.__setitem__(slice(0, 2), b"ZM"), "MZ"),
        (lambda b: b.__setitem__(slice(0x80, 0x84), b"PX\0\0"), "PE signature"),
        (lambda b: struct.pack_into("<H", b, 0x80 + 24, 0x999), "magic"),
        (lambda b: struct.pack_into("<I", b, 0x3C, 0xFFFFFFF0), "e_lfanew"),
        (lambda b: struct.pack_into("<H", b, 0x86, 5000), "section count"),
    ],
)
def test_bad_headers_raise_peerror(tmp_path, sample, mutate, message):
    data = bytearray(sample.file)
    mutate(data)
    p = tmp_path / "bad.dll"
    p.write_bytes(bytes(data))
    with pytest.raises(PEError, match=message):
        PEImage.from_file(str(p))


def test_truncated_and_missing_files(tmp_path, sample):
    p = tmp_path / "trunc.dll"
    p.write_bytes(sample.file[:0x90])
    with pytest.raises(PEError):
        PEImage.from_file(str(p))
    (tmp_path / "empty.dll").write_bytes(b"")
    with pytest.raises(PEError):
        PEImage.from_file(str(tmp_path / "empty.dll"))
    with pytest.raises(PEError):
        PEImage.from_file(str(tmp_path / "nope.dll"))


def test_from_memory_missing_header_is_peerror(sample):
    with pytest.raises(PEError, match="not in the dump"):
        PEImage.from_memory(sample.reader(missing=[(0, 0x200)]), sample.image_base)


def test_missing_pdata_in_memory_raises_memory_not_in_dump(sample):
    p = sample.info["pdata"]
    image = PEImage.from_memory(sample.reader(missing=[(p, p + 0x1000)]), sample.image_base)
    with pytest.raises(MemoryNotInDump):
        image.lookup_function(0x1000)


# ----------------------------------------------------------------------------- .pdata
def test_lookup_function(img, sample):
    i = sample.info
    assert img.pdata_count == i["pdata_count"]
    f0 = img.lookup_function(i["f0"])
    assert f0 == RuntimeFunction(i["f0"], i["f0_end"], i["u0"])
    assert img.lookup_function(i["f0_end"] - 1) == f0
    assert img.lookup_function(i["f0_end"]) is None  # end is exclusive; gap to f1
    assert img.lookup_function(i["f1"]).unwind_rva == i["u1"]
    assert img.lookup_function(i["f2"] + 0x3F).begin_rva == i["f2"]
    assert img.lookup_function(i["f3"] + 0x1F).begin_rva == i["f3"]
    assert img.lookup_function(i["f3_end"] + 4) is None  # the gap before f4
    assert img.lookup_function(0x10) is None  # before the first entry
    assert img.lookup_function(i["f6_end"]) is None  # after the last
    assert img.lookup_function(0xFFFFFFFF) is None


def test_indirect_entry_resolves_to_its_target(img, sample):
    i = sample.info
    rf = img.lookup_function(i["f4"] + 8)
    assert rf.unwind_rva == i["u0"] and rf.unwind_rva & 1 == 0
    assert (rf.begin_rva, rf.end_rva) == (i["f0"], i["f0_end"])  # as RtlLookupFunctionEntry
    assert rf.indirect_from is not None
    assert (rf.indirect_from.begin_rva, rf.indirect_from.end_rva) == (i["f4"], i["f4_end"])


def test_indirect_loop_is_bounded():
    b = PEBuilder()
    b.add_section(".text", b"\xc3" * 0x100, characteristics=synth_pe.TEXT_CHARS)
    p_rva = b.next_rva
    b.add_section(".pdata", struct.pack("<III", 0x1000, 0x1010, p_rva | 1))  # points at itself
    b.set_dir(3, p_rva, 12)
    s = b.build()
    image = PEImage.from_memory(s.reader(), s.image_base)
    with pytest.raises(PEError, match="indirect"):
        image.lookup_function(0x1004)


def test_hostile_exception_directory_size_is_clamped():
    b = PEBuilder()
    b.add_section(".text", b"\xc3" * 0x100, characteristics=synth_pe.TEXT_CHARS)
    p_rva = b.next_rva
    b.add_section(".pdata", struct.pack("<III", 0x1000, 0x1010, 0))
    b.set_dir(3, p_rva, 0xFFFFFFF0)
    s = b.build()
    image = PEImage.from_memory(s.reader(), s.image_base)
    assert image.pdata_count == (s.size_of_image - p_rva) // 12
    assert image.problems
    # the zero padding after the one real entry is garbage to the search, but every probe
    # stays inside the image: no PEError, no MemoryNotInDump
    for rva in (0x1004, 0x1FFFF, 0xFFFFFFFF):
        image.lookup_function(rva)


def test_million_entry_pdata_lookup_reads_log_n_entries():
    big = make_big_pdata_image(1_000_000)
    image = PEImage.from_memory(big.reader(), big.image_base)
    assert image.pdata_count == 1_000_000
    text = big.info["text"]
    for k in (0, 1, 499_999, 765_432, 999_999):
        big.reads = 0
        rf = image.lookup_function(text + 16 * k + 5)
        assert rf == RuntimeFunction(text + 16 * k, text + 16 * k + 12, big.info["xdata"])
        assert big.reads <= 25, big.reads
    big.reads = 0
    assert image.lookup_function(text + 16 * 123_456 + 13) is None  # the 4-byte gap
    assert big.reads <= 25


def test_million_entry_pdata_from_file_reads_little(tmp_path, monkeypatch):
    big = make_big_pdata_image(1_000_000)
    image = PEImage.from_file(big.write(tmp_path / "big.dll"))
    sizes: List[int] = []
    real = PEImage._read_file_rva

    def counting(self, rva, size):
        sizes.append(size)
        return real(self, rva, size)

    monkeypatch.setattr(PEImage, "_read_file_rva", counting)
    rf = image.lookup_function(big.info["text"] + 16 * 654_321)
    assert rf is not None and rf.begin_rva == big.info["text"] + 16 * 654_321
    assert len(sizes) <= 25 and sum(sizes) <= 25 * 12
    image.close()


# ----------------------------------------------------------------------------- UNWIND_INFO
def test_unwind_info_simple(img, sample):
    u = img.unwind_info(sample.info["u0"])
    assert (u.version, u.flags, u.size_of_prolog, u.count_of_codes) == (1, 0, 5, 2)
    assert [(o.code_offset, o.name, o.op_info, o.operand) for o in u.ops] == [
        (5, "ALLOC_SMALL", 4, 0x28),
        (1, "PUSH_NONVOL", 3, 3),
    ]
    assert u.handler_rva is None and u.chained is None


def test_unwind_info_every_op(img, sample):
    u = img.unwind_info(sample.info["u1"])
    assert u.flags == pe.UNW_FLAG_EHANDLER
    assert (u.frame_register, u.frame_offset, u.count_of_codes, u.size_of_prolog) == (5, 0x20, 19, 0x40)
    got = [(o.code_offset, o.op, o.op_info, o.operand, o.slots) for o in u.ops]
    assert got == [
        (0x40, pe.UWOP_PUSH_MACHFRAME, 1, 1, 1),
        (0x38, pe.UWOP_SAVE_XMM128_FAR, 7, 0x100010, 3),  # unscaled 32-bit offset
        (0x30, pe.UWOP_SAVE_XMM128, 6, 3 * 16, 2),
        (0x28, pe.UWOP_SAVE_NONVOL_FAR, 7, 0x90000, 3),
        (0x20, pe.UWOP_SAVE_NONVOL, 6, 9 * 8, 2),
        (0x18, pe.UWOP_ALLOC_LARGE, 1, 0x123458, 3),
        (0x10, pe.UWOP_ALLOC_LARGE, 0, 0x200 * 8, 2),
        (0x08, pe.UWOP_SET_FPREG, 0, 0x20, 1),
        (0x04, pe.UWOP_ALLOC_SMALL, 15, 128, 1),
        (0x01, pe.UWOP_PUSH_NONVOL, 5, 5, 1),
    ]
    assert sum(o.slots for o in u.ops) == u.count_of_codes
    assert u.handler_rva == sample.info["handler"]
    assert img.read_rva(u.handler_data_rva, 4) == b"LSDA"


def test_unwind_info_v2_epilog_codes_take_two_slots(img, sample):
    u = img.unwind_info(sample.info["u2"])
    assert u.version == 2
    assert [(o.op, o.code_offset, o.op_info, o.slots) for o in u.ops] == [
        (pe.UWOP_EPILOG, 6, 1, 2),
        (pe.UWOP_EPILOG, 0x20, 0, 2),
        (pe.UWOP_ALLOC_SMALL, 4, 4, 1),
    ]


def test_chained_unwind_info(img, sample):
    i = sample.info
    u = img.unwind_info(i["u3"])
    assert u.flags == pe.UNW_FLAG_CHAININFO and u.count_of_codes == 1
    # one code + one slot of padding, then the RUNTIME_FUNCTION
    assert u.chained == RuntimeFunction(i["f1"], i["f1_end"], i["u1"])
    assert u.handler_rva is None
    chain = img.unwind_chain(i["u3"])
    assert [c.rva for c in chain] == [i["u3"], i["u1"]]


def test_chain_through_indirect_entry(img, sample):
    chain = img.unwind_chain(sample.info["u6"])
    assert [c.rva for c in chain] == [sample.info["u6"], sample.info["u0"]]


def test_chain_loop_is_detected(img, sample):
    with pytest.raises(PEError, match="loop"):
        img.unwind_chain(sample.info["u5"])


def _unwind_image(blob: bytes):
    b = PEBuilder()
    b.add_section(".text", b"\xc3" * 0x10, characteristics=synth_pe.TEXT_CHARS)
    x = b.add_section(".xdata", blob)
    s = b.build()
    # place the blob at the very end of the image so truncation is real
    return PEImage.from_memory(s.reader(), s.image_base), x.rva


@pytest.mark.parametrize(
    "blob, message",
    [
        (bytes([3, 0, 0, 0]), "version 3"),
        (unwind_info([code(4, 1, 0)]), "runs past"),  # ALLOC_LARGE without its slot
        (unwind_info([code(4, 1, 2), 0]), "ALLOC_LARGE with op info 2"),
        (unwind_info([code(4, 5, 3), 0]), "runs past"),  # SAVE_NONVOL_FAR needs 3 slots
        (unwind_info([code(4, 12, 0)]), "unknown unwind op"),
        (unwind_info([code(4, 10, 2)]), "PUSH_MACHFRAME"),
    ],
)
def test_malformed_unwind_info(blob, message):
    image, rva = _unwind_image(blob)
    with pytest.raises(PEError, match=message):
        image.unwind_info(rva)


def test_truncated_unwind_info():
    b = PEBuilder(size_of_image=0x2000 + 8)
    b.add_section(".text", b"\xc3" * 0x10, characteristics=synth_pe.TEXT_CHARS)
    b.add_section(".xdata", bytes([1, 0, 255, 0]) + b"\0" * 4)  # claims 255 codes
    s = b.build()
    image = PEImage.from_memory(s.reader(), s.image_base)
    with pytest.raises(PEError, match="truncated"):
        image.unwind_info(0x2000)
    with pytest.raises(PEError):
        image.unwind_info(0x2006)  # header itself past the end
    b = PEBuilder(size_of_image=0x2000 + 8)
    b.add_section(".text", b"\xc3" * 0x10, characteristics=synth_pe.TEXT_CHARS)
    b.add_section(".xdata", bytes([1 | (4 << 3), 0, 0, 0]) + b"\0" * 4)  # chain info cut off
    s = b.build()
    image = PEImage.from_memory(s.reader(), s.image_base)
    with pytest.raises(PEError, match="truncated"):
        image.unwind_info(0x2000)


# ----------------------------------------------------------------------------- exports
def test_exports(img, sample):
    i = sample.info
    assert img.exports() == [
        (i["f0"], "alpha"),
        (i["f1"], "beta"),
        (i["f1"], "beta_alias"),
        (i["f2"], "#12"),
        (i["f5"], "epsilon"),
    ]  # "forwarded" is a forwarder: skipped; index 2 has no name: ordinal base 10 + 2
    assert img.nearest_export(i["f1"] + 0x10) == ("beta", i["f1"])
    assert img.nearest_export(i["f0"]) == ("alpha", i["f0"])
    assert img.nearest_export(i["f5"] - 1) == ("#12", i["f2"])
    assert img.nearest_export(i["f5"] + 0x1000) == ("epsilon", i["f5"])
    assert img.nearest_export(i["f0"] - 1) is None
    assert img.problems == []


def test_hostile_export_counts_are_bounded(tmp_path):
    s = make_sample_image(nnames_claim=0xFFFFFFFF, nfuncs_claim=0xFFFFFFFF)
    image = PEImage.from_file(s.write(tmp_path / "hostile.dll"))
    t = time.monotonic()
    exps = image.exports()
    assert time.monotonic() - t < 2
    assert isinstance(exps, list)
    assert image.problems and "claims" in image.problems[0]
    assert image.nearest_export(0x1000) is None or isinstance(image.nearest_export(0x1000), tuple)
    image.close()


def test_exports_unreadable_in_memory_gives_empty(sample):
    r = sample.info["rdata"]
    image = PEImage.from_memory(sample.reader(missing=[(r, r + 0x1000)]), sample.image_base)
    assert image.exports() == []
    assert image.nearest_export(0x1010) is None
    assert any("export" in p for p in image.problems)


# ----------------------------------------------------------------------------- version, CodeView
def test_version_info(img):
    v = img.version_info()
    assert v.file_version == "1.2.3.4"
    assert v.product_version == "5.6.7.8"
    assert v.strings == synth_pe.SAMPLE_STRINGS


def test_version_info_absent_or_unreadable(sample):
    r = sample.info["rsrc"]
    image = PEImage.from_memory(sample.reader(missing=[(r, r + 0x1000)]), sample.image_base)
    assert image.version_info() is None
    big = make_big_pdata_image(10)
    assert PEImage.from_memory(big.reader(), big.image_base).version_info() is None


def test_version_blob_garbage_is_bounded():
    # a VS_VERSIONINFO whose children all claim tiny lengths: no hang, no crash
    blob = synth_pe.version_resource((1, 0, 0, 0), (1, 0, 0, 0), {"A": "b"})
    mangled = bytearray(blob) + b"\x06\x00" * 5000
    struct.pack_into("<H", mangled, 0, min(len(mangled), 0xFFFF))
    v = pe.parse_vs_versioninfo(bytes(mangled))
    assert v.file_version == "1.0.0.0"
    with pytest.raises(PEError):
        pe.parse_vs_versioninfo(b"\x00" * 64)


def test_codeview(img):
    cv = img.codeview()
    assert cv.pdb_name == "C:\\build\\synth.pdb"
    assert cv.age == 3
    assert cv.guid == "13121110-1514-1716-1819-1A1B1C1D1E1F"
    assert cv.symbol_id == "131211101514171618191A1B1C1D1E1F3"


# ----------------------------------------------------------------------------- real binaries
C_SOURCE = r"""
#include <stdio.h>
__declspec(dllexport) __attribute__((noinline)) int small_frame(int x)
{ volatile char buf[300]; buf[x % 300] = (char)x; return buf[(x + 1) % 300]; }
__declspec(dllexport) __attribute__((noinline)) int huge_frame(int x)
{ volatile char big[70000]; big[x % 70000] = (char)x; return big[(x + 7) % 70000] + small_frame(x); }
__declspec(dllexport) __attribute__((noinline)) double mixed(double d, int x)
{ return d * huge_frame(x); }
int main(int argc, char **argv) { printf("%f\n", mixed(1.5, argc)); return 0; }
"""
RC_SOURCE = r"""
1 VERSIONINFO
FILEVERSION 3,1,4,1
PRODUCTVERSION 2,7,1,8
BEGIN
  BLOCK "StringFileInfo"
  BEGIN
    BLOCK "040904b0"
    BEGIN
      VALUE "CompanyName", "Dumpkit Test Co"
      VALUE "FileDescription", "real mingw test binary"
      VALUE "FileVersion", "3.1.4.1"
      VALUE "ProductName", "dumpkit"
      VALUE "ProductVersion", "2.7.1.8"
    END
  END
  BLOCK "VarFileInfo"
  BEGIN
    VALUE "Translation", 0x409, 1200
  END
END
"""


@pytest.fixture(scope="session")
def mingw_exe(tmp_path_factory):
    if not (GCC and WINDRES):
        pytest.skip("mingw-w64 (x86_64-w64-mingw32-gcc, windres) not installed")
    d = tmp_path_factory.mktemp("mingw")
    (d / "t.c").write_text(C_SOURCE)
    (d / "v.rc").write_text(RC_SOURCE)
    subprocess.run([WINDRES, "v.rc", "-O", "coff", "-o", "v.o"], cwd=d, check=True, timeout=120)
    subprocess.run(
        [GCC, "-O2", "-fno-inline", "-o", "t.exe", "t.c", "v.o", "-Wl,--build-id"], cwd=d, check=True, timeout=120
    )
    return str(d / "t.exe")


def _objdump(path: str) -> Tuple[List[Tuple[int, int, int]], Dict[int, dict], int]:
    """(pdata entries as RVAs, xdata decode by unwind RVA, image base) from objdump -x."""
    out = subprocess.run([OBJDUMP, "-x", path], check=True, capture_output=True, text=True, timeout=300).stdout
    base = int(re.search(r"^ImageBase\s+([0-9a-fA-F]+)", out, re.M).group(1), 16)
    entries = []
    m = re.search(r"The Function Table \(interpreted .pdata section contents\)\n(.*?)\n\n", out, re.S)
    for line in m.group(1).splitlines():
        mm = re.match(r"\s*[0-9a-f]+:\s+([0-9a-f]+) ([0-9a-f]+) ([0-9a-f]+)", line)
        if mm:
            b, e, u = (int(x, 16) for x in mm.groups())
            entries.append((b - base, e - base, u - base))
    xdata: Dict[int, dict] = {}
    cur = None
    for line in out.split("Dump of .xdata", 1)[1].splitlines() if "Dump of .xdata" in out else []:
        mm = re.match(r"\s*[0-9a-f]+ \(rva: ([0-9a-f]+)\):", line)
        if mm:
            cur = {"codes": []}
            xdata[int(mm.group(1), 16)] = cur
            continue
        if cur is None:
            continue
        mm = re.search(r"Version: (\d+), Flags: (.*)$", line)
        if mm:
            cur["version"], cur["flags"] = int(mm.group(1)), mm.group(2).strip()
            continue
        mm = re.search(
            r"Nbr codes: (\d+), Prologue size: 0x([0-9a-f]+), Frame offset: 0x([0-9a-f]+), "
            r"Frame reg: (\w+)",
            line,
        )
        if mm:
            cur["count"], cur["prolog"] = int(mm.group(1)), int(mm.group(2), 16)
            cur["frame_off"], cur["frame_reg"] = int(mm.group(3), 16), mm.group(4)
            continue
        mm = re.match(r"\s+pc\+0x([0-9a-f]+): (.*)$", line)
        if mm:
            cur["codes"].append((int(mm.group(1), 16), mm.group(2).strip()))
            continue
        mm = re.match(r"\s+Handler: ([0-9a-f]+)", line)
        if mm:
            cur["handler"] = int(mm.group(1), 16) - base
        if line.strip() == "" or line.startswith("Sections:"):
            cur = None
    return entries, xdata, base


REG = ("rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15")


def _as_objdump_text(op: pe.UnwindOp, info: pe.UnwindInfo) -> Optional[str]:
    if op.op == pe.UWOP_PUSH_NONVOL:
        return f"push {REG[op.operand]}"
    if op.op == pe.UWOP_ALLOC_SMALL:
        return f"alloc small area: rsp = rsp - {op.operand:#x}"
    if op.op == pe.UWOP_ALLOC_LARGE:
        return f"alloc large area: rsp = rsp - {op.operand:#x}"
    if op.op == pe.UWOP_SAVE_NONVOL:
        return f"save {REG[op.op_info]} at rsp + {op.operand:#x}"
    if op.op == pe.UWOP_SAVE_XMM128:
        return f"save xmm{op.op_info} at rsp + {op.operand:#x}"
    if op.op == pe.UWOP_SET_FPREG:
        return f"FPReg: {REG[info.frame_register]} = rsp + {info.frame_offset:#x}"
    return None  # ops mingw does not emit (or objdump decodes differently)


def _cross_check_with_objdump(path: str) -> int:
    entries, xdata, base = _objdump(path)
    image = PEImage.from_file(path)
    assert image.image_base == base
    assert image.pdata_count == len(entries) > 0
    for k, (b, e, u) in enumerate(entries):
        raw = image.pdata_entry(k)
        assert (raw.begin_rva, raw.end_rva, raw.unwind_rva) == (b, e, u)
        for probe in {b, (b + e) // 2, e - 1}:
            rf = image.lookup_function(probe)
            assert rf is not None
            want = (b, e, u) if not u & 1 else None
            if want:
                assert (rf.begin_rva, rf.end_rva, rf.unwind_rva) == want
        assert image.lookup_function(e) is None or image.lookup_function(e).begin_rva == e
    checked = 0
    for urva, d in xdata.items():
        if "count" not in d:
            continue
        info = image.unwind_info(urva)
        assert info.version == d["version"]
        assert info.count_of_codes == d["count"]
        assert info.size_of_prolog == d["prolog"]
        assert info.frame_offset == d["frame_off"] * 16
        assert (REG[info.frame_register] if info.frame_register else "none") == d["frame_reg"]
        assert bool(info.flags & pe.UNW_FLAG_EHANDLER) == ("EHANDLER" in d["flags"])
        assert bool(info.flags & pe.UNW_FLAG_CHAININFO) == ("CHAININFO" in d["flags"])
        if "handler" in d:
            assert info.handler_rva == d["handler"]
        ours = [(o.code_offset, _as_objdump_text(o, info)) for o in info.ops]
        theirs = d["codes"]
        assert len(ours) == len(theirs), (hex(urva), ours, theirs)
        for (off, text), (toff, ttext) in zip(ours, theirs):
            assert off == toff
            if text is not None:
                assert ttext.startswith(text), (hex(urva), text, ttext)
        checked += 1
    image.close()
    return checked


@pytest.mark.skipif(not OBJDUMP, reason="x86_64-w64-mingw32-objdump not installed")
def test_real_mingw_binary_matches_objdump(mingw_exe):
    assert _cross_check_with_objdump(mingw_exe) > 10


def test_real_mingw_binary(mingw_exe):
    image = PEImage.from_file(mingw_exe)
    exps = {n: r for r, n in image.exports()}
    assert set(exps) == {"small_frame", "huge_frame", "mixed"}
    # the frame sizes the unwind data records
    huge = image.unwind_info(image.lookup_function(exps["huge_frame"]).unwind_rva)
    alloc = [o for o in huge.ops if o.op in (pe.UWOP_ALLOC_LARGE, pe.UWOP_ALLOC_SMALL)]
    assert alloc and alloc[0].operand >= 70000
    assert image.nearest_export(exps["huge_frame"] + 7) == ("huge_frame", exps["huge_frame"])
    assert image.is_code_rva(exps["mixed"])
    v = image.version_info()
    assert (v.file_version, v.product_version) == ("3.1.4.1", "2.7.1.8")
    assert v.strings["FileDescription"] == "real mingw test binary"
    cv = image.codeview()  # --build-id gives an RSDS record without a PDB name
    assert cv is not None and len(cv.symbol_id) == 33
    # the same answers from the image as the loader would map it
    data = open(mingw_exe, "rb").read()
    mem = _map_like_loader(image, data)
    mimg = PEImage.from_memory(lambda a, n: mem[a - 0x10000 : a - 0x10000 + n], 0x10000)
    assert mimg.exports() == image.exports()
    assert mimg.version_info() == v
    assert mimg.codeview() == cv
    for k in range(image.pdata_count):
        e = image.pdata_entry(k)
        assert mimg.lookup_function(e.begin_rva) == image.lookup_function(e.begin_rva)
    image.close()


def _map_like_loader(image: PEImage, data: bytes) -> bytes:
    mem = bytearray(image.size_of_image)
    mem[: image.size_of_headers] = data[: image.size_of_headers]
    for s in image.sections:
        n = min(s.raw_size, s.mapped_size)
        mem[s.rva : s.rva + n] = data[s.raw_offset : s.raw_offset + n]
    return bytes(mem)


SAMPLE_FILES = sorted(SAMPLE_BIN.glob("*.exe")) + sorted(SAMPLE_BIN.glob("*.dll")) if SAMPLE_BIN.is_dir() else []


@pytest.mark.skipif(not SAMPLE_FILES, reason="sample_dumps/bin has no binaries yet")
@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_sample_binaries(path):
    image = PEImage.from_file(str(path))
    assert image.machine == pe.IMAGE_FILE_MACHINE_AMD64 and image.is_pe32plus
    assert image.pdata_count > 0
    prev = -1
    for k in range(image.pdata_count):
        e = image.pdata_entry(k)
        assert e.begin_rva >= prev  # sorted, as the binary search needs
        prev = e.begin_rva
        assert image.is_code_rva(e.begin_rva)
        rf = image.lookup_function(e.begin_rva)
        assert rf is not None
        image.unwind_chain(rf.unwind_rva)  # parses without error
    if path.name.lower() == "opkernels.dll":
        names = {n for _, n in image.exports()}
        assert {"visit", "expand", "reduce"} <= names
        visit = next(r for r, n in image.exports() if n == "visit")
        assert image.nearest_export(visit + 3) == ("visit", visit)
    image.close()


@pytest.mark.skipif(not (SAMPLE_FILES and OBJDUMP), reason="no sample binaries or no objdump")
@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_sample_binaries_match_objdump(path):
    assert _cross_check_with_objdump(str(path)) > 0


def test_memory_unwind_data_reads_the_same_unwind_info_as_the_image():
    """Dynamic function tables (JIT code) point at UNWIND_INFO in process memory with no
    PE header; MemoryUnwindData must decode it exactly as PEImage does."""
    import os
    from dumpkit.pe import MemoryUnwindData, PEImage

    path = os.path.join(os.path.dirname(__file__), "..", "sample_dumps", "bin", "opkernels.dll")
    if not os.path.exists(path):
        import pytest

        pytest.skip("sample binaries not present")
    img = PEImage.from_file(path)
    base = 0x7FF600000000
    mem = MemoryUnwindData(lambda va, n: img.read_rva(va - base, n), base)
    for rva, _name in img.exports():
        fn = img.lookup_function(rva)
        if fn is None:
            continue
        assert mem.unwind_chain(fn.unwind_rva) == img.unwind_chain(fn.unwind_rva)
