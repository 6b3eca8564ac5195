"""--fetch-images against a local package index (tests/support/index_server.py): which wheel
is read, how little of it, what is accepted, and what a hostile or broken server gets
(nothing cached, one line saying why). Wheels here are built by the test around a
synthetic PE image; tests/images/test_fetch_real.py does the same with real wheels and
real dumps."""

from __future__ import annotations

import io
import os
import struct
import zipfile
from pathlib import Path
from typing import List, Optional

import pytest

from dumpkit.images.fetch.cache import ImageCache, cache_key, safe_name
from dumpkit.images.fetch.fetcher import ImageFetcher
from dumpkit.images.fetch.index import IndexFile
from dumpkit.images.fetch.pipconfig import Index, IndexConfig, public, read_pip_config, split_credentials
from dumpkit.images.fetch.published import Process, Release, Unpublished, Wheel, Windows, published, python_version
from dumpkit.images.fetch.wheels import candidates
from dumpkit.images.fetch.ziparchive import ZipError
from dumpkit.target import Module
from tests.support.index_server import IndexServer
from tests.support.synth_pe import make_sample_image

PROCESS = Process(
    python_minor=8, python_version="3.8.1", python_home="c:\\py", platform="win_amd64", embed_arch="amd64", wine=False
)
MEMBER = "synthpkg/_ext.cp38-win_amd64.pyd"
PATH = "C:\\py\\Lib\\site-packages\\synthpkg\\_ext.cp38-win_amd64.pyd"
SECRET = "s3cr3t-t0ken"


def _module(image, name: str = "_ext.cp38-win_amd64.pyd", path: str = PATH, timestamp: Optional[int] = None) -> Module:
    return Module(name, path, 0x180000000, image.size_of_image, image.timestamp if timestamp is None else timestamp, 0)


def _wheel(members: dict, metadata: str = "Name: synthpkg\nVersion: 1.0\n") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        zf.writestr("synthpkg-1.0.dist-info/METADATA", metadata)
    return buf.getvalue()


def _fetcher(srv: IndexServer, tmp_path: Path, index_url: Optional[str] = None, **kw) -> ImageFetcher:
    config = IndexConfig((split_credentials(index_url or srv.url + "/simple"),))
    return ImageFetcher(
        PROCESS, kw.pop("limit", 1 << 30), ImageCache(str(tmp_path / "cache")), config=lambda: config, **kw
    )


def _cached(tmp_path: Path) -> List[str]:
    root = tmp_path / "cache"
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()) if root.exists() else []


@pytest.fixture
def srv():
    with IndexServer() as s:
        yield s


# ----------------------------------------------------------------------------- pure parts
def test_pip_configuration_gives_the_indexes_and_hides_their_credentials():
    values = {
        "index-url": f"https://alice:{SECRET}@mirror.example/simple/",
        "extra-index-url": "https://second.example/simple https://mirror.example/simple",
        "cert": "/etc/ca.pem",
        "trusted-host": "Insecure.Example",
        "timeout": "7",
    }
    config = read_pip_config(values.get, None)
    assert [i.url for i in config.indexes] == ["https://mirror.example/simple", "https://second.example/simple"]
    assert config.indexes[0].username == "alice" and config.indexes[0].password == SECRET
    assert SECRET not in repr(config) and config.cert == "/etc/ca.pem" and config.trusted_hosts == ("insecure.example",)
    assert config.timeout == 7.0 and config.problem is None
    assert public(f"https://alice:{SECRET}@mirror.example/x") == "https://mirror.example/x"
    assert read_pip_config({"no-index": "true"}.get, None).indexes == ()
    # no pip, no index-url: nothing is guessed
    assert read_pip_config(lambda _: None, None).problem is not None


def test_pip_own_configuration_is_read(monkeypatch, tmp_path):
    pytest.importorskip("pip", reason="pip's own files are read through pip (the py38 lane's Python has none)")
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = https://from-file.example/simple\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "https://from-env.example/simple")
    urls = [i.url for i in read_pip_config().indexes]
    assert urls[0] == "https://from-file.example/simple" and "https://from-env.example/simple" in urls
    monkeypatch.setenv("PIP_INDEX_URL", "https://env-wins.example/simple")
    assert read_pip_config().indexes[0].url == "https://env-wins.example/simple"


