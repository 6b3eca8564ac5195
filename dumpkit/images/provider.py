"""What the analyses ask of the images: each module's PEImage, its files, its PDB's names
and lines, and where each came from, found once per module through an ImageLocator."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Set, TypeVar

from dumpkit.pe import PEError, PEImage
from dumpkit.problems import Problems
from dumpkit.target import CodeViewRecord, MemoryNotInDump, Module, Target

if TYPE_CHECKING:  # the PDB reader is imported when a PDB is found (most dumps have none)
    from dumpkit.images.fetch.published import Process
    from dumpkit.symbols.pdb import PdbFunction, PdbSymbols, SourceLine
from dumpkit.images.locator import ImageLocator, LocatedImage, LocatedPdb


T = TypeVar("T")


class ImageProvider:
    """Which PE image serves each module of one target (cached per module base); `None`
    when none can be found. An image that cannot be used is a soft error, once, added to
    `problems`: the run's collector, which the caller hands in."""

    def __init__(self, target: Target, locator: Optional[ImageLocator] = None, *, problems: Problems):
        self._target = target
        self._problems = problems
        self._locator = locator
        self._cache: Dict[int, Optional[LocatedImage]] = {}
        self._pdbs: Dict[int, Optional[LocatedPdb]] = {}
        self._no_lines: Set[int] = set()  # modules whose PDB line records could not be read
        self._process: Optional[Process] = None  # what --fetch-images would go by

    def located(self, module: Module) -> Optional[LocatedImage]:
        if module.base not in self._cache:
            found = None
            if self._locator is not None:
                try:
                    found = self._locator.locate(module, self._target.read)
                except (PEError, OSError, ValueError, MemoryNotInDump) as e:
                    self._problems.add(f"{module.name}: image unusable ({e})")
            self._cache[module.base] = found
        return self._cache[module.base]

    def image(self, module: Module) -> Optional[PEImage]:
        found = self.located(module)
        return found.image if found is not None else None

    def files(self, module: Module) -> List[str]:
        """Local files that are this module's: the one its image was read from, then the
        recorded path where it exists here. Its installation (e.g. the Python package that
        owns it) is found next to them."""
        out: List[str] = []
        found = self.located(module)
        if found is not None and found.path:
            out.append(found.path)
        if self._locator is not None and self._locator.use_recorded_path and module.path:
            out += [f for f in self._locator.probe.recorded(module.path) if f not in out]
        return out

    def fetched_from(self, module: Module) -> Optional[str]:
        """The archive (a wheel's file name) the module's image was fetched from, when it
        was fetched (--fetch-images) and the fetch noted where from."""
        found = self.located(module)
        fetcher = self._locator.fetcher if self._locator is not None else None
        if found is None or found.source != "fetched" or fetcher is None:
            return None
        return fetcher.origin(module)

    def search_problems(self) -> List[str]:
        return self._locator.search_problems() if self._locator is not None else []

    def fetch_plan(self, module: Module) -> Optional[str]:
        """For a module without an image: what --fetch-images would fetch and from where
        (fetching off), or why it found nothing (fetching on); None when it cannot help."""
        if self._locator is not None and self._locator.fetcher is not None:
            return self._locator.fetch_plan(module)
        from dumpkit.images.fetch.published import plan_line, process_of, published

        if self._process is None:
            self._process = process_of(self._target.modules, self._target.system)
        return plan_line(published(module, self._process))

    def pdb(self, module: Module) -> Optional[PdbSymbols]:
        """The module's own PDB (GUID and age checked), or None. Candidates that were
        refused are one soft error when no PDB could be used."""
        if module.base not in self._pdbs:
            found = None
            image = self.located(module)
            cv = module.cv_record or (self._codeview(image.image) if image is not None else None)
            if self._locator is not None and cv is not None:
                found = self._locator.locate_pdb(module, cv, image.path if image is not None else None)
                if found.pdb is None and found.refused:
                    self._problems.add(f"{module.name}: PDB {cv.pdb_name} not used: " + "; ".join(found.refused))
            self._pdbs[module.base] = found
        found = self._pdbs[module.base]
        return found.pdb if found is not None else None

    @staticmethod
    def _codeview(image: PEImage) -> Optional[CodeViewRecord]:
        """The image's own CodeView record: Wine's dumps record none in the module list."""
        try:
            return image.codeview()
        except (PEError, MemoryNotInDump):
            return None

    def pdb_function(self, module: Module, rva: int) -> Optional[PdbFunction]:
        """The PDB's name for the code at `rva`."""
        return self._ask_pdb(module, lambda pdb: pdb.function_at(rva))

    def pdb_line(self, module: Module, rva: int) -> Optional[SourceLine]:
        """The PDB's source file and line for the code at `rva`, when it has line records.
        Line records that cannot be read (damaged, or not in an older bundle) cost the
        module its lines, not its names."""
        if module.base in self._no_lines:
            return None
        return self._ask_pdb(module, lambda pdb: pdb.line_at(rva), "source lines")

    def _ask_pdb(self, module: Module, ask: Callable[[PdbSymbols], Optional[T]], what: str = "names") -> Optional[T]:
        """`ask` of the module's PDB; a PDB that turns out damaged (or, from a bundle, short
        of a page) while being read is a soft error once, and its `what` are not asked again."""
        pdb = self.pdb(module)
        if pdb is None:
            return None
        from dumpkit.symbols.pdb import PdbError

        try:
            return ask(pdb)
        except PdbError as e:
            self._problems.add(f"{module.name}: PDB {pdb.path} cannot be read ({e}); its {what} are not used")
            if what == "names":
                self._pdbs[module.base] = LocatedPdb(None, None, ())
            self._no_lines.add(module.base)
            return None

    def symbol_sources(self) -> Dict[str, str]:
        """module name -> where names for its code came from (for the report), for the
        modules whose image or PDB was looked for."""
        out = {}
        for m in self._target.modules:
            if m.base not in self._cache and m.base not in self._pdbs:
                continue
            located = self._pdbs.get(m.base)
            if located is not None and located.pdb is not None:
                out[m.name] = f"pdb: {located.path}"
                continue
            image = self._cache.get(m.base)
            out[m.name] = "image: exports and COFF symbols" if image is not None else "none: no image, no PDB"
            if located is not None and located.refused:
                out[m.name] += f" (PDB not used: {'; '.join(located.refused)})"
        return out

    def sources(self) -> Dict[str, str]:
        """module name -> where its image came from (for the report)."""
        out = {}
        for m in self._target.modules:
            if m.base in self._cache:
                found = self._cache[m.base]
                if found:
                    out[m.name] = f"{found.source}: {found.detail}"
                else:
                    why = self._locator.misses(m) if self._locator is not None else []
                    out[m.name] = "not found" + (f" ({'; '.join(why)})" if why else "")
        return out
