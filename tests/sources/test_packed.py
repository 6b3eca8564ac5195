"""Dumps as people share them: crash.dmp.xz (as the samples ship), .gz, .bz2, or a zip
holding one minidump (GitHub takes no .dmp attachment), read by every command as the
minidump inside, with the file left untouched and no copy left behind; and the one-line
errors for packings that do not hold exactly one dump."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import json
import lzma
import os
import shutil
import zipfile
from pathlib import Path

import pytest

from tests.support.samples import SAMPLE_BIN, run_cli, sample_path

pytestmark = pytest.mark.slow  # the full run's (CI's); `-m "not slow"` leaves it out

PLAIN = "recursion_cycle3.dmp"  # a real mingw-w64 + Wine crash, with its images in sample_dumps/bin


def _packed(tmp_path: Path, how: str) -> Path:
    raw = sample_path(PLAIN).read_bytes()
    out = tmp_path / {"xz": "crash.dmp.xz", "gz": "crash.dmp.gz", "bz2": "crash.dmp.bz2", "zip": "crash.zip"}[how]
    if how == "xz":
        out.write_bytes(lzma.compress(raw, format=lzma.FORMAT_XZ))
    elif how == "gz":
        out.write_bytes(gzip.compress(raw))
    elif how == "bz2":
        out.write_bytes(bz2.compress(raw))
    else:
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("README.txt", "what the user did before the crash\n")
            zf.writestr("crash/python.exe.1234.dmp", raw)
    return out


def _env(tmp: Path) -> dict:
    """The child's temporary folder is `tmp`, to see what is left in it."""
    return {**os.environ, "TMPDIR": str(tmp), "TEMP": str(tmp), "TMP": str(tmp)}


def _report(dump: Path, env=None) -> dict:
    r = run_cli("analyze", dump, "--image-path", SAMPLE_BIN, "--format", "json", env=env)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["dump"].pop("path") == str(dump)  # reports name the file given
    return doc


@pytest.fixture(scope="module")
def plain_report():
    return _report(sample_path(PLAIN))


@pytest.mark.parametrize("how", ["xz", "gz", "bz2", "zip"])
def test_a_packed_dump_reads_as_the_dump_inside(tmp_path, plain_report, how):
    packed = _packed(tmp_path, how)
    before = hashlib.sha256(packed.read_bytes()).hexdigest()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    assert _report(packed, _env(tmp)) == plain_report
    assert hashlib.sha256(packed.read_bytes()).hexdigest() == before  # never written to
    assert list(tmp.iterdir()) == []  # the private copy is gone


def test_a_committed_xz_sample_gets_its_verdict_without_unpacking_by_hand():
    r = run_cli("analyze", sample_path("python/py_recursion.dmp.xz"))
    assert r.returncode == 0, r.stderr
    assert "Stack overflow" in r.stdout and "0xc00000fd STATUS_STACK_OVERFLOW" in r.stdout


def test_stack_and_info_read_it_too(tmp_path):
    packed = _packed(tmp_path, "xz")
    info = run_cli("info", packed, "--json")
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout)["dump"]["file_size"] == sample_path(PLAIN).stat().st_size
    stack = run_cli("stack", packed, "--image-path", SAMPLE_BIN)
    plain = run_cli("stack", sample_path(PLAIN), "--image-path", SAMPLE_BIN)
    assert stack.returncode == 0 and stack.stdout == plain.stdout.replace(str(sample_path(PLAIN)), str(packed))


def test_a_bundle_of_a_packed_dump_holds_the_minidump(tmp_path, plain_report):
    packed = _packed(tmp_path, "gz")
    out = tmp_path / "crash.dkb"
    r = run_cli("bundle", packed, "-o", out, "--image-path", SAMPLE_BIN)
    assert r.returncode == 0, r.stderr
    with zipfile.ZipFile(out) as zf:
        manifest = json.loads(zf.read("manifest.json"))
    assert manifest["dump"]["name"] == "crash.dmp"
    assert manifest["dump"]["sha256"] == hashlib.sha256(sample_path(PLAIN).read_bytes()).hexdigest()
    bundled = _report(out)
    assert bundled["verdict"] == plain_report["verdict"]


