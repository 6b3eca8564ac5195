"""dumpkit.symbols.store as the image locator uses it: where the cache is, which symbol
paths are searched in which order, compressed store files, and what a symbol server's
answer must be before it enters the store. The servers are real HTTP servers on 127.0.0.1
(http.server in a thread) that answer with the right file, a cabinet, junk, another build,
a huge body or a dropped connection."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import socket
import sys
import threading
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Tuple

import pytest

from dumpkit.images import ImageLocator
from dumpkit.pe import PEImage
from dumpkit.symbols.store import download_limit, symbol_cache
from dumpkit.target import CodeViewRecord, Module

from tests.support.samples import SAMPLES, run_cli, sample_path
from tests.symbols.pdbfiles import other_build

DATA = Path(__file__).resolve().parent / "data"
DLL = "pdbkernels.dll"
PDB = "pdbkernels.pdb"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """dumpkit's cache folder for the test (DUMPKIT_CACHE), its symbols under it."""
    monkeypatch.setenv("DUMPKIT_CACHE", str(tmp_path / "dumpkit-cache"))
    return tmp_path / "dumpkit-cache" / "symbols"


@pytest.fixture(scope="module")
def kernels() -> Tuple[Module, CodeViewRecord, bytes, bytes]:
    """The module pdbkernels.dll as a dump records it, its CodeView record, its bytes and its PDB's."""
    path = sample_path(f"bin/pdb/{DLL}")
    with PEImage.from_file(str(path)) as img:
        cv = img.codeview()
        module = Module(DLL, "C:\\gone\\" + DLL, 0x180000000, img.size_of_image, img.timestamp)
    assert cv is not None
    return module, cv, path.read_bytes(), sample_path(f"bin/pdb/{PDB}").read_bytes()


def image_key(module: Module) -> str:
    return f"{module.timestamp:08X}{module.size:x}"


def files_under(root: Path) -> List[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()) if root.exists() else []


# ----------------------------------------------------------------------------- where
def test_cache_folder_is_dumpkit_cache_else_the_user_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DUMPKIT_CACHE", str(tmp_path / "mine"))
    assert symbol_cache() == str(tmp_path / "mine" / "symbols")
    monkeypatch.delenv("DUMPKIT_CACHE")
    if sys.platform.startswith("linux"):  # the XDG convention platformdirs follows there
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        assert symbol_cache() == str(tmp_path / "xdg" / "dumpkit" / "symbols")
        monkeypatch.delenv("XDG_CACHE_HOME")
        assert symbol_cache() == os.path.join(os.path.expanduser("~"), ".cache", "dumpkit", "symbols")


def test_a_server_without_a_cache_downloads_into_dumpkit_cache(cache):
    loc = ImageLocator(symbol_paths=["srv*https://symbols.example/x"], use_recorded_path=False)
    assert [(s.url, s.cache) for s in loc.symbol_servers] == [("https://symbols.example/x", str(cache))]


def test_download_limit_from_the_environment(monkeypatch):
    monkeypatch.delenv("DUMPKIT_MAX_DOWNLOAD", raising=False)
    assert download_limit() == 2 << 30
    for text, size in (("65536", 65536), ("64K", 64 << 10), ("500M", 500 << 20), ("4GiB", 4 << 30)):
        monkeypatch.setenv("DUMPKIT_MAX_DOWNLOAD", text)
        assert download_limit() == size
    monkeypatch.setenv("DUMPKIT_MAX_DOWNLOAD", "lots")
    with pytest.raises(ValueError, match="DUMPKIT_MAX_DOWNLOAD='lots' is not a size"):
        download_limit()


def _ntdll_store(root: Path) -> Path:
    """A store whose ntdll.dll entry is a file.ptr to Wine's ntdll of the sample dumps."""
    ntdll = SAMPLES / "bin" / "wine" / "ntdll.dll.xz"
    d = root / "ntdll.dll" / "63F14E2B361000"
    d.mkdir(parents=True)
    (d / "file.ptr").write_text(f"PATH:{ntdll}")
    return d / "file.ptr"


