"""The names and values of Windows status codes, EXCEPTION_* aliases and fail-fast
subcodes, as generated from the SDK headers into ntstatus.tsv (tools/gen_status_codes.py),
and of Win32 errors and HRESULTs, generated from winerror.h into winerror.tsv
(tools/gen_win32_errors.py).

Read once, at the first lookup that needs it (not at import: `dumpkit explain` starts
faster without it, and most lookups hit the hand-written notes first). The file is package
data, read with pkgutil so it works from any install.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Dict, List, Tuple
from dumpkit.records import record

__all__ = ["CodeTable", "ErrorTable", "code_table", "error_table", "parse_error_table", "parse_table"]

DATA_FILE = "ntstatus.tsv"
ERROR_FILE = "winerror.tsv"


@record
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


def _package_file(name: str) -> str:
    import pkgutil  # imported here: 1.3 ms of every start-up, and most runs never read a table

    data = pkgutil.get_data(__package__ or "dumpkit.analysis.codes", name)
    if data is None:  # a loader that cannot serve package data
        raise FileNotFoundError(f"{name} is missing from the dumpkit.analysis.codes package")
    return data.decode("utf-8")


@lru_cache(maxsize=1)
def code_table() -> CodeTable:
    return parse_table(_package_file(DATA_FILE))


@record
class ErrorTable:
    """Win32 errors and HRESULTs: `*_names[value]` is the first name winerror.h gives the
    value, `*_values` maps every name to its value."""

    win32_names: Dict[int, str]
    win32_values: Dict[str, int]
    hresult_names: Dict[int, str]
    hresult_values: Dict[str, int]


def parse_error_table(text: str) -> ErrorTable:
    """winerror.tsv's rows: kind (win32 or hresult), name, value, source."""
    names: Dict[str, Dict[int, str]] = {"win32": {}, "hresult": {}}
    values: Dict[str, Dict[str, int]] = {"win32": {}, "hresult": {}}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 4 or fields[0] not in names:
            raise ValueError(f"{ERROR_FILE} line {n}: not 'kind<TAB>name<TAB>value<TAB>source'")
        kind, name, value_text, _ = fields
        value = int(value_text, 0)
        names[kind].setdefault(value, name)
        values[kind].setdefault(name, value)
    return ErrorTable(names["win32"], values["win32"], names["hresult"], values["hresult"])


@lru_cache(maxsize=1)
def error_table() -> ErrorTable:
    """Read at the first Win32 or HRESULT lookup."""
    return parse_error_table(_package_file(ERROR_FILE))
