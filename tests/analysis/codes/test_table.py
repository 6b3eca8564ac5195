"""The generated code table (dumpkit/analysis/codes/ntstatus.tsv, made by
tools/gen_status_codes.py from SDK headers and the ntstatus package): the hand-written notes
agree with it, it is what the generator makes from the recorded sources, the generator stops
where the package and the headers disagree, the table is read lazily, and the codes it adds
are named in lookups, headlines, parsing and `dumpkit explain`."""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import shutil
import subprocess
import sys
import textwrap
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

from tests.support.samples import run_cli

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "dumpkit" / "analysis" / "codes" / "ntstatus.tsv"
TOOLS = ROOT / "tools"
GENERATOR = TOOLS / "gen_status_codes.py"


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
    head = "\n".join(line for line in DATA.read_text().splitlines() if line.startswith("#"))
    versions = dict(re.findall(r"^#\s+(mingw-w64-x86-64-dev|libwine-dev) (\S+):", head, re.M))
    versions.update(re.findall(r"^#\s+(ntstatus) (\S+) \(PyPI\)", head, re.M))
    return versions


def test_data_file_names_its_sources_and_their_versions():
    versions = _recorded_versions()
    assert set(versions) == {"mingw-w64-x86-64-dev", "libwine-dev", "ntstatus"} and all(versions.values())
    assert any("status_codes_extra.h" in s for s in code_table().sources)
    assert any("GENERATED" in s for s in code_table().sources)


def installed_version(package: str) -> str:
    """The installed version of a Debian package, or of the ntstatus package from PyPI."""
    if package == "ntstatus":
        try:
            return importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            return ""
    if shutil.which("dpkg-query") is None:
        return ""
    out = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else ""


def test_data_file_is_what_the_generator_makes_from_the_recorded_sources():
    versions = _recorded_versions()
    installed = {p: installed_version(p) for p in versions}
    if installed != versions:
        pytest.skip(f"sources at the recorded versions not installed ({installed} vs {versions})")
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


# ---- the generator's check of the ntstatus package against the headers ---------------------


@pytest.fixture
def generator(monkeypatch):
    monkeypatch.syspath_prepend(str(TOOLS))
    return importlib.import_module("gen_status_codes")


def test_package_names_agreeing_with_the_headers_add_only_what_the_headers_lack(generator):
    known = {"STATUS_ACCESS_VIOLATION": ("status", 0xC0000005)}
    package = {"STATUS_ACCESS_VIOLATION": 0xC0000005, "STATUS_NEWER": 0xC0000FFF}
    rows = generator.package_rows(package, "status", "ntstatus 9.9", known)
    assert [(r.name, r.value, r.source) for r in rows] == [("STATUS_NEWER", 0xC0000FFF, "ntstatus (PyPI)")]


@pytest.mark.parametrize(
    "package,known",
    [
        ({"STATUS_ACCESS_VIOLATION": 0xC0000006}, {"STATUS_ACCESS_VIOLATION": ("status", 0xC0000005)}),
        ({"E_FAIL": 0x80004005}, {"E_FAIL": ("win32", 0x80004005)}),  # same value, another kind
    ],
)
def test_a_package_name_disagreeing_with_the_headers_stops_generation(generator, package, known):
    with pytest.raises(SystemExit, match=r"1 names disagree between ntstatus 9\.9 and the headers") as stop:
        generator.package_rows(package, "status", "ntstatus 9.9", known)
    assert next(iter(package)) in str(stop.value)


def test_the_package_spellings_of_computed_hresults_are_not_names(generator):
    class Const:
        def __init__(self, name, value):
            self.name, self.unsigned_value = name, value

    class HResult:
        E_OUTOFMEMORY = Const("E_OUTOFMEMORY", 0x8007000E)
        WIN32__ERROR_ACCESS_DENIED = Const("HRESULT_FROM_WIN32(ERROR_ACCESS_DENIED)", 0x80070005)
        WIN32__ERROR_OUTOFMEMORY = E_OUTOFMEMORY  # the package's cache hands the first constant back

    assert generator.package_names(HResult) == {"E_OUTOFMEMORY": 0x8007000E}


FAKE_NTSTATUS = textwrap.dedent(
    """
    class _Const:
        def __init__(self, name, value):
            self.name, self.unsigned_value = name, value

    class NtStatus:
        STATUS_ACCESS_VIOLATION = _Const("STATUS_ACCESS_VIOLATION", {status})

    class Win32Error:
        ERROR_ACCESS_DENIED = _Const("ERROR_ACCESS_DENIED", {win32})

    class HResult:
        E_FAIL = _Const("E_FAIL", 0x80004005)
    """
)