def test_alt_symbol_path_is_searched_before_nt_symbol_path(tmp_path):
    """As in WinDbg: both stores have ntdll.dll, the one _NT_ALT_SYMBOL_PATH names serves it."""
    dump = SAMPLES / "fastfail_abort.dmp"
    if not (dump.exists() and (SAMPLES / "bin" / "wine" / "ntdll.dll.xz").exists()):
        pytest.skip("sample dumps not present")
    alt, usual = _ntdll_store(tmp_path / "alt"), _ntdll_store(tmp_path / "usual")
    env = dict(os.environ, _NT_ALT_SYMBOL_PATH=str(tmp_path / "alt"), _NT_SYMBOL_PATH=str(tmp_path / "usual"))
    # not the recorded path: under Wine, C:\windows\system32\ntdll.dll is the very one the
    # sample was made with, and would be found before any store
    r = run_cli("stack", dump, "--json", "--no-recorded-paths", env=env)
    assert r.returncode in (0, 1), r.stderr
    sources = {m["name"]: m["image_source"] for m in json.loads(r.stdout)["modules"] if m["image_source"]}
    assert sources["ntdll.dll"].startswith(f"symbol-store: {alt} -> ")
    env["_NT_ALT_SYMBOL_PATH"] = ""
    r = run_cli("stack", dump, "--json", "--no-recorded-paths", env=env)
    sources = {m["name"]: m["image_source"] for m in json.loads(r.stdout)["modules"] if m["image_source"]}
    assert sources["ntdll.dll"].startswith(f"symbol-store: {usual} -> ")


def test_a_download_limit_that_is_not_a_size_is_one_line(tmp_path):
    dump = SAMPLES / "fastfail_abort.dmp"
    if not dump.exists():
        pytest.skip("sample dumps not present")
    r = run_cli("stack", dump, env=dict(os.environ, DUMPKIT_MAX_DOWNLOAD="a lot"))
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "dumpkit: error: DUMPKIT_MAX_DOWNLOAD='a lot' is not a size (e.g. 500M, 4G or a number of bytes)"
    ]


# ----------------------------------------------------------------------------- compressed stores
def test_compressed_image_and_pdb_in_a_local_store(tmp_path, cache, kernels):
    """symstore /compress layout: NAME/KEY/NAME.dl_ and NAME.pdb/ID/NAME.pd_ (made by gcab)
    are expanded into dumpkit's cache, checked, and used."""
    module, cv, dll, pdb = kernels
    store = tmp_path / "store"
    (store / DLL / image_key(module)).mkdir(parents=True)
    shutil.copy(DATA / "pdbkernels.dl_", store / DLL / image_key(module) / "pdbkernels.dl_")
    (store / PDB / cv.symbol_id).mkdir(parents=True)
    shutil.copy(DATA / "pdbkernels.pd_", store / PDB / cv.symbol_id / "pdbkernels.pd_")
    with ImageLocator(symbol_paths=[str(store)], use_recorded_path=False) as loc:
        found = loc.locate(module, None)
        assert found is not None and found.source == "symbol-store"
        assert found.detail.startswith(f"{store / DLL / image_key(module) / 'pdbkernels.dl_'} expanded into {cache}")
        assert (cache / DLL / image_key(module) / DLL).read_bytes() == dll
        located = loc.locate_pdb(module, cv, found.path)
        assert located.pdb is not None and located.path == str(cache / PDB / cv.symbol_id / PDB)
        assert (cache / PDB / cv.symbol_id / PDB).read_bytes() == pdb
    assert files_under(cache) == sorted([f"{DLL}/{image_key(module)}/{DLL}", f"{PDB}/{cv.symbol_id}/{PDB}"])


def test_compressed_file_of_another_build_is_refused_and_not_cached(tmp_path, cache, kernels):
    module, _, _, _ = kernels
    other = Module(DLL, module.path, module.base, module.size, module.timestamp + 1)
    d = tmp_path / "store" / DLL / image_key(other)
    d.mkdir(parents=True)
    shutil.copy(DATA / "pdbkernels.dl_", d / "pdbkernels.dl_")
    loc = ImageLocator(symbol_paths=[str(tmp_path / "store")], use_recorded_path=False)
    assert loc.locate(other, None) is None
    (why,) = loc.misses(other)
    assert why.startswith(f"symbol store: {d / 'pdbkernels.dl_'} expanded is another build (TimeDateStamp ")
    assert why.endswith("; not cached")
    assert files_under(cache) == []