def test_where_each_module_is_published():
    site = published(Module("_m.pyd", PATH, 0, 0x1000, 1), PROCESS)
    assert site == Wheel(("synthpkg",), MEMBER)  # the path says where in the wheel, not the name
    libs = published(Module("x.dll", "C:\\py\\Lib\\site-packages\\numpy.libs\\x.dll", 0, 1, 1), PROCESS)
    assert isinstance(libs, Wheel) and libs.projects == ("numpy",) and libs.member == "numpy.libs/x.dll"
    cv2 = published(Module("cv2.pyd", "C:\\py\\Lib\\site-packages\\cv2\\cv2.pyd", 0, 1, 1), PROCESS)
    assert isinstance(cv2, Wheel) and cv2.projects[0] == "opencv-python"
    dll = published(Module("python38.dll", "C:\\Py\\python38.dll", 0, 1, 1, file_version="3.8.6121.1013"), PROCESS)
    assert isinstance(dll, Release) and dll.version == "3.8.6rc1"
    assert dll.url.endswith("/3.8.6/python-3.8.6rc1-embed-amd64.zip")
    assert isinstance(published(Module("ntdll.dll", "C:\\Windows\\System32\\ntdll.dll", 0, 1, 1), PROCESS), Windows)
    wine = Process(8, "3.8.1", "c:\\py", "win_amd64", "amd64", True)
    assert isinstance(published(Module("ntdll.dll", "C:\\windows\\system32\\ntdll.dll", 0, 1, 1), wine), Unpublished)
    assert isinstance(published(Module("app.dll", "D:\\app\\app.dll", 0, 1, 1), PROCESS), Unpublished)
    assert python_version("3.11.9150.1013") == "3.11.9" and python_version("14.29.30133.0") is None


def test_candidates_fit_the_process_and_come_nearest_after_the_link_time():
    t = 1_700_000_000
    files = [
        IndexFile("pkg-1.0-cp38-cp38-win_amd64.whl", "u1", t - 90 * 86400),
        IndexFile("pkg-1.1-cp38-cp38-win_amd64.whl", "u2", t + 3600),
        IndexFile("pkg-1.2-cp38-cp38-win_amd64.whl", "u3", t + 30 * 86400),
        IndexFile("pkg-1.1-cp39-cp39-win_amd64.whl", "x", t + 3600),  # another Python
        IndexFile("pkg-1.1-cp38-cp38-win32.whl", "x", t + 3600),  # another CPU
        IndexFile("pkg-1.1-cp38-cp38-manylinux_2_17_x86_64.whl", "x", t + 3600),
        IndexFile("pkg-1.3-cp36-abi3-win_amd64.whl", "u4", t + 60 * 86400),  # stable ABI fits
        IndexFile("pkg-1.1.tar.gz", "x", t),
    ]
    got = [f.url for f in candidates(files, "pkg", 8, "win_amd64", t)]
    assert got == ["u2", "u3", "u4", "u1"]
    # no upload times (an HTML index) or no TimeDateStamp: newest first; a pinned version leads
    untimed = [IndexFile(f.filename, f.url) for f in files]
    assert [f.url for f in candidates(untimed, "pkg", 8, "win_amd64", t)] == ["u4", "u3", "u2", "u1"]
    assert [f.url for f in candidates(untimed, "pkg", 8, "win_amd64", 0, ("1.0",))][0] == "u1"


def test_the_cache_key_never_leaves_the_cache(tmp_path):
    for bad in ("..", ".", "a/b.dll", "..\\evil.dll", "c:evil.dll", "x\0.dll", "evil.dll "):
        assert not safe_name(bad)
        assert cache_key(Module(bad, "C:\\x\\" + bad, 0, 0x1000, 5)) is None
    key = cache_key(Module("ok.dll", "C:\\x\\ok.dll", 0, 0x1000, 0x5EADBEEF))
    assert key is not None and key.key == "5EADBEEF1000"
    zero = cache_key(Module("ok.dll", "C:\\x\\ok.dll", 0, 0x1000, 0, 0x77))
    assert zero is not None and zero.key == "000000001000-00000077"  # reproducible builds: not one key for all


