"""Hostile bundles (issue #14 item 7) through the real CLI: a bad manifest, ranges that
overlap, a path as a member name, zip bombs, a truncated member... each gets exactly one
line on stderr naming the file, exit 2, within the memory and time limits the damaged-dump
corpus runs under. Then a structure-aware fuzz of the bundle reader, in-process: the only
exception it may raise is DumpError."""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import time
import zipfile
from pathlib import Path
from typing import Callable, Dict

import pytest

from tests.support.samples import SAMPLE_BIN, sample_path
from tests.support.measured import MAX_RSS_KB, MAX_SECONDS, run_cli

pytestmark = pytest.mark.slow  # the full run's (CI's); `-m "not slow"` leaves it out


def _members(path: Path) -> Dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {i.filename: zf.read(i) for i in zf.infolist()}


def _zip(members: Dict[str, bytes], compress=zipfile.ZIP_LZMA) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=compress) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    from tests.support.bundles import write

    out = tmp_path_factory.mktemp("good") / "good.dkb"
    write(sample_path("null_deref.dmp"), out, [str(SAMPLE_BIN)])
    return out


def _with_manifest(edit: Callable[[dict], None]) -> Callable[[Dict[str, bytes]], bytes]:
    def make(m: Dict[str, bytes]) -> bytes:
        doc = json.loads(m["manifest.json"])
        edit(doc)
        return _zip({**m, "manifest.json": json.dumps(doc).encode()})

    return make


def _overlap(doc):
    mod = next(x for x in doc["modules"] if len(x["ranges"]) >= 2)
    a, b = mod["ranges"][0], mod["ranges"][1]
    b[0] = a[0] + a[1] - 4096  # starts inside the range before it
    b[1] += 4096


def _bomb_declared_small(m):
    """dump.dmp's header says 2 KiB; its stream inflates to 512 MiB of zeros."""
    raw = _zip({**m, "dump.dmp": bytes(512 << 20)})
    info = zipfile.ZipFile(io.BytesIO(raw)).getinfo("dump.dmp")
    data = bytearray(raw)
    # the declared (uncompressed) size, in the local header and in the central directory
    cd = raw.find(b"PK\x01\x02", info.header_offset)
    while cd >= 0 and raw[cd + 46 : cd + 46 + 8] != b"dump.dmp":
        cd = raw.find(b"PK\x01\x02", cd + 4)
    data[cd + 24 : cd + 28] = (2048).to_bytes(4, "little")
    data[info.header_offset + 22 : info.header_offset + 26] = (2048).to_bytes(4, "little")
    return bytes(data)


def _pdb(**changes):
    """A manifest edit adding one PDB entry (format 2), with `changes` made to it."""
    entry = {
        "name": "x.pdb",
        "guid": "99FF9242-5107-143C-4C4C-44205044422E",
        "age": 1,
        "file": {"size": 8192, "sha256": "0" * 64},
        "member": "pdbs/000-x.pdb",
        "ranges": [[0, 4096]],
    }
    entry.update(changes)
    return _with_manifest(lambda d: d.update(pdbs=[entry]))


def _kept(kept):
    """A manifest edit making the bundle version 3 (--only-used-memory) with `kept` as the
    dump's kept file ranges (the key left out when `kept` is None)."""

    def edit(doc):
        doc["version"] = 3
        if kept is not None:
            doc["dump"]["kept"] = kept(doc["dump"]["size"]) if callable(kept) else kept

    return _with_manifest(edit)


def _packed(kept, size=None, member_from=None):
    """A version 4 bundle (--only-used-memory: the member holds the kept ranges back to
    back) with `kept` as the dump's kept ranges; `member_from`: the member becomes those
    bytes of the dump (its sha256 made right), else it stays the whole dump."""

    def make(m: Dict[str, bytes]) -> bytes:
        doc = json.loads(m["manifest.json"])
        doc["version"] = 4
        doc["dump"]["kept"] = kept
        if size is not None:
            doc["dump"]["size"] = size
        member = m["dump.dmp"]
        if member_from is not None:
            member = b"".join(m["dump.dmp"][off : off + n] for off, n in member_from)
            doc["dump"]["sha256"] = hashlib.sha256(member).hexdigest()
        return _zip({**m, "manifest.json": json.dumps(doc).encode(), "dump.dmp": member})

    return make


