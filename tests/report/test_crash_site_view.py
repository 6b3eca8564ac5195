"""Every format of `analyze` shows the crash site the way !analyze -v and Sentry do: the
signature line, the blamed frame, the faulting code with the faulting instruction marked,
the registers, the process with its command line (or why the dump lacks it), the faulting
module's version and when the dump was written. Real dumps, rendered in process."""

from __future__ import annotations

import html as html_lib
import json

import pytest

from dumpkit.analysis.signature import RULES
from dumpkit.engine import Options
from dumpkit.report.dml import plain_text, render_dml
from dumpkit.report.html import render_html
from dumpkit.report.json_report import render_json
from dumpkit.report.markdown import render_markdown
from dumpkit.report.redact import redact_report
from dumpkit.report.text import render_text
from tests.support.samples import analyse_file, SAMPLE_BIN, real_dump, real_dumps, sample_facts, sample_path

_REPORTS: dict = {}


def _report(path):
    if str(path) not in _REPORTS:
        _REPORTS[str(path)] = analyse_file(str(path), Options(image_paths=[str(SAMPLE_BIN)]))
    return _REPORTS[str(path)]


def _formats(report) -> dict:
    return {
        "text": render_text(report, width=100),
        "markdown": render_markdown(report),
        "html": html_lib.unescape(render_html(report)),
        "dml": "\n".join(plain_text(line) for line in render_dml(report)),
    }


@pytest.mark.parametrize("fmt", ["text", "markdown", "html", "dml"])
def test_every_format_shows_the_crash_site(fmt):
    facts = sample_facts("gp_wild_pointer.dmp")
    report = _report(sample_path("gp_wild_pointer.dmp"))
    out = _formats(report)[fmt]
    flat = " ".join(out.split())  # the text report wraps at its width
    assert report.signature.text in flat
    assert "simdkernels.dll!allocate_output" in out and "the faulting frame itself" in flat
    fault_line = next(line for line in out.splitlines() if "=>" in line and "mov qword ptr [rdx + 8], 0x100" in line)
    assert f"{facts['rip']:x}" in fault_line
    assert f"rip={facts['rip']:016x}" in out  # the registers, WinDbg-style
    assert "simdhost.exe" in out and "no thread environment block" in flat  # the process; why no command line
    assert "2026-11-22" in out  # when the dump was written


def test_the_command_line_and_module_version_when_the_dump_has_them():
    report = _report(real_dump("node-minidump/windows.dmp"))
    text = render_text(report, width=120)
    assert '"C:\\users\\kevin\\Downloads\\electron-v1.4.3-win32-x64\\electron.exe" --type=renderer' in text
    assert "electron.exe 1.4.3.0, pid 10148" in text
    assert "2016-10-13 22:17:00 UTC, 8 s after the process started" in text
    md = render_markdown(redact_report(report))
    assert '"C:\\users\\<user>\\Downloads\\electron-v1.4.3-win32-x64\\electron.exe" --type=renderer' in md
    assert "kevin" not in md


def test_json_carries_the_crash_site_as_data():
    doc = json.loads(render_json(_report(sample_path("recursion_cycle3.dmp"))))
    assert doc["signature"]["kind"] == "STACK_OVERFLOW" and doc["signature"]["rules"] == RULES
    assert doc["signature"]["frames"][0].startswith("recursion(")
    assert doc["blame"]["frame_index"] == 0 and doc["blame"]["skipped"] == []
    assert doc["process"]["name"] == "tfhost.exe" and doc["process"]["command_line"] is None
    code = doc["crash"]["disassembly"]
    assert code["start"] == "function_entry"
    fault = [i for i in code["instructions"] if i["faulting"]]
    assert len(fault) == 1 and fault[0]["address"] == doc["crash"]["address"]
    assert doc["crash"]["module"] == "opkernels.dll"


@pytest.mark.parametrize("dump", real_dumps(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_real_dump_renders_its_crash_site_in_every_format(dump):
    """Including those with no code at the IP (an execute fault on the stack), no exception,
    or no thread list: each format still renders, with the signature when there is one."""
    report = _report(dump)
    for fmt, out in _formats(report).items():
        flat = " ".join(out.split())
        if report.signature is not None:
            assert report.signature.text in flat, fmt
        code = report.crash.disassembly if report.crash is not None else None
        if code is not None:
            assert "Faulting code" in out, fmt
            assert all(i.text in flat for i in code.instructions if i.faulting), fmt
            assert code.note is None or code.note in flat, fmt