# ----------------------------------------------------------------------------- servers
Behaviour = Callable[[http.server.BaseHTTPRequestHandler, str], None]


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        kind, _, rest = self.path.lstrip("/").partition("/")
        self.server.asked.append(self.path)  # type: ignore[attr-defined]
        self.server.behaviours[kind](self, rest)  # type: ignore[attr-defined]

    def send_body(self, body: bytes, length: int = -1) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(body) if length < 0 else length))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server() -> Iterator[Tuple[str, Dict[str, Behaviour], List[str]]]:
    """(base URL, behaviours by first path component, paths asked) of a server on 127.0.0.1."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.daemon_threads = True
    srv.behaviours = {}  # type: ignore[attr-defined]
    srv.asked = []  # type: ignore[attr-defined]
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", srv.behaviours, srv.asked  # type: ignore[attr-defined]
    finally:
        srv.shutdown()
        srv.server_close()


def _from_store(store: Path) -> Behaviour:
    def serve(h: _Handler, rest: str) -> None:
        path = store / rest
        if path.is_file():
            h.send_body(path.read_bytes())
        else:
            h.send_error(404)

    return serve


def _locate_from(url: str, module: Module, cache: Path, **kw) -> Tuple[ImageLocator, object]:
    loc = ImageLocator(symbol_paths=[f"srv*{cache}*{url}"], use_recorded_path=False, **kw)
    return loc, loc.locate(module, None)


def test_server_file_is_checked_then_cached(server, tmp_path, kernels):
    base, behaviours, asked = server
    module, _, dll, _ = kernels
    (tmp_path / "srv" / DLL / image_key(module)).mkdir(parents=True)
    (tmp_path / "srv" / DLL / image_key(module) / DLL).write_bytes(dll)
    behaviours["good"] = _from_store(tmp_path / "srv")
    loc, found = _locate_from(f"{base}/good", module, tmp_path / "cache")
    assert found is not None and found.source == "symbol-server"  # type: ignore[attr-defined]
    assert files_under(tmp_path / "cache") == [f"{DLL}/{image_key(module)}/{DLL}"]
    assert loc.downloads == [str(tmp_path / "cache" / DLL / image_key(module) / DLL)]


def test_server_cabinet_is_expanded_into_the_cache(server, tmp_path, kernels):
    """A server holding only NAME.dl_ (as symstore /compress leaves it) is asked for NAME,
    then NAME_; the cabinet is expanded and the image, not the cabinet, is cached."""
    base, behaviours, asked = server
    module, _, dll, _ = kernels
    (tmp_path / "srv" / DLL / image_key(module)).mkdir(parents=True)
    shutil.copy(DATA / "pdbkernels.dl_", tmp_path / "srv" / DLL / image_key(module) / "pdbkernels.dl_")
    behaviours["cab"] = _from_store(tmp_path / "srv")
    loc, found = _locate_from(f"{base}/cab", module, tmp_path / "cache")
    assert found is not None and found.source == "symbol-server"  # type: ignore[attr-defined]
    assert asked == [f"/cab/{DLL}/{image_key(module)}/{DLL}", f"/cab/{DLL}/{image_key(module)}/pdbkernels.dl_"]
    assert (tmp_path / "cache" / DLL / image_key(module) / DLL).read_bytes() == dll
    assert files_under(tmp_path / "cache") == [f"{DLL}/{image_key(module)}/{DLL}"]


def _refused(loc: ImageLocator, module: Module, url: str) -> str:
    (why,) = loc.misses(module)
    assert why.startswith(f"symbol server {url}: ")
    (problem,) = [p for p in loc.search_problems() if p.startswith(f"symbol server {url}: failed (")]
    assert DLL in problem
    return why


def test_junk_answer_is_refused_and_not_cached(server, tmp_path, kernels):
    """The issue's case: a server answering every request with 4 KiB of "MZ" and zeros."""
    base, behaviours, _ = server
    module = kernels[0]
    behaviours["junk"] = lambda h, rest: h.send_body(b"MZ" + bytes(4094))
    loc, found = _locate_from(f"{base}/junk", module, tmp_path / "cache")
    assert found is None
    why = _refused(loc, module, f"{base}/junk")
    assert f"its {DLL} is not a PE image" in why and why.endswith("; not cached")
    assert files_under(tmp_path / "cache") == []


