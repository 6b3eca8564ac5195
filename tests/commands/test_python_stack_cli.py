"""The Python stack where users see it: `dumpkit analyze` (every format) and
`dumpkit stack --python` on the real full-memory CPython 3.8 dumps, checked against what
the program did (sample_dumps/python/manifest.json: threads, depth, innermost and
outermost frames, the collapsed recursion)."""

from __future__ import annotations

import html
import json

import pytest

from tests.support.samples import python_dump, python_images, python_manifest, run_cli

pytestmark = pytest.mark.slow  # the full run's (CI's); `-m "not slow"` leaves it out

FULL = [d for d in python_manifest() if d.get("python_threads_in_dump")]
NORMAL = [d for d in python_manifest() if d.get("dump_type") == "normal" and d.get("expected_class") == "recursion"]


def _dump(facts, plain):
    return plain(python_dump(facts))  # the committed bundle for NumPy and TensorFlow


def _images(facts):
    return [x for folder in python_images(facts) for x in ("--image-path", folder)]


@pytest.mark.parametrize("facts", FULL, ids=[d["file"] for d in FULL])
def test_stack_python_json_lists_every_python_frame(facts, plain):
    r = run_cli("stack", "--python", "--json", _dump(facts, plain), *_images(facts))
    assert r.returncode == 0, r.stderr
    py = json.loads(r.stdout)["python"]
    assert py["status"] == "read" and py["layout_verified"]
    want = {t["thread_id"]: t for t in facts["python_threads_in_dump"]}
    crashing = next(t for t in py["threads"] if t["thread_id"] == facts["crash_thread_tid"])
    expected = want[crashing["thread_id"]]
    frames = crashing["frames"]
    assert crashing["depth"] == expected["frame_count"] == len(frames)  # every frame, none elided
    as_facts = [{"function": f["function"], "file": f["filename"], "line": f["line"]} for f in frames]
    assert as_facts[: len(expected["innermost"])] == expected["innermost"]
    assert as_facts[::-1][: len(expected["outermost"])] == expected["outermost"]


@pytest.mark.parametrize("fmt", ["text", "markdown", "html"])
@pytest.mark.parametrize("facts", FULL, ids=[d["file"] for d in FULL])
def test_analyze_shows_the_python_stack_with_the_recursion_folded(facts, fmt, plain):
    r = run_cli("analyze", _dump(facts, plain), *_images(facts), "--format", fmt)
    assert r.returncode == 0, r.stderr
    expected = next(t for t in facts["python_threads_in_dump"] if t["thread_id"] == facts["crash_thread_tid"])
    assert "Python stack of thread" in r.stdout and f"{expected['frame_count']:,} frame" in r.stdout
    for f in expected["outermost"]:
        assert (html.escape(f["function"], quote=False) if fmt == "html" else f["function"]) in r.stdout
    cycles = [c for c in expected["collapsed"] if "cycle" in c]
    if cycles:
        assert f"repeat {cycles[0]['repetitions'] - 1:,} more times" in r.stdout


@pytest.mark.parametrize("facts", NORMAL[:1], ids=[d["file"] for d in NORMAL[:1]])
def test_a_normal_dump_says_the_python_stack_is_not_in_it_and_which_dump_has_it(facts, plain):
    r = run_cli("analyze", _dump(facts, plain), *_images(facts))
    assert r.returncode == 0, r.stderr
    section = r.stdout.split("Python stacks", 1)[1].split("\n\n", 1)[0]
    assert "is not in the dump" in section and "MiniDumpWithFullMemory" in section


CRASHED_ELSEWHERE = [d for d in python_manifest() if d.get("expected_class") == "access_violation"]


@pytest.mark.parametrize("facts", CRASHED_ELSEWHERE, ids=[d["file"] for d in CRASHED_ELSEWHERE])
def test_an_access_violation_under_a_few_python_calls_reports_no_recursion(facts, plain):
    """The eval loop repeats once per nested Python call: three of them under a crash that
    is not a stack overflow are ordinary code, not a "Recursion" section."""
    r = run_cli("analyze", _dump(facts, plain), *_images(facts))
    assert r.returncode == 0, r.stderr
    assert "VERDICT  Access violation" in r.stdout
    assert "Recursion on thread" not in r.stdout
