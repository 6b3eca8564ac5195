"""JSON rendering. Schema: docs/report-schema.json, explained in docs/report-schema.md
(addresses are "0x..." strings; non-fatal problems in `soft_errors`)."""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

from dumpkit.analysis.model import (
    BlameFrame,
    CallEdge,
    Contents,
    CrashInfo,
    Ending,
    Environment,
    FrameRecord,
    PythonReport,
    PythonThreadReport,
    Report,
    Stacks,
    ThreadReport,
)
from dumpkit.records import fields, is_dataclass

try:  # json.encoder's own C function, without the json package's decoder imported at start-up
    from _json import encode_basestring_ascii
except ImportError:  # an interpreter without the accelerator
    from json.encoder import encode_basestring_ascii

# Fields holding addresses: rendered as hex strings, the way debuggers show them.
# `registers` holds (name, value) pairs: the names stay strings, the values become hex.
ADDRESS_FIELDS = {
    "ip",
    "sp",
    "base",
    "address",
    "obj",  # ThreadWait: the object waited on (a handle value for a handle wait)
    "raw_address",
    "teb",
    "stack_start",
    "stack_end",
    "access_address",
    "info_address",  # DelayLoadFailure
    "slot_address",
    "limit",
    "reserve_low",
    "return_address",
    "target",
    "resolved",
    "tail_jump",
    "registers",
    "thread_state",  # a PyThreadState (the GIL's witnesses and holders)
    "holder_thread_state",
    "last_holder_thread_state",
}


_FIELD_NAMES: Dict[type, Optional[Tuple[str, ...]]] = {}


# Fields JSON shows as the words a property makes of them, in the field's place (None: not
# shown): a ThreadReport carries how its walk ended as data (`stop`, and the `frame_limit`
# it stopped at) and JSON says it in words, `stop_reason` ("frame limit (2000000) reached").
_SHOWN_AS: Dict[type, Dict[str, Optional[str]]] = {
    ThreadReport: {"stop": "stop_reason", "frame_limit": None},
    PythonThreadReport: {"frame_addresses": None, "thread_state": None},
    PythonReport: {"package_versions": None},  # shown as environment.python_packages
    Ending: {"caller_scanned": None},  # the crashing thread's frames say how the caller was found
}


def _field_names(cls: type) -> Optional[Tuple[str, ...]]:
    """The names JSON shows of a dataclass (its fields, but for `_SHOWN_AS`), looked up
    once per class (reports hold many frames)."""
    try:
        return _FIELD_NAMES[cls]
    except KeyError:
        names: Optional[Tuple[str, ...]] = None
        if is_dataclass(cls):
            shown = _SHOWN_AS.get(cls, {})
            as_shown = (shown.get(f.name, f.name) for f in fields(cls))
            names = tuple(n for n in as_shown if n is not None)
        _FIELD_NAMES[cls] = names
        return names


_SCALARS = (str, float, bool, type(None))

# Fields added after schema version 1 that most records lack: left out rather than null,
# so a report without them reads as it did (docs/report-schema.md).
_OMITTED_WHEN_NONE: Dict[type, Tuple[str, ...]] = {
    FrameRecord: ("source", "support"),
    ThreadReport: ("possible_frames", "possible_count"),
    CrashInfo: ("cxx_throw_info", "delay_load"),
    BlameFrame: ("python_frame", "python_via", "kind"),
    CallEdge: ("tail_jump",),
    Report: ("ending",),
    PythonThreadReport: ("name",),
    PythonReport: ("gil",),
    Environment: ("memory",),
}

# Lists added after schema version 1 that most reports have empty: left out when empty.
_OMITTED_WHEN_EMPTY: Dict[type, Tuple[str, ...]] = {
    Environment: ("runtime_collisions", "python_packages"),
    Report: ("waits", "deadlocks"),
}


