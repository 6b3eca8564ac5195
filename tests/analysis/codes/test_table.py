"""The generated code table (dumpkit/analysis/codes/ntstatus.tsv, made by
tools/gen_status_codes.py from SDK headers): the hand-written notes agree with it, it is
what the generator makes from the recorded headers, it is read lazily, and the codes it
adds are named in lookups, headlines and parsing."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dumpkit.analysis import codes
from dumpkit.analysis.codes import (
    FAST_FAIL,
    STATUS_CODES,
    decode_exception,
    describe_access_violation,
    lookup_status,
    parse_code,
)
from dumpkit.analysis.codes.notes import INFORMAL_ALIASES
from dumpkit.analysis.codes.table import code_table, parse_table

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "dumpkit" / "analysis" / "codes" / "ntstatus.tsv"
GENERATOR = ROOT / "tools" / "gen_status_codes.py"


# ---- the notes agree with the headers -----------------------------------------------------


def test_every_status_with_notes_has_the_headers_name_and_value():
    table = code_table()
    wrong = {info.name: hex(code) for code, info in STATUS_CODES.items() if table.status_values.get(info.name) != code}
    assert not wrong


def test_every_fast_fail_with_notes_has_the_headers_name_and_value():
    table = code_table()
    wrong = {info.name: n for n, info in FAST_FAIL.items() if table.fast_fail_values.get(info.name) != n}
    assert not wrong
    # and every subcode the headers define has notes
    assert set(table.fast_fail_names) == set(FAST_FAIL)


def test_the_codes_dumpkit_uses_by_name_match_the_headers():
    table = code_table()
    for constant in (
        "STATUS_GUARD_PAGE_VIOLATION",
        "STATUS_ACCESS_VIOLATION",
        "STATUS_IN_PAGE_ERROR",
        "STATUS_STACK_OVERFLOW",
        "STATUS_STACK_BUFFER_OVERRUN",
    ):
        assert table.status_values[constant] == getattr(codes, constant)
    assert table.status_values["CPP_EH_EXCEPTION"] == codes.STATUS_CPP_EH_EXCEPTION
    assert table.fast_fail_values["FAST_FAIL_INVALID_FAST_FAIL_CODE"] == codes.FAST_FAIL_INVALID_FAST_FAIL_CODE


def test_the_names_for_the_common_codes_are_the_sdk_ones():
    table = code_table()
    assert table.status_names[0xC00000FD] == "STATUS_STACK_OVERFLOW"
    assert table.status_names[0xC0000409] == "STATUS_STACK_BUFFER_OVERRUN"
    assert table.fast_fail_names[7] == "FAST_FAIL_FATAL_APP_EXIT"
    assert table.status_values["EXCEPTION_STACK_OVERFLOW"] == 0xC00000FD  # minwinbase.h alias


# ---- the data file ------------------------------------------------------------------------


def _recorded_versions():
    head = [line for line in DATA.read_text().splitlines() if line.startswith("#")]
    return dict(re.findall(r"^#\s+(mingw-w64-x86-64-dev|libwine-dev) (\S+):", "\n".join(head), re.M))


def test_data_file_names_its_sources_and_their_versions():
    versions = _recorded_versions()
    assert set(versions) == {"mingw-w64-x86-64-dev", "libwine-dev"} and all(versions.values())
    assert any("status_codes_extra.h" in s for s in code_table().sources)
    assert any("GENERATED" in s for s in code_table().sources)


def _installed_version(package: str) -> str:
    if shutil.which("dpkg-query") is None:
        return ""
    out = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else ""


def test_data_file_is_what_the_generator_makes_from_the_recorded_headers():
    versions = _recorded_versions()
    installed = {p: _installed_version(p) for p in versions}
    if installed != versions:
        pytest.skip(f"headers at the recorded versions not installed ({installed} vs {versions})")
    out = subprocess.run(
        [sys.executable, str(GENERATOR), "--check"], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_malformed_row_is_a_one_line_error():
    with pytest.raises(ValueError, match="line 2"):
        parse_table("# header\nstatus\tSTATUS_X\n")


def test_first_name_of_a_value_wins_and_every_name_maps():
    t = parse_table("status\tSTATUS_SUCCESS\t0x0\ts\nstatus\tSTATUS_WAIT_0\t0x0\ts\nalias\tEXCEPTION_X\t0x5\ts\n")
    assert t.status_names == {0: "STATUS_SUCCESS"}
    assert t.status_values == {"STATUS_SUCCESS": 0, "STATUS_WAIT_0": 0, "EXCEPTION_X": 5}


def test_no_name_reads_as_a_number():
    # parse_code reads numbers before it looks names up (so `explain -1073741571` never
    # loads the table); that order is only safe while no name is also a number
    from dumpkit.analysis.codes.parse import _name_to_code, looks_like_number

    names = set(_name_to_code()) | set(code_table().fast_fail_values)
    assert not [n for n in names if looks_like_number(n)]


def test_table_is_read_at_first_need_not_at_import():
    probe = (
        "import dumpkit.analysis.codes as c\n"
        "from dumpkit.analysis.codes.table import code_table\n"
        "assert code_table.cache_info().currsize == 0, 'read at import'\n"
        "c.lookup_status(0xC00000FD); c.decode_exception(0xC0000409, [7])\n"
        "c.parse_code('-1073741571'); c.parse_code('0xC0000409/7'); c.parse_code('FAST_FAIL_FATAL_APP_EXIT')\n"
        "assert code_table.cache_info().currsize == 0, 'read for a code with notes'\n"
        "assert c.lookup_status(0xC0000228).name == 'STATUS_STACK_OVERFLOW_READ'\n"
        "assert code_table.cache_info().currsize == 1\n"
        # winerror.tsv: not for numbers, fail-fast spellings, words or status names either
        "from dumpkit.analysis.codes.table import error_table\n"
        "c.parse_code('abort'); c.parse_code('stack overflow'); c.parse_code('0xC0000005')\n"
        "assert error_table.cache_info().currsize == 0, 'winerror.tsv read for a status'\n"
        "assert c.parse_code('E_OUTOFMEMORY').code == 0x8007000E and error_table.cache_info().currsize == 1\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr


# ---- what the table adds to lookups, headlines and parsing ----------------------------------


def test_a_code_only_the_headers_name_is_named():
    info = lookup_status(0xC0000228)
    assert info.known and info.name == "STATUS_STACK_OVERFLOW_READ"
    assert info.summary.startswith("an error status defined in the Windows SDK headers")
    assert decode_exception(0xC0000228).headline.startswith("0xC0000228 stack overflow read: an error status")
    assert parse_code("STATUS_STACK_OVERFLOW_READ").code == 0xC0000228
    assert lookup_status(0x40010006).name == "DBG_PRINTEXCEPTION_C"  # debugger codes too


def test_in_page_error_names_an_io_status_without_notes():
    av = describe_access_violation([0, 0x7FF600001000, 0xC000009E])
    assert "(STATUS_DEVICE_POWER_FAILURE)" in av.sentence


def test_small_values_stay_exit_codes_though_headers_name_them():
    # 1 is STATUS_WAIT_1 and 258 STATUS_TIMEOUT in ntstatus.h, but as a process exit code
    # they are what the program passed to exit()
    one = lookup_status(1)
    assert not one.known and "exit code" in one.summary
    assert any("unhandled Python exception" in c for c in one.causes)
    assert not lookup_status(258).known
    assert parse_code("STATUS_TIMEOUT").code == 258  # the name still reads


def test_wrong_mingw_values_are_corrected():
    # mingw-w64 10's ntstatus.h disagrees with the Windows SDK on these two
    assert lookup_status(0xC000042F).name == "STATUS_PKU2U_CERT_FAILURE"
    assert lookup_status(0xC01E0009).name == "STATUS_GRAPHICS_DRIVER_MISMATCH"
    assert lookup_status(0x401E0117).name != "STATUS_GRAPHICS_DRIVER_MISMATCH"


@pytest.mark.parametrize(
    "name,code",
    [
        ("EXCEPTION_ACCESS_VIOLATION", 0xC0000005),
        ("EXCEPTION_DATATYPE_MISALIGNMENT", 0x80000002),
        ("EXCEPTION_BREAKPOINT", 0x80000003),
        ("EXCEPTION_SINGLE_STEP", 0x80000004),
        ("EXCEPTION_ARRAY_BOUNDS_EXCEEDED", 0xC000008C),
        ("EXCEPTION_FLT_DENORMAL_OPERAND", 0xC000008D),
        ("EXCEPTION_FLT_DIVIDE_BY_ZERO", 0xC000008E),
        ("EXCEPTION_FLT_INEXACT_RESULT", 0xC000008F),
        ("EXCEPTION_FLT_INVALID_OPERATION", 0xC0000090),
        ("EXCEPTION_FLT_OVERFLOW", 0xC0000091),
        ("EXCEPTION_FLT_STACK_CHECK", 0xC0000092),
        ("EXCEPTION_FLT_UNDERFLOW", 0xC0000093),
        ("EXCEPTION_INT_DIVIDE_BY_ZERO", 0xC0000094),
        ("EXCEPTION_INT_OVERFLOW", 0xC0000095),
        ("EXCEPTION_PRIV_INSTRUCTION", 0xC0000096),
        ("EXCEPTION_IN_PAGE_ERROR", 0xC0000006),
        ("EXCEPTION_ILLEGAL_INSTRUCTION", 0xC000001D),
        ("EXCEPTION_NONCONTINUABLE_EXCEPTION", 0xC0000025),
        ("EXCEPTION_STACK_OVERFLOW", 0xC00000FD),
        ("EXCEPTION_INVALID_DISPOSITION", 0xC0000026),
        ("EXCEPTION_GUARD_PAGE", 0x80000001),
        ("EXCEPTION_INVALID_HANDLE", 0xC0000008),
        ("EXCEPTION_POSSIBLE_DEADLOCK", 0xC0000194),
        ("STATUS_MSC_EXCEPTION", 0xE06D7363),
        ("MSC_EXCEPTION", 0xE06D7363),
        ("CPP_EXCEPTION", 0xE06D7363),
        ("CLR_EXCEPTION", 0xE0434352),
        ("MS_VC_EXCEPTION", 0x406D1388),
    ],
)
def test_winbase_and_informal_aliases_parse(name, code):
    assert parse_code(name).code == code
    assert parse_code(name.lower()).code == code


def test_informal_aliases_are_not_sdk_names():
    # an informal alias that a header also defines belongs in the generated table instead
    assert not set(INFORMAL_ALIASES) & set(code_table().status_values)
