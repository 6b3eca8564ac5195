"""Win32 errors and HRESULTs (dumpkit/analysis/codes/winerror.tsv, made by
tools/gen_win32_errors.py from mingw-w64's winerror.h and the ntstatus package): what the
generator makes from the recorded sources, how numbers and names read, and what the lookups
say."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from dumpkit.analysis.codes import ParsedCode, parse_code
from dumpkit.analysis.codes.model import HRESULT, STATUS, WIN32
from dumpkit.analysis.codes.parse import looks_like_number
from dumpkit.analysis.codes.table import error_table, parse_error_table
from dumpkit.analysis.codes.winerror import describe_hresult, describe_win32, hresult_from_win32, win32_of

from tests.analysis.codes.test_table import installed_version
from tests.support.samples import run_cli

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "dumpkit" / "analysis" / "codes" / "winerror.tsv"
GENERATOR = ROOT / "tools" / "gen_win32_errors.py"


def test_data_file_is_what_the_generator_makes_from_the_recorded_sources():
    text = DATA.read_text()
    header = re.search(r"^# Read from mingw-w64-x86-64-dev (\S+):", text, re.M)
    package = re.search(r"^# then ntstatus (\S+) \(PyPI\)", text, re.M)
    assert header and package, "the data file names the sources and versions it was read from"
    recorded = {"mingw-w64-x86-64-dev": header.group(1), "ntstatus": package.group(1)}
    installed = {p: installed_version(p) for p in recorded}
    if installed != recorded:
        pytest.skip(f"sources at the recorded versions not installed ({installed} vs {recorded})")
    out = subprocess.run(
        [sys.executable, str(GENERATOR), "--check"], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_sdk_names_and_values():
    t = error_table()
    assert t.win32_names[5] == "ERROR_ACCESS_DENIED" and t.win32_names[0] == "ERROR_SUCCESS"
    assert t.win32_values["NO_ERROR"] == 0  # a later name of a value still reads
    assert t.hresult_names[0x8007000E] == "E_OUTOFMEMORY" and t.hresult_values["E_FAIL"] == 0x80004005
    assert t.win32_values["DNS_ERROR_NO_MEMORY"] == 14  # an alias keeps its target's value
    assert "ERROR_INVALID_FUNCTION" in t.win32_values and not any(n.endswith("_FIRST") for n in t.win32_values)
    # names are looked up after numbers: none may read as one
    assert not [n for n in list(t.win32_values) + list(t.hresult_values) if looks_like_number(n)]


def test_malformed_row_is_a_one_line_error():
    with pytest.raises(ValueError, match="winerror.tsv line 2"):
        parse_error_table("# header\nwin32\tERROR_X\n")


@pytest.mark.parametrize(
    "text,parsed",
    [
        ("0x8007000E", ParsedCode(0x8007000E, None, HRESULT)),
        ("E_OUTOFMEMORY", ParsedCode(0x8007000E, None, HRESULT)),
        ("-2147024891", ParsedCode(0x80070005, None, HRESULT)),  # as Python prints a COM error
        ("0x80004005", ParsedCode(0x80004005, None, HRESULT)),
        ("ERROR_ACCESS_DENIED", ParsedCode(5, None, WIN32)),
        ("error_file_not_found", ParsedCode(2, None, WIN32)),
        ("file not found", ParsedCode(2, None, WIN32)),
        # an NTSTATUS keeps its value's reading, whatever facility bits it has
        ("0x80000003", ParsedCode(0x80000003, None, STATUS)),
        ("0xC0000005", ParsedCode(0xC0000005, None, STATUS)),
        ("5", ParsedCode(5, None, STATUS)),  # a bare small number is an exit code first
    ],
)
def test_hresults_and_win32_errors_read_by_number_and_name(text, parsed):
    assert parse_code(text) == parsed


def test_facility_win32_wraps_a_win32_error():
    assert hresult_from_win32(5) == 0x80070005 and hresult_from_win32(0) == 0
    assert win32_of(0x8007000E) == 14 and win32_of(0x80004005) is None
    info = describe_hresult(0x8007000E)
    assert info.name == "E_OUTOFMEMORY" and "Win32 error 14 ERROR_OUTOFMEMORY" in info.summary
    unnamed = describe_hresult(0x800700C1)  # no HRESULT name: it is named by what it wraps
    assert unnamed.name == "HRESULT_FROM_WIN32(ERROR_BAD_EXE_FORMAT)" and unnamed.known
    assert "0x80070005" in describe_win32(5).summary
    assert not describe_win32(65000).known


def test_names_only_the_ntstatus_package_gives_are_explained():
    rows = {line.split("\t")[1]: line.split("\t") for line in DATA.read_text().splitlines() if "\t" in line}
    # a file an antivirus holds back: what a DLL load can fail with
    assert rows["ERROR_VIRUS_INFECTED"][2:] == ["225", "ntstatus (PyPI)"]
    r = run_cli("explain", "ERROR_VIRUS_INFECTED")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].split() == ["0x000000E1", "Win32", "error", "ERROR_VIRUS_INFECTED"]
    assert rows["CO_E_PREMATURE_STUB_RUNDOWN"][2:] == ["0x80004035", "ntstatus (PyPI)"]
    r = run_cli("explain", "0x80004035")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].split() == ["0x80004035", "HRESULT", "CO_E_PREMATURE_STUB_RUNDOWN"]
    # the package's HRESULT_FROM_WIN32(...) spellings are not names: dumpkit works them out
    assert not [name for name in error_table().hresult_values if "(" in name or name.startswith("WIN32__")]
