"""analysis/environment/runtimes.py: runtime DLLs loaded together that do not fit. Real
dumps first (sample_dumps/collisions: two Intel OpenMP runtimes, CUDA runtimes and cuDNN of
two majors, the std::mutex break of msvcp140.dll 14.34 under ctranslate2 4.8.5, made under
Wine with python.org's CPython and real wheels), then module lists as real dumps record them,
with synthetic images (tests/support/synth_pe.py) for the linker versions and msvcp140
imports no committed image has, and python.org's own extensions where ../shared has them."""

from __future__ import annotations

from typing import Dict, Optional, Sequence

import pytest

from dumpkit.analysis.environment import describe_environment
from dumpkit.analysis.environment.runtimes import MAX_IMAGES_EXAMINED, package_of, runtime_collisions
from dumpkit.analysis.environment.versions import Versions
from dumpkit.analysis.model import CollisionKind, Confidence
from dumpkit.commands.inputs import open_target
from dumpkit.engine import Options, analyze
from dumpkit.pe import PEImage
from dumpkit.report.json_report import report_dict
from dumpkit.report.text import text_lines
from dumpkit.target import Module

from tests.support.samples import ROOT, build_cache, sample_path
from tests.support.synth_pe import make_import_image

# Where sample_dumps/collisions/build.sh keeps the interpreter folders its runs used (the
# wheels' DLLs are not committed): the msvcp140 rule needs ctranslate2's images.
COLLISIONS_CACHE = build_cache("COLLISIONS_CACHE", "cache-collisions")
WINPYTHON = ROOT.parent / "shared" / "winpython"

SITE = "C:\\Python311\\Lib\\site-packages"
MUTEX_IMPORTS = ("MSVCP140.dll", ["_Mtx_lock", "_Mtx_unlock", "_Thrd_yield"])
OLD_MUTEX_IMPORTS = ("MSVCP140.dll", ["_Mtx_init_in_situ", "_Mtx_lock", "_Mtx_unlock"])


def _collisions(name: str, **kw):
    target, _problems = open_target(str(sample_path(f"collisions/{name}")))
    with target:
        return describe_environment(target, **kw).runtime_collisions


def _mod(path: str, fv: Optional[str] = None, base: int = 0x10000) -> Module:
    return Module(name=path.rsplit("\\", 1)[-1], path=path, base=base, size=0x1000, file_version=fv)


def _modules(*specs) -> Sequence[Module]:
    """Modules at distinct bases, as a dump lists them."""
    return [_mod(path, fv, base=0x10000000 * (i + 1)) for i, (path, fv) in enumerate(specs)]


def _images(by_name: Dict[str, bytes]):
    """The engine's lookup: a module -> its image; here synthetic files by module name."""
    asked = []

    def lookup(module: Module) -> Optional[PEImage]:
        asked.append(module.name)
        blob = by_name.get(module.name.lower())
        return PEImage.from_bytes(blob, module.name) if blob is not None else None

    lookup.asked = asked  # type: ignore[attr-defined]
    return lookup


def _run(modules, images=None, problems=None):
    versions = Versions(None)
    out = runtime_collisions(modules, versions, images)
    if problems is not None:
        problems.extend(versions.problems)
    return out


# ----------------------------------------------------------------------------- real dumps
@pytest.mark.parametrize(
    "name, home", [("omp_duplicate_py311.dmp.xz", "Python311"), ("omp_duplicate_py312.dmp.xz", "Python312")]
)
def test_two_intel_openmp_runtimes_from_a_real_dump(name, home):
    """intel-openmp's libiomp5md.dll in sys.prefix\\Library\\bin and ctranslate2's own copy:
    the process printed OMP: Error #15 and ended with exit code 3."""
    (c,) = _collisions(name)
    assert c.kind is CollisionKind.OPENMP and c.confidence is Confidence.HIGH
    assert [(m.path, m.version, m.package) for m in c.modules] == [
        (f"C:\\{home}\\Library\\bin\\libiomp5md.dll", "5.0.2026.828", "the environment's Library\\bin"),
        (f"C:\\{home}\\Lib\\site-packages\\ctranslate2\\libiomp5md.dll", "5.0.2025.910", "ctranslate2"),
    ]
    assert c.title.startswith("Two copies of Intel's OpenMP runtime are loaded")
    assert "OMP: Error #15" in c.leads_to and "exit code 3" in c.leads_to
    assert any("KMP_DUPLICATE_LIB_OK=TRUE" in w and "only silences" in w for w in c.ways_out)


