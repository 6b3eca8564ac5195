"""docs/report-schema.md is checked against docs/report-schema.json: its field tables name
every field the schema has and no other, each with the schema's type, and an enum's
meaning lists exactly the schema's values. The schema is checked against dumpkit's output
(test_report_schema.py), so the Markdown a person reads cannot drift from what is written."""

from __future__ import annotations

import re
from typing import Dict, Iterator, List, Optional, Set, Tuple

import pytest

from tests.support.samples import ROOT
from tests.support.schema import SCHEMA

DOC = ROOT / "docs" / "report-schema.md"
DEFS = SCHEMA["$defs"]
# the Markdown's words for the schema's types
SCALARS = {"integer": "int", "number": "float", "boolean": "bool", "string": "string"}
NAMED = {"address": "address", "register": "[string, address]"}

Field = Tuple[str, str]  # (type, meaning)


def _parts() -> Dict[str, str]:
    """The doc's text per document: the analyze report's part ends where "Other documents"
    (info, stack) begins; triage's is its own chapter."""
    text = DOC.read_text()
    other = text.index("\n## Other documents")
    triage = text.index("\n## `dumpkit triage")
    return {"analyze": text[:other], "other": text[other:triage], "triage": text[triage:]}


_ROW = re.compile(r"^\| (`[^|]+`) \| ([^|]+?) \|(.*)\|$")


def documented_fields(part: str) -> Dict[str, Field]:
    """{"crash.code": (type, meaning), "threads[].tid": ...} from a part's field tables: a
    `### `path`` heading (`### Top level`, or none, for the root), then one row per field;
    a row may name several fields (`first_seen`, `last_seen`)."""
    fields: Dict[str, Field] = {}
    sections: Optional[List[str]] = None  # None: not a field table (the types, the introduction)
    for line in _parts()[part].splitlines():
        if line.startswith("## "):
            sections = [""] if line.startswith("## `dumpkit triage") else None
        elif line.startswith("### "):
            title = line[4:].strip()
            # a table may serve several paths of one shape: ### `a[]`, `b[]`
            sections = [""] if title == "Top level" else re.findall(r"`([^`]+)`", title) or [title]
            continue
        m = _ROW.match(line)
        if m and sections is not None:
            for name in re.findall(r"`([^`]+)`", m[1]):
                for section in sections:
                    fields[f"{section}.{name}" if section else name] = (m[2].strip(), m[3])
    return fields


def _resolve(schema: dict) -> Tuple[str, dict]:
    """(the $defs name it refers to, or "", the schema itself)."""
    name = ""
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        schema = DEFS[name]
    return name, schema


def _not_null(schema: dict) -> List[dict]:
    """The branches of a nullable schema other than null."""
    if "anyOf" in schema:
        return [b for b in schema["anyOf"] if b != {"type": "null"}]
    if isinstance(schema.get("type"), list):
        return [{**schema, "type": next(t for t in schema["type"] if t != "null")}]
    return [schema]


def type_and_values(schema: dict) -> Tuple[str, Tuple]:
    """The Markdown's type word for a schema, and an enum's (or a constant's) values."""
    branches = _not_null(schema)
    if len(branches) > 1:  # an enum widened with a constant (blame.trust's "python stack")
        values = sum((type_and_values(b)[1] for b in branches), ())
        return "enum", values
    name, s = _resolve(branches[0])
    if name in NAMED:
        return NAMED[name], ()
    if "enum" in s:
        return "enum", tuple(s["enum"])
    if "const" in s:
        return ("string" if isinstance(s["const"], str) else "int"), (s["const"],)
    if s["type"] == "array":
        return "array of " + type_and_values(s["items"])[0], ()
    if s["type"] == "object":
        if "properties" in s:
            return "object", ()
        return "map of " + type_and_values(s["additionalProperties"])[0], ()
    return SCALARS[s["type"]], ()


def schema_fields(kind: str) -> Iterator[Tuple[str, dict]]:
    """Every field of a document as the doc's tables name it ("threads[].frames[].ip"),
    with its schema."""
    for path, sub, _ in _schema_fields(kind):
        yield path, sub


