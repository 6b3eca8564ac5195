"""pe/exception.py: the .pdata binary search (plain, indirect, looping and hostile entries,
a million-entry table read in ~log2(n) probes) and UNWIND_INFO decoding (every op, v2
epilogs, chains, malformed and truncated records), from files, memory and dynamic tables."""

from __future__ import annotations

import struct
from typing import List

import pytest

from dumpkit import pe
from dumpkit.pe import MemoryUnwindData, PEError, PEImage, RuntimeFunction
from dumpkit.target import MemoryNotInDump

from tests.support import synth_pe
from tests.support.synth_pe import PEBuilder, code, make_big_pdata_image, unwind_info

from .conftest import SAMPLE_BIN


# ----------------------------------------------------------------------------- .pdata
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


def test_primary_function_of_a_fragment_is_the_entry_its_chain_ends_at(img, sample):
    f1, f3 = sample.info["f1"], sample.info["f3"]
    fragment = img.lookup_function(f3 + 4)
    assert fragment is not None and fragment.begin_rva == f3
    assert img.primary_function(fragment) == img.lookup_function(f1)
    # through an indirect entry: the entry it points at (f0's)
    f6 = img.lookup_function(sample.info["f6"])
    assert f6 is not None and img.primary_function(f6).begin_rva == sample.info["f0"]
    # an entry that chains nowhere is its own primary
    f0 = img.lookup_function(sample.info["f0"])
    assert img.primary_function(f0) is f0


def test_primary_function_of_a_looping_chain_is_an_error(img, sample):
    f5 = img.lookup_function(sample.info["f5"])
    assert f5 is not None
    with pytest.raises(PEError, match="loops"):
        img.primary_function(f5)


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


def test_memory_unwind_data_reads_the_same_unwind_info_as_the_image():
    """Dynamic function tables (JIT code) point at UNWIND_INFO in process memory with no
    PE header; MemoryUnwindData must decode it exactly as PEImage does."""
    path = SAMPLE_BIN / "opkernels.dll"
    if not path.exists():
        pytest.skip("sample binaries not present")
    img = PEImage.from_file(str(path))
    base = 0x7FF600000000
    mem = MemoryUnwindData(lambda va, n: img.read_rva(va - base, n), base)
    checked = 0
    for rva, _name in img.exports():
        fn = img.lookup_function(rva)
        if fn is None:
            continue
        assert mem.unwind_chain(fn.unwind_rva) == img.unwind_chain(fn.unwind_rva)
        checked += 1
    assert checked
    img.close()
