"""One statement of what threading.stack_size does on Windows (issue #41 item 7): `explain
0xC00000FD` and the verdict of a real Python recursion say the same, and it is what the
thread_stack_size sample shows (CPython hands the size to _beginthreadex as the commit size:
threading.stack_size(8 MiB) gave the worker an 8 MiB stack)."""

from __future__ import annotations

import json
import subprocess
import sys

from dumpkit.analysis.advice import THREAD_STACK_SIZE_ON_WINDOWS
from tests.support.samples import SAMPLES


def _dumpkit(*args: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "dumpkit", *args], capture_output=True, text=True, timeout=120, check=False
    ).stdout


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_explain_and_analyze_say_the_same_of_threading_stack_size():
    explained = _flat(_dumpkit("explain", "0xC00000FD"))
    report = json.loads(_dumpkit("analyze", str(SAMPLES / "python" / "py_recursion.dmp.xz"), "--format", "json"))
    steps = [s for s in report["verdict"]["next_steps"] if "threading.stack_size" in s]
    assert steps, report["verdict"]["next_steps"]
    for said in (explained, *steps):
        assert _flat(THREAD_STACK_SIZE_ON_WINDOWS) in _flat(said)
        assert "only reserved" not in said and "not committed" not in said
