"""Report snapshots: `dumpkit analyze --format json` of every sample dump (and, when
../shared is beside the repository, every real third-party dump), with the only
machine-dependent parts (where the repository sits) replaced by placeholders.

They pin behaviour across refactors: test_golden.py compares today's reports with the
committed ones. A change that is meant to change a report regenerates them with

    python tests/golden/snapshot.py            # every snapshot
    python tests/golden/snapshot.py NAME...    # only these (file names of the dumps)

and the diff of tests/golden/*.json is reviewed with the change that caused it."""

from __future__ import annotations

import json
import lzma
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Iterator, List, Tuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SAMPLES = ROOT / "sample_dumps"
REAL = ROOT.parent / "shared" / "real_dumps"


def inputs() -> Iterator[Tuple[str, Path, List[str]]]:
    """(snapshot name, dump path, image paths) for every dump that has a snapshot."""
    for p in sorted(SAMPLES.glob("*.dmp")) + sorted(SAMPLES.glob("*.dmp.xz")):
        yield f"sample--{p.name}", p, [str(SAMPLES / "bin")]
    if REAL.is_dir():
        for p in sorted(REAL.glob("*/*.dmp")):
            yield f"real--{p.parent.name}--{p.name}", p, []


def _where_found(doc: dict) -> None:
    """A module's image_source says which file served it; on a machine with a Wine prefix
    the recorded Windows paths resolve to that prefix's identical DLLs instead of the
    --image-path copies. Which copy served is machine-dependent; whether one did is not."""
    for m in doc.get("modules") or ():
        src = m.get("image_source")
        if src and not src.startswith("not found"):
            m["image_source"] = "found: " + src.split(" (", 1)[1].rstrip(")") if " (" in src else "found"


def normalized_report(dump: Path, image_paths: List[str]) -> dict:
    """The JSON report as a dict, paths of this checkout replaced by "$ROOT", image
    sources reduced to whether (and by what match) an image was found."""
    from dumpkit.engine import Options, analyze
    from dumpkit.problems import Problems
    from dumpkit.report.json_report import render_json
    from dumpkit.sources.minidump import open_dump

    def analyse_file(path: str, options: Options):
        problems = Problems()  # the run's, as `dumpkit analyze` makes it
        return analyze(open_dump(path, problems), options, problems=problems).report

    if dump.suffix == ".xz":  # dumpkit reads plain dumps; the big samples are committed xz'd
        with tempfile.TemporaryDirectory() as tmp:
            plain = Path(tmp) / dump.stem
            with lzma.open(dump) as src, open(plain, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            report = analyse_file(str(plain), Options(image_paths=image_paths))
            text = render_json(report).replace(json.dumps(str(plain))[1:-1], str(dump))
    else:
        report = analyse_file(str(dump), Options(image_paths=image_paths))
        text = render_json(report)
    for root, name in ((REAL.parent, "$SHARED"), (ROOT, "$ROOT")):
        text = text.replace(json.dumps(str(root))[1:-1], name)
    doc = json.loads(text)
    _where_found(doc)
    return doc


def snapshot_path(name: str) -> Path:
    return HERE / f"{name}.json"


def main(argv: List[str]) -> int:
    sys.path.insert(0, str(ROOT))
    for name, dump, images in inputs():
        if argv and dump.name not in argv:
            continue
        doc = normalized_report(dump, images)
        snapshot_path(name).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        print(f"wrote {snapshot_path(name).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