def test_a_bundle_named_zip_is_read_as_a_bundle(tmp_path):
    bundle = tmp_path / "crash.dkb"
    assert run_cli("bundle", sample_path(PLAIN), "-o", bundle, "--image-path", SAMPLE_BIN).returncode == 0
    shutil.copy(bundle, tmp_path / "attached.zip")
    a = run_cli("analyze", tmp_path / "attached.zip")  # no --image-path: the bundle serves the images
    b = run_cli("analyze", sample_path(PLAIN), "--image-path", SAMPLE_BIN)
    assert a.returncode == 0, a.stderr
    assert a.stdout.splitlines()[2:6] == b.stdout.splitlines()[2:6]  # the verdict block


def test_triage_reads_a_zipped_dump_in_a_folder(tmp_path):
    folder = tmp_path / "crashes"
    folder.mkdir()
    shutil.copy(_packed(tmp_path, "zip"), folder / "crash.dmp.zip")
    shutil.copy(sample_path(PLAIN), folder / "plain.dmp")
    r = run_cli("triage", folder, "--image-path", SAMPLE_BIN, "--format", "json", "--no-progress", "-j", "1")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [d["status"] for d in doc["dumps"]] == ["analysed", "analysed"]
    assert len(doc["groups"]) == 1 and doc["groups"][0]["count"] == 2  # the same crash, zipped or not


def _one_line_error(r, dump: Path) -> str:
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"dumpkit: error: {dump}: "), r.stderr
    assert "Traceback" not in r.stderr
    return lines[0]


def test_a_zip_of_several_dumps_names_them_and_says_what_to_do(tmp_path):
    dump = tmp_path / "crashes.zip"
    raw = sample_path(PLAIN).read_bytes()
    with zipfile.ZipFile(dump, "w") as zf:
        for name in ("a.dmp", "b.dmp", "c.mdmp", "d.dmp"):
            zf.writestr(name, raw)
    line = _one_line_error(run_cli("analyze", dump), dump)
    assert "4 minidumps (a.dmp, b.dmp, c.mdmp, ...)" in line and "dumpkit triage" in line


def test_a_zip_without_a_dump_says_so(tmp_path):
    dump = tmp_path / "logs.zip"
    with zipfile.ZipFile(dump, "w") as zf:
        zf.writestr("log.txt", "no dump here\n")
        zf.writestr("trace.bin", b"\0" * 100)
    line = _one_line_error(run_cli("analyze", dump), dump)
    assert "a zip archive of 2 files, none of them a minidump" in line