def _schema_fields(kind: str) -> Iterator[Tuple[str, dict, bool]]:
    """(path, schema, whether the key is always there)."""

    def walk(obj: dict, prefix: str) -> Iterator[Tuple[str, dict, bool]]:
        for name, sub in obj["properties"].items():
            path = f"{prefix}.{name}" if prefix else name
            yield path, sub, name in obj["required"]
            inner = _resolve(_not_null(sub)[0])[1]
            if inner.get("type") == "array":
                path, inner = path + "[]", _resolve(inner["items"])[1]
            if inner.get("type") == "object" and "properties" in inner:
                yield from walk(inner, path)

    yield from walk(DEFS[kind], "")


CHAPTERS = [("analyze", "analyze"), ("triage", "triage")]  # (document, part of the doc)


@pytest.mark.parametrize("kind,part", CHAPTERS)
def test_every_schema_field_is_documented_with_its_type(kind, part):
    documented = documented_fields(part)
    wrong = []
    for path, sub, required in _schema_fields(kind):
        if path not in documented:
            wrong.append(f"{path}: in the schema, not in {DOC.name}")
            continue
        typ, meaning = documented[path]
        if not required and not re.search(r"left out|absent", meaning):
            wrong.append(f"{path}: may be missing, which {DOC.name} does not say (left out, absent)")
        expected, values = type_and_values(sub)
        if typ != expected:
            wrong.append(f"{path}: {DOC.name} says {typ}, the schema {expected}")
        quoted = set(re.findall(r"`([^`]+)`", meaning))
        missing = [v for v in values if str(v) not in quoted | _values_referred_to(quoted)]
        if missing:
            wrong.append(f"{path}: {DOC.name} does not list {missing}")
        if typ == "enum":  # nothing else in backticks but the fields it refers to
            extra = {q for q in quoted - set(map(str, values)) - _field_names() if not q.startswith("--")}
            if extra:
                wrong.append(f"{path}: {DOC.name} lists {sorted(extra)}, which the schema does not allow")
    assert not wrong, "\n".join(wrong)


def _field_names() -> Set[str]:
    """What a meaning may quote besides values (and command-line options): a field, by its
    path or its name."""
    paths = set(documented_fields("analyze")) | set(documented_fields("triage"))
    return paths | {p.rsplit(".", 1)[-1] for p in paths}


def _values_referred_to(quoted: Set[str]) -> Set[str]:
    """An enum's values may be given by quoting the report's field that has them (triage's
    `verdict` is "the report's `verdict.kind`")."""
    report = dict(schema_fields("analyze"))
    return {str(v) for q in quoted if q in report for v in type_and_values(report[q])[1]}


@pytest.mark.parametrize("kind,part", CHAPTERS)
def test_every_documented_field_is_in_the_schema(kind, part):
    known = dict(schema_fields(kind))
    unknown = [p for p in documented_fields(part) if p not in known]
    assert not unknown, f"documented in {DOC.name} but not in the schema: {unknown}"


@pytest.mark.parametrize("kind", ["info", "stack"])
def test_info_and_stack_documents_are_listed_and_share_the_reports_fields(kind):
    """The doc describes them in a paragraph each ("writes `schema`, ... each as above"): it
    names every key, and every key the analyze report has too has the report's schema."""
    paragraph = next(p for p in _parts()["other"].split("\n\n") if p.startswith(f"`dumpkit {kind} --json`"))
    named = set(re.findall(r"`([^`]+)`", paragraph))
    properties = DEFS[kind]["properties"]
    assert set(properties) <= named, f"{kind}: {sorted(set(properties) - named)} not in its paragraph"
    assert properties["schema"]["const"] in named
    report = DEFS["analyze"]["properties"]
    for key, sub in properties.items():
        if key in report and key != "schema":
            assert sub == report[key], f"{kind}.{key} differs from the report's"


def test_every_stop_reason_is_documented():
    """`stop_reason` is a string in the schema (the frame limit says its number), so the
    doc's list of its words is checked here: every way a walk ends and every reason a
    thread was not walked."""
    from dumpkit.analysis.model import NotWalked
    from dumpkit.unwind.frames import StopReason

    _, meaning = documented_fields("analyze")["threads[].stop_reason"]
    quoted = set(re.findall(r"`([^`]+)`", meaning))
    limit = StopReason.FRAME_LIMIT.text(7).replace("7", "N")  # "frame limit (N) reached"
    words = {r.text() for r in StopReason if r is not StopReason.FRAME_LIMIT} | {limit}
    assert words | {r.text() for r in NotWalked} == quoted
