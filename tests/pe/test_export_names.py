"""pe/exports.py reads export names in blocks: the same names as reading each on its own
(read_cstring), whatever pages are missing, in a bounded number of reads; and TensorFlow's
45,575 names over 9.4 MB, from the bundled dump's pages, in a dozen reads instead of
166,000."""

from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional, Set

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dumpkit.pe import exports
from dumpkit.pe.exports import EXPORT_NAME_CHUNK, read_cstring, read_cstrings
from dumpkit.pe.errors import PEError
from dumpkit.target import MemoryNotInDump

PAGE = 4096
TF_BUNDLE = Path(__file__).resolve().parent.parent.parent / "sample_dumps" / "python" / "tf_nest_flatten.dkb"


class Pages:
    """An image as the export parser reads it: bytes, some pages of which the source lacks
    (a dump or a bundle holds some pages of an image, not all); each read counted."""

    def __init__(self, data: bytes, missing: Set[int]):
        self.data = data
        self.size_of_image = len(data)
        self.missing = missing
        self.problems: List[str] = []
        self.reads = 0

    def read_rva(self, rva: int, size: int) -> bytes:
        self.reads += 1
        if rva < 0 or size <= 0 or rva + size > len(self.data):
            raise MemoryNotInDump(rva, size)
        if any(p in self.missing for p in range(rva // PAGE, (rva + size - 1) // PAGE + 1)):
            raise MemoryNotInDump(rva, size)
        return self.data[rva : rva + size]

    def directory(self, index: int) -> None:
        return None


def one_by_one(image: Pages, rvas: List[int], limit: int) -> List[Optional[bytes]]:
    out: List[Optional[bytes]] = []
    for rva in rvas:
        try:
            out.append(read_cstring(image, rva, limit))
        except (PEError, MemoryNotInDump):  # unreadable: read_cstrings says None
            out.append(None)
    return out


@st.composite
def name_tables(draw):
    """A run of names as a linker lays them out (a few over-long or damaged), the RVAs in
    table order (alphabetical: often not address order), some pages missing."""
    names = draw(st.lists(st.binary(min_size=0, max_size=90).filter(lambda b: b"\0" not in b), min_size=1, max_size=60))
    start = draw(st.integers(0, 3 * PAGE))
    data = bytearray(os.urandom(start))
    rvas = []
    for name in names:
        rvas.append(len(data))
        data += name + (b"" if draw(st.integers(0, 15)) == 0 else b"\0")  # now and then unterminated
    data += os.urandom(draw(st.integers(0, 200)))
    extra = draw(st.lists(st.integers(0, len(data) + 100), max_size=5))  # stray RVAs, some past the end
    rvas = draw(st.permutations(rvas + extra))
    pages = (len(data) + PAGE - 1) // PAGE
    missing = draw(st.sets(st.integers(0, max(0, pages - 1)), max_size=pages))
    return bytes(data), rvas, missing


@settings(max_examples=300, deadline=None)
@given(name_tables(), st.sampled_from([64, 100, 256, 1024]), st.sampled_from([PAGE, 2 * PAGE, 3 * PAGE]))
def test_names_read_in_blocks_are_the_names_read_one_by_one(table, limit, block):
    data, rvas, missing = table
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(exports, "EXPORT_NAME_CHUNK", block)  # blocks smaller than the table
        image = Pages(data, missing)
        got = read_cstrings(image, rvas, limit)
    assert got == one_by_one(Pages(data, missing), rvas, limit)


class Touched(Pages):
    """Pages that also notes which 16-byte units each successful read covered."""

    def __init__(self, data: bytes):
        super().__init__(data, set())
        self.units: Set[int] = set()

    def read_rva(self, rva: int, size: int) -> bytes:
        out = super().read_rva(rva, size)
        self.units.update(range(rva // 16, (rva + len(out) - 1) // 16 + 1))
        return out


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.binary(min_size=1, max_size=90).filter(lambda b: b"\0" not in b), min_size=2, max_size=60),
    st.data(),
    st.sampled_from([64, 256, 4096]),
)
def test_blocks_read_only_bytes_reading_one_by_one_reads(names, data, block):
    """A bundle holds the pages its analysis read: the strings not asked for (an export
    whose ordinal is out of range) and what follows the last one are not read in blocks."""
    table = bytearray(b"\x90" * 100)
    rvas = []
    for name in names:
        rvas.append(len(table))
        table += name + b"\0"
    table += b"\xcc" * 2000
    asked = data.draw(st.sets(st.integers(0, len(names) - 1), min_size=1))
    wanted = [rvas[i] for i in sorted(asked)]
    fences = [rvas[i] for i in range(len(names)) if i not in asked]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(exports, "EXPORT_NAME_CHUNK", block)
        blocks, single = Touched(bytes(table)), Touched(bytes(table))
        got = read_cstrings(blocks, wanted, 1024, fences)
    assert got == one_by_one(single, wanted, 1024) == [names[i] for i in sorted(asked)]
    assert blocks.units <= single.units


def test_a_table_of_many_names_costs_a_read_per_block():
    names = [f"?Function{i:06d}@tensorflow@@YAXPEAVNode@1@@Z".encode() for i in range(40_000)]
    data = bytearray(b"\x90" * PAGE)
    rvas = []
    for name in names:
        rvas.append(len(data))
        data += name + b"\0"
    image = Pages(bytes(data), set())
    got = read_cstrings(image, sorted(rvas, key=lambda r: -r), 1024)  # table order need not be address order
    assert got == names[::-1]
    span = len(data) - PAGE
    assert span > 1.5 * EXPORT_NAME_CHUNK  # the test's premise: more than one block
    assert image.reads <= span // (EXPORT_NAME_CHUNK - 1024) + 2


def test_a_block_that_cannot_be_read_is_read_smaller():
    """A bundle holds the pages its analysis read: the names' pages, not the ones after."""
    names = [b"name%05d" % i for i in range(3000)]
    data = bytearray()
    rvas = []
    for name in names:
        rvas.append(len(data))
        data += name + b"\0"
    last = (len(data) - 1) // PAGE
    data += b"\0" * (8 * PAGE)
    image = Pages(bytes(data), set(range(last + 1, last + 9)))
    assert read_cstrings(image, rvas, 1024) == names
    assert image.reads < 20


@pytest.mark.skipif(not TF_BUNDLE.exists(), reason="the TensorFlow bundle is not in this checkout")
def test_tensorflows_export_names_are_read_from_the_bundle_in_a_few_reads():
    from dumpkit.commands.inputs import open_target
    from dumpkit.images import ImageLocator, ImageProvider

    target, problems = open_target(str(TF_BUNDLE))
    module = next(m for m in target.modules if m.name.lower() == "_pywrap_tensorflow_internal.pyd")
    locator = ImageLocator(use_recorded_path=False, store=target.image_store)
    image = ImageProvider(target, locator, problems=problems).image(module)
    assert image is not None
    reads = []
    original = image.read_rva
    image.read_rva = lambda rva, size: reads.append(size) or original(rva, size)  # type: ignore[method-assign]
    named = {name: rva for rva, name in image.exports()}
    assert len(named) > 45_000
    assert "?Flatten@swig@tensorflow@@YAPEAU_object@@PEAU3@_N@Z" in named  # tf.nest.flatten's C++ side
    # 464 names have an ordinal out of range: counted, and not read (the bundle lacks their pages)
    assert image.problems == ["export table: 464 unreadable or invalid names"]
    # one by one they were 166,000 reads; in 1 MiB chunks, 14 (the table, the last name alone)
    assert len(reads) < 40
