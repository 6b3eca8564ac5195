"""A pytest plugin for the Windows side of the py38 lane (`-p tests.py38_lane.results`):
writes every test's outcome as JSON to $DUMPKIT_PY38_RESULTS, for the Linux side to report
per file. Runs inside the genuine Windows CPython 3.8, so 3.8 syntax and stdlib only."""

from __future__ import annotations

import json
import os
import platform
import sys

_RECORDS = []
_LONGREPR = 6000  # characters of a failure's traceback kept: enough to read the cause


def pytest_runtest_logreport(report):
    if report.when != "call" and report.outcome == "passed":
        return
    _RECORDS.append(_record(report))


def pytest_collectreport(report):
    if report.outcome != "passed":  # a file that failed to import, or skipped itself whole
        _RECORDS.append(_record(report))


def _record(report) -> dict:
    if report.outcome == "passed":
        text = ""
    elif report.skipped and isinstance(report.longrepr, tuple):  # (file, line, "Skipped: reason")
        text = report.longrepr[2].split("Skipped: ", 1)[-1]
    else:
        text = report.longreprtext
    return {
        "nodeid": report.nodeid,
        "when": getattr(report, "when", "collect"),
        "outcome": report.outcome,
        "xfail": getattr(report, "wasxfail", None) is not None,
        "longrepr": text[-_LONGREPR:],
        "seconds": round(getattr(report, "duration", 0.0), 3),
    }


def pytest_sessionfinish(session, exitstatus):
    out = os.environ.get("DUMPKIT_PY38_RESULTS")
    if not out:
        return
    doc = {
        "version": sys.version,
        "platform": sys.platform,
        "machine": platform.machine(),
        "exitstatus": int(exitstatus),
        "collected": session.testscollected,
        "records": _RECORDS,
    }
    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f)