def test_one_openmp_runtime_is_no_collision():
    """The control: the same interpreter folder, one libiomp5md.dll loaded, os.abort()."""
    assert _collisions("omp_single_py311.dmp.xz") == ()


def test_cuda_runtimes_and_cudnn_of_two_majors_from_a_real_dump():
    (c,) = _collisions("two_cuda_runtimes_py311.dmp.xz")
    assert c.kind is CollisionKind.CUDA and c.confidence is Confidence.MEDIUM
    assert [(m.name, m.package, m.role) for m in c.modules] == [
        ("cudart64_110.dll", "nvidia.cuda_runtime", "CUDA 11.8 runtime"),
        ("cudart64_12.dll", "nvidia.cuda_runtime", "CUDA 12.9 runtime"),
        ("cudnn64_9.dll", "ctranslate2", "cuDNN 9.10.2"),
        ("cudnn64_8.dll", None, "cuDNN 8"),  # C:\apps\legacy\ctranslate2: no package folder says whose
    ]
    assert c.title.startswith("CUDA runtimes 11.8 and 12.9, and cuDNN 8 and 9.10.2, are loaded together")
    assert "newest loaded (CUDA 12.9)" in c.leads_to


def test_the_msvcp140_break_needs_the_images_and_is_not_claimed_without_them():
    """Without ctranslate2's images the dump shows an old msvcp140.dll and nothing of who
    needs a newer one: no msvcp140 collision is claimed (OpenMP's vcomp + Intel pair is)."""
    found = _collisions("msvcp140_mutex_py311.dmp.xz")
    assert [c.kind for c in found] == [CollisionKind.OPENMP]
    assert found[0].confidence is Confidence.LOW  # vcomp140 beside libiomp5md: no Error #15


@pytest.mark.parametrize("source", ["bundle", "images"])
def test_the_msvcp140_break_from_a_real_dump_and_its_images(source):
    """From a bundle of the dump with the image pages its analysis reads (ctranslate2's
    import tables among them), when one is committed; else from the interpreter folder of
    the run, where build.sh left it."""
    if source == "bundle":
        bundle = ROOT / "sample_dumps" / "bundles" / "msvcp140_mutex_py311.dkb"
        if not bundle.exists():
            pytest.skip("no bundle of msvcp140_mutex_py311 with its images is committed")
        path, options = bundle, Options()
    else:
        folder = COLLISIONS_CACHE / "envs" / "msvcp140_py311"
        if not folder.is_dir():
            pytest.skip(f"{folder} not present (sample_dumps/collisions/build.sh makes it)")
        path, options = sample_path("collisions/msvcp140_mutex_py311.dmp.xz"), Options(image_paths=[str(folder)])
    target, problems = open_target(str(path))
    with target:
        report = analyze(target, options, problems=problems).report
    c = next(c for c in report.environment.runtime_collisions if c.kind is CollisionKind.MSVCP140_MUTEX)
    assert c.confidence is Confidence.HIGH
    assert [(m.name, m.version, m.package) for m in c.modules] == [
        ("MSVCP140.dll", "14.34.31931.0", "the Python installation"),
        ("ctranslate2.dll", None, "ctranslate2"),
        ("_ext.cp311-win_amd64.pyd", None, "ctranslate2"),
    ]
    assert all("linked by MSVC 14.44" in m.role for m in c.modules[1:])
    assert "14.34.31931.0" in c.title and "C:\\Python311" in c.title
    assert c.ways_out[0].startswith("Replace C:\\Python311\\MSVCP140.dll")  # python.exe's folder is searched first
    assert any("`_DISABLE_CONSTEXPR_MUTEX_CONSTRUCTOR`" in w for w in c.ways_out)


