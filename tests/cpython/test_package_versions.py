"""The versions of the packages a Python process had imported, read from its heap
(dumpkit/cpython/package_versions.py), as `analyze` shows them in its environment, checked
against what the crashing program printed of itself (its MARKER line in the manifest:
numpy.__version__), never against dumpkit:

- every sample whose dump holds the heap (the full-memory NumPy crash, the bundle of the
  full-memory TensorFlow CHECK failure) names the NumPy and TensorFlow that ran, in JSON
  (`environment.python_packages`) and in the text report's "Packages" row;
- its MiniDumpNormal twin, without the heap, names none and says why;
- synthetic memory covers what the real dumps do not show: a __version__ that is not a
  version, a name asked for twice, a module that is not a module, nothing asked for."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from dumpkit.cpython.layouts import LAYOUTS
from dumpkit.cpython.objects import object_layout
from dumpkit.cpython.package_versions import REPORTED_PACKAGES, package_versions, read_package_versions
from tests.support.cpython_heap import THREAD_TYPE, Heap
from tests.support.samples import (
    SAMPLES,
    WINPYTHON,
    interpreter_exports,
    open_any,
    python_dump,
    python_manifest,
    run_cli,
)

FROM_MEMORY = "numpy.__version__ in the dump's memory"


def _numpy_dumps(dump_type: str) -> List[dict]:
    return [f for f in python_manifest() if (f.get("marker") or {}).get("numpy") and f["dump_type"] == dump_type]


def _name(facts: dict) -> str:
    return facts.get("name") or facts["file"].split(".")[0]


def _full_dumps_that_said_their_versions() -> List[Tuple[str, Path, Dict[str, str]]]:
    """(name, what is committed of it, the versions its program printed) for every sample
    whose dump holds the heap (full memory: the dump, or the bundle made from it)."""
    found = []
    for manifest in sorted(SAMPLES.glob("*/manifest.json")):
        for facts in json.loads(manifest.read_text())["dumps"]:
            marker = facts.get("marker") or {}
            ran = {k: marker[k] for k in ("tensorflow", "numpy") if isinstance(marker.get(k), str)}
            name = _name(facts)
            if not ran or not (facts.get("dump_type") == "full" or "_full" in name):
                continue
            committed = manifest.parent / facts["file"] if facts.get("file") else SAMPLES / "bundles" / f"{name}.dkb"
            found.append((name, committed, ran))
    return found


FULL = _full_dumps_that_said_their_versions()


@pytest.mark.slow  # analyze of full dumps (77 MB), twice each: the full run's
@pytest.mark.parametrize("name, committed, ran", FULL, ids=[name for name, _, _ in FULL])
def test_a_full_dump_names_the_versions_that_ran(name, committed, ran, plain):
    if not committed.exists():
        pytest.skip(f"{committed.name} is not here")
    r = run_cli("analyze", plain(committed), "--format", "json")
    assert r.returncode in (0, 1), r.stderr
    report = json.loads(r.stdout)
    env = report["environment"]
    for package, version in ran.items():
        said = {"name": package, "version": version, "source": f"{package}.__version__ in the dump's memory"}
        assert said in env.get("python_packages", []), (package, env.get("python_packages"))
    if "tensorflow" in ran:
        assert env["tensorflow_version"] == ran["tensorflow"]
    assert "package_versions" not in report["python"]  # said once, in the environment
    if "numpy" in ran:
        text = run_cli("analyze", plain(committed), "--width", "400").stdout  # the row on one line
        row = rf"^Packages +(\S+ \S+, )*numpy {re.escape(ran['numpy'])}(, \S+ \S+)* \(their __version__ in the dump's memory\)$"
        assert re.search(row, text, re.M), text


@pytest.mark.slow
@pytest.mark.parametrize("facts", _numpy_dumps("normal"), ids=_name)
def test_a_dump_without_the_heap_names_no_versions_and_says_why(facts, plain):
    target = open_any(plain(python_dump(facts)))
    exports, interp = interpreter_exports(target, [str(WINPYTHON)])  # a MiniDumpNormal lacks the export table
    found = read_package_versions(target, exports, interp, REPORTED_PACKAGES)
    assert found.versions == {}
    assert found.problem == "sys.modules is not in the dump (the heap: a full-memory dump has it)"
    r = run_cli("analyze", plain(python_dump(facts)), "--format", "json")
    # a version may still come from the installation the bundle recorded; none from memory
    said = json.loads(r.stdout)["environment"].get("python_packages", [])
    assert all("memory" not in p["source"] and p["source"].startswith("installed package") for p in said), said


def test_the_tests_have_full_dumps_of_numpy_and_tensorflow():
    if not FULL:
        pytest.skip("sample_dumps is not here")
    said = [set(ran) for _, _, ran in FULL]
    assert {"numpy"} in said and any("tensorflow" in s for s in said)


# --- synthetic memory: what the real dumps do not show -------------------------------------
OTHER_TYPE = THREAD_TYPE  # a type that is not `module`


def _versions(modules: Dict[str, int], heap: Heap, names=REPORTED_PACKAGES):
    return package_versions(heap.process(modules), names)


@pytest.mark.parametrize("minor", [8, 10, 11, 12])
def test_only_what_looks_like_a_version_is_taken(minor):
    p = Heap(object_layout((3, minor), LAYOUTS[(3, minor)]))
    modules = {
        "torch": p.module({"__version__": p.string("2.3.1+cu121")}),
        "numpy": p.module({"__version__": p.string("1.26.4")}),
        "scipy": p.module({"__version__": p.string("see the docs")}),
        "pandas": p.module({"__version__": p.dict({})}),  # not a str
        "jax": p.module({"__name__": p.string("jax")}),  # no __version__
        "h5py": p.module({"__version__": p.string("3.11.0")}, type_=OTHER_TYPE),  # not a module
        "json": p.module({"__version__": p.string("2.0.9")}),  # not asked for
    }
    found = _versions(modules, p)
    assert found.versions == {"numpy": "1.26.4", "torch": "2.3.1+cu121"}
    assert list(found.versions) == ["numpy", "torch"]  # REPORTED_PACKAGES' order, not sys.modules'
    assert found.problem is None


def test_nothing_asked_for_is_nothing_read():
    p = Heap(object_layout((3, 11), LAYOUTS[(3, 11)]))
    found = _versions({"numpy": p.module({"__version__": p.string("1.26.4")})}, p, names=())
    assert found.versions == {}
