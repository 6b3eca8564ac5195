"""What users of a command-line tool expect of it (issue #35 item 1): --version, shell
completion typer can install, and type information for the package's users."""

from __future__ import annotations

import os
import re

import pytest

from dumpkit import __version__
from tests.support.samples import ROOT, run_cli


@pytest.mark.parametrize("args", [["--version"], ["--version", "--help"]])
def test_version_is_one_line_and_exit_0(args):
    done = run_cli(*args)
    assert done.returncode == 0 and done.stdout == f"dumpkit {__version__}\n" and not done.stderr


def test_the_version_is_the_packages():
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)


def test_completion_can_be_shown_for_a_shell():
    # typer's own switch: the shell named, not detected (shellingham finds none under Wine)
    done = run_cli("--show-completion", "bash", env=dict(os.environ, _TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION="1"))
    assert done.returncode == 0 and "complete" in done.stdout and "dumpkit" in done.stdout


def test_help_offers_completion_and_version():
    done = run_cli("--help")
    assert done.returncode == 0
    for option in ("--version", "--install-completion", "--show-completion"):
        assert option in done.stdout


def test_the_wheel_declares_its_types():
    """PEP 561: py.typed sits in the package and the build ships it."""
    assert (ROOT / "dumpkit" / "py.typed").is_file()
    assert '"dumpkit" = ["py.typed"]' in (ROOT / "pyproject.toml").read_text()
