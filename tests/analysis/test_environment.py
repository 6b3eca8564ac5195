"""Behaviour of dumpkit.analysis.environment: what a TensorFlow issue report would be told
about the machine and the loaded stack, from real dumps first and small fakes for the rules
no real dump here exercises."""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence

import pytest

from dumpkit.analysis.environment import tf_builds
from dumpkit.analysis.environment import (
    cuda_toolkit_version,
    describe_environment,
    nvidia_driver_version,
    os_name,
    python_version_from_file_version,
)
from dumpkit.pe import PEImage, VersionInfo
from dumpkit.sources.minidump import open_dump
from dumpkit.target import InstalledPackage, Module, SystemInfo

from tests.support.samples import SAMPLE_BIN, real_dump, sample_path
from tests.support.fakes.target import MemoryTarget


# ----------------------------------------------------------------------------- helpers
def _image_version_from(directory) -> callable:
    """What the engine passes: module -> the PE version resource of its image. Here the
    images are found by file name under `directory` (the stand-ins in sample_dumps/bin/env)."""
    index: Dict[str, str] = {}
    for root, _dirs, files in os.walk(directory):
        for f in files:
            index.setdefault(f.lower(), os.path.join(root, f))
    calls: List[str] = []

    def lookup(module: Module) -> Optional[VersionInfo]:
        calls.append(module.name)
        path = index.get(module.name.lower())
        if path is None:
            return None
        with PEImage.from_file(path) as img:
            return img.version_info()

    lookup.calls = calls  # type: ignore[attr-defined]
    return lookup


def _env(path, **kw):
    with open_dump(str(path)) as t:
        return describe_environment(t, **kw)


def _target(system: Optional[SystemInfo], modules: Sequence[Module] = ()) -> MemoryTarget:
    """Just a system record and modules: all describe_environment reads here."""
    return MemoryTarget((), modules, system=system)


def _mod(path: str, fv: Optional[str] = None, base: int = 0x10000) -> Module:
    return Module(name=path.rsplit("\\", 1)[-1], path=path, base=base, size=0x1000, file_version=fv, product_version=fv)


def _win10_amd64(pf: int = 0, **kw) -> SystemInfo:
    args = {
        "processor_architecture": 9,
        "processor_level": 6,
        "processor_revision": 0x9E0A,
        "number_of_processors": 8,
        "product_type": 1,
        "os_major": 10,
        "os_minor": 0,
        "os_build": 19045,
        "platform_id": 2,
        "processor_features": (pf, 0),
    }
    args.update(kw)
    return SystemInfo(**args)


# ----------------------------------------------------------------------------- tf_env_abort.dmp
@pytest.fixture(scope="module")
def tf_env():
    path = sample_path("tf_env_abort.dmp")
    lookup = _image_version_from(SAMPLE_BIN / "env")
    return _env(path, image_version=lookup), lookup


def test_tf_env_python_from_python310_dll(tf_env):
    env, _ = tf_env
    # python310.dll's fixed FileVersion 3.10.11150.1013: FIELD3 11150 = micro 11, final.
    assert env.python == "3.10.11"
    assert env.python_module.endswith("\\Python310\\python310.dll")


def test_tf_env_tensorflow_module_and_version_from_its_resource(tf_env):
    env, _ = tf_env
    assert env.tensorflow and env.tensorflow[0].endswith(
        "\\site-packages\\tensorflow\\python\\_pywrap_tensorflow_internal.pyd"
    )
    assert env.tensorflow_version == "2.10.0"
    assert "version resource" in env.tensorflow_version_source


def test_tf_env_tensorflow_version_without_images_comes_from_the_dump(tf_env):
    # Wine's dbghelp filled VS_FIXEDFILEINFO (2.10.0.0) in the module record, so even with no
    # image the version is known; it just says where it came from.
    with open_dump(str(sample_path("tf_env_abort.dmp"))) as t:
        rec = next(m for m in t.modules if m.name == "_pywrap_tensorflow_internal.pyd")
        assert rec.file_version == "2.10.0.0"
        env = describe_environment(t)
    assert env.tensorflow_version == "2.10.0"
    assert "VS_FIXEDFILEINFO" in env.tensorflow_version_source
    assert env.python == "3.10.11"