CASES: Dict[str, Callable[[Dict[str, bytes]], bytes]] = {
    "packed_member_not_the_kept_size": _packed([[0, 4096]]),
    "packed_dump_size_huge": _packed([[0, 4096]], size=1 << 50),
    "packed_kept_over_the_limit": _packed([[0, 5 << 30]], size=6 << 30),
    "packed_without_the_header": _packed([[4096, 4096]], member_from=[[4096, 4096]]),
    "manifest_dump_kept_missing": _kept(None),
    "manifest_dump_kept_not_a_list": _kept("all"),
    "manifest_dump_kept_overlap": _kept([[0, 8192], [4096, 8192]]),
    "manifest_dump_kept_past_file": _kept(lambda size: [[0, size + 1]]),
    "manifest_dump_kept_negative": _kept([[-4096, 8192]]),
    "manifest_dump_kept_not_pairs": _kept([[0, 4096, 1]]),
    "not_a_zip": lambda m: b"MDMP" + bytes(100),
    "empty_file": lambda m: b"",
    "no_manifest": lambda m: _zip({k: v for k, v in m.items() if k != "manifest.json"}),
    "manifest_not_json": lambda m: _zip({**m, "manifest.json": b"{not json"}),
    "manifest_wrong_format": _with_manifest(lambda d: d.update(format="something-else")),
    "manifest_future_version": _with_manifest(lambda d: d.update(version=99)),
    "manifest_ranges_overlap": _with_manifest(_overlap),
    "manifest_range_past_file": _with_manifest(lambda d: d["modules"][0]["ranges"].append([1 << 40, 4096])),
    "manifest_base_not_a_number": _with_manifest(lambda d: d["modules"][0].update(base="lots")),
    "manifest_dump_size_huge": _with_manifest(lambda d: d["dump"].update(size=1 << 50)),
    "manifest_member_missing": _with_manifest(lambda d: d["modules"][0].update(member="images/999-gone.dll")),
    "manifest_member_is_a_path": _with_manifest(lambda d: d["modules"][0].update(member="../../etc/passwd")),
    "manifest_pdb_guid_not_a_guid": _pdb(guid="../../x"),
    "manifest_pdb_member_is_a_path": _pdb(member="pdbs/../../x.pdb"),
    "manifest_pdb_member_missing": _pdb(),
    "manifest_pdb_range_past_file": _pdb(ranges=[[4096, 8192]]),
    "member_name_is_a_path": lambda m: _zip({**m, "../evil.dll": b"x"}),
    "member_name_absolute": lambda m: _zip({**m, "/etc/evil": b"x"}),
    "member_name_windows_path": lambda m: _zip({**m, "C:\\evil.dll": b"x"}),
    "dump_sha_differs": _with_manifest(lambda d: d["dump"].update(sha256="0" * 64)),
    "dump_member_other_bytes": lambda m: _zip({**m, "dump.dmp": m["dump.dmp"][:-1] + b"\x01"}),
    "image_member_short": lambda m: _zip({**m, next(k for k in m if k.startswith("images/")): b"abc"}),
    "zip_bomb_declared_small": _bomb_declared_small,
    "zip_bomb_image": lambda m: _zip({**m, next(k for k in m if k.startswith("images/")): bytes(256 << 20)}),
    "member_not_in_manifest": lambda m: _zip({**m, "images/999-extra.dll": b"x"}),
    "truncated_file": None,  # type: ignore[dict-item]  (made from the good bundle's bytes below)
    "duplicate_member": lambda m: _zip(m) + b"",
}


def _make(name: str, good: Path, folder: Path) -> Path:
    m = _members(good)
    if name == "truncated_file":
        data = good.read_bytes()[: good.stat().st_size // 2]
    elif name == "duplicate_member":
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_LZMA) as zf:
            for k, v in m.items():
                zf.writestr(k, v)
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                zf.writestr("dump.dmp", b"MDMP")
        data = buf.getvalue()
    else:
        data = CASES[name](m)
    path = folder / f"{name}.dkb"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_hostile_bundle_is_one_line_and_exit_2(name, good, tmp_path):
    path = _make(name, good, tmp_path)
    r = run_cli(["analyze", path, "--format", "json"])
    where = f"{name}: exit {r.code}, stderr:\n{r.stderr[-2000:]}"
    assert r.code == 2, where
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"dumpkit: error: {path}: "), where
    assert "Traceback" not in r.stderr and r.stdout == ""
    assert r.seconds < MAX_SECONDS and r.max_rss_kb < MAX_RSS_KB, (r.seconds, r.max_rss_kb)


