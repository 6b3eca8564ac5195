"""A dump read from a stream: `dumpkit analyze -` with the dump piped in (plain, compressed,
zipped, a bundle), a FIFO such as bash's <(zcat crash.dmp.gz); what is no dump is refused
from its first bytes, and nothing is left in the temporary folder. A FIFO used to hang the
command: the file's way of opening (sniff, close, open again) lost its writer."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import tempfile
import threading
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dumpkit.cli import app
from dumpkit.sources import streamed
from dumpkit.target import DumpError
from tests.support.samples import ROOT, SAMPLE_BIN, sample_path

PLAIN = "recursion_cycle3.dmp"  # a real mingw-w64 + Wine crash, with its images in sample_dumps/bin


def _analyze(dump: str, tmp: Path, stdin: bytes = b"") -> subprocess.CompletedProcess:
    """`dumpkit analyze DUMP` in a child, its temporary folder `tmp` (a FIFO's test)."""
    env = {**os.environ, "TMPDIR": str(tmp), "TEMP": str(tmp), "TMP": str(tmp)}
    return subprocess.run(
        [sys.executable, "-m", "dumpkit", "analyze", dump, "--image-path", str(SAMPLE_BIN), "--format", "json"],
        input=stdin,
        capture_output=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )


def _piped(stdin: bytes, tmp: Path, monkeypatch) -> subprocess.CompletedProcess:
    """`dumpkit analyze -` with `stdin` piped in, in this process (the command's own code,
    as the CLI runs it), its temporary folder `tmp`."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    r = CliRunner().invoke(app, ["analyze", "-", "--image-path", str(SAMPLE_BIN), "--format", "json"], input=stdin)
    # r.output: stdout and stderr as a terminal shows them (older click keeps no stderr apart)
    return subprocess.CompletedProcess([], r.exit_code, r.stdout_bytes, r.output.encode())


def _verdict(r: subprocess.CompletedProcess, named: str) -> str:
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    doc = json.loads(r.stdout)
    assert doc["dump"]["path"] == named  # reports name the stream as given
    return doc["verdict"]["headline"]


@pytest.fixture(scope="module")
def from_file() -> str:
    r = CliRunner().invoke(
        app, ["analyze", str(sample_path(PLAIN)), "--image-path", str(SAMPLE_BIN), "--format", "json"]
    )
    return _verdict(
        subprocess.CompletedProcess([], r.exit_code, r.stdout_bytes, r.output.encode()), str(sample_path(PLAIN))
    )


def _zipped(raw: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("crash/python.exe.1234.dmp", raw)
    return out.getvalue()


@pytest.mark.parametrize("packing", ["plain", "gzip", "zip"])
def test_a_dump_piped_to_standard_input_gets_the_files_verdict(tmp_path, from_file, packing, monkeypatch):
    raw = sample_path(PLAIN).read_bytes()
    piped = {"plain": raw, "gzip": gzip.compress(raw), "zip": _zipped(raw)}[packing]
    assert "unbounded recursion" in from_file
    assert _verdict(_piped(piped, tmp_path, monkeypatch), "-") == from_file
    assert list(tmp_path.iterdir()) == []  # no private copy left behind


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_fifo_is_read_once_and_not_waited_on_forever(tmp_path, from_file):
    fifo = tmp_path / "crash.dmp"
    os.mkfifo(fifo)
    raw = sample_path(PLAIN).read_bytes()

    def feed() -> None:
        with open(fifo, "wb") as f:
            f.write(raw)

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    spool = tmp_path / "tmp"
    spool.mkdir()
    assert _verdict(_analyze(str(fifo), spool), str(fifo)) == from_file
    writer.join(10)
    assert list(spool.iterdir()) == []


@pytest.mark.parametrize(
    "stdin,message",
    [
        (b"", "-: the stream is empty, not a minidump"),
        (
            b"\0" * 4096,
            "-: not a minidump (it starts with b'\\x00\\x00\\x00\\x00', not b'MDMP'); nothing more was read",
        ),
    ],
    ids=["empty", "zeros"],
)
def test_what_is_no_dump_is_one_line_and_exit_2(tmp_path, stdin, message, monkeypatch):
    r = _piped(stdin, tmp_path, monkeypatch)
    assert r.returncode == 2
    assert r.stderr.decode().strip() == f"dumpkit: error: {message}"


def test_a_stream_past_memory_goes_to_a_private_copy_and_stops_at_its_bound(tmp_path):
    raw = sample_path(PLAIN).read_bytes()
    copy = tmp_path / "copy.dmp"
    # past `in_memory`: every byte lands in the copy
    assert streamed._take(io.BytesIO(raw[1:]), raw[:1], str(copy), len(raw) * 2, 1000) is None
    assert copy.read_bytes() == raw
    # within it: the bytes, no file
    assert streamed._take(io.BytesIO(raw[1:]), raw[:1], str(tmp_path / "none.dmp"), len(raw), len(raw)) == raw
    assert not (tmp_path / "none.dmp").exists()
    with pytest.raises(DumpError, match="more than 32 GiB"):
        streamed._counted(streamed.MAX_UNPACKED + 1, streamed.MAX_UNPACKED)
    with pytest.raises(DumpError, match="past the 1 MiB its minidump header and streams account for"):
        streamed._counted((1 << 20) + streamed.UNACCOUNTED + 1, (1 << 20) + streamed.UNACCOUNTED)


@pytest.mark.skipif(os.name != "posix", reason="/dev/zero")
def test_dev_zero_is_refused_from_its_first_bytes(tmp_path):
    r = _analyze("/dev/zero", tmp_path)
    assert r.returncode == 2 and b"not a minidump" in r.stderr and b"nothing more was read" in r.stderr