def test_tf_env_cuda_components(tf_env):
    env, _ = tf_env
    by = {c.name: c for c in env.cuda}
    rt = by["CUDA runtime"]
    assert rt.module.endswith("cudart64_110.dll")
    assert rt.version.startswith("11.2")  # FileVersion 6.14.11.11020: 11020 -> 11.2
    assert rt.version == "11.2.152"  # the exact release, from the image's version strings
    assert rt.source == "module record"
    assert by["cuDNN"].version == "8.1.0" and "build 77" in by["cuDNN"].detail
    assert by["cuBLAS"].version == "11.4.1.1043"  # cuBLAS's own version, not the toolkit's
    assert "CUDA 11.2" in by["cuBLAS"].detail
    drv = by["NVIDIA driver"]
    assert drv.version == "531.79" and "31.0.15.3179" in drv.detail
    assert [c.name for c in env.cuda] == ["CUDA runtime", "cuDNN", "cuBLAS", "NVIDIA driver"]


def test_tf_env_cuda_without_images_uses_the_module_records():
    with open_dump(str(sample_path("tf_env_abort.dmp"))) as t:
        env = describe_environment(t)
    by = {c.name: c for c in env.cuda}
    assert by["CUDA runtime"].version == "11.2"
    assert by["cuDNN"].version == "8.1.0"
    assert by["cuBLAS"].version == "CUDA 11.2"
    assert by["NVIDIA driver"].version == "531.79"


def test_tf_env_compatibility_sentences(tf_env):
    env, _ = tf_env
    text = "\n".join(env.compatibility)
    # TF 2.5.0 ... 2.10.0 all list cuDNN 8.1 / CUDA 11.2 for Windows GPU.
    assert "CUDA 11.2 with cuDNN 8.1.0 is the tested Windows GPU configuration of TensorFlow 2.5-2.10" in text
    assert "TensorFlow 2.10.0 was tested on Windows with CUDA 11.2 and cuDNN 8.1" in text and " match." in text
    assert "Python 3.10 is within TensorFlow 2.10's tested Python range 3.7-3.10" in text
    assert "supports CUDA up to 12.1, enough for the CUDA 11.2 runtime" in text


def test_tf_env_is_wine_not_windows(tf_env):
    env, _ = tf_env
    assert env.wine and env.wine.startswith("wine-8.0")
    assert env.os.startswith("Wine 8.0")
    assert "not Windows" in env.os
    assert env.os_build.startswith("6.1.7601")
    assert any("Wine" in n for n in env.notes)


def test_tf_env_asks_each_image_once_at_most(tf_env):
    _env_, lookup = tf_env
    assert len(lookup.calls) == len(set(lookup.calls))
    assert "ntdll.dll" not in lookup.calls  # only modules the environment is about


def test_wine_pf_bits_show_avx_and_avx2_but_not_avx512_absence(tf_env):
    env, _ = tf_env
    # Wine 8.0 fills PF 36..40 (bits 39/40 set here) and never PF 41: no claim either way.
    assert env.cpu_features == {"AVX": True, "AVX2": True, "AVX512F": None}
    assert "PF_" in env.cpu_features_source


# ----------------------------------------------------------------------------- real Windows dumps
def test_sentry_windows11_amd_pf_bits():
    env = _env(real_dump("sentry-native/minidump.dmp"))
    # ProcessorFeatures[0] = 0x5fb10e2774c: bits 36-40 and 42 set, 41 clear.
    assert env.cpu_features == {"AVX": True, "AVX2": True, "AVX512F": False}
    assert "bit 39 set" in env.cpu_feature_sources["AVX"]
    assert "bit 41 clear" in env.cpu_feature_sources["AVX512F"]
    assert env.os == "Windows 11"
    assert env.os_build.startswith("10.0.22621")
    assert "22621.1.amd64fre.ni_release.220506-1250" in env.os_build
    assert env.wine is None
    assert "family 25 model 33" in env.cpu and "AMD" in env.cpu
    assert env.cuda == () and env.python is None and env.compatibility == ()


