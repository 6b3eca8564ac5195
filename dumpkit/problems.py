"""The one collector of a run's problems: what reading a dump, walking its threads and
analysing them met and read around (a damaged stream, an unusable image or unwind entry, a
thread not walked), one line each.

It sits at the bottom so that every stage may be handed it: the run (a command, a triage
worker, `!tfstack`) makes one, gives it to the source it opens (which adds what reading
meets, and a debugger session what its later, lazy reads meet) and to the engine, which
passes it down to each phase by argument."""

from __future__ import annotations

import re
from typing import Dict, List

from dumpkit.records import field, record

__all__ = ["Problems"]

_SHAPE = re.compile(r"0x[0-9a-fA-F]+|\d+")


@record(frozen=False)
class Problems:
    """Non-fatal problems, collected as a run meets them; every entry is one line.

    A damaged dump repeats the same problem thousands of times (one per thread, range,
    record): the first `per_shape` lines of each shape (the message with its numbers
    blanked) are listed, the rest are counted on one summary line."""

    items: List[str] = field(default_factory=list)
    limit: int = 200
    per_shape: int = 3
    _seen: set = field(default_factory=set, repr=False)
    _shapes: Dict[str, int] = field(default_factory=dict, repr=False)
    _summary_at: Dict[str, int] = field(default_factory=dict, repr=False)

    def add(self, message: str) -> None:
        if message in self._seen:
            return  # one line per distinct problem, however often it is met
        self._seen.add(message)
        shape = _SHAPE.sub("#", message)
        n = self._shapes.get(shape, 0) + 1
        self._shapes[shape] = n
        if n > self.per_shape:
            more = n - self.per_shape
            line = f"... and {more} more like: {message}"
            at = self._summary_at.get(shape)
            if at is not None:
                self.items[at] = line
                return
            message = line
            if len(self.items) < self.limit:
                self._summary_at[shape] = len(self.items)
        if len(self.items) < self.limit:
            self.items.append(message)
        elif len(self.items) == self.limit:
            self.items.append("further problems not listed")