# ----------------------------------------------------------------------------- a local index
def test_a_wheel_is_read_by_ranges_and_its_member_kept(srv, tmp_path):
    image = make_sample_image(timestamp=0x61000000)
    filler = os.urandom(1 << 20)  # what the fetch must not download: the rest of the wheel
    wheel = _wheel({MEMBER: image.file, "synthpkg/data.bin": filler})
    path = srv.add_wheel("synthpkg", "synthpkg-1.0-cp38-cp38-win_amd64.whl", wheel, "2021-07-27T00:00:00Z")
    fetcher = _fetcher(srv, tmp_path)
    got = fetcher.fetch(_module(image), None)
    assert got is not None and Path(got).read_bytes() == image.file, fetcher.lines
    file_requests = [r for r in srv.log if r[0] == path]
    assert file_requests and all(r[1] for r in file_requests)  # every request asked for a range
    sent = sum(
        int(r[1].split("-")[1]) - int(r[1].split("=")[1].split("-")[0] or 0) + 1
        for r in file_requests
        if r[1] and r[1].split("=")[1][0] != "-"
    )
    assert sent < len(filler)  # the member's bytes and the directory, not the wheel
    assert fetcher.fetched == [("_ext.cp38-win_amd64.pyd", f"synthpkg-1.0-cp38-cp38-win_amd64.whl ({srv.url}{path})")]
    # a second run asks nobody, and knows which wheel held the build (the distribution's
    # version, for the report's environment)
    srv.log.clear()
    again = _fetcher(srv, tmp_path)
    assert again.fetch(_module(image), None) == got and srv.log == []
    assert again.origin(_module(image)) == "synthpkg-1.0-cp38-cp38-win_amd64.whl"


def test_another_build_is_refused_and_the_next_candidate_taken(srv, tmp_path):
    image = make_sample_image(timestamp=0x61000000)
    other = make_sample_image(timestamp=0x61000100)  # a rebuild: same size, another TimeDateStamp
    srv.add_wheel(
        "synthpkg", "synthpkg-1.1-cp38-cp38-win_amd64.whl", _wheel({MEMBER: other.file}), "2021-07-27T01:00:00Z"
    )
    srv.add_wheel(
        "synthpkg", "synthpkg-1.0-cp38-cp38-win_amd64.whl", _wheel({MEMBER: image.file}), "2021-07-29T00:00:00Z"
    )
    fetcher = _fetcher(srv, tmp_path)
    got = fetcher.fetch(_module(image), None)
    assert got is not None and Path(got).read_bytes() == image.file
    kept = Path(os.path.relpath(got, tmp_path / "cache"))
    assert _cached(tmp_path) == sorted([kept.as_posix(), (kept.parent / "origin").as_posix()])  # the build, its wheel
    assert (tmp_path / "cache" / kept.parent / "origin").read_text() == "synthpkg-1.0-cp38-cp38-win_amd64.whl"


def test_no_ranges_html_index_and_whole_wheels_still_work(srv, tmp_path):
    image = make_sample_image(timestamp=0x61000000)
    path = srv.add_wheel("synthpkg", "synthpkg-1.0-cp38-cp38-win_amd64.whl", _wheel({MEMBER: image.file}))
    srv.no_ranges.add(path)
    srv.html_only = True
    fetcher = _fetcher(srv, tmp_path)
    got = fetcher.fetch(_module(image), None)
    assert got is not None and Path(got).read_bytes() == image.file, fetcher.lines
    fetcher.close()  # the run ends (the locator closes its fetcher)
    assert not list((tmp_path / "cache").rglob(".dumpkit-partial-*"))  # the spooled wheel is gone


