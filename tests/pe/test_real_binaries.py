"""dumpkit.pe on real binaries: a mingw-w64 program built here when the cross toolchain is
installed (its .pdata/.xdata cross-checked against objdump's decode), and the sample
program binaries in sample_dumps/bin when they exist."""

from __future__ import annotations

import re
import subprocess
from typing import Dict, List, Optional, Tuple

import pytest

from dumpkit import pe
from dumpkit.pe import PEImage

from .conftest import GCC, OBJDUMP, SAMPLE_FILES, WINDRES


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
