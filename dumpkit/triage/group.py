"""Records grouped by crash signature, the biggest group first."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from dumpkit.triage.record import DumpRecord
from dumpkit.records import record

NO_EXCEPTION = "(no exception record)"


@record
class Group:
    signature: str  # NO_EXCEPTION for dumps analysed without an exception
    kind: Optional[str]
    verdicts: Tuple[str, ...]  # the verdict kinds of its dumps, most frequent first
    count: int
    modules: Tuple[str, ...]  # "name version" of the modules its signature names, every version seen
    example: DumpRecord  # the earliest-written dump of the group
    first_seen: Optional[int]  # dump write times, Unix seconds
    last_seen: Optional[int]
    members: Tuple[int, ...]  # indices into the records
    # (Python recursion, its dumps): the Python functions its dumps show recursing, most
    # frequent first. Every Python-level recursion has the eval loop's signature: these
    # tell them apart where the dumps hold the Python stack (full-memory dumps).
    python_recursions: Tuple[Tuple[str, int], ...] = ()
    # (module, its dumps): modules on the crashing stacks whose images were not found, in
    # most dumps first. Their frames are scanned, so the signature stops before them: with
    # the images (--image-path, --fetch-images) the group may split by where it crashed.
    missing_images: Tuple[Tuple[str, int], ...] = ()
    # (limit, its dumps): the memory limits its dumps' processes were at, in most dumps first
    memory_limits: Tuple[Tuple[str, int], ...] = ()


def _ranked(counts: Dict[str, int]) -> Tuple[str, ...]:
    return tuple(k for k, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def group(records: Sequence[DumpRecord]) -> List[Group]:
    """Groups of the analysed records (failures belong to none), by count, then signature."""
    members: Dict[str, List[int]] = {}
    for i, r in enumerate(records):
        if r.ok:
            members.setdefault(r.signature or NO_EXCEPTION, []).append(i)
    groups = []
    for signature, idx in members.items():
        rs = [records[i] for i in idx]
        verdicts: Dict[str, int] = {}
        modules: Dict[str, int] = {}
        python: Dict[str, int] = {}
        missing: Dict[str, int] = {}
        limits: Dict[str, int] = {}
        for r in rs:
            for limit in r.memory_limits:
                limits[limit] = limits.get(limit, 0) + 1
            for name in r.missing_images:
                missing[name] = missing.get(name, 0) + 1
            if r.python_recursion:
                python[r.python_recursion] = python.get(r.python_recursion, 0) + 1
            verdicts[r.verdict or "?"] = verdicts.get(r.verdict or "?", 0) + 1
            for m in r.modules:
                modules[m] = modules.get(m, 0) + 1
        times = [r.written for r in rs if r.written]
        example = min(rs, key=lambda r: (r.written or 0, r.path))
        groups.append(
            Group(
                signature=signature,
                kind=rs[0].kind,
                verdicts=_ranked(verdicts),
                count=len(rs),
                modules=tuple(sorted(modules)),
                example=example,
                first_seen=min(times) if times else None,
                last_seen=max(times) if times else None,
                members=tuple(idx),
                python_recursions=tuple((p, python[p]) for p in _ranked(python)),
                missing_images=tuple((m, missing[m]) for m in _ranked(missing)),
                memory_limits=tuple((m, limits[m]) for m in _ranked(limits)),
            )
        )
    groups.sort(key=lambda g: (-g.count, g.signature))
    return groups