def test_a_collision_in_every_format_of_a_real_dumps_report():
    target, problems = open_target(str(sample_path("collisions/omp_duplicate_py311.dmp.xz")))
    with target:
        report = analyze(target, problems=problems).report
    (doc,) = report_dict(report)["environment"]["runtime_collisions"]
    assert doc["kind"] == "openmp" and doc["confidence"] == "high" and len(doc["modules"]) == 2
    text = "\n".join(line.plain for line in text_lines(report, width=200))
    assert "Runtime collision (high confidence)" in text and "ctranslate2\\libiomp5md.dll" in text


# ----------------------------------------------------------------------------- msvcp140.dll and std::mutex
PYQT_OLD = (f"{SITE}\\PyQt5\\Qt5\\bin\\MSVCP140.dll", "14.26.28720.3")
EXTENSION = f"{SITE}\\fastext\\_core.cp311-win_amd64.pyd"


def test_an_old_msvcp140_under_an_extension_linked_by_msvc_1440():
    modules = _modules(PYQT_OLD, (EXTENSION, None))
    images = _images({"_core.cp311-win_amd64.pyd": make_import_image([MUTEX_IMPORTS]).file})
    (c,) = _run(modules, images)
    assert c.kind is CollisionKind.MSVCP140_MUTEX and c.confidence is Confidence.HIGH
    old, ext = c.modules
    assert (old.package, old.version, ext.package) == ("PyQt5", "14.26.28720.3", "fastext")
    assert "linked by MSVC 14.40" in ext.role and "imports _Mtx_lock but not _Mtx_init_in_situ" in ext.role
    assert c.title.startswith(
        "MSVCP140.dll 14.26.28720.3 from PyQt5 (C:\\Python311\\Lib\\site-packages\\PyQt5\\Qt5\\bin)"
    )
    assert "access violation reading address 0" in c.leads_to
    assert c.ways_out[0].startswith("Load a current msvcp140.dll first: import fastext before PyQt5")
    assert "Visual C++ Redistributable" in c.ways_out[1]
    assert c.unknown == ()


@pytest.mark.parametrize(
    "why, image, old",
    [
        ("constructs its mutexes through msvcp140", make_import_image([OLD_MUTEX_IMPORTS]), PYQT_OLD),
        ("linked before 14.40", make_import_image([MUTEX_IMPORTS], linker_version=(14, 38)), PYQT_OLD),
        ("msvcp140.dll is current", make_import_image([MUTEX_IMPORTS]), (PYQT_OLD[0], "14.40.33810.0")),
        ("its own renamed copy", make_import_image([("msvcp140-0a1b2c.dll", MUTEX_IMPORTS[1])]), PYQT_OLD),
        (
            "mingw's code imports msvcrt",
            make_import_image([("msvcrt.dll", ["malloc"])], linker_version=(2, 40)),
            PYQT_OLD,
        ),
    ],
)
def test_no_mutex_collision_when(why, image, old):
    assert _run(_modules(old, (EXTENSION, None)), _images({"_core.cp311-win_amd64.pyd": image.file})) == (), why


def test_an_unknown_msvcp140_version_claims_nothing():
    images = _images({"_core.cp311-win_amd64.pyd": make_import_image([MUTEX_IMPORTS]).file})
    assert _run(_modules((PYQT_OLD[0], None), (EXTENSION, None)), images) == ()


def test_imports_that_cannot_be_read_give_a_low_confidence_collision():
    """The header of a 14.40 module is in the dump, its import table is not."""
    synth = make_import_image([MUTEX_IMPORTS])
    r = synth.info["rdata"]
    modules = _modules(PYQT_OLD, (EXTENSION, None))
    ext = modules[1]

    def lookup(module):
        if module is ext:
            return PEImage.from_memory(synth.reader(base=ext.base, missing=[(r, r + 0x1000)]), ext.base)
        return None

    (c,) = _run(modules, lookup)
    assert c.confidence is Confidence.LOW
    assert "its imports could not be read in full" in c.modules[1].role
    assert "if _core.cp311-win_amd64.pyd locks a std::mutex" in c.leads_to
    assert any("could not be read in full" in u for u in c.unknown)


