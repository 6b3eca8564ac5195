"""The versions of the packages a Python process had imported, as the process itself held
them: `sys.modules[name].__version__` of the main interpreter, read from a dump's heap
(objects.py). NumPy and TensorFlow set `__version__` in their package's own globals
(numpy/__init__.py, tensorflow/__init__.py), so a full-memory dump names the very versions
that ran, with no image, installation or index at hand.

A MiniDumpNormal dump does not hold the heap: the result is empty, with `problem` saying
so. Never raises on dump data; each name is looked up in sys.modules as the interpreter
would (objects.py probes by the str's hash), so a reading touches a few pages per name, and
`dumpkit capture` records them for its Python-aware dump."""

from __future__ import annotations

import re
from typing import Dict, Optional, Sequence

from dumpkit.cpython.interpreter import Interpreter
from dumpkit.cpython.objects import ExportAddress, Objects, open_objects
from dumpkit.records import record
from dumpkit.target import Target

# The packages an ML bug report asks the versions of (sys.modules keys), in the order shown.
REPORTED_PACKAGES = (
    "tensorflow",
    "keras",
    "tf_keras",
    "numpy",
    "ml_dtypes",
    "google.protobuf",
    "h5py",
    "scipy",
    "pandas",
    "jax",
    "jaxlib",
    "torch",
    "onnxruntime",
)

# What a package's __version__ may be (PEP 440 and local labels, as text): anything else in
# the dump's memory is not taken for a version.
_VERSION = re.compile(r"[0-9][0-9A-Za-z.+!_-]{0,63}")


@record
class PackageVersions:
    """module name -> its `__version__`, for the names asked for that the interpreter had
    imported; `problem`: why sys.modules could not be read (one line), else None."""

    versions: Dict[str, str]
    problem: Optional[str] = None


def _main_modules(objects: Objects) -> Optional[int]:
    """The main interpreter's sys.modules (the last of the runtime's interpreters)."""
    interpreters = objects.interpreters()
    if not interpreters:
        return None
    modules = objects.pointer(interpreters[-1] + objects.layout.interp_modules)
    return modules or None


def _version_of(objects: Objects, module: int) -> Optional[str]:
    if not objects.is_a(module, "module"):
        return None
    globals_ = objects.pointer(module + objects.layout.module_dict)
    if not globals_:
        return None
    value = objects.dict_get(globals_, "__version__")
    found = objects.text(value) if value else None
    return found if found is not None and _VERSION.fullmatch(found) else None


def read_package_versions(
    target: Target, export_address: Optional[ExportAddress], interpreter: Interpreter, names: Sequence[str]
) -> PackageVersions:
    """`__version__` of each of `names` (sys.modules keys: "numpy", "google.protobuf") that
    the process's main interpreter had imported. `export_address` is python3X.dll's exports,
    as read_python_state takes them."""
    if export_address is None:
        return PackageVersions({}, f"{interpreter.module.name}'s exports are not known: _PyRuntime cannot be located")
    objects = open_objects(target, export_address, interpreter)
    if objects is None:
        return PackageVersions({}, f"the objects of CPython {interpreter.version_text} are not readable in this dump")
    return package_versions(objects, names)


def package_versions(objects: Objects, names: Sequence[str]) -> PackageVersions:
    """`__version__` of each of `names` among the main interpreter's sys.modules, in the
    order of `names`."""
    modules = _main_modules(objects)
    if modules is None or not objects.is_a(modules, "dict"):
        return PackageVersions({}, "sys.modules is not in the dump (the heap: a full-memory dump has it)")
    versions: Dict[str, str] = {}
    for name in dict.fromkeys(names):  # each probed for by its hash: a few pages, not every key
        module = objects.dict_get(modules, name)
        version = _version_of(objects, module) if module else None
        if version is not None:
            versions[name] = version
    return PackageVersions(versions)
