"""Full-memory dumps (issue #20 item 4): every analysis, the Python-stack recovery among them,
reads the pages it needs and nothing else, so a dump's size is not the analysis's cost.

The committed full-memory dump of a real python.exe (a walk -> visit recursion, 3,829
Python frames on the heap) is grown by 1 GiB of captured memory that no analysis needs
(bench/make_sparse_dump.py: a MemoryList of 4,096 ranges at 1 TiB up, a hole in the file):
`analyze` and `stack --all --python` must not read one page of it, and must say what they
say of the dump as it was. bench's pyfull4g measures the same on a real 4.4 GB dump."""

from __future__ import annotations

import json

from tests.support.samples import PY_SAMPLES, plain_dump, sparse_dump

FULL = PY_SAMPLES / "py_recursion_full.trimmed.dmp.xz"
PAGE = 4096


def _documents(path):
    """(analyze JSON, stack --all --python JSON, pages of memory both read)."""
    from dumpkit.engine import Options, analyze, stacks
    from dumpkit.report.json_report import render_json
    from dumpkit.sources.minidump import open_dump

    target = open_dump(str(path))
    try:
        pages = target.record_memory_reads()
        options = Options()
        report = json.loads(render_json(analyze(target, options, problems=target.soft_errors).report))
        doc, _, _ = stacks(target, options, list(target.threads), python=True, problems=target.soft_errors)
        stack = json.loads(render_json(doc))
    finally:
        target.close()
    return report, stack, pages


def test_a_python_full_memory_dump_is_read_only_where_the_analysis_needs_it(tmp_path):
    full = plain_dump(FULL, tmp_path)
    grown = tmp_path / "grown.dmp"
    made = sparse_dump(full, grown, gib=1, ranges=4096)
    assert made["stream"] == "MemoryList" and made["range_bytes"] == 1 << 30

    report, stack, pages = _documents(grown)
    added = range(made["first_addr"] // PAGE, made["last_end"] // PAGE)
    assert not [p for p in pages if p in added], "an analysis read memory it does not need"
    # what it did read: the crashing thread's stack, image pages and the Python frames
    assert len(pages) * PAGE < 8 << 20, len(pages)
    assert report["dump"]["memory_ranges"] == 59 + 4096

    before, before_stack, _ = _documents(full)
    for doc in (report, before):
        doc.pop("dump")
    assert report == before
    assert (stack["threads"], stack["python"]) == (before_stack["threads"], before_stack["python"])
    py = report["python"]["threads"][0]
    assert py["depth"] == 3829 and "walk" in json.dumps(py["frames"][:2])
