"""Where `dumpkit analyze` writes and in which format: the format named in any case, or
implied by the --output file's extension; report files get the permissions the umask
gives (or keep those of the file they replace)."""

from __future__ import annotations

import json
import os
import stat
import threading
import zipfile

import pytest
from typer.testing import CliRunner

from dumpkit.cli import app
from dumpkit.destinations import destination
from tests.support.samples import SAMPLE_BIN, sample_path


def _analyze(*args):
    dump = sample_path("null_deref.dmp")
    return CliRunner().invoke(app, ["analyze", str(dump), "--image-path", str(SAMPLE_BIN), *map(str, args)])


def _kind(text: str) -> str:
    if text.startswith("<!DOCTYPE html>"):
        return "html"
    if text.startswith("## Crash analysis"):
        return "markdown"
    if text.startswith("{"):
        json.loads(text)
        return "json"
    return "text" if text.startswith("dumpkit ") else "?"


@pytest.mark.parametrize(
    "name,expected",
    [("r.html", "html"), ("r.HTM", "html"), ("r.md", "markdown"), ("r.json", "json"), ("r.txt", "text"), ("r", "text")],
)
def test_output_extension_chooses_the_format(tmp_path, name, expected):
    out = tmp_path / name
    r = _analyze("--output", out)
    assert r.exit_code == 0, r.output
    assert _kind(out.read_text()) == expected


def test_an_explicit_format_wins_over_the_extension_and_any_case_is_accepted(tmp_path):
    out = tmp_path / "report.html"
    assert _analyze("-f", "JSON", "-o", out).exit_code == 0
    assert _kind(out.read_text()) == "json"
    for spelling, expected in (("HTML", "html"), ("Md", "markdown"), ("Text", "text")):
        r = _analyze("--format", spelling)
        assert r.exit_code == 0 and _kind(r.stdout) == expected, (spelling, r.stdout[:80])


def test_an_unknown_format_is_one_line_and_exit_2():
    r = CliRunner().invoke(app, ["analyze", str(sample_path("null_deref.dmp")), "-f", "xml"])
    assert r.exit_code == 2
    assert "unknown format 'xml'" in r.output and "Traceback" not in r.output


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_output_files_get_the_permissions_the_umask_gives(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        out = tmp_path / "r.md"
        assert _analyze("-o", out).exit_code == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == mode


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_a_replaced_report_keeps_its_permissions(tmp_path):
    out = tmp_path / "r.json"
    out.write_text("old")
    out.chmod(0o640)
    assert _analyze("-o", out).exit_code == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o640 and _kind(out.read_text()) == "json"


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_a_bundle_gets_the_permissions_a_report_gets(tmp_path):
    """Bundles and reports go through one writer: the umask's mode for a new file, the old
    file's mode for one replaced (a bundle was always 0644 before, whatever the umask)."""
    from tests.support.bundles import write

    out = tmp_path / "b.dkb"
    old = os.umask(0o077)
    try:
        write(sample_path("null_deref.dmp"), out)
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and zipfile.is_zipfile(out)
    out.chmod(0o640)
    write(sample_path("null_deref.dmp"), out)
    assert stat.S_IMODE(out.stat().st_mode) == 0o640 and zipfile.is_zipfile(out)
    assert [p.name for p in tmp_path.iterdir()] == ["b.dkb"]  # no temporary file left


def test_width_fits_the_text_report_to_the_columns_asked_for():
    r = _analyze("--width", "80", "--no-color")
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), [ln for ln in lines if len(ln) > 80]
    assert any("opkernels.dll!null_deref" in line for line in lines)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_fifo_gets_the_report_and_stays_a_fifo(tmp_path):
    """Renamed over a FIFO (or /dev/null, which as root became a regular file for every
    program), a temporary file would replace it: a FIFO, device or stream is written to."""
    fifo = tmp_path / "report.json"
    os.mkfifo(fifo)
    got: list = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    r = _analyze("-o", fifo)
    reader.join(60)
    assert r.exit_code == 0, r.output
    assert got and _kind(got[0]) == "json", "the reader of the FIFO got no report"
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]  # no temporary file left


@pytest.mark.skipif(not hasattr(os, "symlink") or os.name != "posix", reason="symbolic links")
def test_a_link_stays_a_link_and_its_file_gets_the_report(tmp_path):
    real = tmp_path / "reports" / "r.md"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "latest.md"
    link.symlink_to(real)
    assert _analyze("-o", link).exit_code == 0
    assert link.is_symlink() and _kind(real.read_text()) == "markdown"


@pytest.mark.skipif(os.name != "nt", reason="Windows device names")
def test_nul_takes_the_report_on_windows(tmp_path):
    r = _analyze("-o", "NUL", "--format", "json")
    assert r.exit_code == 0, r.output
    assert not any(p.name.upper().startswith("NUL") for p in tmp_path.iterdir())


@pytest.mark.parametrize(
    "path,straight",
    [
        ("NUL", True),
        ("nul.json", True),
        ("C:\\out\\CON", True),
        ("COM3.log", True),
        ("NUL:", True),
        ("\\\\.\\pipe\\reports", True),
        ("C:\\out\\null.json", False),
        ("con1", False),
        ("reports\\r.md", False),
    ],
)
def test_windows_devices_are_written_straight_through(path, straight):
    assert destination(path, windows=True).atomic is not straight


def test_a_new_file_and_a_regular_file_are_written_atomically(tmp_path):
    assert destination(str(tmp_path / "new.json"), windows=False) == (str(tmp_path / "new.json"), True)
    (tmp_path / "old.json").write_text("x")
    assert destination(str(tmp_path / "old.json"), windows=False).atomic
    assert not destination("/dev/stdout", windows=False).atomic