def test_a_shell_wheel_sends_the_search_to_the_distribution_it_requires(srv, tmp_path):
    """tensorflow's Windows wheels hold no .pyd: they require tensorflow-intel, which does."""
    image = make_sample_image(timestamp=0x61000000)
    shell = _wheel(
        {}, 'Name: synthpkg\nVersion: 1.0\nRequires-Dist: synthpkg-intel (==1.0) ; platform_system == "Windows"\n'
    )
    srv.add_wheel("synthpkg", "synthpkg-1.0-cp38-cp38-win_amd64.whl", shell, "2021-07-27T00:00:00Z")
    srv.add_wheel("synthpkg-intel", "synthpkg_intel-0.9-cp38-cp38-win_amd64.whl", _wheel({}), "2021-07-27T00:00:00Z")
    srv.add_wheel(
        "synthpkg-intel",
        "synthpkg_intel-1.0-cp38-cp38-win_amd64.whl",
        _wheel({MEMBER: image.file}),
        "2021-09-01T00:00:00Z",
    )
    fetcher = _fetcher(srv, tmp_path)
    got = fetcher.fetch(_module(image), None)
    assert got is not None and "synthpkg_intel-1.0" in fetcher.fetched[0][1]
    assert not any("synthpkg_intel-0.9" in r[0] for r in srv.log)  # the pinned version first


def test_timestamp_zero_is_matched_by_the_headers_the_dump_holds(srv, tmp_path):
    image = make_sample_image(timestamp=0)
    header = image.file[:4096]
    srv.add_wheel("synthpkg", "synthpkg-1.0-cp38-cp38-win_amd64.whl", _wheel({MEMBER: image.file}))
    module = _module(image, timestamp=0)
    blind = _fetcher(srv, tmp_path)
    assert blind.fetch(module, None) is None and "not identifiable" in blind.lines[0][1]
    assert _cached(tmp_path) == ["_ext.cp38-win_amd64.pyd/000000003000-00000000/miss"] or all(
        p.endswith("miss") for p in _cached(tmp_path)
    )
    for p in (tmp_path / "cache").rglob("miss"):
        p.unlink()
    seen = _fetcher(srv, tmp_path)
    assert seen.fetch(module, header) is not None, seen.lines
    forged = bytearray(header)
    forged[0x80:0x84] = b"XXXX"  # any other header byte: another build
    for p in (tmp_path / "cache").rglob("_ext*.pyd"):
        if p.is_file():
            p.unlink()
    other = _fetcher(srv, tmp_path)
    assert other.fetch(module, bytes(forged)) is None and "headers differ" in other.lines[0][1]


# ----------------------------------------------------------------------------- hostile answers
def _no_image(tmp_path: Path) -> bool:
    return not [p for p in _cached(tmp_path) if not p.endswith("/miss")]


def test_a_member_that_is_not_a_pe_image_is_refused(srv, tmp_path):
    image = make_sample_image(timestamp=0x61000000)
    srv.add_wheel("synthpkg", "synthpkg-1.0-cp38-cp38-win_amd64.whl", _wheel({MEMBER: b"MZ" + bytes(5000)}))
    fetcher = _fetcher(srv, tmp_path)
    assert fetcher.fetch(_module(image), None) is None
    assert "not a PE image" in fetcher.lines[0][1] and _no_image(tmp_path)


def _bomb(image_file: bytes) -> bytes:
    """A wheel whose member inflates far past the size its directory declares."""
    body = image_file + bytes(64 << 20)
    raw = _wheel({MEMBER: body})
    size = struct.pack("<I", len(image_file))
    old = struct.pack("<I", len(body))
    return raw.replace(old, size)  # local header and central directory alike


def test_a_zip_bomb_is_refused(srv, tmp_path):
    image = make_sample_image(timestamp=0x61000000)
    srv.add_wheel("synthpkg", "synthpkg-1.0-cp38-cp38-win_amd64.whl", _bomb(image.file))
    fetcher = _fetcher(srv, tmp_path)
    assert fetcher.fetch(_module(image), None) is None
    assert "inflates past its declared" in fetcher.lines[0][1] and _no_image(tmp_path)


def test_a_member_larger_than_the_limit_is_refused(srv, tmp_path):
    image = make_sample_image(timestamp=0x61000000)
    srv.add_wheel("synthpkg", "synthpkg-1.0-cp38-cp38-win_amd64.whl", _wheel({MEMBER: image.file}))
    fetcher = _fetcher(srv, tmp_path, limit=len(image.file) - 1)
    assert fetcher.fetch(_module(image), None) is None and _no_image(tmp_path)
    assert "limit" in fetcher.lines[0][1]