def _convert(obj: Any, key: str = "") -> Any:
    cls = type(obj)
    if cls is int:  # the common cases first: a report is mostly numbers and strings
        return f"{obj:#x}" if key in ADDRESS_FIELDS else obj
    if cls in _SCALARS:
        return obj
    names = _field_names(cls)
    if names is not None:
        out = {}
        for n in names:  # a record's numbers and strings converted here: a call each was ~15% of the time
            value = getattr(obj, n)
            kind = type(value)
            if kind is int:
                out[n] = f"{value:#x}" if n in ADDRESS_FIELDS else value
            elif kind in _SCALARS:
                out[n] = value
            else:
                out[n] = _convert(value, n)
        for n in _OMITTED_WHEN_NONE.get(cls, ()):
            if out.get(n, 0) is None:
                del out[n]
        for n in _OMITTED_WHEN_EMPTY.get(cls, ()):
            if out.get(n) == []:
                del out[n]
        return out
    if isinstance(obj, dict):
        return {str(k): _convert(v, str(k)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_convert(v, key) for v in obj]
    if isinstance(obj, int) and not isinstance(obj, bool) and key in ADDRESS_FIELDS:
        return f"{obj:#x}"
    return obj


# Each document names its schema, as triage's does ("dumpkit-triage"): a reader tells an
# analyze report from an info or stack document by its first key, not by guessing from the
# keys it happens to hold (docs/report-schema.json has one definition per name).
SCHEMA_NAMES: Dict[type, str] = {Report: "dumpkit-analyze", Contents: "dumpkit-info", Stacks: "dumpkit-stack"}


def report_dict(report: Union[Report, Contents, Stacks]) -> dict:
    return {"schema": SCHEMA_NAMES[type(report)], **_convert(report)}


def render_json(report: Union[Report, Contents, Stacks], indent: Optional[int] = 2) -> str:
    """Any of the engine's documents (analyze's Report, info's Contents, stack's Stacks):
    they share their records, so they share their JSON shapes too."""
    tree = report_dict(report)
    if indent is not None:
        try:
            return _indented(tree, " " * indent)
        except _Unusual:
            pass  # json.dumps says what it says of it
    import json

    return json.dumps(tree, indent=indent, ensure_ascii=True)


# ----------------------------------------------------------------------------- indented text
# json.dumps(tree, indent=n, ensure_ascii=True), written here: with an indent the json module
# leaves its C encoder for Python generators (one per list and dict, a yield per piece),
# 12 of render_json's 18 ms on a 47-thread report; this writes the same text in 60% of that.
# Only for what _convert makes (dicts with string keys, lists, strings, numbers, booleans,
# None); anything else raises _Unusual and json.dumps writes the document.
# tests/report/test_json_report.py holds the two to the same text.


class _Unusual(Exception):
    """A value or key _indented leaves to json.dumps."""


_INFINITY = float("inf")


def _scalar(value: Any) -> Optional[str]:
    """The JSON of a value that holds no other (as json.dumps writes it); None for a list or
    a dict."""
    if isinstance(value, str):
        return encode_basestring_ascii(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if value != value:
            return "NaN"
        if value == _INFINITY:
            return "Infinity"
        if value == -_INFINITY:
            return "-Infinity"
        return float.__repr__(value)
    if isinstance(value, (list, dict)):
        return None
    raise _Unusual


def _indented(tree: Any, step: str) -> str:
    text = _scalar(tree)
    if text is not None:
        return text
    out: List[str] = []
    _write(tree, out, "\n", step)
    return "".join(out)


def _key(key: Any) -> str:
    if type(key) is not str:
        raise _Unusual
    return encode_basestring_ascii(key) + ": "


def _write(tree: Union[list, dict], out: List[str], newline: str, step: str) -> None:
    """A list or dict whose first character goes where `out` ends, its lines indented by
    `newline`'s spaces plus `step`. Strings, most of a report, are written inline."""
    if not tree:
        out.append("{}" if isinstance(tree, dict) else "[]")
        return
    inner = newline + step
    if isinstance(tree, dict):
        opening, closing = "{", "}"
        items: Iterable[Tuple[str, Any]] = ((_key(key), value) for key, value in tree.items())
    else:
        opening, closing = "[", "]"
        items = (("", value) for value in tree)
    before = opening + inner
    for head, value in items:
        text = encode_basestring_ascii(value) if type(value) is str else _scalar(value)
        if text is None:
            out.append(before + head)
            _write(value, out, inner, step)
        else:
            out.append(before + head + text)
        before = "," + inner
    out.append(newline + closing)