def test_a_current_copy_loaded_too_lowers_the_confidence():
    modules = _modules(PYQT_OLD, (EXTENSION, None), ("C:\\other\\MSVCP140.dll", "14.42.34433.0"))
    (c,) = _run(modules, _images({"_core.cp311-win_amd64.pyd": make_import_image([MUTEX_IMPORTS]).file}))
    assert c.confidence is Confidence.MEDIUM and c.modules[-1].role == "a current msvcp140.dll, also loaded"


def test_windows_own_old_msvcp140():
    modules = _modules(("C:\\Windows\\System32\\msvcp140.dll", "14.29.30139.0"), (EXTENSION, None))
    (c,) = _run(modules, _images({"_core.cp311-win_amd64.pyd": make_import_image([MUTEX_IMPORTS]).file}))
    assert c.modules[0].package == "Windows"
    assert c.ways_out[0].startswith("Import first a package that ships msvcp140.dll 14.40 or newer")


def test_modules_without_images_are_said_unknown_and_windows_is_not_asked():
    modules = _modules(
        PYQT_OLD,
        (EXTENSION, None),
        (f"{SITE}\\other\\other.pyd", None),
        ("C:\\Windows\\System32\\kernel32.dll", "10.0.19041.1"),
        ("C:\\Python311\\VCRUNTIME140.dll", "14.29.30139.0"),
    )
    images = _images({"_core.cp311-win_amd64.pyd": make_import_image([MUTEX_IMPORTS]).file})
    (c,) = _run(modules, images)
    assert c.unknown == (
        "1 other module had no image to read (e.g. other.pyd): whether it needs msvcp140.dll 14.40 is not known.",
    )
    assert "kernel32.dll" not in images.asked and "VCRUNTIME140.dll" not in images.asked


def test_without_an_image_lookup_the_mutex_rule_says_nothing():
    assert _run(_modules(PYQT_OLD, (EXTENSION, None))) == ()


def test_a_failing_lookup_is_a_problem_line():
    def boom(module):
        raise OSError("disk gone")

    problems = []
    assert _run(_modules(PYQT_OLD, (EXTENSION, None)), boom, problems) == ()
    assert problems and "image lookup failed (disk gone)" in problems[0]


def test_images_asked_are_bounded():
    many = [(f"{SITE}\\pkg{i}\\m{i}.pyd", None) for i in range(MAX_IMAGES_EXAMINED + 300)]
    images = _images({})
    _run(_modules(PYQT_OLD, *many), images)
    assert len(images.asked) == MAX_IMAGES_EXAMINED


# ----------------------------------------------------------------------------- OpenMP
@pytest.mark.parametrize(
    "names, confidence, title",
    [
        (("libiomp5md.dll", "libomp.dll"), Confidence.HIGH, "Two OpenMP runtimes of Intel's code"),
        (("libiomp5md-5f3c.dll", "libiomp5md-91ab.dll"), Confidence.HIGH, "Two copies of Intel's OpenMP runtime"),
        (("libiomp5md.dll", "vcomp140.dll"), Confidence.LOW, "Two OpenMP runtimes are loaded"),
        (("libgomp-1.dll", "vcomp140.dll"), Confidence.LOW, "Two OpenMP runtimes are loaded"),
    ],
)
def test_openmp_pairs(names, confidence, title):
    (c,) = _run(_modules(*((f"{SITE}\\pkg{i}\\{n}", None) for i, n in enumerate(names))))
    assert c.confidence is confidence and c.title.startswith(title)
    assert [m.package for m in c.modules] == ["pkg0", "pkg1"]
    assert ("OMP: Error #15" in c.leads_to) is (confidence is Confidence.HIGH)


def test_one_openmp_runtime_beside_its_stubs_is_fine():
    assert (
        _run(
            _modules((f"{SITE}\\torch\\lib\\libiomp5md.dll", None), (f"{SITE}\\torch\\lib\\libiompstubs5md.dll", None))
        )
        == ()
    )


