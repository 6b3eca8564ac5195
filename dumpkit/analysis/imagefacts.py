"""What the modules' images (and the files beside them) tell about the process: the
executable's stack reserve, each module's version resource, linker version and imports, the
Python distribution that installed a module (each None where no image or file says), and how
much of the crashing stack rests on images."""

from __future__ import annotations

from typing import Dict, Optional

from dumpkit.analysis.coverage import image_coverage
from dumpkit.analysis.environment import ImageFactsLookup, VersionLookup
from dumpkit.analysis.model import ImageCoverage
from dumpkit.analysis.threadreport import with_possible
from dumpkit.images import ImageProvider
from dumpkit.packages import InstalledPackage, owning_package
from dumpkit.pe import PEError, PEImage, VersionInfo
from dumpkit.target import MemoryNotInDump, Module, Target
from dumpkit.unwind.frames import StackWalk


def exe_stack_reserve(target: Target, images: ImageProvider) -> Optional[int]:
    """The stack reserve the executable's PE header asks for (the main thread's stack size)."""
    exe = next((m for m in target.modules if m.name.lower().endswith(".exe")), None)
    if exe is None:
        return None
    image = images.image(exe)
    return image.size_of_stack_reserve if image is not None else None


def image_version(images: ImageProvider) -> VersionLookup:
    """A module's version resource, read from its image; None when there is no image or
    the resource cannot be read."""

    def lookup(module: Module) -> Optional[VersionInfo]:
        image = images.image(module)
        if image is None:
            return None
        try:
            return image.version_info()
        except (PEError, MemoryNotInDump):
            return None

    return lookup


def image_facts(images: ImageProvider) -> ImageFactsLookup:
    """A module's image as the runtime collisions read it (linker version, imports): the
    image the provider located, a file or a bundle's pages, or the dump's own memory when
    that is all there is; None when there is none."""

    def lookup(module: Module) -> Optional[PEImage]:
        return images.image(module)

    return lookup


class InstalledPackages:
    """The distribution that installed a module, asked once per module: as a bundle
    recorded it (the installation stayed on the machine that wrote it), else found next to
    the module's local files. `found`: every answer so far, by module base (None: none)."""

    def __init__(self, target: Target, images: ImageProvider):
        self._target = target
        self._images = images
        self.found: Dict[int, Optional[InstalledPackage]] = {}

    def __call__(self, module: Module) -> Optional[InstalledPackage]:
        if module.base not in self.found:
            store = self._target.image_store
            found = store.package_for(module) if store is not None else None
            if found is None:
                found = owning_package(self._images.files(module))
            if found is None:
                found = _wheel_package(self._images.fetched_from(module))
            self.found[module.base] = found
        return self.found[module.base]


def _wheel_package(wheel_file: Optional[str]) -> Optional[InstalledPackage]:
    """The distribution of a wheel that holds the module's very build (--fetch-images took
    the image from it only when its TimeDateStamp and SizeOfImage, or its headers, match)."""
    if not wheel_file:
        return None
    from dumpkit.images.fetch.wheels import parse_wheel_name  # only for a fetched image

    wheel = parse_wheel_name(wheel_file)
    return InstalledPackage(wheel.project, wheel.version, wheel_file) if wheel is not None else None


def crash_coverage(
    target: Target, images: ImageProvider, walk: Optional[StackWalk], plans: bool = True
) -> Optional[ImageCoverage]:
    """What of the crashing thread's walk (`walk`; None: not walked) rests on images, and
    what the image searches met; with `plans`, each missing image's fix says where
    --fetch-images would find it (words for a reader: no verdict reads them)."""
    return image_coverage(
        # the possible frames too: their modules' images are what could confirm them
        with_possible(walk) if walk else (),
        target.modules,
        lambda module: images.image(module) is not None,
        images.search_problems(),
        wine=bool(target.system is not None and target.system.wine_version),
        fetch_plan=images.fetch_plan if plans else None,
    )