def fake_ntstatus(tmp_path: Path, status: int = 0xC0000005, win32: int = 5) -> Path:
    """A folder holding an installed `ntstatus` 9.9 whose names are the ones given."""
    site = tmp_path / "site"
    (site / "ntstatus").mkdir(parents=True)
    (site / "ntstatus" / "__init__.py").write_text(FAKE_NTSTATUS.format(status=status, win32=win32))
    (site / "ntstatus-9.9.dist-info").mkdir()
    (site / "ntstatus-9.9.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: ntstatus\nVersion: 9.9\n")
    return site


# the few lines of each header the generators read, in the headers' own syntax
HEADERS = {
    "mingw/ntstatus.h": "#define STATUS_ACCESS_VIOLATION ((NTSTATUS)0xC0000005)\n",
    "mingw/winnt.h": "#define FAST_FAIL_FATAL_APP_EXIT 7\n",
    "mingw/minwinbase.h": "#define EXCEPTION_ACCESS_VIOLATION STATUS_ACCESS_VIOLATION\n",
    "mingw/winerror.h": "#define ERROR_ACCESS_DENIED __MSABI_LONG(5)\n#define E_FAIL _HRESULT_TYPEDEF_(0x80004005L)\n",
    "wine/ntstatus.h": "#define STATUS_ACCESS_VIOLATION ((NTSTATUS)0xC0000005)\n",
    "wine/winnt.h": "",
}


# The generators are run with PYTHONPATH naming a fake package and import each other from
# their folder: neither reaches an isolated interpreter (the embeddable CPython of the py38
# lane, whose ._pth implies -I). The generators run on the maintainer's Linux anyway.
needs_pythonpath = pytest.mark.skipif(
    bool(sys.flags.isolated),
    reason="isolated interpreter (-I, a ._pth file): PYTHONPATH and the script's folder are ignored",
)


def run_generator(script: str, site: Path, out: Path) -> "subprocess.CompletedProcess[str]":
    headers = out.parent / "headers"
    for name, text in HEADERS.items():
        (headers / name).parent.mkdir(parents=True, exist_ok=True)
        (headers / name).write_text(text)
    args = [sys.executable, str(TOOLS / script), "--out", str(out)]
    args += ["--mingw", str(headers / "mingw"), "--mingw-package", "mingw-w64 X"]
    if script == "gen_status_codes.py":
        args += ["--wine", str(headers / "wine"), "--wine-package", "wine X"]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site)}
    return subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)


@needs_pythonpath
@pytest.mark.parametrize(
    "script,wrong", [("gen_status_codes.py", {"status": 0xC0000006}), ("gen_win32_errors.py", {"win32": 6})]
)
def test_the_generators_stop_and_write_nothing_when_the_package_disagrees(tmp_path, script, wrong):
    out = tmp_path / "table.tsv"
    run = run_generator(script, fake_ntstatus(tmp_path, **wrong), out)
    assert run.returncode != 0
    name = "STATUS_ACCESS_VIOLATION" if "status" in wrong else "ERROR_ACCESS_DENIED"
    assert f"{name}: ntstatus 9.9 says" in run.stderr
    assert not out.exists()
    # and with the package agreeing, the same run writes the table, the package named in it
    run = run_generator(script, fake_ntstatus(tmp_path / "agreeing"), out)
    assert run.returncode == 0, run.stderr
    assert "ntstatus 9.9 (PyPI)" in out.read_text()


@needs_pythonpath
def test_without_the_package_the_generator_says_how_to_get_it(tmp_path):
    # a module that fails as a missing one does, ahead of any installed copy
    (tmp_path / "ntstatus.py").write_text("raise ModuleNotFoundError('No module named ntstatus', name='ntstatus')\n")
    run = run_generator("gen_status_codes.py", tmp_path, tmp_path / "table.tsv")
    assert run.returncode != 0 and "pip install ntstatus" in run.stderr


# ---- what the table adds to lookups, headlines, parsing and `dumpkit explain` ---------------


def test_a_code_only_the_ntstatus_package_names_is_explained():
    # 0xC00001B2, raised when a CET shadow stack does not match the return address, is in
    # none of the headers the generator reads: the package named it
    row = next(line for line in DATA.read_text().splitlines() if line.startswith("status\tSTATUS_CONTROL_STACK_V"))
    assert row.split("\t")[2:] == ["0xC00001B2", "ntstatus (PyPI)"]
    for spelling in ("0xC00001B2", "-1073741390", "STATUS_CONTROL_STACK_VIOLATION"):
        r = run_cli("explain", spelling)
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines()[0].split() == ["0xC00001B2", "STATUS_CONTROL_STACK_VIOLATION"]


def test_a_code_only_the_headers_name_is_named():
    info = lookup_status(0xC0000228)
    assert info.known and info.name == "STATUS_STACK_OVERFLOW_READ"
    assert info.summary.startswith("an error status Windows defines")
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
