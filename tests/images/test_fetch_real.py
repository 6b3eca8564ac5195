"""--fetch-images on real dumps, against a local index serving the real wheels the crashed
processes installed (tests/support/index_wheels.py) and a local python.org holding the
genuine embeddable files of ../shared/winpython zipped as python.org ships them: the
report given with the fetched images is the report given with the images at hand
(verdict, confidence, signature). One slow test asks the real index pip is configured for
(numpy, and tensorflow, which leads to tensorflow-intel) and skips offline."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest

from tests.support.index_server import IndexServer
from tests.support.index_wheels import wheel
from tests.support.samples import ROOT, run_cli, sample_path

WINPYTHON = ROOT.parent / "shared" / "winpython"
AWAY = ("--no-recorded-paths", "--format", "json")
DEAD = "http://127.0.0.1:9/simple"  # an index nobody answers: what a run gets, it got from the cache


def _env(tmp_path: Path, srv: IndexServer) -> dict:
    env = dict(os.environ, DUMPKIT_CACHE=str(tmp_path / "cache"), PIP_CONFIG_FILE=os.devnull)
    env["PIP_INDEX_URL"] = srv.url + "/simple"
    env["DUMPKIT_PYTHON_ORG_URL"] = srv.url + "/ftp/python"
    for name in ("PIP_EXTRA_INDEX_URL", "DUMPKIT_FETCH_IMAGES"):
        env.pop(name, None)
    return env


def _report(*args, env=None) -> dict:
    r = run_cli("analyze", *args, *AWAY, env=env, timeout=900)
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)


def _said(report: dict) -> tuple:
    v = report["verdict"]
    return v["headline"], v["confidence"], (report.get("signature") or {}).get("text")


def _sources(report: dict) -> dict:
    return {m["name"]: m.get("image_source") or "" for m in report["modules"]}


def _numpy(report: dict):
    return next((p for p in report["environment"].get("python_packages", ()) if p["name"] == "numpy"), None)


def test_numpy_from_its_wheel_gives_the_report_the_images_at_hand_give(tmp_path):
    dump = sample_path("python/numpy_strided_av.dmp")
    whl = wheel("numpy")
    site = tmp_path / "site-packages"
    with zipfile.ZipFile(whl) as zf:
        zf.extractall(site)
    at_hand = _report(dump, "--image-path", site / "numpy")
    without = _report(dump)
    umath = "_multiarray_umath.cp38-win_amd64.pyd"
    numpy = _numpy(at_hand)  # the installation beside the image: its RECORD lists the module
    assert numpy and numpy["version"] == whl.name.split("-")[1]
    assert numpy["source"].startswith(f"installed package numpy {numpy['version']}, whose RECORD lists {umath}")
    assert _numpy(without) is None  # a MiniDumpNormal far from the machine: nothing says it
    fix = {m["module"]: m["fix"] for m in without["images"]["missing"]}
    assert "--fetch-images would look for it in the wheels of numpy" in fix["_multiarray_umath.cp38-win_amd64.pyd"]
    with IndexServer() as srv:
        srv.add_wheel("numpy", whl.name, whl, "2023-06-26T13:29:58Z")
        env = _env(tmp_path, srv)
        fetched = _report(dump, "--fetch-images", env=env)
        assert _said(fetched) == _said(at_hand) != _said(without)
        assert _sources(fetched)["_multiarray_umath.cp38-win_amd64.pyd"].startswith("fetched: ")
        assert _numpy(fetched) == dict(
            numpy, source=f"the wheel {whl.name} holds this build of {umath} (--fetch-images took it from there)"
        )
        ranged = [r for r in srv.log if r[0].endswith(".whl")]
        assert all(r[1] for r in ranged)  # ranges only: not the 14.9 MB wheel
        srv.log.clear()
        again = _report(dump, "--fetch-images", env=env)  # the warm cache: the index is not asked
        assert _said(again) == _said(at_hand) and not [r for r in srv.log if r[0].startswith(("/simple", "/files"))]


def test_bundle_and_triage_with_fetched_images(tmp_path):
    """`bundle --fetch-images` carries the fetched pages (the bundle re-analyses offline,
    with nothing fetched); `triage --fetch-images` groups by the signature they give."""
    dump = sample_path("python/numpy_strided_av.dmp")
    whl = wheel("numpy")
    with IndexServer() as srv:
        srv.add_wheel("numpy", whl.name, whl, "2023-06-26T13:29:58Z")
        env = _env(tmp_path, srv)
        fetched = _report(dump, "--fetch-images", env=env)
        out = tmp_path / "numpy.dkb"
        r = run_cli("bundle", dump, "--fetch-images", "-o", out, env=env, timeout=900)
        assert r.returncode in (0, 1), r.stderr
        assert "_multiarray_umath.cp38-win_amd64.pyd" in r.stdout
        folder = tmp_path / "dumps"
        folder.mkdir()
        (folder / "a.dmp").write_bytes(dump.read_bytes())
        t = run_cli("triage", folder, "--fetch-images", "--format", "json", "--jobs", "1", env=env, timeout=900)
        assert t.returncode in (0, 1), t.stderr
        i = run_cli("info", dump, "--json", "--fetch-images", env=env, timeout=900)  # every module looked for
        assert i.returncode in (0, 1), i.stderr
    info = {m["name"]: m["image_source"] or "" for m in json.loads(i.stdout)["modules"]}
    assert info["mtrand.cp38-win_amd64.pyd"].startswith("fetched: ")  # not on the crashing stack
    assert "Wine's own DLL" in info["ntdll.dll"]
    offline = dict(env, DUMPKIT_CACHE=str(tmp_path / "empty-cache"), PIP_INDEX_URL="http://127.0.0.1:9/simple")
    again = _report(out, env=offline)  # the server is gone: only the bundle's pages
    assert _said(again) == _said(fetched)
    assert _numpy(again) == _numpy(fetched) is not None  # the bundle carries the wheel's name
    with zipfile.ZipFile(out) as zf:
        manifest = json.loads(zf.read("manifest.json"))
    kept = {m["name"]: m for m in manifest["modules"]}
    assert kept["_multiarray_umath.cp38-win_amd64.pyd"]["file"]["found_in"] == "fetched"
    groups = json.loads(t.stdout)["groups"]
    assert [g["signature"] for g in groups] == [fetched["signature"]["text"]]


def test_numpy_2_linked_with_timestamp_zero_on_python_311(tmp_path):
    """The dump in tf_nest_flatten_py311.dkb loaded NumPy 2.0.2, whose .pyd files have
    TimeDateStamp 0 and which Wine's writer recorded without CodeView records: SizeOfImage
    and CheckSum pick its build out of the wheel."""
    bundle = sample_path("pyversions/tf311/tf_nest_flatten_py311.dkb")
    with zipfile.ZipFile(bundle) as zf:
        zf.extract("dump.dmp", tmp_path)
    whl = wheel("numpy", "2.0.2")
    with IndexServer() as srv:
        srv.add_wheel("numpy", whl.name, whl, "2024-08-26T16:05:30Z")
        i = run_cli("info", tmp_path / "dump.dmp", "--json", "--fetch-images", env=_env(tmp_path, srv), timeout=900)
    assert i.returncode in (0, 1), i.stderr
    modules = {m["name"]: m for m in json.loads(i.stdout)["modules"]}
    umath = modules["_multiarray_umath.cp311-win_amd64.pyd"]
    assert umath["timestamp"] == 0 and umath["image_source"].startswith("fetched: numpy-2.0.2-cp311")


def _embeddable(minor: str, version: str, dest: Path) -> Path:
    folder = WINPYTHON / f"cpython-3.{minor}-amd64"
    if not folder.is_dir():
        pytest.skip(f"{folder} is not here (../shared)")
    out = dest / f"python-{version}-embed-amd64.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:  # python.org's: every file at the top
        for f in sorted(folder.iterdir()):
            if f.is_file():
                zf.write(f, f.name)
    return out


def test_python_311_from_python_orgs_embeddable_zip(tmp_path):
    dump = sample_path("pyversions/repr_recursion_py311.dmp.xz")
    at_hand = _report(dump, "--image-path", WINPYTHON / "cpython-3.11-amd64") if WINPYTHON.is_dir() else None
    zipped = _embeddable("11", "3.11.9", tmp_path)
    without = _report(dump)
    fix = {m["module"]: m["fix"] for m in without["images"]["missing"]}
    assert "python.org's Python 3.11.9 embeddable zip" in fix["python311.dll"]
    with IndexServer() as srv:
        srv.files["/ftp/python/3.11.9/" + zipped.name] = zipped
        fetched = _report(dump, "--fetch-images", env=_env(tmp_path, srv))
    assert at_hand is not None and _said(fetched) == _said(at_hand)
    assert _sources(fetched)["python311.dll"].startswith("fetched: ")
    assert not [m for m in fetched["images"]["missing"] if m["module"] == "python311.dll"]


@pytest.mark.slow
def test_tensorflow_from_tensorflow_intels_wheel_gives_the_bundles_report(tmp_path):
    """The dump inside tf_nest_flatten.dkb, analysed without the bundle's images: the
    tensorflow wheel names tensorflow-intel, whose wheel holds the 642 MB .pyd."""
    bundle = sample_path("python/tf_nest_flatten.dkb")
    with zipfile.ZipFile(bundle) as zf:
        zf.extract("dump.dmp", tmp_path)
    dump = tmp_path / "dump.dmp"
    shell, intel = wheel("tensorflow"), wheel("tensorflow-intel")
    from_bundle = _report(bundle)
    without = _report(dump)
    with IndexServer() as srv:
        srv.add_wheel("tensorflow", shell.name, shell)
        srv.add_wheel("tensorflow-intel", intel.name, intel)
        fetched = _report(dump, "--fetch-images", env=_env(tmp_path, srv))
    assert _said(fetched) == _said(from_bundle) != _said(without)
    assert _sources(fetched)["_pywrap_tensorflow_internal.pyd"].startswith("fetched: ")
    # the wheel that holds this very build names TensorFlow's version, which the dump alone
    # does not (no version resource, no site-packages here); so does a run from the cache
    version = intel.name.split("-")[1]
    assert without["environment"]["tensorflow_version"] is None
    assert any(
        "TensorFlow's version is unknown" in n and "--fetch-images" in n for n in without["environment"]["notes"]
    )
    for report in (fetched, _report(dump, "--fetch-images", env=dict(_env(tmp_path, srv), PIP_INDEX_URL=DEAD))):
        env = report["environment"]
        assert env["tensorflow_version"] == version, env
        assert env["tensorflow_version_source"].startswith(f"the wheel {intel.name} holds this build")
    # triage groups the bare dump by the signature the images give, not STACK_OVERFLOW alone
    folder = tmp_path / "dumps"
    folder.mkdir()
    dump.rename(folder / "tf.dmp")
    env = dict(os.environ, DUMPKIT_CACHE=str(tmp_path / "cache"), PIP_CONFIG_FILE=os.devnull)
    env["PIP_INDEX_URL"] = "http://127.0.0.1:9/simple"  # the cache has the images now: no index needed
    t = run_cli("triage", folder, "--fetch-images", "--format", "json", "--jobs", "1", env=env, timeout=900)
    assert t.returncode in (0, 1), t.stderr
    assert [g["signature"] for g in json.loads(t.stdout)["groups"]] == [from_bundle["signature"]["text"]]


@pytest.mark.slow
def test_the_real_index_pip_is_configured_for(tmp_path):
    """numpy's and tensorflow's wheels from the index pip names here (no host written in
    the project); skips when it cannot be reached."""
    dump = sample_path("python/numpy_strided_av.dmp")
    env = dict(os.environ, DUMPKIT_CACHE=str(tmp_path / "cache"))
    fetched = _report(dump, "--fetch-images", env=env)
    sources = _sources(fetched)
    if not sources["_multiarray_umath.cp38-win_amd64.pyd"].startswith("fetched: "):
        problems = " ".join(fetched["images"]["search_problems"])
        if "unreachable" in problems or "offline" in problems:
            pytest.skip(f"the package index cannot be reached: {problems[:300]}")
        raise AssertionError(problems)
    bundle = sample_path("python/tf_nest_flatten.dkb")
    with zipfile.ZipFile(bundle) as zf:
        zf.extract("dump.dmp", tmp_path)
    tf = _report(tmp_path / "dump.dmp", "--fetch-images", env=env)
    assert _said(tf) == _said(_report(bundle))
