"""How much of the crashing stack rests on module images, and what would complete it.

A dump read on another machine (the normal case for a bug report) usually lacks the crashed
program's binaries. The walker then scans for return addresses, names come only from what
the dump holds, and a verdict may rest on guesses. This says which modules on the crashing
thread's stack had no image, how many frames were found by scanning, and the option or
folder that would fill the gap; and lists the searches the user asked for that found
nothing (a mistyped --image-path, a symbol server that failed)."""

from __future__ import annotations

import ntpath
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from dumpkit.analysis.advice import WINE_PE_FOLDER
from dumpkit.unwind.bulk import tally
from dumpkit.analysis.model import ImageCoverage, MissingImage
from dumpkit.target import Module
from dumpkit.unwind.frames import Frame, Trust

MICROSOFT_SYMBOLS = "https://msdl.microsoft.com/download/symbols"
_WINDOWS_DIR = ("c:\\windows\\", "\\systemroot\\", "\\??\\c:\\windows\\")


def _is_windows_module(module: Module) -> bool:
    return module.path.lower().startswith(_WINDOWS_DIR)


def fix_for(module: Module, wine: bool) -> str:
    """The option that would give dumpkit this module's image."""
    if _is_windows_module(module):
        if wine:
            return (
                f"it is Wine's own DLL: --image-path the Wine installation's PE DLL folder (Debian: {WINE_PE_FOLDER})"
            )
        return f"it is Windows' own: --symbol-path srv*CACHE*{MICROSOFT_SYMBOLS} (Microsoft's server has its image)"
    folder = ntpath.dirname(module.path) if module.path else ""
    if folder:
        return f"--image-path a copy of {folder} from the machine that crashed"
    return f"--image-path a folder holding {module.name} from the machine that crashed"


def _trust_and_module(f: Frame) -> Tuple[Trust, Optional[str]]:
    return f.trust, f.module


def image_coverage(
    frames: Sequence[Frame],
    modules: Sequence[Module],
    has_image: Callable[[Module], bool],
    search_problems: Sequence[str],
    wine: bool = False,
    fetch_plan: Optional[Callable[[Module], Optional[str]]] = None,
) -> Optional[ImageCoverage]:
    """None when there are no frames and nothing to say about the searches."""
    if not frames and not search_problems:
        return None
    by_name: Dict[str, Module] = {}
    for m in modules:
        by_name.setdefault(m.name.lower(), m)
    counts: Dict[str, int] = {}
    scanned = unvalidated = 0
    # one pass, a bulk-walked recursion counted per member: a million frames is a normal input
    for (trust, mod_name), n in tally(frames, _trust_and_module).items():
        if trust is Trust.SCAN:
            unvalidated += n
            scanned += n
        elif trust is Trust.SCAN_VALIDATED:
            scanned += n
        if mod_name is not None:
            key = mod_name.lower()
            counts[key] = counts.get(key, 0) + n
    missing: List[MissingImage] = []
    for key, n in counts.items():
        module = by_name.get(key)
        if module is None or has_image(module):
            continue
        fix = fix_for(module, wine)
        plan = fetch_plan(module) if fetch_plan is not None else None  # where --fetch-images finds it
        missing.append(MissingImage(module.name, n, module.path, f"{fix}; or {plan}" if plan else fix))
    missing.sort(key=lambda m: (-m.frames, m.module.lower()))
    return ImageCoverage(
        frames=len(frames),
        scanned=scanned,
        unvalidated=unvalidated,
        missing=tuple(missing),
        search_problems=tuple(search_problems),
    )


def rests_on_guesses(
    coverage: Optional[ImageCoverage], frames: Sequence[Frame], span: Tuple[int, int], images_matter: bool = True
) -> Optional[str]:
    """Why a verdict drawn from the crashing stack's frames `span` (first, end) cannot be
    "high": one of them was found by scanning without a call site to confirm it, or
    (`images_matter`) lies in a module whose image was not found (its frame size, its
    callers and its code are then guesses)."""
    if coverage is None:
        return None
    missing = {m.module.lower() for m in coverage.missing}
    guessed: List[Tuple[int, str]] = []
    for f in frames[max(0, span[0]) : max(0, span[1])]:
        if f.trust is Trust.SCAN:
            guessed.append((f.index, "found by stack scanning without a call site to confirm it"))
        elif images_matter and f.module is not None and f.module.lower() in missing:
            guessed.append((f.index, f"in {f.module}, whose image was not found"))
        if len(guessed) >= 3:
            break
    if not guessed:
        return None
    first = guessed[0]
    more = f" (and {len(guessed) - 1} more)" if len(guessed) > 1 else ""
    return f"frame {first[0]} is {first[1]}{more}"