def test_a_redirect_to_another_host_is_refused(srv, tmp_path):
    image = make_sample_image(timestamp=0x61000000)
    path = srv.add_wheel("synthpkg", "synthpkg-1.0-cp38-cp38-win_amd64.whl", _wheel({MEMBER: image.file}))
    port = srv.url.rsplit(":", 1)[1]
    srv.redirect[path] = f"http://localhost:{port}/elsewhere.whl"
    fetcher = _fetcher(srv, tmp_path)
    assert fetcher.fetch(_module(image), None) is None and _no_image(tmp_path)
    assert "redirects to another host" in fetcher.lines[0][1]
    assert not any(r[0] == "/elsewhere.whl" for r in srv.log)


def test_a_body_cut_short_is_refused(srv, tmp_path):
    image = make_sample_image(timestamp=0x61000000)
    path = srv.add_wheel("synthpkg", "synthpkg-1.0-cp38-cp38-win_amd64.whl", _wheel({MEMBER: image.file}))
    srv.cut.add(path)
    fetcher = _fetcher(srv, tmp_path)
    assert fetcher.fetch(_module(image), None) is None and _no_image(tmp_path)
    assert "connection lost" in fetcher.lines[0][1] or "cut short" in fetcher.lines[0][1]
    assert not list((tmp_path / "cache").rglob(".dumpkit-partial-*"))


def test_a_module_name_that_leaves_the_cache_is_refused(srv, tmp_path):
    image = make_sample_image(timestamp=0x61000000)
    srv.add_wheel("synthpkg", "synthpkg-1.0-cp38-cp38-win_amd64.whl", _wheel({MEMBER: image.file}))
    fetcher = _fetcher(srv, tmp_path)
    evil = _module(image, name="..", path="C:\\py\\Lib\\site-packages\\synthpkg\\..")
    assert fetcher.fetch(evil, None) is None and srv.log == [] and _cached(tmp_path) == []
    assert not list(tmp_path.glob("*.pyd"))


def test_credentials_go_to_the_index_only_and_never_into_a_line(srv, tmp_path):
    srv.auth = ("alice", SECRET)
    image = make_sample_image(timestamp=0x61000000)
    srv.add_wheel("synthpkg", "synthpkg-1.0-cp38-cp38-win_amd64.whl", _wheel({MEMBER: b"MZ" + bytes(100)}))
    fetcher = _fetcher(srv, tmp_path, index_url=srv.url.replace("://", f"://alice:{SECRET}@") + "/simple")
    assert fetcher.fetch(_module(image), None) is None
    assert any(r[2] and r[0].startswith("/simple/") for r in srv.log)  # the index was asked with them
    text = repr(fetcher.lines) + repr(fetcher.fetched)
    assert SECRET not in text and "alice" not in text
    wrong = _fetcher(srv, tmp_path / "2", index_url=srv.url.replace("://", "://alice:wrong@") + "/simple")
    assert wrong.fetch(_module(image), None) is None and "HTTP 401" in wrong.lines[0][1]
    assert "wrong" not in repr(wrong.lines)


def test_offline_says_so_and_remembers_nothing(tmp_path):
    image = make_sample_image(timestamp=0x61000000)
    config = IndexConfig((Index("http://127.0.0.1:9/simple"),))  # the discard port: nothing listens
    fetcher = ImageFetcher(PROCESS, 1 << 30, ImageCache(str(tmp_path / "cache")), config=lambda: config)
    assert fetcher.fetch(_module(image), None) is None
    assert "unreachable" in fetcher.lines[0][1] and _cached(tmp_path) == []


def test_a_damaged_directory_is_refused(srv, tmp_path):
    image = make_sample_image(timestamp=0x61000000)
    raw = bytearray(_wheel({MEMBER: image.file}))
    cd = raw.rfind(b"PK\x01\x02")
    raw[cd : cd + 4] = b"XXXX"
    srv.add_wheel("synthpkg", "synthpkg-1.0-cp38-cp38-win_amd64.whl", bytes(raw))
    fetcher = _fetcher(srv, tmp_path)
    assert fetcher.fetch(_module(image), None) is None and _no_image(tmp_path)
    assert "damaged central directory" in fetcher.lines[0][1]
    assert issubclass(ZipError, Exception)


