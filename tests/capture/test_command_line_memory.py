"""`dumpkit capture` adds the bytes a dump needs for its command line where the writer left
them out (Wine's dbghelp writes no TEB or PEB): on each Python version's ctypes crash, the
full-memory dump stands in for the stopped process and the minidump of the same program
for the written dump (Wine lays both processes out alike: the same TEB, PEB and
parameters). Amended, the minidump shows the command line the full dump shows; the
environment block beside it stays out."""

from __future__ import annotations

import shutil
import struct

import pytest

from dumpkit.analysis.environment.versions import Versions
from dumpkit.analysis.process import COMMAND_LINE_IN_PARAMETERS, PARAMETERS_IN_PEB, PEB_IN_TEB, process_record
from dumpkit.capture.amend import add_memory
from dumpkit.capture.pymemory import command_line_memory, page_bytes
from dumpkit.sources.minidump import open_dump
from tests.support.samples import SAMPLES

MINORS = ("39", "310", "311", "312", "313")
ENVIRONMENT_IN_PARAMETERS = 0x80  # RTL_USER_PROCESS_PARAMETERS.Environment (x64)


def _word(target, address: int) -> int:
    return struct.unpack("<Q", target.read(address, 8))[0]


@pytest.mark.parametrize("minor", MINORS)
def test_the_added_bytes_give_the_minidump_its_command_line_and_nothing_around_it(minor, plain, tmp_path):
    process = open_dump(str(plain(SAMPLES / "pyversions" / f"ctypes_recursion_full_py{minor}.trimmed.dmp.xz")))
    mini = tmp_path / "capture.dmp"
    shutil.copy(plain(SAMPLES / "pyversions" / f"ctypes_recursion_py{minor}.dmp.xz"), mini)
    try:
        written = open_dump(str(mini))
        threads = list(written.threads)
        before = process_record(written, Versions(None))
        written.close()
        assert before.command_line is None and "TEB" in before.command_line_missing

        ranges = command_line_memory(process, threads)
        assert sum(size for _, size in ranges) < 1024  # a few words and the text: no pages
        added = add_memory(str(mini), page_bytes(process, ranges))
        assert added.bytes_added == sum(size for _, size in ranges)

        expected = process_record(process, Versions(None)).command_line
        assert expected and "python.exe" in expected.lower()
        amended = open_dump(str(mini))
        try:
            assert process_record(amended, Versions(None)).command_line == expected
            # the environment block (it holds whatever the user's shell held) is not copied
            params = _word(process, _word(process, threads[0].teb + PEB_IN_TEB[0]) + PARAMETERS_IN_PEB[0])
            environment = _word(process, params + ENVIRONMENT_IN_PARAMETERS)
            assert process.read_available(environment, 16)
            assert amended.read_available(environment, 16) == b""
            assert amended.read_available(params + COMMAND_LINE_IN_PARAMETERS[0], 16)
        finally:
            amended.close()
    finally:
        process.close()
