"""User names leave shared reports: paths under C:\\Users\\NAME, /home/NAME... keep their
shape with <user> in place of the name, on the real dumps that record such paths."""

from __future__ import annotations

import json
import re

import pytest

from dumpkit.engine import Options
from dumpkit.report.json_report import render_json
from dumpkit.report.redact import redact_report, redact_text
from tests.support.samples import analyse_file, real_dump


@pytest.mark.parametrize(
    "before,after",
    [
        (r"C:\Users\kevin\Downloads\x.dll", r"C:\Users\<user>\Downloads\x.dll"),
        (r"c:\users\Ann Lee\AppData\x.pyd", r"c:\users\<user>\AppData\x.pyd"),
        ("C:/Users/tim/.cache/electron.exe", "C:/Users/<user>/.cache/electron.exe"),
        ("/home/alice/crash.dmp", "/home/<user>/crash.dmp"),
        ("/home/bob --flag=/opt/x", "/home/<user> --flag=/opt/x"),
        ("/Users/mac/x", "/Users/<user>/x"),
        (r"C:\Documents and Settings\joe\x", r"C:\Documents and Settings\<user>\x"),
        ("Z:\\home\\al\\.wine\\drive_c\\users\\al\\x.dll", "Z:\\home\\<user>\\.wine\\drive_c\\users\\<user>\\x.dll"),
        (
            r'"C:\Users\tim\e.exe" --dir="C:\Users\tim\AppData"',
            r'"C:\Users\<user>\e.exe" --dir="C:\Users\<user>\AppData"',
        ),
    ],
)
def test_user_folder_names_are_replaced(before, after):
    assert redact_text(before) == after


@pytest.mark.parametrize(
    "kept", [r"C:\Users\Public\x", r"C:\Users\Default\x", r"C:\Windows\System32\ntdll.dll", "m.dll!f"]
)
def test_shared_folders_and_other_strings_are_kept(kept):
    assert redact_text(kept) == kept


@pytest.mark.parametrize(
    "rel,name", [("node-minidump/windows.dmp", "kevin"), ("rust-minidump/stability-report.dmp", "tim")]
)
def test_a_real_report_keeps_no_user_name_once_redacted(rel, name):
    report = analyse_file(str(real_dump(rel)), Options())
    raw = render_json(report)
    assert f"\\\\Users\\\\{name}\\\\".lower() in raw.lower()  # the dump does record it
    redacted = render_json(redact_report(report))
    assert not re.search(rf"\b{name}\b", redacted, re.I)
    doc = json.loads(redacted)
    assert any("<user>" in m["path"] for m in doc["modules"])
    assert len(doc["modules"]) == len(report.modules) and doc["verdict"] == json.loads(raw)["verdict"]
