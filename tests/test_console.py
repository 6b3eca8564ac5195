"""The dump's path as the report tells the user to type it: quoted as shlex.quote quotes it
on a POSIX shell (dumpkit's own rule spares shlex's import)."""

from __future__ import annotations

import os
import random
import shlex

import pytest

from dumpkit.console import shell_quote

ALPHABET = "aZ09_@%+=:,./-' \"$`\\!*?~#&;|<>()[]{}\t\né\u3000"


@pytest.mark.skipif(os.name == "nt", reason="cmd.exe's quoting on Windows")
def test_a_path_is_quoted_as_shlex_quotes_it() -> None:
    rng = random.Random(7)
    paths = ["", "crash.dmp", "/tmp/dumps/crash 1.dmp", "it's.dmp", "C:\\dumps\\a.dmp", "-rf", "~/x"]
    paths += ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 12))) for _ in range(3000)]
    for path in paths:
        assert shell_quote(path) == shlex.quote(path), path
