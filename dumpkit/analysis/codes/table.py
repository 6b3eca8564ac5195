"""The names and values of Windows status codes, EXCEPTION_* aliases and fail-fast
subcodes, as generated from the SDK headers into ntstatus.tsv (tools/gen_status_codes.py).

Read once, at the first lookup that needs it (not at import: `dumpkit explain` starts
faster without it, and most lookups hit the hand-written notes first). The file is package
data, read with pkgutil so it works from any install.
"""

from __future__ import annotations

import pkgutil
from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, List, Tuple

__all__ = ["CodeTable", "code_table", "parse_table"]

DATA_FILE = "ntstatus.tsv"


@dataclass(frozen=True)
class CodeTable:
    """`status_names[value]` is the name the headers give first for that value;
    `status_values` maps every status name and EXCEPTION_* alias to its value; likewise
    for fail-fast subcodes. `sources` are the header lines of the data file."""

    status_names: Dict[int, str]
    status_values: Dict[str, int]
    fast_fail_names: Dict[int, str]
    fast_fail_values: Dict[str, int]
    sources: Tuple[str, ...]


def parse_table(text: str) -> CodeTable:
    """ntstatus.tsv's rows: kind, name, value (hex or decimal), source; '#' starts a comment."""
    status_names: Dict[int, str] = {}
    status_values: Dict[str, int] = {}
    ff_names: Dict[int, str] = {}
    ff_values: Dict[str, int] = {}
    sources: List[str] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if line.startswith("#"):
            sources.append(line[1:].strip())
            continue
        fields = line.split("\t")
        if len(fields) != 4 or fields[0] not in ("status", "alias", "fast_fail"):
            raise ValueError(f"{DATA_FILE} line {n}: not 'kind<TAB>name<TAB>value<TAB>source'")
        kind, name, value_text, _ = fields
        value = int(value_text, 0)
        if kind == "fast_fail":
            ff_values.setdefault(name, value)
            ff_names.setdefault(value, name)
        else:
            status_values.setdefault(name, value)
            if kind == "status":
                status_names.setdefault(value, name)
    return CodeTable(status_names, status_values, ff_names, ff_values, tuple(sources))


@lru_cache(maxsize=1)
def code_table() -> CodeTable:
    data = pkgutil.get_data(__package__ or "dumpkit.analysis.codes", DATA_FILE)
    if data is None:  # a loader that cannot serve package data
        raise FileNotFoundError(f"{DATA_FILE} is missing from the dumpkit.analysis.codes package")
    return parse_table(data.decode("utf-8"))