def test_a_minidump_not_named_like_one_is_found_in_a_zip(tmp_path, plain_report):
    dump = tmp_path / "report.zip"
    with zipfile.ZipFile(dump, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("notes.txt", "steps\n")
        zf.writestr("memory.bin", sample_path(PLAIN).read_bytes())
    assert _report(dump) == plain_report


def test_a_truncated_xz_is_one_line_and_leaves_nothing_behind(tmp_path):
    whole = _packed(tmp_path, "xz").read_bytes()
    dump = tmp_path / "cut.dmp.xz"
    dump.write_bytes(whole[: len(whole) // 2])
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    line = _one_line_error(run_cli("analyze", dump, env=_env(tmp)), dump)
    assert "xz-compressed: cannot unpack it" in line
    assert list(tmp.iterdir()) == []


def test_a_packed_file_that_is_no_minidump_says_what_it_holds(tmp_path):
    dump = tmp_path / "notes.txt.gz"
    dump.write_bytes(gzip.compress(b"these are notes, not a dump\n" * 10))
    line = _one_line_error(run_cli("info", dump), dump)
    assert line.endswith("gzip-compressed, but what it holds is not a minidump (it starts with b'thes', not b'MDMP')")
    twice = tmp_path / "crash.dmp.gz.xz"
    twice.write_bytes(lzma.compress(gzip.compress(sample_path(PLAIN).read_bytes())))
    line = _one_line_error(run_cli("analyze", twice), twice)
    assert "xz-compressed, and what it holds is gzip-compressed again, not a minidump" in line


def test_a_bomb_of_something_else_stops_at_its_first_bytes(tmp_path):
    """Not a minidump from its first bytes: nothing more is unpacked (a 1 GiB run of zeros
    packs into 1 KB with bzip2; it is refused at once, not after 1 GiB)."""
    dump = tmp_path / "bomb.dmp.bz2"
    compressor = bz2.BZ2Compressor(9)
    with open(dump, "wb") as f:
        block = bytes(1 << 20)
        for _ in range(1024):
            f.write(compressor.compress(block))
        f.write(compressor.flush())
    assert dump.stat().st_size < (64 << 10)
    r = run_cli("analyze", dump, timeout=60)
    line = _one_line_error(r, dump)
    assert "bzip2-compressed, but what it holds is not a minidump (it starts with b'\\x00\\x00\\x00\\x00'" in line


def test_a_dump_too_big_to_hold_is_read_from_a_private_copy_that_is_then_gone(tmp_path, monkeypatch):
    """Past IN_MEMORY the unpacked dump is a mapped temporary file (deleted at once here;
    on Windows at exit: tests/windows_lane), with the same report."""
    import tempfile

    from dumpkit.engine import Options, analyze
    from dumpkit.problems import Problems
    from dumpkit.report.json_report import render_json
    from dumpkit.sources import packed
    from dumpkit.sources.minidump import open_dump

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.setattr(packed, "IN_MEMORY", 0)
    dump = _packed(tmp_path, "bz2")
    docs = []
    for open_it in (
        lambda p: packed.open_packed(str(dump), packed.packing_of(str(dump)), p),
        lambda p: open_dump(str(sample_path(PLAIN)), p),
    ):
        problems = Problems()
        target = open_it(problems)
        assert list(tmp.iterdir()) == []  # unlinked while mapped (POSIX)
        doc = json.loads(
            render_json(analyze(target, Options(image_paths=(str(SAMPLE_BIN),)), problems=problems).report)
        )
        target.close()
        doc["dump"].pop("path")
        docs.append(doc)
    assert docs[0] == docs[1]


def test_unpacking_stops_before_the_temporary_folder_is_full(tmp_path, monkeypatch):
    """A small packed file can claim many GB: past IN_MEMORY it is unpacked to a file only
    while the folder keeps MIN_FREE (here: more than the disk has), with one line saying
    where and what to do, and nothing left behind."""
    import tempfile

    from dumpkit.sources import packed
    from dumpkit.target import DumpError

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.setattr(packed, "IN_MEMORY", 0)
    monkeypatch.setattr(packed, "MIN_FREE", shutil.disk_usage(tmp).total + 1)
    dump = _packed(tmp_path, "xz")
    with pytest.raises(DumpError) as e:
        packed.open_packed(str(dump), packed.packing_of(str(dump)))
    assert str(e.value).startswith(f"xz-compressed: the temporary folder {tmp} has ")
    assert "unpack it where there is room" in str(e.value)
    assert list(tmp.iterdir()) == []


def test_a_folder_given_as_the_dump_names_the_dumps_it_holds(tmp_path):
    """A Windows Error Reporting report folder holds its dumps as .mdmp and .hdmp (a
    minidump with the process's memory): the one line names them and what to run."""
    report = tmp_path / "AppCrash_python.exe_1a2b"
    report.mkdir()
    (report / "Report.wer").write_text("EventType=APPCRASH\n")
    for name in ("triagedump.mdmp", "memory.hdmp"):
        shutil.copy(sample_path(PLAIN), report / name)
    line = _one_line_error(run_cli("analyze", report), report)
    assert line.endswith(
        "is a directory, not a dump file; it holds 2 dump files (memory.hdmp, triagedump.mdmp): "
        "name one, or run dumpkit triage on the folder"
    ), line
    (report / "triagedump.mdmp").unlink()
    line = _one_line_error(run_cli("info", report), report)
    assert line.endswith("is a directory, not a dump file; it holds memory.hdmp: name that file"), line
    r = run_cli("triage", report, "--image-path", SAMPLE_BIN, "--format", "json", "--no-progress", "-j", "1")
    assert r.returncode == 0, r.stderr
    assert [os.path.basename(d["path"]) for d in json.loads(r.stdout)["dumps"]] == ["memory.hdmp"]


def test_a_zip_made_by_macos_finder_holds_one_dump(tmp_path, plain_report):
    """Finder adds __MACOSX/._crash.dmp (the resource fork) beside crash.dmp: not a dump."""
    dump = tmp_path / "crash.zip"
    with zipfile.ZipFile(dump, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("crash.dmp", sample_path(PLAIN).read_bytes())
        zf.writestr("__MACOSX/._crash.dmp", b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        " + bytes(100))
    assert _report(dump) == plain_report
