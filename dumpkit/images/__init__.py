"""Where each module's PE image (and so its unwind data) and its PDB come from, in the
order docs/architecture.md and DESIGN.md give: locator.py (the search), checks.py (what
makes a file the module's build), backings.py (reading a found file, recording what was
read), provider.py (what the analyses ask). The symbol stores and servers themselves are
dumpkit.symbols.store."""

from dumpkit.images.backings import RecordingBacking, XzBacking
from dumpkit.images.locator import SOURCES, ImageLocator, ImageStore, LocatedImage, LocatedPdb
from dumpkit.images.paths import parse_symbol_path, parse_symbol_servers, windows_path_candidates
from dumpkit.images.provider import ImageProvider

__all__ = [
    "SOURCES",
    "ImageLocator",
    "ImageProvider",
    "ImageStore",
    "LocatedImage",
    "LocatedPdb",
    "RecordingBacking",
    "XzBacking",
    "parse_symbol_path",
    "parse_symbol_servers",
    "windows_path_candidates",
]
