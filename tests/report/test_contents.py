"""`dumpkit info` as text."""

from __future__ import annotations

import io

from rich.console import Console

from dumpkit.analysis.model import Contents, DumpSummary, Environment, SCHEMA_VERSION
from dumpkit.report.contents import render_contents
from tests.support.builders import system


def _info(processors: int) -> str:
    doc = Contents(
        schema_version=SCHEMA_VERSION,
        dumpkit_version="0.test",
        dump=DumpSummary("crash.dmp", 1000, 0, (), (), 0, 0, 0),
        system=system(processors=processors),
        crash=None,
        crash_absent="no exception stream",
        threads=(),
        modules=(),
        unloaded_modules=(),
        environment=Environment(),
        soft_errors=(),
    )
    buf = io.StringIO()
    render_contents(doc, Console(file=buf, width=120, highlight=False, soft_wrap=False))
    return buf.getvalue()


def test_processor_count_in_words():
    assert "CPU      Intel64 family 6, 1 processor\n" in _info(1)
    assert "CPU      Intel64 family 6, 2 processors\n" in _info(2)