def test_wrong_build_is_refused_with_what_it_is(server, tmp_path, kernels):
    base, behaviours, _ = server
    module, _, dll, _ = kernels
    wrong = bytearray(dll)
    pe = int.from_bytes(dll[0x3C:0x40], "little")
    wrong[pe + 8 : pe + 12] = (0x12345678).to_bytes(4, "little")  # another build's TimeDateStamp
    behaviours["wrong"] = lambda h, rest: h.send_body(bytes(wrong))
    loc, found = _locate_from(f"{base}/wrong", module, tmp_path / "cache")
    assert found is None
    why = _refused(loc, module, f"{base}/wrong")
    assert f"its {DLL} is another build (TimeDateStamp 0x12345678 SizeOfImage {module.size:#x}" in why
    assert files_under(tmp_path / "cache") == []


def test_wrong_pdb_is_refused_and_not_cached(server, tmp_path, kernels):
    base, behaviours, _ = server
    module, cv, _, _ = kernels
    wrong = other_build(sample_path(f"bin/pdb/{PDB}"), tmp_path / "other" / PDB, guid_byte=0x42).read_bytes()
    behaviours["wrongpdb"] = lambda h, rest: h.send_body(wrong)
    loc = ImageLocator(symbol_paths=[f"srv*{tmp_path / 'cache'}*{base}/wrongpdb"], use_recorded_path=False)
    located = loc.locate_pdb(module, cv, None)
    assert located.pdb is None
    (why,) = [r for r in located.refused if r.startswith(f"symbol server {base}/wrongpdb: ")]
    assert f"its {PDB} is another build (GUID " in why and why.endswith("; not cached")
    assert files_under(tmp_path / "cache") == []


def test_huge_answers_are_capped(server, tmp_path, kernels):
    """A body longer than the cap is refused: at once when its length is declared, at the
    cap when it is not (the server would send forever)."""
    base, behaviours, _ = server
    module = kernels[0]
    behaviours["declared"] = lambda h, rest: h.send_body(b"MZ", length=10 << 30)

    def endless(h: _Handler, rest: str) -> None:
        h.protocol_version = "HTTP/1.0"  # no length: the body ends when the connection does
        h.send_response(200)
        h.end_headers()
        try:
            for _ in range(1024):  # 64 MiB at most, far past the cap
                h.wfile.write(b"MZ" + bytes(65534))
        except OSError:
            pass  # the client hung up at its cap

    behaviours["endless"] = endless
    limit = 1 << 20
    loc, found = _locate_from(f"{base}/declared", module, tmp_path / "cache", max_download=limit)
    assert found is None
    assert f"is 10,737,418,240 bytes, more than the limit of {limit:,} (DUMPKIT_MAX_DOWNLOAD); not fetched" in (
        _refused(loc, module, f"{base}/declared")
    )
    loc, found = _locate_from(f"{base}/endless", module, tmp_path / "cache", max_download=limit)
    assert found is None
    assert f"sent more than the limit of {limit:,} bytes (DUMPKIT_MAX_DOWNLOAD); not cached" in (
        _refused(loc, module, f"{base}/endless")
    )
    assert files_under(tmp_path / "cache") == []


def test_dropped_connection_leaves_nothing_behind(server, tmp_path, kernels):
    base, behaviours, _ = server
    module, _, dll, _ = kernels

    def drop(h: _Handler, rest: str) -> None:
        h.send_body(dll[: len(dll) // 2], length=len(dll))
        h.wfile.flush()
        h.connection.shutdown(socket.SHUT_RDWR)
        h.close_connection = True

    behaviours["drop"] = drop
    loc, found = _locate_from(f"{base}/drop", module, tmp_path / "cache")
    assert found is None
    why = _refused(loc, module, f"{base}/drop")
    assert f"connection lost after {len(dll) // 2:,} of {len(dll):,} bytes" in why and why.endswith("; not cached")
    assert files_under(tmp_path / "cache") == []


def test_junk_left_in_the_cache_is_replaced_by_a_checked_download(server, tmp_path, kernels):
    """Older dumpkits cached whatever a server sent: a file under the key that is not the
    build the key names is downloaded again, and replaced once the download is checked."""
    base, behaviours, _ = server
    module, _, dll, _ = kernels
    (tmp_path / "srv" / DLL / image_key(module)).mkdir(parents=True)
    (tmp_path / "srv" / DLL / image_key(module) / DLL).write_bytes(dll)
    behaviours["good"] = _from_store(tmp_path / "srv")
    cached = tmp_path / "cache" / DLL / image_key(module) / DLL
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"MZ" + bytes(4094))
    loc, found = _locate_from(f"{base}/good", module, tmp_path / "cache")
    assert found is not None and found.source == "symbol-server"  # type: ignore[attr-defined]
    assert cached.read_bytes() == dll