def test_skylake_server_reports_avx512():
    env = _env(real_dump("breakpad/tiny-exe-fastfail.dmp"))
    assert env.cpu_features == {"AVX": True, "AVX2": True, "AVX512F": True}
    assert env.os == "Windows 10"


def test_old_windows_without_pf_36_plus_claims_nothing():
    # Windows 10 1607 on a Haswell (model 69) CPU, which has AVX2: the OS simply does not
    # report PF 36+, so a clear bit 39 must not become "no AVX".
    env = _env(real_dump("node-minidump/windows.dmp"))
    assert env.cpu_features == {"AVX": None, "AVX2": None, "AVX512F": None}
    assert "unknown" in env.cpu_features_source


def test_xstate_clear_bit_is_not_evidence_of_absence():
    # Tiger Lake (family 6 model 140) has AVX; this dump's XSTATE mask lacks bit 2 anyway.
    env = _env(real_dump("breakpad/tiny-exe-with-cet-xsave.dmp"))
    assert env.cpu_features["AVX"] is None
    assert env.os == "Windows 11"


def test_xstate_shows_avx_on_an_x86_dump():
    env = _env(real_dump("breakpad/tiny-exe-with-cet-xsave-x86.dmp"))
    assert env.cpu_features == {"AVX": True, "AVX2": None, "AVX512F": None}
    assert "XSTATE" in env.cpu_feature_sources["AVX"]


def test_x86_breakpad_dump_has_no_avx_evidence():
    env = _env(real_dump("breakpad/stack_exhaustion.dmp"))
    assert env.cpu_features == {"AVX": None, "AVX2": None, "AVX512F": None}
    assert "ECX" in env.cpu_features_source
    assert env.cpu.startswith("GenuineIntel family 6 model 26 stepping 5")
    assert env.os == "Windows 7"


def test_server_edition_by_product_type():
    env = _env(real_dump("symbolic/windows_mini.dmp"))
    assert env.os == "Windows Server 2016"


def test_dumps_without_system_info_still_describe():
    env = _env(real_dump("rust-minidump/invalid-range.dmp"))
    assert env.os is None and env.cpu_features == {"AVX": None, "AVX2": None, "AVX512F": None}


# ----------------------------------------------------------------------------- decoding rules
@pytest.mark.parametrize(
    "fv,expected",
    [
        ("31.0.15.3179", "531.79"),
        ("27.21.14.5671", "456.71"),
        ("30.0.15.1179", "511.79"),
        ("26.21.14.3200", "432.00"),
        ("32.0.15.6094", "560.94"),
        ("1.2", None),
    ],
)
def test_nvidia_driver_version(fv, expected):
    assert nvidia_driver_version(fv) == expected


@pytest.mark.parametrize(
    "fv,expected",
    [
        ("6.14.11.11020", "11.2"),
        ("6.14.11.10010", "10.1"),
        ("6.14.11.9000", "9.0"),
        ("6.14.11.12010", "12.1"),
        ("8.1.0.77", None),
        (None, None),
    ],
)
def test_cuda_toolkit_version(fv, expected):
    assert cuda_toolkit_version(fv) == expected


@pytest.mark.parametrize(
    "fv,expected",
    [
        ("3.10.11150.1013", "3.10.11"),
        ("3.12.1150.1013", "3.12.1"),
        ("3.13.0101.1013", "3.13.0a1"),
        ("3.11.0122.1013", "3.11.0rc2"),
    ],
)
def test_python_file_version(fv, expected):
    assert python_version_from_file_version(fv) == expected


@pytest.mark.parametrize(
    "ver,ptype,name",
    [
        ((10, 0, 22000), 1, "Windows 11"),
        ((10, 0, 19045), 1, "Windows 10"),
        ((10, 0, 20348), 3, "Windows Server 2022"),
        ((6, 1, 7601), 1, "Windows 7"),
        ((6, 1, 7601), 3, "Windows Server 2008 R2"),
    ],
)
def test_os_names(ver, ptype, name):
    assert os_name(*ver, product_type=ptype) == name


