"""The session's setup and its shared fixtures. What the tests build their inputs from
(sample and real dumps, synthetic dumps and images, stand-ins, `run_cli`) is the
tests/support package; this file holds only what pytest itself must find here.

Where tests live: each file in the folder of the package part it tests (tests/unwind for
dumpkit/unwind, tests/images for dumpkit/images, tests/commands for the commands, tests/windbg
for windbg_scripts, ...). The files left at the top test no one part: test_consistency.py
(the commands agree with each other), test_golden.py (every report against its snapshot),
test_real_dumps.py (the real dumps of ../shared against other tools' answers),
test_full_memory.py (every analysis and two commands read only the pages they need),
test_code_checks.py (ruff, mypy and the import layers over the whole tree),
test_conventions.py (what any command line tool owes its users) and test_cli_output.py
(the output of every command); test_records.py and test_frontdoor.py test
dumpkit/records.py and dumpkit/frontdoor.py, themselves top modules."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# Tests must not depend on what else is on the machine: a Wine prefix in ~/.wine or
# $WINEPREFIX would serve the recorded Windows paths of the sample dumps with its own DLLs,
# and ~/.cache would hold a symbol cache. The session (and every CLI it runs) gets an empty
# home of its own.
_HOME = tempfile.mkdtemp(prefix="dumpkit-tests-home-")
os.environ["HOME"] = _HOME
os.environ.pop("WINEPREFIX", None)
# what the symbol stores read from the environment (symbols/store.py): a developer's own
# settings must not reach a test; tests that need one set it themselves
for _name in ("_NT_SYMBOL_PATH", "_NT_ALT_SYMBOL_PATH", "DUMPKIT_CACHE", "DUMPKIT_MAX_DOWNLOAD", "XDG_CACHE_HOME"):
    os.environ.pop(_name, None)
# --fetch-images' switch and mirror (images/fetch/): no test fetches unless it asks to
for _name in ("DUMPKIT_FETCH_IMAGES", "DUMPKIT_PYTHON_ORG_URL"):
    os.environ.pop(_name, None)

from tests.support.samples import (  # noqa: E402  (the path above first)
    SAMPLE_BIN,
    CrashWalk,
    analyse_file,
    plain_dump,
    python_dump,
    python_images,
    sample_manifest,
    sample_path,
)


@pytest.fixture(scope="session")
def crash_walk():
    """crash_walk("recursion_one.dmp") -> CrashWalk (cached); skips when the dump is absent."""
    cache = {}

    def get(name: str) -> CrashWalk:
        if name not in cache:
            path = sample_path(name)
            from dumpkit.images import ImageLocator, ImageProvider
            from dumpkit.sources.minidump import open_dump
            from dumpkit.unwind.cpus import step_for
            from dumpkit.unwind.walk import Walker, walk_thread

            target = open_dump(str(path))
            locator = ImageLocator(image_paths=[str(SAMPLE_BIN)] if SAMPLE_BIN.is_dir() else [])
            walker = Walker(
                target,
                ImageProvider(target, locator, problems=target.soft_errors),
                step_for(target),
                problems=target.soft_errors,
            )
            ex = target.exception
            thread = next(t for t in target.threads if t.tid == ex.thread_id)
            walk = walk_thread(walker, thread, ex.context)
            facts = next((d for d in sample_manifest() if d.get("file") == name), {})
            cache[name] = CrashWalk(target, walker, thread, walk, facts)
        return cache[name]

    return get


@pytest.fixture(scope="session")
def plain(tmp_path_factory):
    """plain(path) -> a readable dump path (xz samples decompressed once per session)."""
    root = tmp_path_factory.mktemp("plain-dumps")
    return lambda path: plain_dump(Path(path), root)


@pytest.fixture(scope="session")
def python_report(plain):
    """python_report(facts) -> the analysed Report of a Python sample dump (a manifest
    entry), with the images it needs (or skip); each analysed once per session."""
    from dumpkit.engine import Options

    cache: dict = {}

    def get(facts: dict):
        if facts["file"] not in cache:
            path = python_dump(facts)  # the committed bundle for NumPy and TensorFlow
            images = python_images(facts)
            cache[facts["file"]] = analyse_file(plain(path), Options(image_paths=images))
        return cache[facts["file"]]

    return get


# --- the fast tier: `pytest -m "not slow"` for development, the full run for CI. Slow
# tests mark themselves (`pytestmark = pytest.mark.slow` in the module, or
# `@pytest.mark.slow` on the test): those that run the CLI once per case, walk or
# decompress the million-frame samples, fuzz, start a browser or worker processes.
