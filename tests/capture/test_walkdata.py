"""What `dumpkit capture` keeps of the modules' images (capture/walkdata.py) is enough for
the analysis to read an image from the dump's memory alone, as it does when no file is at
hand: the same exception directory, the same unwind information for every entry, the same
export names, on real DLLs (Wine's own, committed in sample_dumps/bin/wine, and python.org's
python312.dll where ../shared is beside the repo)."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import List, Sequence

import pytest

from dumpkit.capture.walkdata import MAX_TOTAL, image_tables, modules_on_stacks, walk_tables
from dumpkit.images.backings import XzBacking
from dumpkit.images.checks import pdata_unreadable
from dumpkit.pe.exports import parse_exports
from dumpkit.pe.image import PEImage
from dumpkit.spans import Span
from dumpkit.target import MemoryNotInDump, Module
from tests.support.samples import SAMPLES

WINE = SAMPLES / "bin" / "wine"
PYTHON312 = SAMPLES.parent.parent / "shared" / "winpython" / "cpython-3.12-amd64" / "python312.dll"
BASE = 0x7FF800000000


def _image(path: Path) -> PEImage:
    if not path.exists():
        pytest.skip(f"{path} is not here")
    if path.suffix == ".xz":
        return PEImage.from_backing(XzBacking(str(path)), path.name)
    return PEImage.from_file(str(path))


def _mapped(img: PEImage, base: int):
    """The image as the process maps it at `base`."""

    def read(va: int, size: int) -> bytes:
        if not base <= va < base + img.size_of_image:
            raise MemoryNotInDump(va, size)
        return img.read_rva(va - base, size)

    return read


def _only(read, spans: Sequence[Span]):
    """A reader that holds `spans` and nothing else, as a dump holding only them would."""

    def held(va: int, size: int) -> bytes:
        for a, b in spans:
            if a <= va and va + size <= b:
                return read(va, size)
        raise MemoryNotInDump(va, size)

    return held


def _module(img: PEImage, name: str) -> Module:
    return Module(name, f"C:\\windows\\system32\\{name}", BASE, img.size_of_image, img.timestamp)


CASES = [WINE / "ntdll.dll.xz", WINE / "kernelbase.dll.xz", WINE / "kernel32.dll.xz", PYTHON312]


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.name)
def test_the_tables_kept_read_as_the_whole_image(path: Path) -> None:
    img = _image(path)
    name = path.name.replace(".xz", "")
    read = _mapped(img, BASE)
    spans = image_tables(PEImage.from_memory(read, BASE), _module(img, name))
    kept = sum(b - a for a, b in spans)
    assert 0 < kept < img.size_of_image // 4, (kept, img.size_of_image)
    from_dump = PEImage.from_memory(_only(read, spans), BASE)
    assert pdata_unreadable(from_dump) is None
    assert from_dump.pdata_count == img.pdata_count > 0
    for i in range(img.pdata_count):
        entry = img.pdata_entry(i)
        assert from_dump.pdata_entry(i) == entry
        if not entry.unwind_rva & 1:
            assert from_dump.unwind_info(entry.unwind_rva) == img.unwind_info(entry.unwind_rva)
    assert parse_exports(from_dump) == parse_exports(img)


def test_a_module_outside_the_stacks_is_left_out_and_the_most_pointed_at_comes_first() -> None:
    a = Module("a.dll", "C:\\a.dll", 0x10000000, 0x10000)
    b = Module("b.dll", "C:\\b.dll", 0x20000000, 0x10000)
    c = Module("c.dll", "C:\\c.dll", 0x30000000, 0x10000)
    stack = struct.pack("<6Q", 0x20000010, 0x20000020, 0x10000010, 0x12345678, 0, 0x2000FFFF)
    assert modules_on_stacks([a, b, c], [0x10000004], [stack]) == [b, a]
    assert modules_on_stacks([a, b, c], [], []) == []


def test_the_total_is_bounded() -> None:
    """Modules whose tables would pass MAX_TOTAL are left out; what is kept stays under it."""
    img = _image(WINE / "kernelbase.dll.xz")
    modules: List[Module] = []
    images = {}
    for i in range(100):  # kernelbase's tables are ~190 KB: 100 copies are past 16 MB
        base = BASE + i * 0x10000000
        modules.append(Module(f"k{i}.dll", f"C:\\k{i}.dll", base, img.size_of_image, img.timestamp))
        images[base] = _mapped(img, base)

    def read(va: int, size: int) -> bytes:
        base = va - (va - BASE) % 0x10000000
        if base not in images:
            raise MemoryNotInDump(va, size)
        return images[base](va, size)

    one = sum(b - a for a, b in image_tables(PEImage.from_memory(read, modules[0].base), modules[0]))
    spans = walk_tables(read, modules, [m.base + 0x1000 for m in modules], [])
    total = sum(b - a for a, b in spans)
    assert total <= MAX_TOTAL and total >= MAX_TOTAL - one