def test_tf_table_has_the_last_native_windows_gpu_release():
    row = tf_builds.build_for(2, 10)
    assert (row.python, row.cudnn, row.cuda, row.compiler) == (("3.7", "3.10"), "8.1", "11.2", "MSVC 2019")
    assert tf_builds.build_for(2, 11) is None
    assert tf_builds.cudart_dll_tag("11.2") == "110" and tf_builds.cudart_dll_tag("10.1") == "101"


# ----------------------------------------------------------------------------- synthetic stacks
def test_pf_clear_bits_count_only_when_the_os_reports_the_block():
    ssse3_to_sse42 = (1 << 36) | (1 << 37) | (1 << 38)
    env = describe_environment(_target(_win10_amd64(ssse3_to_sse42)))
    assert env.cpu_features == {"AVX": False, "AVX2": False, "AVX512F": False}  # e.g. a Pentium
    env = describe_environment(_target(_win10_amd64(1 << 2)))  # only old bits present
    assert env.cpu_features == {"AVX": None, "AVX2": None, "AVX512F": None}


def test_tf_211_with_cuda_dlls_on_native_windows_gets_the_wsl2_note():
    mods = [
        _mod(r"C:\Python311\python311.dll", "3.11.4150.1013"),
        _mod(r"C:\venv\Lib\site-packages\tensorflow\python\_pywrap_tensorflow_internal.pyd", "2.12.0.0", 0x20000),
        _mod(r"C:\CUDA\v11.8\bin\cudart64_110.dll", "6.14.11.11080", 0x30000),
        _mod(r"C:\CUDA\v11.8\bin\cudnn64_8.dll", "8.6.0.163", 0x40000),
    ]
    env = describe_environment(_target(_win10_amd64(), mods))
    assert env.python == "3.11.4" and env.tensorflow_version == "2.12.0"
    text = " ".join(env.compatibility)
    assert "2.11 and later have no GPU support on native Windows" in text and "WSL2" in text
    assert "CUDA 11.8 with cuDNN 8.6.0 is not a tested Windows GPU configuration" in text
    assert "TensorFlow 2.4-2.10 Windows GPU builds load" in text


def test_python_outside_tested_range_and_mismatched_pair():
    mods = [
        _mod(r"C:\Python311\python311.dll", "3.11.4150.1013"),
        _mod(r"C:\py\Lib\site-packages\tensorflow\python\_pywrap_tensorflow_internal.pyd", "2.10.1.0", 0x20000),
        _mod(r"C:\CUDA\v11.0\bin\cudart64_110.dll", "6.14.11.11000", 0x30000),
        _mod(r"C:\CUDA\v11.0\bin\cudnn64_8.dll", "8.0.5.39", 0x40000),
    ]
    env = describe_environment(_target(_win10_amd64(), mods))
    text = " ".join(env.compatibility)
    assert "tested Windows GPU configuration of TensorFlow 2.4" in text
    assert "TensorFlow 2.10.1 was tested on Windows with CUDA 11.2 and cuDNN 8.1" in text
    assert "do not match" in text
    assert "Python 3.11 is OUTSIDE TensorFlow 2.10's tested Python range 3.7-3.10" in text


def test_names_only_when_nothing_carries_a_version():
    mods = [
        _mod(r"C:\x\cudart64_101.dll"),
        _mod(r"C:\x\cudnn64_7.dll", base=0x20000),
        _mod(r"C:\Windows\System32\nvcuda.dll", base=0x30000),
        _mod(
            r"C:\envs\tensorflow-gpu-2.3.0\Lib\site-packages\tensorflow_core\python\_pywrap_tensorflow_internal.pyd",
            base=0x40000,
        ),
    ]
    env = describe_environment(_target(_win10_amd64(), mods), image_version=lambda m: None)
    by = {c.name: c for c in env.cuda}
    assert by["CUDA runtime"].version == "10.1" and by["CUDA runtime"].source == "file name"
    assert by["cuDNN"].version == "7" and by["cuDNN"].source == "file name"
    assert by["NVIDIA driver"].version is None and by["NVIDIA driver"].source is None
    assert env.tensorflow_version == "2.3.0" and env.tensorflow_version_source.startswith("path hint")
    text = " ".join(env.compatibility)
    # Only cuDNN's major is known: never "tested", never "mismatch", but "if it is 7.6".
    assert (
        "CUDA 10.1 with cuDNN 7.x is the tested Windows GPU configuration of TensorFlow 2.1-2.3 if the cuDNN is 7.6"
    ) in text
    assert "match as far as known" in text and "do not match" not in text


