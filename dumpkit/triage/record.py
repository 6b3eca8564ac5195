"""One dump's triage result: a small record that crosses process (and machine) boundaries
as a dict, never a Report."""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple, Type

from dumpkit.analysis.model import Confidence, MemoryLimit, VerdictKind
from dumpkit.records import fields, record, replace
from dumpkit.words import Word


class Status(Word):
    """How a dump's triage ended. A str-valued `Word`: records and JSON hold the value."""

    ANALYSED = "analysed"
    FAILED = "error"
    TIMED_OUT = "timeout"


ANALYSED, FAILED, TIMED_OUT = Status.ANALYSED, Status.FAILED, Status.TIMED_OUT
RECORD_VERSION = 5  # 2 added python_recursion, 3 missing_images, 4 memory_limits; 5: a snapshot is
# no longer headlined "damaged" for a walk's problems (a cached headline would be stale)


@record
class DumpRecord:
    path: str
    size: int
    sha256: str
    status: Status
    error: Optional[str] = None  # one line, when the dump could not be analysed
    written: Optional[int] = None  # when the dump was written (its header's time stamp, Unix seconds)
    signature: Optional[str] = None  # None: analysed, but the dump holds no exception
    kind: Optional[str] = None  # the signature's kind (STACK_OVERFLOW, ...)
    rules: Optional[int] = None  # the signature rules' version
    verdict: Optional[VerdictKind] = None
    headline: Optional[str] = None
    confidence: Optional[Confidence] = None
    modules: Tuple[str, ...] = ()  # modules the signature names, "name version" when known
    # the crashing thread's Python recursion when the dump holds its Python stack
    # (analysis.signature.python_recursion): 'walk (job.py) > visit (job.py)'
    python_recursion: Optional[str] = None
    # modules on the crashing stack whose images were not found, most frames first: their
    # frames were found by stack scanning, so the signature stops short of them (rule 5);
    # for a snapshot, the system DLLs whose images would name its threads' waits
    missing_images: Tuple[str, ...] = ()
    # the memory limits the process was at when its dump was written (environment.memory's
    # limits_reached): a crash at the commit limit is most likely an allocation that failed
    memory_limits: Tuple[MemoryLimit, ...] = ()
    problems: int = 0  # problems met reading the dump (the report lists them)
    seconds: float = 0.0  # analysis time
    report: Optional[str] = None  # the per-dump report written for it, relative to the output folder
    cached: bool = False  # taken from --cache, not analysed in this run

    @property
    def ok(self) -> bool:
        return self.status == ANALYSED

    def to_dict(self) -> Dict[str, Any]:
        # the fields as they are (every one a str, number, word or None): dataclasses.asdict
        # deep-copies each, and the parent of a triage asks this of every record twice
        d = {name: getattr(self, name) for name in _FIELD_NAMES}
        d["modules"] = list(self.modules)
        d["missing_images"] = list(self.missing_images)
        d["memory_limits"] = list(self.memory_limits)
        return d

    @staticmethod
    def from_dict(d: Any) -> Optional["DumpRecord"]:
        """The record `to_dict` wrote; None for anything else (a cache entry that was
        truncated, edited or written by something else must not become a result)."""
        if not isinstance(d, dict):
            return None
        known = {f.name: f for f in fields(DumpRecord)}
        kept = {k: v for k, v in d.items() if k in known}
        modules = kept.get("modules") or ()
        if not isinstance(modules, (list, tuple)) or not all(isinstance(m, str) for m in modules):
            return None
        kept["modules"] = tuple(modules)
        missing = kept.get("missing_images") or ()
        if not isinstance(missing, (list, tuple)) or not all(isinstance(m, str) for m in missing):
            return None
        kept["missing_images"] = tuple(missing)
        limits = kept.get("memory_limits") or ()
        if not isinstance(limits, (list, tuple)):
            return None
        try:
            kept["memory_limits"] = tuple(MemoryLimit(v) for v in limits)
        except ValueError:  # not one of ours (another version's, or edited)
            return None
        for name, kind in _REQUIRED.items():
            value = kept.get(name)
            if not isinstance(value, kind) or isinstance(value, bool):  # JSON's true is no size
                return None
        for name, word in _WORDS.items():  # JSON holds their values: the enum's members again
            value = kept.get(name)  # (status is required, and a str: checked above)
            if value is not None:
                try:
                    kept[name] = word(value)
                except ValueError:  # not one of ours (another version's, or edited)
                    return None
        return DumpRecord(**kept)

    def at(self, path: str, cached: bool) -> "DumpRecord":
        """The same result for a copy of the dump found at `path`."""
        return replace(self, path=path, cached=cached)


# what a record read back must have, and of which type
_REQUIRED: Dict[str, type] = {"path": str, "size": int, "sha256": str, "status": str}
# what a record read back holds as a word of the model's vocabulary, and which
_WORDS: Dict[str, Type[Word]] = {"status": Status, "verdict": VerdictKind, "confidence": Confidence}


_FIELD_NAMES = tuple(f.name for f in fields(DumpRecord))
