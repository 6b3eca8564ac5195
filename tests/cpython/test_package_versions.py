"""The versions of the packages a Python process had imported, read from its heap
(dumpkit/cpython/package_versions.py), as `analyze` shows them in its environment, checked
against what the crashing program printed of itself (its MARKER line in the manifest:
numpy.__version__), never against dumpkit:

- sample_dumps/python's full-memory NumPy crash names the NumPy that ran, in JSON
  (`environment.python_packages`) and in the text report's "Packages" row;
- its MiniDumpNormal twin, without the heap, names none and says why;
- synthetic memory covers what the real dumps do not show: a __version__ that is not a
  version, a name asked for twice, a module that is not a module, nothing asked for."""

from __future__ import annotations

import json
import re
from typing import Dict, List

import pytest

from dumpkit.cpython.layouts import LAYOUTS
from dumpkit.cpython.objects import object_layout
from dumpkit.cpython.package_versions import REPORTED_PACKAGES, package_versions, read_package_versions
from tests.support.cpython_heap import THREAD_TYPE, Heap
from tests.support.samples import WINPYTHON, interpreter_exports, open_any, python_dump, python_manifest, run_cli

FROM_MEMORY = "numpy.__version__ in the dump's memory"


def _numpy_dumps(dump_type: str) -> List[dict]:
    return [f for f in python_manifest() if (f.get("marker") or {}).get("numpy") and f["dump_type"] == dump_type]


def _name(facts: dict) -> str:
    return facts["file"].split(".")[0]


@pytest.mark.parametrize("facts", _numpy_dumps("full"), ids=_name)
def test_a_full_dump_names_the_numpy_that_ran(facts, plain):
    dump = plain(python_dump(facts))
    ran = facts["marker"]["numpy"]
    r = run_cli("analyze", dump, "--format", "json")
    assert r.returncode == 0, r.stderr
    env = json.loads(r.stdout)["environment"]
    assert {"name": "numpy", "version": ran, "source": FROM_MEMORY} in env["python_packages"]
    assert "package_versions" not in json.loads(r.stdout)["python"]  # said once, in the environment
    text = run_cli("analyze", dump).stdout
    assert re.search(rf"^Packages +numpy {re.escape(ran)} \(their __version__ in the dump's memory\)$", text, re.M)


@pytest.mark.parametrize("facts", _numpy_dumps("normal"), ids=_name)
def test_a_dump_without_the_heap_names_no_versions_and_says_why(facts, plain):
    target = open_any(plain(python_dump(facts)))
    exports, interp = interpreter_exports(target, [str(WINPYTHON)])  # a MiniDumpNormal lacks the export table
    found = read_package_versions(target, exports, interp, REPORTED_PACKAGES)
    assert found.versions == {}
    assert found.problem == "sys.modules is not in the dump (the heap: a full-memory dump has it)"
    r = run_cli("analyze", plain(python_dump(facts)), "--format", "json")
    assert "python_packages" not in json.loads(r.stdout)["environment"]


def test_the_tests_have_a_full_numpy_dump():
    if not python_manifest():
        pytest.skip("sample_dumps/python is not here")
    assert _numpy_dumps("full"), "no full-memory NumPy sample in sample_dumps/python/manifest.json"


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
