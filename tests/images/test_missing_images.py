"""A dump read without the crashed program's binaries (issue #15 items 1-3): the report says
which modules on the crashing stack had no image, how many frames were guessed by scanning
and which option would fix it; confidence follows the evidence; searches the user asked for
that found nothing are named. Real sample dumps, read as a colleague's machine would read
them (--no-recorded-paths: the paths the dump recorded are not looked at)."""

from __future__ import annotations

import json
import re

import pytest

from tests.support.samples import SAMPLE_BIN, run_cli, sample_path

AWAY = ("--no-recorded-paths",)


def _json(*args) -> dict:
    r = run_cli("analyze", *args, "--format", "json")
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def cycle3_away() -> dict:
    return _json(sample_path("recursion_cycle3.dmp"), *AWAY)


def test_without_images_the_report_names_the_modules_and_the_option_that_fixes_it(cycle3_away):
    images = cycle3_away["images"]
    missing = {m["module"]: m for m in images["missing"]}
    assert {"opkernels.dll", "tfhost.exe"} <= set(missing)
    ops = missing["opkernels.dll"]
    assert ops["frames"] > 5000  # the recursion lives there
    assert ops["recorded_path"].endswith("\\opkernels.dll")
    assert ops["fix"].startswith("--image-path a copy of ") and ops["recorded_path"].rsplit("\\", 1)[0] in ops["fix"]
    assert "Wine" in missing["ntdll.dll"]["fix"]  # the dump ran under Wine: its system DLLs are Wine's
    assert images["frames"] > 5000 and images["scanned"] > 0 and images["unvalidated"] > 0


def test_a_recursion_found_without_images_is_not_high_confidence(cycle3_away):
    v = cycle3_away["verdict"]
    assert v["kind"] == "recursion"
    assert v["confidence"] == "medium"
    assert any("confidence is medium, not high" in e and "opkernels.dll" in e for e in v["evidence"])


def _name(frame: dict) -> str:
    """A frame's function as entry paths name it (Frame.function_name)."""
    if frame["symbol"]:
        return frame["symbol"].split("+", 1)[0]
    return f"{frame['module']}+{int(frame['rva'], 16) if isinstance(frame['rva'], str) else frame['rva']:#x}"


def test_the_entry_path_holds_no_frame_found_by_unconfirmed_scanning(cycle3_away):
    """Without images, the frames below the recursion are scanned for and nothing confirms
    them (issue #32 item 9): they are possible frames, shown apart, and the recursion's
    entry path names none of them."""
    crashing = next(t for t in cycle3_away["threads"] if t["is_crashing"])
    possible = crashing.get("possible_frames") or []
    assert possible and all(f["trust"].startswith("scan") and f["support"] != "recursion" for f in possible)
    unconfirmed = {_name(f) for f in possible} | {_name(f) for f in crashing["frames"] if f.get("support") == "none"}
    confirmed = {_name(f) for f in crashing["frames"] if f.get("support") != "none"}
    entry = crashing["cycles"][0]["entry_path"]
    assert unconfirmed - confirmed
    assert not (unconfirmed - confirmed) & set(entry)


def test_with_its_images_the_same_dump_is_high_confidence_and_shows_no_missing_images():
    dump = sample_path("recursion_cycle3.dmp")
    report = _json(dump, *AWAY, "--image-path", SAMPLE_BIN)
    assert report["verdict"]["confidence"] == "high"
    assert report["images"]["missing"] == [] and report["images"]["unvalidated"] == 0
    text = run_cli("analyze", dump, *AWAY, "--image-path", SAMPLE_BIN).stdout
    assert "Missing images" not in text


def test_a_stack_overflow_whose_cause_needs_the_images_says_so_instead_of_guessing():
    r = run_cli("analyze", sample_path("big_frame.dmp"), *AWAY)
    head = r.stdout.split("Crash ", 1)[0]
    assert "the cause cannot be shown without images" in head
    assert "confidence: low" in head
    assert "no repeating cycle and no oversized frame found" not in head and "the stack is deep" not in head.lower()
    section = head.split("Missing images", 1)[1]
    assert "opkernels.dll" in section and "--image-path a copy of" in section


@pytest.mark.parametrize("fmt", ["text", "markdown", "html"])
def test_image_paths_that_gave_nothing_are_named_in_every_format(fmt, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "tfhost.exe").write_bytes(b"MZ not the one")
    missing = tmp_path / "typo"
    # --no-redact: markdown and html would show a temporary folder under C:\Users\NAME (Windows)
    # as C:\Users\<user>
    args = ("-i", missing, "-i", empty, "--format", fmt, "--no-redact")
    r = run_cli("analyze", sample_path("null_deref.dmp"), *AWAY, *args)
    assert r.returncode in (0, 1), r.stderr
    out = " ".join(r.stdout.split())  # the terminal report wraps long lines
    if fmt == "markdown":  # as it reads rendered: escapes undone (a Windows path's backslashes)
        out = re.sub(r"\\(.)", r"\1", out)
    assert f"--image-path {missing}: no such folder" in out
    assert f"--image-path {empty}: none of its 1 files is an image of the" in out


def test_a_symbol_server_that_fails_is_named_with_the_modules_it_did_not_give(tmp_path):
    report = _json(
        sample_path("null_deref.dmp"), *AWAY, "--symbol-path", f"srv*{tmp_path / 'cache'}*http://127.0.0.1:9"
    )
    problems = report["images"]["search_problems"]
    (line,) = [p for p in problems if p.startswith("symbol server http://127.0.0.1:9: failed")]
    assert "tfhost.exe" in line
