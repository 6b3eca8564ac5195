"""Version evidence per module: the dump's own record (VS_FIXEDFILEINFO) first, then the
version resource of the module's image when the caller can read one."""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

from dumpkit.pe import VersionInfo
from dumpkit.target import Module


VersionLookup = Callable[[Module], Optional[VersionInfo]]


def version_groups(version: Optional[str]) -> Optional[Tuple[int, ...]]:
    if not version:
        return None
    try:
        return tuple(int(x) for x in version.split("."))
    except ValueError:
        return None


def trim_version(version: str, keep: int) -> str:
    return ".".join(version.split(".")[:keep])


class Versions:
    """Per-module version evidence: the dump's record first, then the image's resource."""

    def __init__(self, image_version: Optional[VersionLookup]):
        self._lookup = image_version
        self._cache: Dict[Tuple[str, int], Optional[VersionInfo]] = {}
        self.problems: List[str] = []

    def image(self, module: Module) -> Optional[VersionInfo]:
        if self._lookup is None:
            return None
        key = (module.name.lower(), module.base)
        if key not in self._cache:
            try:
                self._cache[key] = self._lookup(module)
            except Exception as e:  # the lookup is the caller's; never let it sink the report
                self.problems.append(f"{module.name}: version lookup failed ({e})")
                self._cache[key] = None
        return self._cache[key]

    def fixed(self, module: Module) -> Tuple[Optional[str], Optional[str], Optional[str]]:
        """(file_version, product_version, source) from the record, else from the image."""
        if module.file_version and module.file_version != "0.0.0.0":
            return module.file_version, module.product_version, "module record"
        vi = self.image(module)
        if vi is not None and vi.file_version and vi.file_version != "0.0.0.0":
            return vi.file_version, vi.product_version, "image"
        return None, None, None

    def strings(self, module: Module) -> Dict[str, str]:
        vi = self.image(module)
        return dict(vi.strings) if vi is not None and vi.strings else {}
