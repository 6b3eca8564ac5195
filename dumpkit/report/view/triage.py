"""The format-neutral view of a triage: the groups table, the failures, the summary, and
the JSON document, decided once for the text, Markdown and HTML renderers."""

from __future__ import annotations

import datetime
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

from dumpkit.analysis.memory import LIMIT_WORDS
from dumpkit.analysis.model import MemoryLimit
from dumpkit.triage.group import Group, group
from dumpkit.triage.record import DumpRecord
from dumpkit.records import record

SCHEMA = "dumpkit-triage"
SCHEMA_VERSION = 1
HEADERS = ("#", "signature", "verdict", "count", "modules", "first seen", "last seen", "example")


@record
class GroupRow:
    number: int
    signature: str
    verdict: str  # its dumps' verdict kinds, most frequent first
    count: int
    modules: str
    first_seen: str
    last_seen: str
    example: str  # the example dump's path
    example_report: Optional[str]  # its per-dump report, relative to the triage page
    python: str  # 'walk (job.py) > visit (job.py) in 2 of 3 dumps; ...', or '' when none
    missing_images: str  # 'python312.dll in 24 of 26 dumps; ...', or '' when every image was found
    memory_limits: str  # "the machine's commit limit in 3 of 5 dumps", or '' when none was at a limit


@record
class FailureRow:
    path: str
    status: str
    error: str


@record
class TriageView:
    summary: str
    groups: Tuple[GroupRow, ...]
    failures: Tuple[FailureRow, ...]
    interrupted: bool


def when(seconds: Optional[int]) -> str:
    if not seconds:
        return "-"
    try:
        t = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return "-"
    return t.strftime("%Y-%m-%d %H:%M UTC")


def _count(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def triage_view(records: Sequence[DumpRecord], interrupted: bool = False, seconds: float = 0.0) -> TriageView:
    groups = group(records)
    failed = [r for r in records if not r.ok]
    cached = sum(1 for r in records if r.cached)
    parts = [_count(len(records), "dump"), _count(len(groups), "group")]
    if failed:
        parts.append(f"{len(failed):,} not analysed")
    if cached:
        parts.append(f"{cached:,} from the cache")
    summary = ", ".join(parts) + (f" in {seconds:.1f} s" if seconds else "")
    if interrupted:
        summary += " (interrupted: only the dumps finished before Ctrl-C)"
    rows = tuple(
        GroupRow(
            number=i,
            signature=g.signature,
            verdict=", ".join(g.verdicts),
            count=g.count,
            modules=", ".join(g.modules) or "-",
            first_seen=when(g.first_seen),
            last_seen=when(g.last_seen),
            example=g.example.path,
            example_report=g.example.report,
            python=_python_recursions(g),
            missing_images=_missing_images(g),
            memory_limits=_memory_limits(g),
        )
        for i, g in enumerate(groups, 1)
    )
    failures = tuple(FailureRow(r.path, r.status, r.error or "") for r in sorted(failed, key=lambda r: r.path))
    return TriageView(summary, rows, failures, interrupted)


def _python_recursions(g: Group) -> str:
    """What its dumps' Python stacks show recursing, or '' when none shows any: a group of
    Python-level recursions shares the eval loop's signature whatever the Python code was."""
    return "; ".join(f"{p} in {n:,} of {g.count:,} dumps" for p, n in g.python_recursions)


MISSING_SHOWN = 4  # modules a group row names as missing their images


def _missing_images(g: Group) -> str:
    """Which images its dumps lacked on the crashing stack, in how many of them: a group
    whose frames were scanned is only as sharp as its signature could be without them."""
    shown = [f"{m} in {n:,} of {g.count:,} dumps" for m, n in g.missing_images[:MISSING_SHOWN]]
    more = len(g.missing_images) - MISSING_SHOWN
    return "; ".join(shown) + (f"; {more:,} more" if more > 0 else "")


def _memory_limits(g: Group) -> str:
    """How many of its dumps were written at a memory limit: a crash signature shared by
    dumps at the commit limit and dumps far from it is told apart here."""
    return "; ".join(f"{LIMIT_WORDS[MemoryLimit(m)]} in {n:,} of {g.count:,} dumps" for m, n in g.memory_limits)


def _group_doc(g: Group) -> Dict[str, Any]:
    return {
        "signature": g.signature,
        "kind": g.kind,
        "verdicts": list(g.verdicts),
        "count": g.count,
        "modules": list(g.modules),
        "first_seen": g.first_seen,
        "last_seen": g.last_seen,
        "example": g.example.path,
        "dumps": list(g.members),
        "python_recursions": [{"functions": p, "count": n} for p, n in g.python_recursions],
        "missing_images": [{"module": m, "count": n} for m, n in g.missing_images],
        "memory_limits": [{"limit": m, "count": n} for m, n in g.memory_limits],
    }


def triage_document(
    records: Sequence[DumpRecord], version: str, rules: int, interrupted: bool = False
) -> Dict[str, Any]:
    """The JSON document (docs/report-schema.md, "triage"): every record, then the groups
    referring to them by index."""
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "dumpkit_version": version,
        "signature_rules": rules,
        "interrupted": interrupted,
        "dumps": [r.to_dict() for r in records],
        "groups": [_group_doc(g) for g in group(records)],
    }


def link(report: Optional[str]) -> Optional[str]:
    """A per-dump report's address from the triage page (always '/'-separated)."""
    return report.replace(os.sep, "/") if report else None


def rows_as_cells(view: TriageView) -> List[Tuple[str, ...]]:
    return [
        (str(r.number), r.signature, r.verdict, str(r.count), r.modules, r.first_seen, r.last_seen, r.example)
        for r in view.groups
    ]