def test_a_failing_lookup_is_a_note_not_a_crash():
    def boom(_m):
        raise OSError("disk on fire")

    mods = [_mod(r"C:\Python310\python310.dll")]
    env = describe_environment(_target(_win10_amd64(), mods), image_version=boom)
    assert env.python == "3.10"
    assert any("disk on fire" in n for n in env.notes)


def test_the_processs_own_tensorflow_version_comes_before_installations_and_paths():
    """`tensorflow.__version__` from a full dump's heap: after the module's own version
    records, before an installation's RECORD and the path hint; every package read shown."""
    pyd = _mod(r"C:\envs\tensorflow-2.3.0\Lib\site-packages\tensorflow\python\_pywrap_tensorflow_internal.pyd")
    asked: List[str] = []

    def installed(module):
        asked.append(module.name)
        return None

    loaded = {"tensorflow": "2.13.0", "numpy": "1.24.3"}
    env = describe_environment(
        _target(_win10_amd64(), [pyd]),
        image_version=lambda m: None,
        installed_package=installed,
        loaded_versions=loaded,
    )
    assert env.tensorflow_version == "2.13.0"
    assert env.tensorflow_version_source == "tensorflow.__version__ in the dump's memory (sys.modules)"
    assert asked == []  # the process said it: no installation is asked
    assert [(p.name, p.version) for p in env.python_packages] == [("tensorflow", "2.13.0"), ("numpy", "1.24.3")]
    # the module's own record still wins: it is the build itself
    versioned = _mod(pyd.path, "2.12.0.0")
    env = describe_environment(
        _target(_win10_amd64(), [versioned]), image_version=lambda m: None, loaded_versions=loaded
    )
    assert env.tensorflow_version == "2.12.0" and "VS_FIXEDFILEINFO" in env.tensorflow_version_source
    # what does not read as a version is not taken for one
    env = describe_environment(
        _target(_win10_amd64(), [pyd]), image_version=lambda m: None, loaded_versions={"tensorflow": "unknown"}
    )
    assert env.tensorflow_version == "2.3.0" and env.tensorflow_version_source.startswith("path hint")


def test_numpys_version_from_its_installation_when_the_heap_has_none():
    """NumPy's extension module names its distribution; the heap's own __version__ wins."""
    umath = _mod(r"C:\venv\Lib\site-packages\numpy\core\_multiarray_umath.cp311-win_amd64.pyd")
    numpy2 = _mod(r"C:\venv\Lib\site-packages\numpy\_core\_multiarray_umath.cp312-win_amd64.pyd")
    record = r"C:\venv\Lib\site-packages\numpy-1.26.4.dist-info"

    def installed(module):
        return InstalledPackage("numpy", "1.26.4", record) if "_multiarray_umath" in module.name else None

    for module in (umath, numpy2):
        env = describe_environment(_target(_win10_amd64(), [module]), installed_package=installed)
        assert [(p.name, p.version, p.source) for p in env.python_packages] == [
            ("numpy", "1.26.4", f"installed package numpy 1.26.4, whose RECORD lists {module.name} ({record})")
        ]
    env = describe_environment(
        _target(_win10_amd64(), [umath]), installed_package=installed, loaded_versions={"numpy": "1.26.3"}
    )
    assert [(p.name, p.version) for p in env.python_packages] == [("numpy", "1.26.3")]
    assert env.python_packages[0].source == "numpy.__version__ in the dump's memory"
    elsewhere = _mod(r"C:\venv\Lib\site-packages\vendored\_multiarray_umath.cp311-win_amd64.pyd")
    assert describe_environment(_target(_win10_amd64(), [elsewhere]), installed_package=installed).python_packages == ()