# ----------------------------------------------------------------------------- Python
def test_two_python_dlls_and_the_extension_named_for_the_other():
    """No images: python.exe's folder says which DLL is the interpreter's, the wheel tag of
    the extension which Python it was built for."""
    modules = _modules(
        ("C:\\Python310\\python.exe", "3.10.11150.1013"),
        ("C:\\Python310\\python310.dll", "3.10.11150.1013"),
        ("C:\\Python310\\Lib\\site-packages\\fast\\_speed.cp39-win_amd64.pyd", None),
        ("C:\\Python39\\python39.dll", "3.9.13150.1013"),
    )
    (c,) = _run(modules, _images({}))
    assert c.kind is CollisionKind.PYTHON and c.confidence is Confidence.HIGH
    assert [(m.name, m.role) for m in c.modules] == [
        ("python310.dll", "the interpreter's Python DLL"),
        ("python39.dll", "a second Python DLL"),
        ("_speed.cp39-win_amd64.pyd", "an extension built for another Python: named for CPython 3.9"),
    ]
    assert "python310.dll 3.10.11" in c.title and "python39.dll 3.9.13" in c.title
    assert c.title.endswith("_speed.cp39-win_amd64.pyd pulled the second in")
    assert c.ways_out[0].startswith("Reinstall (or rebuild) fast for this interpreter (Python 3.10)")
    assert "C:\\Python39" in c.ways_out[1]


@pytest.mark.parametrize("with_exe", [False, True])
def test_an_extension_linked_against_python39_in_a_real_311_process(with_exe):
    """sample_dumps/endings/two_pythons_py311: oldext.dll (committed, linked against
    python39.dll) loaded by ctypes into python.org's 3.11 crashed in python39.dll, never
    initialised. Its image says it imports python39.dll; python.exe's folder (or, with
    python.org's python.exe from ../shared, its imports) says python311.dll is the
    interpreter's."""
    paths = [str(ROOT / "sample_dumps" / "endings" / "bin")]
    if with_exe:
        exe = WINPYTHON / "cpython-3.11-amd64"
        if not exe.is_dir():
            pytest.skip("../shared/winpython/cpython-3.11-amd64 not present")
        paths.append(str(exe))
    target, problems = open_target(str(sample_path("endings/two_pythons_py311.dmp.xz")))
    with target:
        report = analyze(target, Options(image_paths=paths), problems=problems).report
    (c,) = report.environment.runtime_collisions
    assert c.kind is CollisionKind.PYTHON and c.confidence is Confidence.HIGH
    assert [(m.path, m.package, m.role) for m in c.modules] == [
        ("C:\\Python311\\python311.dll", "the Python installation", "the interpreter's Python DLL"),
        ("C:\\scripts\\oldext\\python39.dll", None, "a second Python DLL"),
        ("C:\\scripts\\oldext\\oldext.dll", None, "an extension built for another Python: imports python39.dll"),
    ]
    assert c.title == (
        "Two Python DLLs are loaded: python311.dll 3.11.9 from the Python installation (C:\\Python311); "
        "python39.dll 3.9.13 from C:\\scripts\\oldext; oldext.dll pulled the second in"
    )
    assert c.ways_out[0].startswith("Reinstall (or rebuild) oldext.dll for this interpreter (Python 3.11)")
    assert c.unknown == ()


def test_two_pythons_without_images_say_what_is_not_known():
    target, _problems = open_target(str(sample_path("endings/two_pythons_py311.dmp.xz")))
    with target:
        (c,) = describe_environment(target).runtime_collisions
    assert [m.role for m in c.modules] == ["the interpreter's Python DLL", "a second Python DLL"]
    assert c.unknown == (
        "Which module loaded the second Python DLL is not known: 4 modules had no image to read their imports from.",
    )


def test_real_python_org_images_tell_which_extension_imports_the_other_python():
    """python.exe of 3.10 imports python310.dll; 3.9's _ctypes.pyd (untagged, as python.org
    ships its own) imports python39.dll: both read from the genuine files."""
    py310, py39 = WINPYTHON / "cpython-3.10-amd64", WINPYTHON / "cpython-3.9-amd64"
    if not (py310.is_dir() and py39.is_dir()):
        pytest.skip("../shared/winpython's 3.9 and 3.10 not present")
    files = {"python.exe": py310 / "python.exe", "_ctypes.pyd": py39 / "_ctypes.pyd"}
    modules = _modules(
        ("C:\\app\\python.exe", None),
        ("C:\\app\\python310.dll", "3.10.11150.1013"),
        ("C:\\app\\plugins\\_ctypes.pyd", None),
        ("C:\\Python39\\python39.dll", "3.9.13150.1013"),
    )
    images = _images({k: v.read_bytes() for k, v in files.items()})
    (c,) = _run(modules, images)
    roles = {m.name: m.role for m in c.modules}
    assert roles["python310.dll"] == "the interpreter's Python DLL"  # from python.exe's imports
    assert roles["_ctypes.pyd"] == "an extension built for another Python: imports python39.dll"
    assert c.unknown == ()