def test_parallel_fetchers_share_one_cache(srv, tmp_path):
    """Triage workers fetch into one cache at once: each gets the whole file, none a partial."""
    import threading

    image = make_sample_image(timestamp=0x61000000)
    srv.add_wheel("synthpkg", "synthpkg-1.0-cp38-cp38-win_amd64.whl", _wheel({MEMBER: image.file}))
    got: List[Optional[str]] = []

    def work() -> None:
        fetcher = _fetcher(srv, tmp_path)
        got.append(fetcher.fetch(_module(image), None))
        fetcher.close()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(got) == 4 and len(set(got)) == 1 and got[0] is not None
    assert Path(got[0]).read_bytes() == image.file
    assert not list((tmp_path / "cache").rglob(".dumpkit-partial-*"))


def test_the_progress_bar_draws_on_a_terminal_only():
    from dumpkit.commands.output import fetch_progress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert fetch_progress(io.StringIO()) is None  # a pipe or a log: nothing drawn
    out = Tty()
    draw = fetch_progress(out)
    assert draw is not None
    draw("big.pyd", 50_000_000, 100_000_000)
    draw("big.pyd", 100_000_000, 100_000_000)
    text = out.getvalue()
    assert "fetching big.pyd [" in text and "100.0 of 100.0 MB" in text and text.endswith("\n")


def test_python_orgs_pdb_package_gives_the_interpreters_pdb(srv, tmp_path):
    """python3X.dll's PDB from the release's core_pdb.msi (an MSI holding a cabinet, as
    python.org ships it), matched by GUID and age; another build's is refused."""
    from dumpkit.symbols.pdb import open_pdb
    from dumpkit.target import CodeViewRecord
    from tests.support.msi_package import compound_file, stored_cabinet
    from tests.support.samples import sample_path

    real = sample_path("bin/pdb/pdbkernels.pdb").read_bytes()
    pdb = open_pdb(str(sample_path("bin/pdb/pdbkernels.pdb")))
    cv = CodeViewRecord("D:\\a\\1\\b\\bin\\amd64\\python311.pdb", pdb.info.guid, pdb.info.age)
    pdb.close()
    msi = compound_file(stored_cabinet({"python311.pdb": real, "python3.pdb": b"MZ not a pdb"}))
    srv.files["/ftp/python/3.11.9/amd64/core_pdb.msi"] = msi
    module = Module("python311.dll", "C:\\Py\\python311.dll", 0x180000000, 0x5A0000, 0x660BDA4F, 0, "3.11.9150.1013")
    process = Process(11, "3.11.9", "c:\\py", "win_amd64", "amd64", False)

    def fetcher(root: str) -> ImageFetcher:
        f = ImageFetcher(process, 1 << 30, ImageCache(str(tmp_path / root)), config=lambda: IndexConfig(()))
        f.python_org = srv.url + "/ftp/python"
        return f

    got = fetcher("cache").fetch_pdb(module, cv)
    assert got is not None and Path(got).read_bytes() == real and Path(got).name == "python311.pdb"
    other = CodeViewRecord(cv.pdb_name, cv.guid, cv.age + 1)  # a rebuild's record
    refusing = fetcher("cache2")
    assert refusing.fetch_pdb(module, other) is None and "holds no PDB of this build" in refusing.pdb_lines[0][1]
    assert refusing.lines == []  # the image is not what was missing
    assert not [p for p in (tmp_path / "cache2").rglob("*.pdb") if p.is_file()]


def test_windows_dlls_come_from_the_symbol_server_into_the_symbol_cache(srv, tmp_path, monkeypatch):
    import dumpkit.images.fetch.published as where

    image = make_sample_image(timestamp=0x61000000)
    key = f"{image.timestamp:08X}{image.size_of_image:x}"
    srv.files[f"/symbols/ntdll.dll/{key}/ntdll.dll"] = image.file
    monkeypatch.setattr(where, "MICROSOFT_SYMBOLS", srv.url + "/symbols")
    monkeypatch.setenv("DUMPKIT_CACHE", str(tmp_path / "dk"))
    module = Module(
        "ntdll.dll", "C:\\Windows\\System32\\ntdll.dll", 0x7FF800000000, image.size_of_image, image.timestamp
    )
    fetcher = _fetcher(srv, tmp_path)
    got = fetcher.fetch(module, None)
    assert got is not None and Path(got).read_bytes() == image.file
    assert str(got).startswith(str(tmp_path / "dk" / "symbols"))  # where srv* downloads go: found by either
    wine = ImageFetcher(
        Process(8, "3.8.1", "c:\\py", "win_amd64", "amd64", True), 1 << 30, ImageCache(str(tmp_path / "c2"))
    )
    assert wine.fetch(module, None) is None and "Wine's own" in wine.lines[0][1]