def test_what_the_errors_say(good, tmp_path):
    said = {}
    for name in ("manifest_ranges_overlap", "member_name_is_a_path", "zip_bomb_declared_small", "truncated_file"):
        said[name] = run_cli(["info", _make(name, good, tmp_path)]).stderr
    assert "overlaps" in said["manifest_ranges_overlap"]
    assert "'../evil.dll' is not a name a dumpkit bundle uses" in said["member_name_is_a_path"]
    assert "2048 bytes; the manifest says" in said["zip_bomb_declared_small"]
    said["manifest_dump_kept_overlap"] = run_cli(["info", _make("manifest_dump_kept_overlap", good, tmp_path)]).stderr
    assert "dump.kept[1] at 0x1000 overlaps" in said["manifest_dump_kept_overlap"]
    assert "zip" in said["truncated_file"]


# ----------------------------------------------------------------- fuzz
def _mutate_manifest(doc, rng: random.Random) -> None:
    """Change one field of the manifest to a hostile value."""
    values = [
        None,
        -1,
        0,
        1,
        1 << 31,
        1 << 63,
        1 << 70,
        "0x",
        "0xffffffffffffffffff",
        "",
        "x" * 5000,
        [],
        {},
        True,
        1.5,
    ]
    target = rng.choice(["dump", "modules", "top"])
    if target == "top" or not doc.get("modules"):
        key = rng.choice(["format", "version", "dumpkit_version", "redacted", "modules", "dump"])
        doc[key] = rng.choice(values)
    elif target == "dump":
        doc["dump"][rng.choice(["size", "sha256", "member", "name"])] = rng.choice(values)
    else:
        mod = rng.choice(doc["modules"])
        key = rng.choice(["name", "base", "timestamp", "size_of_image", "path", "member", "ranges", "file"])
        if key == "ranges" and mod["ranges"] and rng.random() < 0.7:
            r = rng.choice(mod["ranges"])
            r[rng.randrange(2)] = rng.choice([v for v in values if isinstance(v, int)] + [r[0] + 1, r[1] - 1])
        elif key == "file":
            mod["file"][rng.choice(["size", "sha256", "found_in"])] = rng.choice(values)
        else:
            mod[key] = rng.choice(values)


def test_bundle_reader_fuzz(good, tmp_path):
    """~20 s of mutations: manifest fields, member bytes and the zip's own bytes. open_bundle
    either gives a Target that analyses, or raises DumpError with one line."""
    from dumpkit.sources.bundle import open_bundle
    from dumpkit.engine import Options, analyze
    from dumpkit.target import DumpError

    seconds = float(os.environ.get("DUMPKIT_BUNDLE_FUZZ_SECONDS", "20"))
    rng = random.Random(int(os.environ.get("DUMPKIT_FUZZ_SEED", "1414")))
    members = _members(good)
    raw = good.read_bytes()
    path = tmp_path / "fuzz.dkb"
    started = time.monotonic()
    execs = opened = 0
    while time.monotonic() - started < seconds:
        kind = rng.randrange(3)
        if kind == 0:
            doc = json.loads(members["manifest.json"])
            for _ in range(rng.randint(1, 3)):
                _mutate_manifest(doc, rng)
            data = _zip({**members, "manifest.json": json.dumps(doc).encode()})
        elif kind == 1:
            name = rng.choice(sorted(members))
            blob = bytearray(members[name])
            for _ in range(rng.randint(1, 8)):
                if blob:
                    blob[rng.randrange(len(blob))] = rng.randrange(256)
            data = _zip({**members, name: bytes(blob)})
        else:
            blob = bytearray(raw)
            for _ in range(rng.randint(1, 16)):
                blob[rng.randrange(len(blob))] = rng.randrange(256)
            data = bytes(blob)
        path.write_bytes(data)
        execs += 1
        try:
            target = open_bundle(str(path))
        except DumpError as e:
            assert "\n" not in str(e)
            continue
        opened += 1
        analyze(target, Options(max_frames=20_000, other_thread_max_frames=500), problems=target.soft_errors)
    assert execs > 10 and opened >= 1, (execs, opened)
