"""Off Windows, `dumpkit capture` and `dumpkit wer` say in one line that they are for
Windows and what to use instead, with exit code 2 and no traceback."""

from __future__ import annotations

import sys

import pytest

from tests.support.samples import run_cli

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the Windows behaviour is the Wine lane's")


@pytest.mark.parametrize(
    "args, words",
    [
        (["capture", "--", "python", "train.py"], "dumpkit capture runs on Windows"),
        (["capture", "--attach", "1234"], "dumpkit capture runs on Windows"),
        (["wer", "enable", "python.exe"], "run it on Windows"),
        (["wer", "status"], "run it on Windows"),
    ],
)
def test_one_line_saying_it_is_for_windows(args, words):
    done = run_cli(*args)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in done.stderr
    if args[0] == "capture":
        assert "faulthandler" in lines[0] and "dumpkit analyze" in lines[0]
