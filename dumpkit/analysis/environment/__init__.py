"""The environment a TensorFlow issue report asks for, read from a dump.

OS and build, CPU and its AVX support, the memory committed (analysis/memory.py), Python,
the TensorFlow module, the CUDA runtime / cuDNN / CUDA libraries / NVIDIA driver, and
whether they fit TensorFlow's tested Windows GPU configurations (`tf_builds`); the
versions of the Python packages the process had imported (from the heap, else from the
installation of their extension modules).

Pure over a `Target`: no file I/O here. Versions come from the dump's own module records
(VS_FIXEDFILEINFO); the caller may pass `image_version(module)`, which reads the PE version
resource of the module's image when one was found (that adds the version *strings*, e.g.
"NVIDIA CUDA 11.2.152 Runtime", which a minidump never carries).

Every value says where it came from, and nothing is claimed that the dump does not show:
a CPU feature the dump has no evidence for is None (unknown), not False.
"""

from __future__ import annotations

from typing import List, Mapping, Optional

from dumpkit.analysis.environment.compatibility import compatibility
from dumpkit.analysis.environment.cpu import cpu_features, cpu_name
from dumpkit.analysis.environment.cuda import cuda_toolkit_version, find_cuda, nvidia_driver_version
from dumpkit.analysis.environment.pypackages import PackageLookup, python_packages
from dumpkit.analysis.environment.python import find_python, python_version_from_file_version
from dumpkit.analysis.environment.runtimes import ImageFacts, ImageFactsLookup, runtime_collisions
from dumpkit.analysis.environment.tensorflow import find_tensorflow
from dumpkit.analysis.environment.versions import VersionLookup, Versions
from dumpkit.analysis.environment.windows import os_build, os_name, wine_description
from dumpkit.analysis.memory import memory_use
from dumpkit.analysis.model import Environment
from dumpkit.target import Target

__all__ = [
    "describe_environment",
    "VersionLookup",
    "PackageLookup",
    "ImageFacts",
    "ImageFactsLookup",
    "cpu_features",
    "nvidia_driver_version",
    "cuda_toolkit_version",
    "python_version_from_file_version",
    "os_name",
]


def describe_environment(
    target: Target,
    *,
    image_version: Optional[VersionLookup] = None,
    installed_package: Optional[PackageLookup] = None,
    image_facts: Optional[ImageFactsLookup] = None,
    loaded_versions: Optional[Mapping[str, str]] = None,
) -> Environment:
    """Everything an issue report asks about the machine and the loaded stack, from a dump.

    `image_version(module)` (optional) returns the PE version resource of the module's image
    (or None); it is called at most once per module and only for modules named here.
    `installed_package(module)` (optional) returns the Python distribution that installed the
    module's file, where that installation is reachable (TensorFlow's version when its
    modules carry none). `image_facts(module)` (optional) returns the module's image (its
    linker version and imports): the runtime collisions read them, only for the modules a
    rule needs (runtimes.py); without it they rest on the module list alone.
    `loaded_versions` (optional) maps a package's sys.modules name to the `__version__` the
    process held (the Python phase reads them from a full dump's heap)."""
    system = target.system
    modules = list(target.modules)
    vers = Versions(image_version)
    notes: List[str] = []

    os_text = build = wine = cpu = None
    if system is not None:
        build = os_build(system, target.build_string)
        if system.wine_version:
            wine = system.wine_version
            os_text = wine_description(system.wine_version, system)
            notes.append(
                "The process ran under Wine: OS version, CPU data and DLL behaviour are "
                "Wine's, not those of a Windows machine."
            )
        else:
            os_text = os_name(system.os_major, system.os_minor, system.os_build, system.product_type)
        cpu = cpu_name(system)
    feats, feat_sources, feat_summary = cpu_features(system, target.xstate_enabled_features)

    python, python_module, python_exe = find_python(modules, vers)
    loaded = dict(loaded_versions or {})
    tf_paths, tf_version, tf_source = find_tensorflow(
        modules, vers, _guarded(installed_package, notes), loaded.get("tensorflow")
    )
    cuda = find_cuda(modules, vers)
    compat = compatibility(cuda, tf_version, python, wine is not None)
    if tf_paths and not tf_version:
        notes.append(
            "TensorFlow's version is unknown: its modules carry no version resource and "
            "no installed package (a tensorflow*.dist-info whose RECORD lists them) was found "
            'next to their files; run `python -c "import tensorflow as tf; '
            'print(tf.__version__)"` in the same environment, or analyse with --fetch-images: the wheel '
            "that holds their very build names the version."
        )
    collisions = runtime_collisions(modules, vers, image_facts)
    notes.extend(vers.problems)
    return Environment(
        os=os_text,
        os_build=build,
        wine=wine,
        cpu=cpu,
        cpu_features=feats,
        cpu_features_source=feat_summary,
        cpu_feature_sources=feat_sources,
        python=python,
        python_module=python_module,
        python_executable=python_exe,
        tensorflow=tf_paths,
        tensorflow_version=tf_version,
        tensorflow_version_source=tf_source,
        cuda=tuple(cuda.components),
        compatibility=compat,
        notes=tuple(notes),
        runtime_collisions=collisions,
        python_packages=python_packages(modules, loaded, _guarded(installed_package, notes)),
        memory=memory_use(target.process_memory, target.system_memory),
    )


def _guarded(lookup: Optional[PackageLookup], notes: List[str]) -> Optional[PackageLookup]:
    """The caller's lookup reads files; a failure there is a note, never a lost report."""
    if lookup is None:
        return None

    def guarded(module):
        try:
            return lookup(module)
        except Exception as e:
            notes.append(f"{module.name}: installed-package lookup failed ({e})")
            return None

    return guarded
