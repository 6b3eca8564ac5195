"""Local user names out of a report before it is shared: `C:\\Users\\NAME\\...` becomes
`C:\\Users\\<user>\\...`, and likewise `/home/NAME`, `/Users/NAME` (macOS) and
`...\\Documents and Settings\\NAME`, wherever a path sits in a report string (module
paths, the dump's path, the command line, evidence sentences, problems).

Whose folders they are is what is private; the folder names Windows gives every machine
(Public, Default, All Users) are kept. Nothing else is changed, so the report still reads
the same and its paths still say where things were."""

from __future__ import annotations

import re
from typing import Any, Dict, Optional, Tuple

from dumpkit.analysis.model import Report
from dumpkit.records import fields, is_dataclass, replace

PLACEHOLDER = "<user>"
_SHARED = frozenset({"public", "default", "all users", "default user", PLACEHOLDER})
# Characters a Windows user name cannot hold (path separators among them): a name ends there.
_NOT_NAME = r"\\/:*?\"<>|=,+;\[\]\r\n"
_USER_PATH = re.compile(
    r"(?P<head>[\\/](?:users|documents and settings|home)[\\/])"
    # a user name may hold spaces when a separator follows ("C:\Users\Ann Lee\x");
    # otherwise a name stops at white space (a command line's next argument)
    rf"(?P<name>[^{_NOT_NAME}\s](?:[^{_NOT_NAME}]*[^{_NOT_NAME}\s])?(?=[\\/])|[^{_NOT_NAME}\s]+)",
    re.IGNORECASE,
)


def redact_text(text: str) -> str:
    """`text` with the user folder names of the paths it holds replaced by <user>."""
    if "/" not in text and "\\" not in text:
        return text

    def replace(m: "re.Match[str]") -> str:
        name = m.group("name")
        return m.group(0) if name.lower() in _SHARED else m.group("head") + PLACEHOLDER

    out = _USER_PATH.sub(replace, text)
    return text if out == text else out  # the same object when unchanged: callers test identity


_FIELDS: Dict[type, Optional[Tuple[str, ...]]] = {}


def _redacted(value: Any) -> Any:
    """Every string inside `value` redacted; dataclasses, tuples, lists and dicts rebuilt
    only where something changed. The model's nesting is fixed by its classes (a thread
    holds frames, a frame holds strings), never by the dump, so this recursion is bounded."""
    if isinstance(value, str):
        return redact_text(value)
    cls = type(value)
    if is_dataclass(value) and not isinstance(value, type):
        names = _FIELDS.get(cls)
        if names is None:
            names = _FIELDS[cls] = tuple(f.name for f in fields(value))
        changes = {}
        for n in names:
            old = getattr(value, n)
            new = _redacted(old)
            if new is not old:
                changes[n] = new
        return replace(value, **changes) if changes else value
    if isinstance(value, (tuple, list)):
        items = [_redacted(v) for v in value]
        if all(a is b for a, b in zip(items, value)):
            return value
        return cls(items)
    if isinstance(value, dict):
        pairs = {_redacted(k): _redacted(v) for k, v in value.items()}
        return pairs if pairs != value else value
    return value


def redact_report(report: Report) -> Report:
    """The report with every user folder name in its strings replaced by <user>."""
    return _redacted(report)