def test_what_output_shows_of_a_url():
    assert public("https://u:p@mirror.example/f.whl?X-Signature=abc#sha256=00") == "https://mirror.example/f.whl"


def test_timestamp_zero_with_a_checksum_and_its_siblings_link_time(srv, tmp_path):
    """NumPy 2's .pyd files link with TimeDateStamp 0 (reproducible builds) and a Wine dump
    keeps no CodeView record nor headers: SizeOfImage and CheckSum identify the build, and
    a sibling DLL's link time (numpy.libs) puts the right release first."""
    import struct as st

    from dumpkit.images.fetch.published import process_of

    image = make_sample_image(timestamp=0)
    data = bytearray(image.file)
    opt = st.unpack_from("<I", data, 0x3C)[0] + 24
    st.pack_into("<I", data, opt + 64, 0x0004_1A2B)  # its CheckSum
    other = bytearray(data)
    st.pack_into("<I", other, opt + 64, 0x0004_1A2C)  # another build of the same size
    srv.add_wheel(
        "synthpkg", "synthpkg-2.1-cp38-cp38-win_amd64.whl", _wheel({MEMBER: bytes(other)}), "2024-08-18T00:00:00Z"
    )
    srv.add_wheel(
        "synthpkg", "synthpkg-2.0-cp38-cp38-win_amd64.whl", _wheel({MEMBER: bytes(data)}), "2024-08-26T00:00:00Z"
    )
    srv.add_wheel(
        "synthpkg", "synthpkg-2.2-cp38-cp38-win_amd64.whl", _wheel({MEMBER: bytes(other)}), "2024-12-01T00:00:00Z"
    )
    module = Module(MEMBER.rsplit("/", 1)[1], PATH, 0x180000000, image.size_of_image, 0, 0x0004_1A2B)
    sibling = Module(
        "libblas.dll", "C:\\py\\Lib\\site-packages\\synthpkg.libs\\libblas.dll", 0x1000, 0x1000, 1_724_000_000
    )
    process = process_of([module, sibling], None)
    assert process.link_time("synthpkg") == 1_724_000_000
    fetcher = ImageFetcher(
        process, 1 << 30, ImageCache(str(tmp_path / "cache")), config=lambda: IndexConfig((Index(srv.url + "/simple"),))
    )
    got = fetcher.fetch(module, None)
    assert got is not None and Path(got).read_bytes() == bytes(data), fetcher.lines
    read = [r[0] for r in srv.log if r[0].endswith(".whl")]
    assert not any("synthpkg-2.2" in r for r in read)  # the newest release was not the first tried


def test_certificates_are_checked_as_pip_checks_them(tmp_path):
    """An https index whose certificate no trusted CA signed is refused; pip's `cert`
    (a CA bundle) makes it trusted, as it does for pip."""
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    image = make_sample_image(timestamp=0x61000000)
    srv = IndexServer()
    srv.use_tls(str(cert), str(key))
    srv.add_wheel("synthpkg", "synthpkg-1.0-cp38-cp38-win_amd64.whl", _wheel({MEMBER: image.file}))
    with srv:
        untrusted = ImageFetcher(
            PROCESS,
            1 << 30,
            ImageCache(str(tmp_path / "c1")),
            config=lambda: IndexConfig((Index(srv.url + "/simple"),)),
        )
        assert untrusted.fetch(_module(image), None) is None
        assert "certificate" in untrusted.lines[0][1]
        assert not [p for p in (tmp_path / "c1").rglob("*") if p.is_file()]
        trusted = ImageFetcher(
            PROCESS,
            1 << 30,
            ImageCache(str(tmp_path / "c2")),
            config=lambda: IndexConfig((Index(srv.url + "/simple"),), cert=str(cert)),
        )
        assert trusted.fetch(_module(image), None) is not None, trusted.lines
