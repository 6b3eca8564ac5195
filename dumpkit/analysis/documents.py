"""The documents a run hands back, assembled from what its phases found: the Report
(`dumpkit analyze`) and the Contents (`dumpkit info`, the read phase alone). Both carry the
same records for the dump, its system, crash, threads and modules (docs/report-schema.md)."""

from __future__ import annotations

from typing import Optional, Sequence, TypedDict

from dumpkit import __version__
from dumpkit.analysis import facts
from dumpkit.analysis.blame import blame_frame
from dumpkit.analysis.crash import decode_crash
from dumpkit.analysis.environment import describe_environment
from dumpkit.analysis.environment.versions import Versions
from dumpkit.analysis.model import (
    SCHEMA_VERSION,
    Contents,
    DumpSummary,
    Finding,
    NotWalked,
    Report,
    SystemSummary,
    ThreadReport,
    Verdict,
)
from dumpkit.analysis.process import process_record
from dumpkit.analysis.signature import crash_signature, recursion_start
from dumpkit.analysis.verdict.hang import snapshot_signature
from dumpkit.analysis.verdict import Case
from dumpkit.images import ImageProvider
from dumpkit.problems import Problems
from dumpkit.target import Target, Thread


class Header(TypedDict):
    """What every document begins with: its schema, this dumpkit, the dump and its system."""

    schema_version: int
    dumpkit_version: str
    dump: DumpSummary
    system: Optional[SystemSummary]


def header(target: Target) -> Header:
    """The header of a document about `target`."""
    return Header(
        schema_version=SCHEMA_VERSION,
        dumpkit_version=__version__,
        dump=facts.dump_summary(target),
        system=facts.system_summary(target),
    )


def contents_document(target: Target, problems: Problems) -> Contents:
    """What the dump holds, nothing walked: its threads without frames."""
    ex = target.exception
    crash = decode_crash(ex, target.system, (), target.read_available) if ex is not None else None
    threads = tuple(
        ThreadReport(
            tid=t.tid,
            name=t.name,
            is_crashing=ex is not None and t.tid == ex.thread_id,
            frame_count=0,
            frames=(),
            elided_frames=0,
            stop=NotWalked.SKIPPED,
            trust_counts={},
            **facts.thread_record_fields(t),  # type: ignore[arg-type]
        )
        for t in target.threads
    )
    return Contents(
        **header(target),
        crash=crash,
        crash_absent=facts.crash_absent(target, problems),
        threads=threads,
        modules=facts.module_records(target, {}),
        unloaded_modules=facts.unloaded_records(target),
        environment=describe_environment(target),
        soft_errors=tuple(problems.items),
    )


def report_document(
    target: Target,
    case: Case,
    verdict: Verdict,
    findings: Sequence[Finding],
    threads: Sequence[ThreadReport],
    images: ImageProvider,
    problems: Problems,
    crash_absent: Optional[str],
    versions: Versions,
    crash_thread: Optional[Thread],
    for_record: bool = False,
) -> Report:
    """The Report of a run: the `case` the verdict was decided on, the verdict and its
    `findings`, every thread's report; `problems` as they stand now (the process record is
    read after they are taken). `for_record`: a triage record's, never shown: without the
    module list and the blamed frame, which only a reader of the report is given."""
    crash, thread = case.crash, case.thread
    modules = () if for_record else facts.module_records(target, images.sources(), images.symbol_sources())
    return Report(
        **header(target),
        crash=crash,
        verdict=verdict,
        findings=tuple(findings),
        threads=tuple(threads),
        frame_sizes=tuple(case.sizes),
        environment=case.environment,
        modules=modules,
        soft_errors=tuple(problems.items),
        oversized_threshold=case.threshold,
        unloaded_modules=facts.unloaded_records(target),
        crash_absent=crash_absent,
        python=case.python,
        images=case.coverage,
        process=process_record(target, versions, (crash_thread,) if crash_thread is not None else ()),
        signature=crash_signature(crash, thread, case.ending) if crash is not None else snapshot_signature(case),
        blame=blame_frame(
            thread,
            modules,
            recursion_start(crash, thread),
            case.python_entry,
            case.ending.caller_frame if case.ending is not None else None,
            crash.delay_load.caller_frame if crash is not None and crash.delay_load is not None else None,
        )
        if crash is not None and not for_record
        else None,
        ending=case.ending,
        waits=tuple(case.waits),
        deadlocks=tuple(case.deadlocks),
    )
