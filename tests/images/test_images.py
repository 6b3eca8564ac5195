"""dumpkit.images: which image a module's unwind data comes from, in DESIGN.md's order."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from dumpkit.images import ImageLocator, parse_symbol_path, windows_path_candidates
from dumpkit.images.paths import FileProbe, RememberingProbe, existing_files
from dumpkit.pe import PEImage
from dumpkit.target import MemoryNotInDump, Module

from tests.support.synth_pe import make_sample_image
from tests.support.samples import ROOT, run_cli

REPO = ROOT
SAMPLE_BIN = REPO / "sample_dumps" / "bin"


@pytest.fixture(scope="module")
def synth():
    return make_sample_image()


@pytest.fixture(scope="module")
def other_build():
    return make_sample_image(timestamp=0x11111111)  # same name and size, different build


def module_for(s, path="C:\\Program Files\\app\\synth.dll", **kw) -> Module:
    args = {"name": "synth.dll", "path": path, "base": s.image_base, "size": s.size_of_image, "timestamp": s.timestamp}
    args.update(kw)
    return Module(**args)


def no_memory(address, size):
    raise MemoryNotInDump(address, size)


def snapshot(root: Path):
    return sorted((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*"))


# ----------------------------------------------------------------------------- 1. memory
def test_dump_memory_first_when_pdata_readable(synth, tmp_path):
    loc = ImageLocator(image_paths=[str(tmp_path)])
    found = loc.locate(module_for(synth), synth.reader())
    assert found.source == "dump-memory"
    assert found.image.source == "memory"
    assert found.image.lookup_function(synth.info["f1"]).unwind_rva == synth.info["u1"]
    assert "7 entries" in found.detail
    loc.close()


def test_memory_without_pdata_is_only_a_fallback(synth, other_build, tmp_path):
    p = synth.info["pdata"]
    partial = synth.reader(missing=[(p + 12, p + 24)])  # one entry missing is enough
    # no other source: the header-only memory image is still returned, and says why
    loc = ImageLocator()
    found = loc.locate(module_for(synth), partial)
    assert found.source == "dump-memory"
    assert "not in the dump" in found.detail
    # a file at the recorded path that matches wins over it
    good = synth.write(tmp_path / "synth.dll")
    loc = ImageLocator()
    found = loc.locate(module_for(synth, path=good), partial)
    assert (found.source, found.image.path) == ("recorded-path", good)
    assert found.image.lookup_function(synth.info["f1"] + 2) is not None
    # ... but not a different build of the same DLL
    (tmp_path / "b").mkdir()
    wrong = other_build.write(tmp_path / "b" / "synth.dll")
    loc = ImageLocator()
    found = loc.locate(module_for(synth, path=wrong), partial)
    assert found.source == "dump-memory"


def test_memory_with_pdata_but_no_unwind_info_yields_to_a_matching_file(synth, tmp_path):
    """A dump can hold .pdata but not the .xdata it points at: such a memory image would
    find every function and unwind none of them, so a matching file wins."""
    x = synth.info["xdata"]
    no_xdata = synth.reader(missing=[(x, x + 0x1000)])
    (tmp_path / "img").mkdir()
    good = synth.write(tmp_path / "img" / "synth.dll")
    with ImageLocator(image_paths=[str(tmp_path / "img")], use_recorded_path=False) as loc:
        found = loc.locate(module_for(synth), no_xdata)
        assert (found.source, found.image.path) == ("image-path", good)
        f1 = found.image.lookup_function(synth.info["f1"])
        assert found.image.unwind_info(f1.unwind_rva).frame_register == 5
    # with nothing better, the memory image is kept and says what it lacks
    with ImageLocator(use_recorded_path=False) as loc:
        found = loc.locate(module_for(synth), no_xdata)
        assert found.source == "dump-memory" and "unwind info not in the dump" in found.detail


def test_memory_with_the_tables_but_no_code_yields_to_a_matching_file(synth, tmp_path):
    """A dump `dumpkit capture` wrote holds a module's tables (headers, exports, .pdata,
    .xdata) and not its code: it unwinds and names alone, but a matching file, where one is
    found, also has the code the call-site and prologue checks read."""
    t = synth.info["text"]
    no_code = synth.reader(missing=[(t, synth.info["xdata"])])
    (tmp_path / "img").mkdir()
    good = synth.write(tmp_path / "img" / "synth.dll")
    with ImageLocator(image_paths=[str(tmp_path / "img")], use_recorded_path=False) as loc:
        found = loc.locate(module_for(synth), no_code)
        assert (found.source, found.image.path) == ("image-path", good)
    with ImageLocator(use_recorded_path=False) as loc:
        found = loc.locate(module_for(synth), no_code)
        assert found.source == "dump-memory" and found.detail.endswith("entries) at 0x180000000, without its code")
        f1 = found.image.lookup_function(synth.info["f1"])
        assert found.image.unwind_info(f1.unwind_rva).frame_register == 5


def test_huge_exception_directory_in_memory_is_checked_by_sampling():
    from tests.support.synth_pe import make_big_pdata_image

    big = make_big_pdata_image(1_000_000)
    read_va = big.reader()
    sizes = []

    def counting(address, size):
        sizes.append(size)
        return read_va(address, size)

    module = Module("big.dll", "C:\\x\\big.dll", big.image_base, big.size_of_image, big.timestamp)
    with ImageLocator(use_recorded_path=False) as loc:
        found = loc.locate(module, counting)
        assert found.source == "dump-memory" and "1000000 entries" in found.detail
    assert sum(sizes) < 64 << 10, sum(sizes)  # not the 12 MB table


# ----------------------------------------------------------------------------- 2. recorded path
def test_recorded_path_windows_forms(synth, tmp_path, monkeypatch):
    if os.sep != "/":
        pytest.skip("POSIX path mapping")
    real = synth.write(tmp_path / "synth.dll")
    # Wine maps Z: to the root; Windows names are case-insensitive
    zpath = "Z:" + str(tmp_path).replace("/", "\\") + "\\SYNTH.DLL"
    found = ImageLocator().locate(module_for(synth, path=zpath), no_memory)
    assert found.source == "recorded-path"
    assert os.path.samefile(found.image.path, real)
    # C: under $WINEPREFIX/drive_c, with \\?\ prefix
    prefix = tmp_path / "wineprefix"
    (prefix / "drive_c" / "Python311" / "DLLs").mkdir(parents=True)
    synth.write(prefix / "drive_c" / "Python311" / "DLLs" / "synth.dll")
    monkeypatch.setenv("WINEPREFIX", str(prefix))
    found = ImageLocator().locate(module_for(synth, path="\\\\?\\C:\\python311\\dlls\\synth.dll"), None)
    assert found.source == "recorded-path"
    assert "drive_c" in found.image.path
    # switched off
    assert ImageLocator(use_recorded_path=False).locate(module_for(synth, path=zpath), no_memory) is None


def files_opened(monkeypatch) -> list:
    """The image files the locator opens from now on, in order."""
    import dumpkit.images.locator as locator_module

    opened: list = []

    class CountingBacking(locator_module.FileBacking):
        def __init__(self, path, *a, **kw):
            opened.append(path)
            super().__init__(path, *a, **kw)

    monkeypatch.setattr(locator_module, "FileBacking", CountingBacking)
    return opened


def test_a_wine_prefixs_file_is_tried_once_though_two_paths_name_it(synth, other_build, tmp_path, monkeypatch):
    """`dosdevices/c:` is a link to `drive_c` in every Wine prefix: a recorded C:\\ path is
    the same file by both, opened (and, when it is another build, refused) once."""
    if os.sep != "/":
        pytest.skip("Wine's layout on POSIX")
    prefix = tmp_path / "wineprefix"
    dlls = prefix / "drive_c" / "windows" / "system32"
    dlls.mkdir(parents=True)
    (prefix / "dosdevices").mkdir()
    os.symlink("../drive_c", prefix / "dosdevices" / "c:")
    other_build.write(dlls / "synth.dll")
    monkeypatch.setenv("WINEPREFIX", str(prefix))
    recorded = "C:\\Windows\\System32\\synth.dll"
    assert len(windows_path_candidates(recorded)) >= 3  # as recorded, dosdevices/c:, drive_c
    found = FileProbe().recorded(recorded)
    assert [os.path.relpath(p, prefix) for p in found] == ["dosdevices/c:/windows/system32/synth.dll"]
    opened = files_opened(monkeypatch)
    assert ImageLocator().locate(module_for(synth, path=recorded), None) is None  # another build's file
    assert len(opened) == 1, opened
    # two files are two candidates; a link to one of them is not a third
    other = other_build.write(tmp_path / "other.dll")
    os.symlink(other, tmp_path / "link.dll")
    mine = str(dlls / "synth.dll")
    assert list(existing_files([mine, str(other), str(tmp_path / "link.dll")])) == [mine, str(other)]


def test_one_run_looks_for_a_folder_once_and_for_files_at_each_question(tmp_path, monkeypatch):
    """An Unreal editor's 600 modules are recorded in a few folders: in one run (one
    locator) each folder is resolved once, a missing one answering for every file in it;
    files are still looked for at each question, and a probe that keeps nothing sees a
    folder made between two questions."""
    if os.sep != "/":
        pytest.skip("POSIX case-insensitive lookup")
    prefix = tmp_path / "wineprefix"
    (prefix / "drive_c" / "Windows" / "System32").mkdir(parents=True)
    monkeypatch.setenv("WINEPREFIX", str(prefix))
    asked: list = []
    real_exists = os.path.exists

    def counting(path):
        asked.append(str(path))
        return real_exists(path)

    monkeypatch.setattr(os.path, "exists", counting)
    run = FileProbe().for_one_run()
    for i in range(200):
        assert run.recorded(f"C:\\Game\\Binaries\\Win64\\Plugin{i}.dll") == []
    game = [p for p in asked if "/Game" in p or "/game" in p.lower()]
    assert len(game) < 40, len(game)  # not 200 modules x 2 candidates x the components
    # a file put in an existing folder during the run is found at its question
    (prefix / "drive_c" / "Windows" / "System32" / "late.dll").write_bytes(b"MZ")
    assert [os.path.basename(p) for p in run.recorded("C:\\windows\\system32\\LATE.DLL")] == ["late.dll"]
    # a probe that keeps nothing sees the folder made after its first question
    live = FileProbe()
    assert live.recorded("C:\\Game\\Binaries\\Win64\\Plugin0.dll") == []
    (prefix / "drive_c" / "Game" / "Binaries" / "Win64").mkdir(parents=True)
    (prefix / "drive_c" / "Game" / "Binaries" / "Win64" / "Plugin0.dll").write_bytes(b"MZ")
    assert [os.path.basename(p) for p in live.recorded("C:\\Game\\Binaries\\Win64\\Plugin0.dll")] == ["Plugin0.dll"]
    assert FileProbe().for_one_run().recorded("c:\\game\\binaries\\win64\\plugin0.dll")  # a new run too


def test_a_file_put_in_place_between_two_questions_is_found(synth, tmp_path, monkeypatch):
    """Folders listed for a case-insensitive match are remembered while they are unchanged:
    a question after a module was copied in or renamed must not answer from the listing
    taken before."""
    if os.sep != "/":
        pytest.skip("POSIX case-insensitive lookup")
    prefix = tmp_path / "wineprefix"
    dlls = prefix / "drive_c" / "windows" / "system32"
    dlls.mkdir(parents=True)
    (dlls / "kernel32.dll").write_bytes(b"")
    monkeypatch.setenv("WINEPREFIX", str(prefix))
    recorded = "C:\\Windows\\System32\\SYNTH.DLL"
    probe = FileProbe()

    def settled(seconds_ago: int) -> None:  # an old folder: its listing is kept
        stamp = time.time() - seconds_ago
        os.utime(dlls, (stamp, stamp))

    settled(100)
    assert probe.recorded(recorded) == []
    synth.write(dlls / "synth.dll")
    assert {os.path.basename(p) for p in probe.recorded(recorded)} == {"synth.dll"}
    found = ImageLocator().locate(module_for(synth, path=recorded), None)
    assert found is not None and found.source == "recorded-path"
    settled(50)
    assert {os.path.basename(p) for p in probe.recorded(recorded)} == {"synth.dll"}
    os.rename(dlls / "synth.dll", dlls / "Synth.dll")  # the same folder, a name changed
    assert {os.path.basename(p) for p in probe.recorded(recorded)} == {"Synth.dll"}
    settled(20)
    assert probe.recorded(recorded)
    os.remove(dlls / "Synth.dll")
    assert probe.recorded(recorded) == []


def test_a_triage_reads_a_refused_file_once_and_still_finds_the_module_it_is(synth, other_build, tmp_path, monkeypatch):
    """A fleet's dumps name the same system DLLs, and the file of that name here is not
    theirs: one probe shared by a triage's dumps reads it once. A module it is still finds
    it, and one without a stamp to compare is still served it, unverified."""
    opened = files_opened(monkeypatch)
    zpath = "Z:" + str(tmp_path).replace("/", "\\") + "\\synth.dll"
    if os.sep != "/":
        zpath = str(tmp_path / "synth.dll")
    other_build.write(tmp_path / "synth.dll")  # the local file: another build
    probe = RememberingProbe()
    for _ in range(3):  # three dumps of the fleet, a locator each
        assert ImageLocator(probe=probe).locate(module_for(synth, path=zpath), no_memory) is None
    assert len(opened) == 1
    theirs = ImageLocator(probe=probe).locate(module_for(other_build, path=zpath), no_memory)
    assert theirs is not None and theirs.source == "recorded-path"
    unstamped = ImageLocator(probe=probe).locate(module_for(synth, path=zpath, timestamp=0), no_memory)
    assert unstamped is not None and "not verified" in unstamped.detail
    assert len(opened) == 3
    # a probe that keeps nothing (analyze) reads the file at each question
    opened.clear()
    for _ in range(2):
        assert ImageLocator().locate(module_for(synth, path=zpath), no_memory) is None
    assert len(opened) == 2


def test_windows_path_candidates():
    c = windows_path_candidates("\\??\\Z:\\opt\\x.dll")
    if os.sep == "/":
        assert "/opt/x.dll" in c
    assert c[0] == "\\??\\Z:\\opt\\x.dll"
    assert windows_path_candidates("") == []


# ----------------------------------------------------------------------------- 3. image paths
def test_image_path_recursive_match_by_name_timestamp_size(synth, other_build, tmp_path):
    root = tmp_path / "images"
    (root / "a" / "old").mkdir(parents=True)
    (root / "z" / "deep" / "er").mkdir(parents=True)
    other_build.write(root / "a" / "old" / "synth.dll")  # sorted first; wrong timestamp
    good = synth.write(root / "z" / "deep" / "er" / "SYNTH.DLL")  # case differs
    (root / "z" / "notes.txt").write_text("not a PE")
    before = snapshot(tmp_path)
    loc = ImageLocator(image_paths=[str(root)])
    found = loc.locate(module_for(synth), no_memory)
    assert found.source == "image-path"
    assert found.image.path == good
    assert "match" in found.detail
    # a second module and a second lookup reuse the index and the cached answer
    assert loc.locate(module_for(synth), no_memory) is found
    assert loc.locate(module_for(synth, name="other.dll", base=0x7FF000000000), no_memory) is None
    assert loc.index_builds == 1
    loc.close()
    assert snapshot(tmp_path) == before  # nothing written anywhere


def test_image_path_unverifiable_module_accepted_on_name(other_build, tmp_path):
    other_build.write(tmp_path / "synth.dll")
    found = ImageLocator(image_paths=[str(tmp_path)]).locate(module_for(other_build, timestamp=0), no_memory)
    assert found.source == "image-path"
    assert "not verified" in found.detail


def test_image_path_rejects_non_pe_and_mismatch(synth, other_build, tmp_path):
    (tmp_path / "synth.dll").write_bytes(b"MZ garbage")
    (tmp_path / "x").mkdir()
    other_build.write(tmp_path / "x" / "synth.dll")
    assert ImageLocator(image_paths=[str(tmp_path)]).locate(module_for(synth), no_memory) is None


# ----------------------------------------------------------------------------- 4. symbol store
def test_symbol_store_layout(synth, tmp_path):
    store = tmp_path / "symcache"
    key = f"{synth.timestamp:08X}{synth.size_of_image:x}"
    assert key == "5EADBEEF7000"
    d = store / "synth.dll" / key
    d.mkdir(parents=True)
    good = synth.write(d / "synth.dll")
    spec = f"srv*{store}*https://msdl.microsoft.com/download/symbols"
    loc = ImageLocator(symbol_paths=[spec])
    assert loc.symbol_dirs == [str(store)]
    found = loc.locate(module_for(synth, path="C:\\nowhere\\synth.dll"), no_memory)
    assert (found.source, found.image.path) == ("symbol-store", good)
    # the key needs both values from the dump
    assert ImageLocator(symbol_paths=[str(store)]).locate(module_for(synth, size=0), no_memory) is None


def test_symbol_store_tolerates_case(synth, tmp_path):
    d = tmp_path / "SYNTH.DLL" / "5eadbeef7000"
    d.mkdir(parents=True)
    synth.write(d / "Synth.dll")
    found = ImageLocator(symbol_paths=[f"cache*{tmp_path}"]).locate(module_for(synth), no_memory)
    if os.sep == "/":
        assert found is not None and found.source == "symbol-store"


def test_parse_symbol_path():
    assert parse_symbol_path("srv*C:\\cache*https://msdl.microsoft.com/download/symbols") == ["C:\\cache"]
    assert parse_symbol_path("cache*/var/sym;srv*/srv/store*http://host/x;/plain/dir") == [
        "/var/sym",
        "/srv/store",
        "/plain/dir",
    ]
    assert parse_symbol_path("symsrv*symsrv.dll*D:\\s*https://x") == ["D:\\s"]
    # a server with no local store downloads into dumpkit's own cache folder
    from dumpkit.symbols.store import symbol_cache

    assert parse_symbol_path("srv*https://only.example/symbols") == [symbol_cache()]
    assert parse_symbol_path(";;") == []


# ----------------------------------------------------------------------------- order & cache
def test_order_memory_beats_files(synth, tmp_path):
    synth.write(tmp_path / "synth.dll")
    found = ImageLocator(image_paths=[str(tmp_path)]).locate(
        module_for(synth, path=str(tmp_path / "synth.dll")), synth.reader()
    )
    assert found.source == "dump-memory"


def test_recorded_path_beats_image_path(synth, tmp_path):
    (tmp_path / "rec").mkdir()
    (tmp_path / "ip").mkdir()
    rec = synth.write(tmp_path / "rec" / "synth.dll")
    synth.write(tmp_path / "ip" / "synth.dll")
    found = ImageLocator(image_paths=[str(tmp_path / "ip")]).locate(module_for(synth, path=rec), no_memory)
    assert (found.source, found.image.path) == ("recorded-path", rec)


def test_nothing_found_is_none_and_cached(synth):
    calls = []

    def read_va(address, size):
        calls.append(address)
        raise MemoryNotInDump(address, size)

    loc = ImageLocator()
    m = module_for(synth, path="C:\\gone\\synth.dll")
    assert loc.locate(m, read_va) is None
    n = len(calls)
    assert loc.locate(m, read_va) is None
    assert len(calls) == n


# ----------------------------------------------------------------------------- real binaries
SAMPLE_FILES = sorted(SAMPLE_BIN.glob("*.dll")) + sorted(SAMPLE_BIN.glob("*.exe")) if SAMPLE_BIN.is_dir() else []


@pytest.mark.skipif(not SAMPLE_FILES, reason="sample_dumps/bin has no binaries yet")
@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_sample_binary_found_by_image_path(path):
    with PEImage.from_file(str(path)) as img:
        m = Module(
            name=path.name.upper(),
            path="C:\\build\\" + path.name,
            base=0x7FF800000000,
            size=img.size_of_image,
            timestamp=img.timestamp,
        )
    with ImageLocator(image_paths=[str(SAMPLE_BIN.parent)], use_recorded_path=False) as loc:
        found = loc.locate(m, no_memory)
        assert found is not None and found.source == "image-path"
        assert Path(found.image.path).name.lower() == path.name.lower()
        assert found.image.pdata_count > 0


# ----------------------------------------------------------------------------- real dumps
WINE_PE_DIR = Path("/usr/lib/x86_64-linux-gnu/wine/x86_64-windows")
REAL_DUMP = REPO / "sample_dumps" / "recursion_one.dmp"


def _open_real_dump():
    if not REAL_DUMP.is_file():
        pytest.skip("sample dump not built yet")
    try:
        from dumpkit.sources.minidump import open_dump
    except ImportError:
        pytest.skip("dumpkit.sources.minidump not available")
    return open_dump(str(REAL_DUMP))


def test_real_dump_modules_found_at_recorded_wine_paths():
    """The sample dumps were written under Wine, which records Z:\\work\\main\\... paths."""
    target = _open_real_dump()
    try:
        mods = {m.name.lower(): m for m in target.modules}
        if "opkernels.dll" not in mods or not mods["opkernels.dll"].path.upper().startswith("Z:\\"):
            pytest.skip("dump does not record a Z: path for opkernels.dll")
        # The recorded path is the folder the sample was built in; a clone elsewhere (or
        # another machine) does not have the file there, and that is no failure of ours.
        if not any(os.path.isfile(p) for p in windows_path_candidates(mods["opkernels.dll"].path)):
            pytest.skip(f"the recorded path {mods['opkernels.dll'].path} is not on this machine")
        with ImageLocator() as loc:
            found = loc.locate(mods["opkernels.dll"], target.read)
            assert found is not None and found.source in ("dump-memory", "recorded-path")
            assert found.image.timestamp == mods["opkernels.dll"].timestamp
            assert "visit" in {n for _, n in found.image.exports()}
    finally:
        target.close()


@pytest.mark.skipif(not WINE_PE_DIR.is_dir(), reason="Wine's PE builtin DLLs not installed")
def test_real_dump_wine_system_dlls_via_image_path():
    target = _open_real_dump()
    try:
        ntdll = next((m for m in target.modules if m.name.lower() == "ntdll.dll"), None)
        if ntdll is None or not (WINE_PE_DIR / "ntdll.dll").is_file():
            pytest.skip("no ntdll in the dump or in Wine's directory")
        with PEImage.from_file(str(WINE_PE_DIR / "ntdll.dll")) as probe:
            if (probe.timestamp, probe.size_of_image) != (ntdll.timestamp, ntdll.size):
                pytest.skip("this Wine is not the one that wrote the dump")
        # not the recorded path: under Wine (the py38 lane) C:\windows\system32\ntdll.dll
        # is this very file, and would be found before the image path
        with ImageLocator(image_paths=[str(WINE_PE_DIR)], use_recorded_path=False) as loc:
            found = loc.locate(ntdll, target.read)
            assert found is not None and found.source in ("dump-memory", "image-path")
            assert found.image.pdata_count > 100
    finally:
        target.close()


def test_parse_symbol_servers():
    from dumpkit.images import parse_symbol_servers
    from dumpkit.symbols.store import SymbolServer
    from dumpkit.symbols.store import symbol_cache

    assert parse_symbol_servers("srv*C:\\cache*https://msdl.microsoft.com/download/symbols/") == [
        SymbolServer("https://msdl.microsoft.com/download/symbols", "C:\\cache")
    ]
    assert parse_symbol_servers("srv*http://a/x;cache*/c;/plain") == [SymbolServer("http://a/x", symbol_cache())]
    assert parse_symbol_servers("srv*ftp://nope*/d") == []


def test_symbol_server_download_over_loopback(tmp_path):
    """A symbol server (served here on 127.0.0.1 from a store laid out like Microsoft's)
    is asked for NAME/TIMESTAMPSIZE/NAME; the image lands in the cache and is used."""
    import functools
    import http.server
    import shutil
    import threading

    from dumpkit.pe import PEImage

    src = ROOT / "sample_dumps" / "bin" / "opkernels.dll"
    if not src.exists():
        pytest.skip("sample binaries not present")
    img = PEImage.from_file(str(src))
    key = f"{img.timestamp:08X}{img.size_of_image:x}"
    store = tmp_path / "server"
    (store / "opkernels.dll" / key).mkdir(parents=True)
    shutil.copy(src, store / "opkernels.dll" / key / "opkernels.dll")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(store))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        cache = tmp_path / "cache"
        module = Module("opkernels.dll", r"C:\\gone\\opkernels.dll", 0x180000000, img.size_of_image, img.timestamp)
        loc = ImageLocator(symbol_paths=[f"srv*{cache}*{url}"], use_recorded_path=False)
        found = loc.locate(module, None)
        assert found is not None and found.source == "symbol-server"
        assert (cache / "opkernels.dll" / key / "opkernels.dll").read_bytes() == src.read_bytes()
        assert found.image.lookup_function(0x14B0) is not None
        # a module the server does not have: a failure noted, not an exception
        other = Module("missing.dll", r"C:\\missing.dll", 0x10000000, 0x1000, 0x12345678)
        assert loc.locate(other, None) is None
        assert any("HTTP 404" in f for f in loc.failures)
        # the second locator finds the cached copy without asking the server
        server.shutdown()
        again = ImageLocator(symbol_paths=[f"srv*{cache}*{url}"], use_recorded_path=False).locate(module, None)
        assert again is not None and again.source == "symbol-store"
    finally:
        server.server_close()


def test_symbol_store_follows_file_ptr(synth, tmp_path):
    """symstore /p stores a pointer instead of the file: NAME/KEY/file.ptr = PATH:<file>."""
    (tmp_path / "builds").mkdir()
    real = synth.write(tmp_path / "builds" / "synth.dll")
    d = tmp_path / "store" / "synth.dll" / "5EADBEEF7000"
    d.mkdir(parents=True)
    (d / "file.ptr").write_text(f"PATH:{real}\r\n")
    loc = ImageLocator(symbol_paths=[str(tmp_path / "store")], use_recorded_path=False)
    found = loc.locate(module_for(synth), no_memory)
    assert found is not None and found.source == "symbol-store" and found.image.path == real
    assert str(d / "file.ptr") in found.detail
    # a pointer to a file that is not here, and a MSG: pointer, are misses that say why
    (d / "file.ptr").write_text("PATH:\\\\buildserver\\drops\\synth.dll")
    loc = ImageLocator(symbol_paths=[str(tmp_path / "store")], use_recorded_path=False)
    assert loc.locate(module_for(synth), no_memory) is None
    assert any("\\\\buildserver\\drops\\synth.dll, which is not here" in m for m in loc.misses(module_for(synth)))
    (d / "file.ptr").write_text("MSG: deleted by symstore")
    loc = ImageLocator(symbol_paths=[str(tmp_path / "store")], use_recorded_path=False)
    assert loc.locate(module_for(synth), no_memory) is None
    assert any("deleted by symstore" in m for m in loc.misses(module_for(synth)))


def test_damaged_compressed_store_file_is_named(synth, tmp_path):
    """A store's NAME.dl_ that is not a readable cabinet is a miss that names the file and
    what is wrong with it (tests/symbols/test_store.py reads real ones)."""
    d = tmp_path / "synth.dll" / "5EADBEEF7000"
    d.mkdir(parents=True)
    (d / "synth.dl_").write_bytes(b"MSCF\0\0\0\0" + bytes(64))
    loc = ImageLocator(symbol_paths=[str(tmp_path)], use_recorded_path=False)
    assert loc.locate(module_for(synth), no_memory) is None
    (why,) = loc.misses(module_for(synth))
    assert "synth.dl_" in why and "cabinet format 0.0" in why


def test_stack_names_the_store_pointer_it_followed(tmp_path):
    """End to end: Wine's ntdll reached through a file.ptr in a symbol store is what
    `dumpkit stack` says served it; a module the store has only as a damaged cabinet says so."""
    import json

    dump = REPO / "sample_dumps" / "fastfail_abort.dmp"
    ntdll = SAMPLE_BIN / "wine" / "ntdll.dll.xz"
    if not (dump.exists() and ntdll.exists()):
        pytest.skip("sample dumps not present")
    d = tmp_path / "ntdll.dll" / "63F14E2B361000"
    d.mkdir(parents=True)
    (d / "file.ptr").write_text(f"PATH:{ntdll}")
    k = tmp_path / "kernel32.dll" / "63F14E2B195000"
    k.mkdir(parents=True)
    (k / "kernel32.dl_").write_bytes(b"MSCF" + bytes(60))
    # conftest clears _NT_SYMBOL_PATH; not the recorded paths, which under Wine (the py38 lane)
    # are the very DLLs the sample was made with
    r = run_cli("stack", dump, "--json", "--no-recorded-paths", "--symbol-path", tmp_path)
    assert r.returncode in (0, 1), r.stderr
    sources = {m["name"]: m["image_source"] for m in json.loads(r.stdout)["modules"] if m["image_source"]}
    assert sources["ntdll.dll"].startswith("symbol-store: " + str(d / "file.ptr") + " -> " + str(ntdll))
    assert sources["kernel32.dll"].startswith("not found (symbol store: ") and "kernel32.dl_" in sources["kernel32.dll"]


# ----------------------------------------------------------------------------- NAME.dll.xz
def _xz_backings(monkeypatch):
    """Every XzBacking the locator makes, to see how much of each it decompressed."""
    import dumpkit.images as images

    made = []
    real_init = images.XzBacking.__init__

    def init(self, path):
        real_init(self, path)
        made.append(self)

    monkeypatch.setattr(images.XzBacking, "__init__", init)
    return made


def _big_image(timestamp):
    """A synthetic image followed by 4 MiB of data that unwinding never reads."""
    from tests.support.synth_pe import PEBuilder, TEXT_CHARS

    b = PEBuilder(timestamp=timestamp)
    b.add_section(".text", b"\xc3" * 0x200, characteristics=TEXT_CHARS)
    b.add_section(".big", bytes(range(256)) * (4 << 12))
    return b.build()


def test_xz_images_are_decompressed_only_as_far_as_reads_reach(tmp_path, monkeypatch):
    import lzma

    good, other = _big_image(0x22222222), _big_image(0x33333333)
    (tmp_path / "a").mkdir()
    (tmp_path / "z").mkdir()
    (tmp_path / "a" / "big.dll.xz").write_bytes(lzma.compress(other.file))  # found first, wrong build
    (tmp_path / "z" / "big.dll.xz").write_bytes(lzma.compress(good.file))
    (tmp_path / "z" / "bad").mkdir()
    (tmp_path / "z" / "bad" / "big.dll.xz").write_bytes(b"\xfd7zXZ\0" + bytes(100))  # corrupt
    made = _xz_backings(monkeypatch)
    module = Module("big.dll", "C:\\x\\big.dll", good.image_base, good.size_of_image, good.timestamp)
    with ImageLocator(image_paths=[str(tmp_path)], use_recorded_path=False) as loc:
        found = loc.locate(module, no_memory)
        assert found.source == "image-path" and found.image.path.endswith(os.path.join("z", "big.dll.xz"))
        assert found.image.read_rva(0x1000, 1) == b"\xc3"
        # the header check and the code read cost the first chunk, not the 4 MiB behind it
        assert len(good.file) > 4 << 20
        assert all(b.decompressed <= 1 << 20 for b in made), [b.decompressed for b in made]
        big = found.image.sections[-1]
        assert found.image.read_rva(big.rva + (4 << 20) - 4, 4) == bytes([252, 253, 254, 255])
        assert made[-1].decompressed == len(good.file)


def test_wine_kernel32_from_xz_is_read_only_as_far_as_unwinding_and_naming_need(monkeypatch):
    """kernel32's frame (BaseThreadInitThunk) is named from its export table: its COFF
    symbols and DWARF sections, most of the file, are never decompressed."""
    from dumpkit.engine import Options, crashing_thread, make_walker
    from dumpkit.sources.minidump import open_dump
    from dumpkit.unwind.walk import walk_thread

    dump = REPO / "sample_dumps" / "big_frame.dmp"
    if not dump.exists() or not (SAMPLE_BIN / "wine" / "kernel32.dll.xz").exists():
        pytest.skip("sample dumps not present")
    made = _xz_backings(monkeypatch)
    target = open_dump(str(dump))
    # not the recorded path: under Wine (the py38 lane) that is the very kernel32.dll, uncompressed
    walker = make_walker(
        target, Options(image_paths=(str(SAMPLE_BIN),), use_recorded_paths=False), problems=target.soft_errors
    )
    walk = walk_thread(walker, crashing_thread(target), target.exception.context)
    k32 = next(f for f in walk.frames if f.module == "kernel32.dll")
    assert k32.symbol.startswith("kernel32.dll!BaseThreadInitThunk+") and k32.trust == "unwind_info"
    (backing,) = [b for b in made if b.path.endswith("kernel32.dll.xz")]
    image = walker.code.images.image(target.module_at(k32.ip))
    assert image.path == backing.path
    assert backing.decompressed < image._symtab_ptr  # the COFF table, near the end, was not needed


def test_a_file_put_in_place_is_found_by_the_next_analysis_but_not_within_one_triage(synth, tmp_path):
    """`analyze` and the debugger extension ask the file system at every run (LIVE); a triage
    asks once per recorded path for all its dumps (RememberingProbe)."""
    if os.sep != "/":
        pytest.skip("POSIX path mapping")
    zpath = "Z:" + str(tmp_path).replace("/", "\\") + "\\SYNTH.DLL"
    module = module_for(synth, path=zpath)
    remembering = RememberingProbe()
    assert ImageLocator(probe=remembering).locate(module, no_memory) is None
    assert ImageLocator().locate(module, no_memory) is None
    synth.write(tmp_path / "synth.dll")
    assert ImageLocator().locate(module, no_memory).source == "recorded-path"
    assert ImageLocator(probe=remembering).locate(module, no_memory) is None  # the triage's answer stands
    assert ImageLocator(probe=RememberingProbe()).locate(module, no_memory).source == "recorded-path"
