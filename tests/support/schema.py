"""docs/report-schema.json and the documents it describes, for the tests: a validator per
document kind (jsonschema, the reference validator), and the documents as the CLI writes
them, made with the functions the CLI calls."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, Dict, List, Optional

from jsonschema import Draft202012Validator

from tests.support.samples import ROOT

SCHEMA_PATH = ROOT / "docs" / "report-schema.json"
SCHEMA: Dict[str, Any] = json.loads(SCHEMA_PATH.read_text())
KINDS = ("analyze", "info", "stack", "triage")  # documents, by the $defs that describe them

_VALIDATORS: Dict[str, Draft202012Validator] = {}


def validator(kind: Optional[str] = None) -> Draft202012Validator:
    """The whole schema (None: any document), or the definition of one kind of document."""
    if kind not in _VALIDATORS:
        one = {"$schema": SCHEMA["$schema"], "$defs": SCHEMA["$defs"], "$ref": f"#/$defs/{kind}"}
        _VALIDATORS[kind] = Draft202012Validator(SCHEMA if kind is None else one)
    return _VALIDATORS[kind]


def problems(doc: Any, kind: Optional[str] = None, limit: int = 12) -> List[str]:
    """What in `doc` the schema refuses, as 'json/path: why' lines (empty: valid).

    For a named kind, the document must also name that schema: an analyze report that
    passed as an info document would still fail here."""
    out = []
    for error in validator(kind).iter_errors(doc):
        while error.context:  # "not valid under any of the given schemas": the branch that got furthest says why
            error = max(error.context, key=lambda e: len(e.absolute_path))
        where = "/".join(map(str, error.absolute_path)) or "(top)"
        out.append(f"{where}: {error.message[:300]}")
        if len(out) >= limit:
            break
    return out


def documents(
    path: Path, image_paths=(), kinds=("analyze", "info", "stack"), max_frames: Optional[int] = None
) -> Dict[str, Any]:
    """{kind: document} as `dumpkit analyze --format json`, `info --json` and
    `stack --all --python --json [--max-frames N]` write them for `path` (a dump or a
    bundle). `stack` is left out for a dump the CLI does not walk (neither x64 nor x86)."""
    from dumpkit.commands.inputs import open_target
    from dumpkit.engine import Options, analyze, contents, stacks, walker_for
    from dumpkit.report.json_report import render_json
    from dumpkit.report.stream import write_stacks_json

    def stack(target, problems) -> Optional[str]:
        if walker_for(target) is None:
            return None
        doc, frames, supports = stacks(
            target, walk_opts, list(target.threads), python=True, cycles=False, problems=problems
        )
        text = io.StringIO()
        write_stacks_json(doc, frames, text, supports=supports)
        return text.getvalue()

    opts = Options(image_paths=tuple(map(str, image_paths)))
    walk_opts = opts if max_frames is None else Options(image_paths=opts.image_paths, max_frames=max_frames)
    write = {
        "analyze": lambda target, problems: render_json(analyze(target, opts, problems=problems).report),
        "info": lambda target, problems: render_json(contents(target, problems=problems)),
        "stack": stack,
    }
    out: Dict[str, Any] = {}
    for kind in kinds:
        target, problems = open_target(str(path))  # each command opens the dump afresh: a run each
        try:
            text = write[kind](target, problems)
        finally:
            target.close()
        if text is not None:
            out[kind] = json.loads(text)
    return out
