"""What the modules' images tell (analysis/imagefacts.py), over stand-in images: the
executable's stack reserve, version resources, the installing distribution (a bundle's
record first, asked once per module), and the crashing stack's image coverage."""

from __future__ import annotations

from dumpkit.analysis.coverage import fix_for
from dumpkit.analysis.imagefacts import InstalledPackages, crash_coverage, exe_stack_reserve, image_version
from dumpkit.packages import InstalledPackage
from dumpkit.pe import PEError
from dumpkit.target import Module, SystemInfo
from dumpkit.unwind.frames import Frame, StackWalk, StopReason, Trust
from tests.support.fakes.target import MemoryTarget

APP = Module("app.exe", r"C:\app\app.exe", 0x140000000, 0x10000)
LIB = Module("lib.dll", r"C:\app\lib.dll", 0x180000000, 0x10000)


class _Image:
    size_of_stack_reserve = 0x800000

    def __init__(self, version=None):
        self._version = version

    def version_info(self):
        if self._version is None:
            raise PEError("version resource: truncated")
        return self._version


class _Images:
    """An ImageProvider stand-in: an image for the modules in `images`, files for `files`."""

    def __init__(self, images=(), files=None, searched=(), wheels=None):
        self._images = dict(images)
        self._files = files or {}
        self._wheels = wheels or {}  # module base -> the wheel --fetch-images took its image from
        self.searched = list(searched)
        self.files_asked = []

    def fetched_from(self, module):
        return self._wheels.get(module.base)

    def image(self, module):
        return self._images.get(module.base)

    def files(self, module):
        self.files_asked.append(module.name)
        return self._files.get(module.base, [])

    def fetch_plan(self, module):
        return None  # what --fetch-images would do: nothing, here

    def search_problems(self):
        return self.searched


def test_the_stack_reserve_is_the_executables_when_its_image_is_found():
    images = _Images({APP.base: _Image()})
    assert exe_stack_reserve(MemoryTarget(modules=[LIB, APP]), images) == 0x800000
    assert exe_stack_reserve(MemoryTarget(modules=[LIB, APP]), _Images()) is None
    assert exe_stack_reserve(MemoryTarget(modules=[LIB]), images) is None


def test_a_version_resource_that_cannot_be_read_is_no_version():
    lookup = image_version(_Images({APP.base: _Image(version="1.2.3.4"), LIB.base: _Image()}))
    assert lookup(APP) == "1.2.3.4"
    assert lookup(LIB) is None  # PEError reading the resource
    assert image_version(_Images())(APP) is None


class _Store:
    def __init__(self, packages):
        self.packages = packages

    def package_for(self, module):
        return self.packages.get(module.name)


def test_a_bundles_recorded_package_comes_first_and_each_module_is_asked_once():
    recorded = InstalledPackage("tensorflow-intel", "2.15.0", "tensorflow_intel-2.15.0.dist-info")
    target = MemoryTarget(modules=[APP, LIB])
    target.image_store = _Store({"lib.dll": recorded})
    images = _Images(files={APP.base: ["/nowhere/app.exe"]})
    packages = InstalledPackages(target, images)
    assert packages(LIB) is recorded
    assert packages(APP) is None and packages(APP) is None
    assert images.files_asked == ["app.exe"]  # the bundle answered for lib.dll; app.exe once
    assert packages.found == {LIB.base: recorded, APP.base: None}


def test_a_fetched_images_wheel_names_its_distribution_after_the_bundle_and_the_installation():
    """The wheel whose member is this very build (--fetch-images checked it) gives the
    distribution's version when neither a bundle nor an installation's RECORD does."""
    target = MemoryTarget(modules=[APP, LIB])
    wheel = "tensorflow_intel-2.13.0-cp38-cp38-win_amd64.whl"
    images = _Images(wheels={LIB.base: wheel, APP.base: "python-3.8.1-embed-amd64.zip"})
    packages = InstalledPackages(target, images)
    assert packages(LIB) == InstalledPackage("tensorflow-intel", "2.13.0", wheel)
    assert packages(APP) is None  # a zip, not a wheel: no distribution
    recorded = InstalledPackage("tensorflow-intel", "2.15.0", "tensorflow_intel-2.15.0.dist-info")
    target.image_store = _Store({"lib.dll": recorded})
    assert InstalledPackages(target, images)(LIB) is recorded


def test_coverage_counts_the_possible_frames_and_says_the_image_searches():
    def frame(i, trust):
        return Frame(i, LIB.base + 0x100 + i, 0x8000 + 0x40 * i, "lib.dll", 0x100 + i, None, None, 0x40, trust, None)

    walk = StackWalk(1, [frame(0, Trust.CONTEXT)], StopReason.NO_CALLER, [], None, [frame(1, Trust.SCAN)])
    target = MemoryTarget(modules=[LIB], system=SystemInfo(processor_architecture=9, wine_version="8.0"))
    coverage = crash_coverage(target, _Images(searched=["C:/symbols: nothing found"]), walk)
    assert (coverage.frames, coverage.scanned) == (2, 1)
    assert [(m.module, m.frames) for m in coverage.missing] == [("lib.dll", 2)]
    assert coverage.missing[0].fix == fix_for(LIB, wine=True)  # advice for a dump Wine wrote
    assert coverage.search_problems == ("C:/symbols: nothing found",)
    assert crash_coverage(target, _Images(), None) is None  # no stack, no search to speak of
