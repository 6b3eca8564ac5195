"""Bundles made once per session from the sample dumps, and the report comparison the
round-trip tests use (a report from a bundle vs. the report from the dump with its images)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, Sequence

from tests.golden.snapshot import _where_found


def write(dump: Path, out: Path, image_paths: Sequence[str] = (), redact: bool = False, only_used_memory: bool = False):
    """`dumpkit bundle` in-process: the summary of what was written."""
    from dumpkit.bundle.writer import write_bundle
    from dumpkit.sources.minidump import open_dump

    target = open_dump(str(dump))
    try:
        return write_bundle(
            target,
            str(dump),
            str(out),
            image_paths=image_paths,
            only_used_memory=only_used_memory,
            problems=target.soft_errors,
        )
    finally:
        target.close()


def _pdb_found(doc: Dict) -> None:
    """A module's symbol_source names the PDB file that served it (a file here, a member of
    the bundle there): which copy served is the run's; that a PDB did is the report's."""
    for m in doc.get("modules") or ():
        src = m.get("symbol_source")
        if src and src.startswith("pdb: "):
            m["symbol_source"] = "pdb"


def report_json(target, image_paths: Sequence[str] = ()) -> Dict:
    """The JSON report as a dict, with what may differ between a dump and its bundle
    removed: the dump's path (reports of a bundle name the bundle), which file served an
    image (its match, TimeDateStamp and SizeOfImage, stays) and what the --image-path
    folders of the run said."""
    from dumpkit.engine import Options, analyze
    from dumpkit.report.json_report import render_json

    try:
        doc = json.loads(
            render_json(analyze(target, Options(image_paths=image_paths), problems=target.soft_errors).report)
        )
    finally:
        target.close()
    doc["dump"].pop("path", None)
    # what each --image-path folder of the run gave (nothing, or not what was looked for)
    # is about that run's options: a bundle is read without them
    (doc.get("images") or {}).pop("search_problems", None)
    _where_found(doc)
    _pdb_found(doc)
    return doc


def stacks_json(target, image_paths: Sequence[str] = ()) -> Dict:
    """`dumpkit stack --all --python --json` as a dict, normalised like report_json."""
    from dumpkit.engine import Options, stacks
    from dumpkit.report.json_report import render_json

    try:
        doc, _, _ = stacks(
            target, Options(image_paths=image_paths), list(target.threads), python=True, problems=target.soft_errors
        )
        out = json.loads(render_json(doc))
    finally:
        target.close()
    out["dump"].pop("path", None)
    _where_found(out)
    _pdb_found(out)
    return out
