"""The terminal report at the terminal's width: on 80 columns every function name of the
crashing stack is shown whole (addresses shorten, then give way, first), and a wide
terminal gets every column in full."""

from __future__ import annotations

import re

import pytest

from dumpkit.engine import Options
from dumpkit.report.text import render_text
from tests.support.samples import analyse_file, SAMPLE_BIN, sample_path

_REPORTS: dict = {}


def _report(name: str):
    if name not in _REPORTS:
        _REPORTS[name] = analyse_file(str(sample_path(name)), Options(image_paths=[str(SAMPLE_BIN)]))
    return _REPORTS[name]


def _stack_section(text: str) -> list:
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("Crashing thread"))
    end = next(i for i in range(start, len(lines)) if not lines[i].strip())
    return lines[start:end]


def _names(report) -> list:
    crash = next(t for t in report.threads if t.is_crashing)
    return [f.symbol for f in crash.frames[:40] if f.symbol]


@pytest.mark.parametrize("name", ["big_frame.dmp", "recursion_cycle3.dmp", "fastfail_abort.dmp", "null_deref.dmp"])
def test_80_columns_show_every_function_name_whole(name):
    report = _report(name)
    text = render_text(report, width=80)
    section = _stack_section(text)
    table = "\n".join(section)
    for fn in _names(report)[:6]:
        assert re.search(rf"(^|\s){re.escape(fn)}(\s|$)", table, re.M), (fn, table)
    assert all(len(line) <= 80 for line in text.splitlines()), [ln for ln in text.splitlines() if len(ln) > 80]
    assert "…" not in text


def test_addresses_shorten_then_give_way_before_names_are_cut():
    report = _report("big_frame.dmp")
    crash = next(t for t in report.threads if t.is_crashing)
    sp, ip = crash.frames[0].sp, crash.frames[0].ip
    wide = "\n".join(_stack_section(render_text(report, width=200)))
    assert f"{sp:016x}" in wide and f"{ip:016x}" in wide and "left out" not in wide
    narrow = "\n".join(_stack_section(render_text(report, width=80)))
    assert f"{sp:016x}" not in narrow and f"{sp:x}" not in narrow  # Child-SP gave way
    assert re.search(rf"\b0*{ip:x}\b", narrow) and f"{ip:016x}" not in narrow  # the IP, shortened
    assert "Child-SP left out to fit 80 columns" in narrow


def test_headers_state_their_units():
    text = render_text(_report("big_frame.dmp"), width=120)
    header = next(ln for ln in _stack_section(text) if ln.lstrip().startswith("#"))
    assert header.split()[:4] == ["#", "Frame", "size", "(B)"]
    assert "Frame size (B)" in text and "Prologue asks (B)" in text
