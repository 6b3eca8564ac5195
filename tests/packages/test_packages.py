"""TensorFlow's version from the installed package that owns its module (issue #13 item 5):
the real TensorFlow 2.13 dump, whose modules carry no version resource, with the
environment it crashed in (pip's RECORD files beside the images), and a site-packages laid
out as pip lays it out for what the real one cannot show."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dumpkit.packages import owning_package
from tests.support.samples import python_dump, python_manifest, run_cli


def _dist(site: Path, name: str, version: str, files, top_level=None) -> Path:
    folder = site / f"{name.replace('-', '_')}-{version}.dist-info"
    folder.mkdir(parents=True)
    (folder / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nVersion: 9.9.9 in prose\n"
    )
    (folder / "RECORD").write_text("".join(f"{f},sha256=x,1\n" for f in files) + f"{folder.name}/RECORD,,\n")
    if top_level is not None:
        (folder / "top_level.txt").write_text("\n".join(top_level) + "\n")
    for f in files:
        (site / f).parent.mkdir(parents=True, exist_ok=True)
        (site / f).write_bytes(b"MZ")
    return folder


def test_the_distribution_whose_record_lists_the_file_owns_it(tmp_path):
    site = tmp_path / "Lib" / "site-packages"
    pyd = "tensorflow/python/_pywrap_tensorflow_internal.pyd"
    # tensorflow_estimator also names a tensorflow* folder; tensorflow-intel installed the pyd
    _dist(site, "tensorflow-estimator", "2.13.0", ["tensorflow_estimator/__init__.py"], ["tensorflow_estimator"])
    owner_folder = _dist(site, "tensorflow-intel", "2.13.0", [pyd], ["tensorflow"])
    found = owning_package([str(site / pyd)])
    assert (found.name, found.version, found.record) == ("tensorflow-intel", "2.13.0", str(owner_folder))


def test_a_wheel_without_top_level_and_a_compressed_image_are_still_matched(tmp_path):
    site = tmp_path / "site-packages"
    _dist(site, "other", "1.0", ["other/x.py"], ["other"])
    _dist(site, "tensorflow-cpu", "2.10.1", ["tensorflow/python/_pywrap_tensorflow_internal.pyd"])
    xz = site / "tensorflow" / "python" / "_pywrap_tensorflow_internal.pyd.xz"
    xz.write_bytes(b"")
    found = owning_package([str(xz)])
    assert (found.name, found.version) == ("tensorflow-cpu", "2.10.1")


def test_no_owner_outside_site_packages_or_when_no_record_lists_the_file(tmp_path):
    site = tmp_path / "site-packages"
    _dist(site, "tensorflow", "2.15.0", ["tensorflow/python/other.pyd"], ["tensorflow"])
    stray = site / "tensorflow" / "python" / "_pywrap_tensorflow_internal.pyd"
    stray.write_bytes(b"MZ")
    assert owning_package([str(stray)]) is None
    loose = tmp_path / "_pywrap_tensorflow_internal.pyd"
    loose.write_bytes(b"MZ")
    assert owning_package([str(loose)]) is None
    assert owning_package([str(tmp_path / "missing" / "site-packages" / "x.pyd")]) is None


def _tf_dump():
    for facts in python_manifest():
        if facts.get("tensorflow_version"):
            return facts
    pytest.skip("no TensorFlow sample dump")


@pytest.mark.slow
def test_the_tensorflow_dump_names_the_version_its_environment_installed(plain):
    facts = _tf_dump()
    images = os.environ.get("DUMPKIT_PYDUMPS_IMAGES")
    tf_env = Path(images or "/nonexistent") / "Python38-tf"
    if not tf_env.is_dir():
        pytest.skip("TensorFlow's installation is not here (DUMPKIT_PYDUMPS_IMAGES)")
    r = run_cli("analyze", plain(python_dump(facts)), "--format", "json", "--image-path", tf_env)
    report = json.loads(r.stdout)
    env = report["environment"]
    assert env["tensorflow_version"] == facts["tensorflow_version"]
    assert env["tensorflow_version_source"].startswith("installed package tensorflow-intel 2.13.0")
    assert not any("version is unknown" in n for n in env["notes"])
