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


def test_times_are_what_datetime_writes_without_datetime():
    """iso_time formats with time.gmtime (datetime's import is ~1 ms of every report):
    the same text as datetime for whole seconds, None where datetime fails."""
    import datetime
    import random

    from dumpkit.report.view.contents import iso_time

    def datetimes(stamp):
        try:
            return datetime.datetime.fromtimestamp(stamp, datetime.timezone.utc).isoformat() if stamp else None
        except (OverflowError, OSError, ValueError):
            return None

    edges = [0, 1, -1, 2**31 - 1, 2**32 - 1, 253402300799, 253402300800, -62135596800, -62135596801, 2**63, -(2**70)]
    rnd = random.Random(34)
    stamps = edges + [rnd.randrange(-(2**38), 2**38) for _ in range(20000)]
    assert [iso_time(s) for s in stamps] == [datetimes(s) for s in stamps]
    assert iso_time(1285797233) == "2010-09-29T21:53:53+00:00"
    assert iso_time(None) is None