def test_one_python_from_two_folders():
    modules = _modules(
        ("C:\\Python311\\python.exe", None),
        ("C:\\Python311\\python311.dll", "3.11.9150.1013"),
        ("C:\\Tools\\embedded\\python311.dll", "3.11.4150.1013"),
    )
    (c,) = _run(modules)
    assert c.title.startswith("Two Python DLLs are loaded: python311.dll 3.11.9 from the Python installation")
    assert "two copies of the same one" in c.leads_to
    assert c.unknown == ("Which module loaded the second copy is not known: both copies have the same name.",)


def test_one_python_and_its_stable_abi_forwarder_are_fine():
    modules = _modules(("C:\\Python311\\python311.dll", None), ("C:\\Python311\\python3.dll", None))
    assert _run(modules) == ()


# ----------------------------------------------------------------------------- where a module comes from
@pytest.mark.parametrize(
    "path, package",
    [
        (f"{SITE}\\PyQt5\\Qt5\\bin\\msvcp140.dll", "PyQt5"),
        (f"{SITE}\\numpy.libs\\msvcp140-23e9b4a8.dll", "numpy"),
        (f"{SITE}\\numpy\\.libs\\libopenblas.dll", "numpy"),
        (f"{SITE}\\nvidia\\cudnn\\bin\\cudnn64_9.dll", "nvidia.cudnn"),
        (f"{SITE}\\_cffi_backend.cp311-win_amd64.pyd", "_cffi_backend"),
        ("C:\\Users\\me\\AppData\\Roaming\\Python\\Python311\\site-packages\\torch\\lib\\libiomp5md.dll", "torch"),
        ("C:\\Python311\\msvcp140.dll", "the Python installation"),
        ("C:\\Python311\\DLLs\\_ctypes.pyd", "the Python installation"),
        ("C:\\Python311\\Library\\bin\\libiomp5md.dll", "the environment's Library\\bin"),
        ("C:\\Windows\\System32\\MSVCP140.dll", "Windows"),
        ("c:\\windows\\system32\\vcomp140.dll", "Windows"),
        (
            "C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v11.2\\bin\\cudart64_110.dll",
            "the CUDA Toolkit 11.2",
        ),
        ("C:\\apps\\legacy\\cudnn64_8.dll", None),
    ],
)
def test_package_of(path, package):
    assert package_of(path, ["C:\\Python311"]) == package


def test_the_interpreter_itself_is_never_a_maybe():
    """python312.dll is linked by 14.42: with its import table out of the dump it would
    be a module that may need a newer msvcp140, but CPython is C and imports none."""
    synth = make_import_image([("KERNEL32.dll", ["Sleep"])], linker_version=(14, 42))
    r = synth.info["rdata"]
    modules = _modules(
        PYQT_OLD, ("C:\\Python312\\python312.dll", "3.12.9150.1013"), ("C:\\Python312\\python.exe", None)
    )

    def lookup(module):
        return PEImage.from_memory(synth.reader(base=module.base, missing=[(r, r + 0x1000)]), module.base)

    assert _run(modules, lookup) == ()


def test_with_two_cuda_majors_compatibility_pairs_none_of_them():
    """compatibility.py checks one CUDA / cuDNN pair; with two of each it would pair the
    last runtime found with the last cuDNN (CUDA 12.9 with cuDNN 8 here), which no
    library loaded together."""
    target, _problems = open_target(str(sample_path("collisions/two_cuda_runtimes_py311.dmp.xz")))
    with target:
        env = describe_environment(target)
    assert env.compatibility[0].startswith("Several CUDA runtimes or cuDNN majors are loaded")
    assert not any("12.9 with cuDNN 8" in s or "cudnn64_8.dll" in s for s in env.compatibility)
