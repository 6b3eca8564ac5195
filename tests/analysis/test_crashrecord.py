"""The crash record (analysis/crashrecord.py): an address named by its module, and a real
access violation decoded and placed."""

from __future__ import annotations

from dumpkit.analysis.crashrecord import crash_record, place_of
from dumpkit.analysis.environment.versions import Versions
from dumpkit.images import ImageLocator, ImageProvider
from dumpkit.sources.minidump import open_dump
from dumpkit.target import Module
from dumpkit.unwind.codemap import CodeMap
from tests.support.fakes.target import MemoryTarget
from tests.support.samples import SAMPLE_BIN, sample_facts, sample_path


def test_an_address_is_named_by_its_module_and_rva():
    target = MemoryTarget(modules=[Module("lib.dll", r"C:\lib.dll", 0x180000000, 0x10000)])
    place = place_of(target)
    assert place(0x180001234) == "lib.dll+0x1234"
    assert place(0x180010000) is None  # one past the module's end


def test_no_exception_no_crash_record():
    target = MemoryTarget()
    assert (
        crash_record(
            target, CodeMap(target, ImageProvider(target, problems=target.soft_errors)), (), Versions(None), True
        )
        is None
    )


def test_a_null_dereference_is_decoded_and_placed_in_its_module():
    facts = sample_facts("null_deref.dmp")
    target = open_dump(str(sample_path("null_deref.dmp")))
    code = CodeMap(
        target, ImageProvider(target, ImageLocator(image_paths=[str(SAMPLE_BIN)]), problems=target.soft_errors)
    )
    crash = crash_record(target, code, (), Versions(None), True)
    assert crash is not None and crash.code == facts["exception_code"]
    assert (crash.access_kind, crash.access_address) == ("read", 0x10)
    assert crash.module == facts["rip_module"]
    assert crash.disassembly is not None  # the code around the IP, as `decodes` asks
    assert crash_record(target, code, (), Versions(None), False).disassembly is None
