"""Dynamic function tables: the unwind entries JIT code registers with
RtlAddFunctionTable, as a minidump's FunctionTable stream holds them, one run of
RUNTIME_FUNCTIONs per registered table.

A JIT registers a table per method or per code chunk: a Unity player's Mono runtime left
62,000 entries in 3,600 tables in one real dump, and a walk looks up a few dozen
addresses. So a table's entries are decoded when an address falls among them, not when
the dump is opened: each table is first summarised by its lowest and highest start and
highest end (passes in C over its words), and the tables are kept sorted by start.
When no two tables' starts interleave, which is how a JIT lays out its code, a lookup
decides which table it is in and then which entry, and says exactly what one sorted list
of every entry would say; when they do interleave, every entry is decoded into that list.

An entry is (begin, end, unwind_va, base): addresses, base added (DynamicEntry)."""

from __future__ import annotations

import bisect
import struct
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union, overload

# A FunctionTable stream entry (JIT code registered with RtlAddFunctionTable):
# (begin VA, end VA, unwind-info VA as recorded, base the RVAs are relative to).
DynamicEntry = Tuple[int, int, int, int]
# One registered table: where its 12-byte RUNTIME_FUNCTIONs start in `data`, how many,
# and the base address their RVAs are relative to.
Run = Tuple[int, int, int]


class FunctionTable(Sequence[DynamicEntry]):
    """Every dynamic function table entry of a dump, sorted; `entry_at` and `reaches`
    answer without decoding what they do not need. As a sequence it is the sorted list of
    all entries (decoded on first use: `bundle`, tests)."""

    def __init__(self, data: bytes = b"", runs: Sequence[Run] = (), entries: Sequence[DynamicEntry] = ()):
        self._data = data
        self._runs = [r for r in runs if r[1] > 0]
        self._extra = list(entries)  # entries given decoded (other entry sizes, other sources)
        self._count = sum(r[1] for r in self._runs) + len(self._extra)
        self._all: Optional[List[DynamicEntry]] = None
        self._all_starts: List[int] = []
        # the two-level index, built on the first lookup (None: not yet; [] with _all: flat)
        self._lows: Optional[List[int]] = None
        self._tables: List[Tuple[int, int, int, int]] = []  # (lowest start, highest start, highest end, run)
        self._reach: List[int] = []  # highest end of the tables up to each one
        self._decoded: Dict[int, Tuple[List[DynamicEntry], List[int]]] = {}  # run -> (entries sorted, starts)

    @classmethod
    def of(cls, entries: Sequence[DynamicEntry]) -> "FunctionTable":
        """`entries` as a FunctionTable (a target that lists them decoded, or none)."""
        return entries if isinstance(entries, FunctionTable) else cls(entries=entries)

    # -- the sequence: every entry, sorted ----------------------------------------------
    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    @overload
    def __getitem__(self, i: int) -> DynamicEntry: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[DynamicEntry]: ...

    def __getitem__(self, i: Union[int, slice]) -> Union[DynamicEntry, Sequence[DynamicEntry]]:
        return self._flat()[i]

    def __iter__(self) -> Iterator[DynamicEntry]:
        return iter(self._flat())

    def __eq__(self, other: object) -> bool:
        """Equal to a list or tuple of the same entries in the same (sorted) order."""
        if isinstance(other, (FunctionTable, list, tuple)):
            return self._flat() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to a list, so not hashable either

    def _flat(self) -> List[DynamicEntry]:
        if self._all is None:
            out = list(self._extra)
            for k in range(len(self._runs)):
                out += self._decode(k)
            out.sort()
            self._all = out
            self._all_starts = [e[0] for e in out]
        return self._all

    # -- lookups --------------------------------------------------------------------------
    def entry_at(self, ip: int) -> Optional[DynamicEntry]:
        """The entry covering ip, if any: of the entries starting at or below ip, the last
        in sorted order, when ip is below its end (as a bisection of the sorted list).
        Asked per stack word a scan meets outside every module: kept to few calls."""
        lows = self._lows if self._lows is not None else self._index()
        if lows:
            k = bisect.bisect_right(lows, ip) - 1
            if k < 0 or ip >= self._tables[k][2]:
                return None  # below every table, or past the highest end of the one below it
            run = self._tables[k][3]
            found = self._decoded.get(run)
            entries, starts = found if found is not None else self._sorted_run(run)
        elif self._count:
            entries, starts = self._flat(), self._all_starts
        else:
            return None
        i = bisect.bisect_right(starts, ip) - 1
        if i >= 0 and ip < entries[i][1]:
            return entries[i]
        return None

    def reaches(self, lo: int, hi: int) -> bool:
        """Does an entry starting at or below hi end above lo (JIT code in [lo, hi])?"""
        if not self._count:
            return False
        lows = self._index()
        if not lows:
            entries = self._flat()
            nearest = bisect.bisect_right(self._all_starts, hi)
            return any(entries[k][1] > lo for k in range(nearest - 1, -1, -1))
        # tables starting at or below hi, nearest first, while one of them or an earlier
        # one still ends above lo
        for k in range(bisect.bisect_right(lows, hi) - 1, -1, -1):
            if self._reach[k] <= lo:
                return False
            if self._tables[k][2] > lo:
                entries, starts = self._sorted_run(self._tables[k][3])
                nearest = bisect.bisect_right(starts, hi)
                if any(entries[j][1] > lo for j in range(nearest)):
                    return True
        return False

    # -- the index ------------------------------------------------------------------------
    def _index(self) -> List[int]:
        """The tables' lowest starts, sorted; [] when the entries are looked up flat (their
        starts interleave, or they came decoded)."""
        if self._lows is not None:
            return self._lows
        self._lows = []
        if self._extra:
            return self._lows
        tables = []
        for k, (off, count, base) in enumerate(self._runs):
            words = struct.unpack_from(f"<{3 * count}I", self._data, off)
            starts = words[0::3]
            tables.append((base + min(starts), base + max(starts), base + max(words[1::3]), k))
        tables.sort()
        if any(tables[k][1] >= tables[k + 1][0] for k in range(len(tables) - 1)):
            return self._lows  # interleaved: the flat list answers
        reach, top = [], 0
        for table in tables:
            top = max(top, table[2])
            reach.append(top)
        self._tables, self._reach = tables, reach
        self._lows = [t[0] for t in tables]
        return self._lows

    def _decode(self, k: int) -> List[DynamicEntry]:
        off, count, base = self._runs[k]
        triples = struct.iter_unpack("<III", self._data[off : off + 12 * count])
        return [(base + b, base + e, base + u, base) for b, e, u in triples]

    def _sorted_run(self, k: int) -> Tuple[List[DynamicEntry], List[int]]:
        found = self._decoded.get(k)
        if found is None:
            entries = sorted(self._decode(k))
            found = self._decoded[k] = (entries, [e[0] for e in entries])
        return found
