"""Bundles on the sample dumps: what a bundle holds, that it is the same bytes every time,
that a read outside the captured pages says "not in the bundle" (never zeros), the CLI's
front door (write, analyze, stack, info) and --redact."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest

from tests.support.bundles import write
from tests.support.samples import analyse_file, SAMPLE_BIN, run_cli, sample_path

DUMP = "recursion_cycle3.dmp"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "cycle3.dkb"
    write(sample_path(DUMP), out, [str(SAMPLE_BIN)])
    return out


def test_a_bundle_is_a_zip_with_a_manifest_the_dump_and_one_member_per_image(bundle):
    with zipfile.ZipFile(bundle) as zf:
        names = zf.namelist()
        manifest = json.loads(zf.read("manifest.json"))
        assert zf.read("dump.dmp") == sample_path(DUMP).read_bytes()
        methods = {i.filename: i.compress_type for i in zf.infolist()}
        assert methods.pop("manifest.json") == zipfile.ZIP_DEFLATED  # any zip tool reads it
        assert set(methods.values()) == {zipfile.ZIP_LZMA}
        for m in manifest["modules"]:
            assert zf.getinfo(m["member"]).file_size == sum(n for _, n in m["ranges"])
    assert names[:2] == ["manifest.json", "dump.dmp"]
    assert (manifest["format"], manifest["version"]) == ("dumpkit-bundle", 2)
    assert manifest["pdbs"] == []  # its images name their code without PDBs
    modules = {m["name"]: m for m in manifest["modules"]}
    # opkernels.dll (the recursion) came from --image-path: its unwind data is in the bundle
    ok = modules["opkernels.dll"]
    image = SAMPLE_BIN / "opkernels.dll"
    assert ok["file"]["size"] == image.stat().st_size
    assert ok["file"]["found_in"] in ("image-path", "recorded-path")  # its recorded Z:\\ path may exist here
    import hashlib

    assert ok["file"]["sha256"] == hashlib.sha256(image.read_bytes()).hexdigest()
    # pages, not the file: every range starts on a 4 KiB boundary, and far less than the file is kept
    assert all(off % 4096 == 0 for off, _ in ok["ranges"])
    assert sum(n for _, n in ok["ranges"]) < ok["file"]["size"]


def test_the_same_dump_and_images_give_the_same_bundle_bytes(bundle, tmp_path):
    again = tmp_path / "again.dkb"
    write(sample_path(DUMP), again, [str(SAMPLE_BIN)])
    assert again.read_bytes() == bundle.read_bytes()


def test_a_read_outside_the_captured_pages_is_not_in_the_bundle_never_zeros(bundle):
    from dumpkit.sources.bundle import NotInBundle, open_bundle
    from dumpkit.pe import PEError

    target = open_bundle(str(bundle))
    module = next(m for m in target.modules if m.name == "opkernels.dll")
    backing, where = target.image_store.backing_for(module)
    entry = next(e for e in target.bundle.images if e.name == "opkernels.dll")
    original = (SAMPLE_BIN / "opkernels.dll").read_bytes()
    # captured: the original file's bytes
    off, n = entry.ranges[0]
    assert backing.read(off, n) == original[off : off + n]
    # a page that was not read: an error that says so, naming the member
    gaps = [a + b for a, b in entry.ranges if a + b < entry.file_size and (a + b) not in {o for o, _ in entry.ranges}]
    assert gaps, entry.ranges
    with pytest.raises(NotInBundle, match="not in the bundle") as e:
        backing.read(gaps[0], 16)
    assert where in str(e.value) and isinstance(e.value, PEError)
    # a read that starts captured and runs past the captured range is refused whole
    last_off, last_n = entry.ranges[-1]
    if last_off + last_n < entry.file_size:
        with pytest.raises(NotInBundle):
            backing.read(last_off + last_n - 8, 16)
    # past the end of the file: the error a file gives
    with pytest.raises(PEError, match="past the end of the file"):
        backing.read(entry.file_size - 4, 8)


def test_an_image_read_the_analysis_did_not_make_is_reported_not_invented(bundle):
    """Through the PE reader: an RVA whose page was not captured raises, so the walker and
    analyses treat it as unreadable (as with a dump's missing memory)."""
    from dumpkit.sources.bundle import NotInBundle, open_bundle
    from dumpkit.images import ImageLocator

    target = open_bundle(str(bundle))
    locator = ImageLocator(store=target.image_store, use_recorded_path=False)
    module = next(m for m in target.modules if m.name == "opkernels.dll")
    found = locator.locate(module, None)
    assert found is not None and found.source == "bundle" and found.detail.startswith("cycle3.dkb:images/")
    image = found.image
    captured = {off // 4096 for e in target.bundle.images if e.name == "opkernels.dll" for off, n in e.ranges}
    rvas = [s.rva for s in image.sections if s.raw_size and (s.raw_offset // 4096) not in captured]
    assert rvas, "every section's first page was read"
    with pytest.raises(NotInBundle):
        image.read_rva(rvas[0], 4)


PDB_DUMP = "pdb_static_cycle.dmp"  # a recursion through static functions only its PDB names


@pytest.fixture(scope="module")
def pdb_bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("pdbbundle") / "static.dkb"
    write(sample_path(PDB_DUMP), out, [str(SAMPLE_BIN)])
    return out


def test_a_bundle_carries_the_pdb_pages_the_analysis_read_named_by_guid_and_age(pdb_bundle):
    import hashlib

    from dumpkit.sources.bundle import open_bundle
    from dumpkit.symbols.pdb import open_pdb

    with zipfile.ZipFile(pdb_bundle) as zf:
        manifest = json.loads(zf.read("manifest.json"))
        names = zf.namelist()
        pdbs = {p["name"]: p for p in manifest["pdbs"]}
        assert set(pdbs) == {"pdbhost.pdb", "pdbkernels.pdb"}
        for name, entry in pdbs.items():
            original = (SAMPLE_BIN / "pdb" / name).read_bytes()
            member = zf.read(entry["member"])
            assert entry["member"].startswith("pdbs/") and entry["member"] in names
            assert entry["file"] == {"size": len(original), "sha256": hashlib.sha256(original).hexdigest()}
            # exactly the ranges' bytes of the original file, and fewer than all of them
            assert member == b"".join(original[off : off + n] for off, n in entry["ranges"])
            assert all(off % 4096 == 0 for off, _ in entry["ranges"]) and len(member) < len(original)
            # named as the image's CodeView record names it
            info = open_pdb(str(SAMPLE_BIN / "pdb" / name)).info
            assert (entry["guid"], entry["age"]) == (info.guid, info.age)
    target = open_bundle(str(pdb_bundle))
    module = next(m for m in target.modules if m.name == "pdbkernels.dll")
    # what the dump's module record says, or (Wine records none) the image's own
    from dumpkit.images import ImageLocator, ImageProvider

    provider = ImageProvider(
        target, ImageLocator(store=target.image_store, use_recorded_path=False), problems=target.soft_errors
    )
    cv = module.cv_record or provider.located(module).image.codeview()  # type: ignore[union-attr]
    assert target.image_store.pdb_for(cv) is not None
    assert provider.pdb(module) is not None and provider.pdb(module).path.endswith("static.dkb:pdbs/001-pdbkernels.pdb")


def test_a_pdb_read_outside_the_captured_pages_is_not_in_the_bundle(pdb_bundle):
    from dumpkit.sources.bundle import PdbNotInBundle, open_bundle
    from dumpkit.symbols.pdb import PdbError
    from dumpkit.target import CodeViewRecord

    target = open_bundle(str(pdb_bundle))
    entry = next(p for p in target.bundle.pdbs if p.name == "pdbkernels.pdb")
    source, where = target.image_store.pdb_for(CodeViewRecord(entry.name, entry.guid.lower(), entry.age))
    original = (SAMPLE_BIN / "pdb" / entry.name).read_bytes()
    off, n = entry.ranges[0]
    assert source.read(off, n) == original[off : off + n]
    gap = next(a + b for a, b in entry.ranges if a + b < entry.file_size and a + b not in {o for o, _ in entry.ranges})
    with pytest.raises(PdbNotInBundle, match="not in the bundle") as e:
        source.read(gap, 16)
    assert where in str(e.value) and isinstance(e.value, PdbError)
    with pytest.raises(PdbError, match="past the end of the file"):
        source.read(entry.file_size - 4, 8)
    # another build's PDB (other age) is not served for this one
    assert target.image_store.pdb_for(CodeViewRecord(entry.name, entry.guid, entry.age + 1)) is None


def test_a_version_1_bundle_without_pdbs_still_reads(pdb_bundle, tmp_path):
    """Bundles written before PDBs travelled (format 1):
    read as they were, their PDB-named frames falling back to what the image names."""
    from dumpkit.sources.bundle import open_bundle

    with zipfile.ZipFile(pdb_bundle) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    doc = json.loads(members["manifest.json"])
    doc["version"] = 1
    del doc["pdbs"]
    old = tmp_path / "v1.dkb"
    with zipfile.ZipFile(old, "w", compression=zipfile.ZIP_LZMA) as zf:
        zf.writestr("manifest.json", json.dumps(doc))
        for name, data in members.items():
            if name != "manifest.json" and not name.startswith("pdbs/"):
                zf.writestr(name, data)
    r = run_cli("stack", old)
    assert r.returncode == 0, r.stderr
    assert "pdbkernels.dll!func_" in r.stdout and "parse_list" not in r.stdout
    r = run_cli("stack", pdb_bundle)
    assert "pdbkernels.dll!parse_list+0x3a" in r.stdout
    assert open_bundle(str(old)).bundle.version == 1


def test_a_bundle_without_the_pdb_line_records_keeps_the_pdb_names(tmp_path, monkeypatch):
    """A bundle written by a dumpkit that did not read line records (before source lines
    were shown) holds no line pages: its frames keep their PDB names, lose their lines,
    and the report says why once per module."""
    from dumpkit.engine import Options
    from dumpkit.symbols.pdb import PdbSymbols

    old = tmp_path / "no-lines.dkb"
    with monkeypatch.context() as m:
        m.setattr(PdbSymbols, "line_at", lambda self, rva: None)  # the older writer
        write(sample_path(PDB_DUMP), old, [str(SAMPLE_BIN)])
    r = analyse_file(str(old), Options())
    frames = next(t for t in r.threads if t.is_crashing).frames
    assert frames[0].symbol.startswith("pdbkernels.dll!parse_list+") and frames[0].source is None
    said = [e for e in r.soft_errors if "source lines are not used" in e]
    assert said and all("not in the bundle" in e for e in said)
    assert not [e for e in r.soft_errors if "names are not used" in e]


@pytest.mark.slow
def test_cli_bundle_then_analyze_stack_and_info_without_images(tmp_path):
    out = tmp_path / "c3.dkb"
    r = run_cli("bundle", sample_path(DUMP), "--image-path", SAMPLE_BIN, "-o", out)
    assert r.returncode == 0, r.stderr
    first = r.stdout.splitlines()[0]
    assert first.startswith(f"wrote {out}: ") and "holding the dump (recursion_cycle3.dmp, 1.2 MiB)" in first
    assert "opkernels.dll: " in r.stdout and "-path)" in r.stdout
    assert "verdict: Stack overflow: unbounded recursion" in r.stdout
    # wide enough that no line wraps: the two paths differ in length (and with where the
    # test's temporary folder is), which would move the wrapping of the lines naming them
    plain = run_cli("analyze", sample_path(DUMP), "--image-path", SAMPLE_BIN, "--width", "1000")
    bundled = run_cli("analyze", out, "--width", "1000")
    assert bundled.returncode == plain.returncode == 0, bundled.stderr
    # the same report, the bundle named where the dump was
    assert bundled.stdout == plain.stdout.replace(str(sample_path(DUMP)), str(out))
    s = run_cli("stack", out, "--json")
    assert s.returncode == 0, s.stderr
    sources = {m["name"]: m["image_source"] for m in json.loads(s.stdout)["modules"] if m["image_source"]}
    assert sources["opkernels.dll"].startswith("bundle: c3.dkb:images/")
    i = run_cli("info", out)
    assert i.returncode == 0 and str(out) in i.stdout and "ThreadListStream" in i.stdout


@pytest.mark.slow
def test_cli_bundle_refuses_to_overwrite_its_own_input(tmp_path, bundle):
    dump = tmp_path / "d.dmp"
    dump.write_bytes(sample_path("null_deref.dmp").read_bytes())
    r = run_cli("bundle", dump, "-o", dump)
    assert r.returncode == 2 and "refusing to overwrite" in r.stderr
    assert dump.read_bytes() == sample_path("null_deref.dmp").read_bytes()
    copy = tmp_path / "b.dkb"
    copy.write_bytes(bundle.read_bytes())
    r = run_cli("bundle", copy, "-o", copy)
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and "refusing to overwrite" in r.stderr
    assert copy.read_bytes() == bundle.read_bytes()


@pytest.mark.slow
def test_cli_bundle_of_a_bundle_is_the_same_bundle(pdb_bundle, tmp_path):
    """A bundle is input to `bundle` too (to redact it, or add what --image-path gives):
    with nothing added, it holds exactly what it held, the PDB pages included, byte for byte."""
    again = tmp_path / "again.dkb"
    r = run_cli("bundle", pdb_bundle, "-o", again)
    assert r.returncode == 0, r.stderr
    assert "holding the dump (pdb_static_cycle.dmp, " in r.stdout  # the dump's name, not the bundle's
    assert "pdbkernels.pdb: " in r.stdout and "(from image-path)" in r.stdout  # where the first one found it
    assert again.read_bytes() == pdb_bundle.read_bytes()


def _misses(path: Path) -> list:
    """The image pages today's analysis asks a bundle for and does not find in it."""
    from dumpkit.engine import Options, analyze, stacks
    from tests.support.samples import open_any

    target = open_any(path)
    analyze(target, Options(), problems=target.soft_errors)
    stacks(target, Options(), list(target.threads), python=True, problems=target.soft_errors)
    return target.image_store.misses


def test_a_stale_bundle_bundled_again_with_the_image_at_hand_gets_the_pages_it_lacked(bundle, tmp_path):
    """A bundle made before the analysis read a page (an older dumpkit) lacks it; bundled
    again with --image-path, the whole image there serves, not the bundle's partial copy, and
    the new bundle holds every page. Without the image the gap stays, and is said."""
    with zipfile.ZipFile(bundle) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    manifest = json.loads(members["manifest.json"])
    ok = next(m for m in manifest["modules"] if m["name"] == "opkernels.dll")
    # its second range (the first is the header): what the walk reads of the code
    (header, (offset, size), *rest) = ok["ranges"]
    data = members[ok["member"]]
    ok["ranges"] = [header, *rest]
    members[ok["member"]] = data[: header[1]] + data[header[1] + size :]
    members["manifest.json"] = json.dumps(manifest).encode()
    stale = tmp_path / "stale.dkb"
    with zipfile.ZipFile(stale, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    gap = re.compile(r"opkernels\.dll: file offset (0x[0-9a-f]+) ")
    lacked = [int(m.group(1), 16) for m in map(gap.search, _misses(stale)) if m]
    assert any(offset <= at < offset + size for at in lacked)

    still = tmp_path / "still.dkb"
    assert run_cli("bundle", stale, "-o", still).returncode == 0
    assert _misses(still)
    mended = tmp_path / "mended.dkb"
    r = run_cli("bundle", stale, "--image-path", SAMPLE_BIN, "-o", mended)
    assert r.returncode == 0, r.stderr
    assert _misses(mended) == []
    with zipfile.ZipFile(mended) as zf:
        again = {m["name"]: m for m in json.loads(zf.read("manifest.json"))["modules"]}
    assert [offset, size] in again["opkernels.dll"]["ranges"]


@pytest.mark.slow
def test_cli_bundle_redacts_a_bundle(tmp_path):
    """The committed TensorFlow bundle, as format 1 wrote it (no PDBs; made here from the
    committed format 2 one, as the test above makes one), bundled again with --redact and
    no images: a format 2 bundle of the same images, holding the pages of them today's
    analysis reads (none the original lacks; a page the walk no longer asks about is left
    out), whose report is the original's with the user name starred."""
    from tests.support.samples import PY_SAMPLES

    committed = PY_SAMPLES / "tf_nest_flatten.dkb"
    if not committed.exists():
        pytest.skip("tf_nest_flatten.dkb not present")
    with zipfile.ZipFile(committed) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    manifest = json.loads(members.pop("manifest.json"))
    manifest["version"] = 1
    manifest.pop("pdbs", None)
    source = tmp_path / "v1.dkb"
    # stored, not compressed: the 40 MB the test reads back cost 25 s of LZMA, and a zip's
    # compression is not what makes a bundle format 1
    with zipfile.ZipFile(source, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr("manifest.json", json.dumps(manifest))
        for name, data in members.items():
            if not name.startswith("pdbs/"):
                zf.writestr(name, data)
    out = tmp_path / "r.dkb"
    r = run_cli("bundle", source, "--redact", "-o", out)
    assert r.returncode == 0, r.stderr
    assert "redacted: 1 user name(s) in paths" in r.stdout
    with zipfile.ZipFile(source) as zf:
        before = json.loads(zf.read("manifest.json"))
    with zipfile.ZipFile(out) as zf:
        after = json.loads(zf.read("manifest.json"))
        assert b"\\\x00u\x00s\x00e\x00r\x00s\x00\\\x00r\x00o\x00o\x00t\x00" not in zf.read("dump.dmp")
    assert (before["version"], after["version"]) == (1, 2) and after["dump"]["name"] == before["dump"]["name"]
    assert after["redacted"] and after["pdbs"] == []
    same = ("name", "base", "timestamp", "size_of_image", "file")
    assert [{k: m[k] for k in same} for m in after["modules"]] == [{k: m[k] for k in same} for m in before["modules"]]

    def pages(ranges):  # type: ignore[no-untyped-def]
        return {p for off, size in ranges for p in range(off // 4096, (off + size + 4095) // 4096)}

    for now, then in zip(after["modules"], before["modules"]):
        assert pages(now["ranges"]) <= pages(then["ranges"]), now["name"]
    assert sum(len(m["ranges"]) for m in after["modules"]) > 0
    original = json.loads(run_cli("analyze", source, "--format", "json").stdout)
    redacted = json.loads(run_cli("analyze", out, "--format", "json").stdout)
    from tests.golden.snapshot import _where_found

    for doc in (original, redacted):
        doc["dump"].pop("path")
        _where_found(doc)  # which bundle member served an image (named by its bundle)
        doc["environment"].pop("tensorflow_version_source")  # the dist-info folder: its path is dropped
    starred = json.dumps(original).replace("\\\\users\\\\root\\\\", "\\\\users\\\\****\\\\")
    assert redacted == json.loads(starred)


@pytest.mark.slow
def test_redact_replaces_user_names_in_paths_and_keeps_the_dump_readable(tmp_path):
    """A real dump whose modules live under C:\\users\\root (TensorFlow's per-user install)."""
    from dumpkit.sources.bundle import open_bundle
    from dumpkit.bundle.redact import redact_dump, user_names
    from dumpkit.bundle.writer import write_bundle
    from dumpkit.sources.minidump import open_dump_bytes
    from tests.support.samples import PY_SAMPLES

    source = PY_SAMPLES / "tf_nest_flatten.dkb"
    if not source.exists():
        pytest.skip("tf_nest_flatten.dkb not present")
    original = open_bundle(str(source))
    with zipfile.ZipFile(source) as zf:
        raw = zf.read("dump.dmp")
    assert user_names(original) == ["root"]
    data, said = redact_dump(raw, original)
    assert len(data) == len(raw) and "user name" in said[0]
    for needle in ("\\users\\root\\", "\\Users\\root\\", "/users/root/"):
        assert needle.encode("utf-16-le") not in data and needle.encode() not in data
    redacted = open_dump_bytes(data, "redacted.dmp")
    assert [m.path for m in redacted.modules] == [
        m.path.replace("\\users\\root\\", "\\users\\****\\") for m in original.modules
    ]
    assert redacted.soft_errors.items == original.soft_errors.items  # nothing else changed shape
    out = tmp_path / "r.dkb"
    summary = write_bundle(
        redacted, "redacted.dmp", str(out), dump_data=data, redacted=said, problems=redacted.soft_errors
    )
    assert summary.manifest.redacted == said
    with zipfile.ZipFile(out) as zf:
        assert json.loads(zf.read("manifest.json"))["redacted"] == list(said)
        assert b"r\x00o\x00o\x00t\x00\\\x00" not in zf.read("dump.dmp").replace(b"\\\x00r\x00o\x00o\x00t\x00", b"")


def test_redact_zeroes_every_copy_of_the_environment_block():
    """A full-memory dump holds the PEB and the environment block it points at."""
    from dumpkit.bundle.redact import environment_block, redact_dump
    from dumpkit.sources.minidump import open_dump_bytes
    from tests.support.samples import PY_SAMPLES

    path = PY_SAMPLES / "py_recursion_full.trimmed.dmp.xz"
    if not path.exists():
        pytest.skip("py_recursion_full.trimmed.dmp.xz not present")
    import lzma

    raw = lzma.decompress(path.read_bytes())
    target = open_dump_bytes(raw, "full.dmp")
    block = environment_block(target)
    if block is None:
        pytest.skip("this dump does not hold the environment block")
    assert "=".encode("utf-16-le") in block and block.endswith(b"\0\0\0\0")
    data, said = redact_dump(raw, target)
    assert block not in data and any("environment block" in s and "zeroed" in s for s in said)
    assert environment_block(open_dump_bytes(data, "r.dmp")) == b"\0\0\0\0"  # an empty environment


@pytest.mark.slow
def test_the_tensorflow_bundle_names_the_version_its_installation_said_without_it():
    """The TF pyd has no version resource: the version comes from the installed package
    (tensorflow-intel's RECORD lists the pyd). The installation stays where the bundle was
    written; the bundle carries what it said."""
    from tests.support.bundles import report_json
    from tests.support.samples import open_any, python_bundle, python_manifest

    facts = next((f for f in python_manifest() if f.get("tensorflow_version")), None)
    bundle = python_bundle(facts) if facts else None
    if bundle is None:
        pytest.skip("no TensorFlow sample bundle")
    env = report_json(open_any(bundle))["environment"]
    assert env["tensorflow_version"] == facts["tensorflow_version"] == "2.13.0"
    assert env["tensorflow_version_source"].startswith("installed package tensorflow-intel 2.13.0, whose RECORD")


@pytest.mark.parametrize("name", ["numpy_object_recursion.dkb", "tf_nest_flatten.dkb"])
@pytest.mark.slow
def test_the_committed_bundles_hold_every_page_todays_analysis_reads(name):
    """When the analysis starts reading other pages (a new analysis, a changed unwinder), a
    committed bundle goes stale silently: its report loses what the missing pages held.
    This catches it without the images: regenerate with sample_dumps/python/build.sh step 5,
    or mend it: `dumpkit bundle OLD.dkb --image-path FOLDER -o NEW.dkb`, FOLDER holding the
    images (a wheel's files unpacked, from `pip download` of the pinned requirement)."""
    from tests.support.samples import PY_SAMPLES

    path = PY_SAMPLES / name
    if not path.exists():
        pytest.skip(f"{name} not present")
    assert _misses(path) == []
