"""`dumpkit triage`: collect the dumps, run them with a progress bar on a terminal, write
the groups in the format asked."""

from __future__ import annotations

import os
import sys
import time
from typing import List, Optional, Sequence

from dumpkit import __version__
from dumpkit.analysis.signature import RULES
from dumpkit.commands.exits import EXIT_INTERRUPTED, EXIT_OK, EXIT_PROBLEMS, fail
from dumpkit.commands.inputs import symbol_paths
from dumpkit.commands.output import Format, report_format, write_file
from dumpkit.sources.packed import unpack_ratio
from dumpkit.sources.streamed import is_stream
from dumpkit.triage.analyse import Job
from dumpkit.triage.cache import Cache
from dumpkit.triage.collect import collect
from dumpkit.triage.memory import default_cap, parse_size
from dumpkit.triage.record import DumpRecord
from dumpkit.triage.forkserver import worker_count
from dumpkit.triage.run import run

REPORTS = "reports"  # per-dump reports, beside the HTML page


class UsageError(Exception):
    """One line for stderr; exit code 2."""


def html_page(output: str) -> str:
    """Where the HTML page goes: OUTPUT itself when it names an .html file, else
    OUTPUT/index.html (a folder that also receives the per-dump reports)."""
    if output.lower().endswith((".html", ".htm")):
        return output
    return os.path.join(output, "index.html")


def _records(
    paths: Sequence[str],
    job: Job,
    jobs: int,
    cache: Optional[Cache],
    scheduler: Optional[str],
    progress: bool,
    memory_cap: Optional[int],
):
    """The records as they finish, with a rich progress bar on stderr when asked."""
    stream = run(paths, job, jobs=jobs, cache=cache, scheduler=scheduler, memory_cap=memory_cap)
    if not progress:
        yield from stream
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("triage"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("triage", total=len(paths))
        for record in stream:
            bar.advance(task)
            yield record


def run_triage(
    paths: Sequence[str],
    fmt_name: Optional[str] = None,
    output: Optional[str] = None,
    jobs: Optional[int] = None,
    timeout: float = 600.0,
    cache: Optional[str] = None,
    scheduler: Optional[str] = None,
    image_path: Sequence[str] = (),
    symbol_path: Sequence[str] = (),
    progress: Optional[bool] = None,
    memory_cap: Optional[str] = None,
    fetch_images: bool = False,
    recorded_paths: bool = True,
) -> int:
    """The groups written where asked; returns the exit code. `timeout` 0 is no limit."""
    fmt = report_format(fmt_name, output if output and os.path.splitext(output)[1] else None)
    if output and fmt is Format.text and not fmt_name and not os.path.splitext(output)[1]:
        fmt = Format.html  # a folder: the HTML page and its per-dump reports
    try:
        return _triage(
            paths,
            fmt.value,
            output,
            worker_count(jobs),
            timeout if timeout > 0 else None,
            cache,
            scheduler,
            image_path,
            symbol_paths(list(symbol_path)),
            progress,
            memory_cap,
            fetch_images,
            recorded_paths,
        )
    except UsageError as e:
        raise fail(str(e)) from None


def _triage(
    inputs: Sequence[str],
    fmt: str,
    output: Optional[str],
    jobs: int,
    timeout: Optional[float],
    cache_dir: Optional[str],
    scheduler: Optional[str],
    image_paths: Sequence[str],
    symbol_paths: Sequence[str],
    progress: Optional[bool],
    memory_cap: Optional[str] = None,
    fetch_images: bool = False,
    recorded_paths: bool = True,
) -> int:
    from dumpkit.report import triage as render
    from dumpkit.report.view.triage import triage_document, triage_view

    try:
        cap = default_cap(jobs) if memory_cap is None else parse_size(memory_cap)
    except ValueError as e:
        raise UsageError(f"--memory-cap: {e}") from None
    try:
        ratio = unpack_ratio()
    except ValueError as e:
        raise UsageError(str(e)) from None
    paths, missing = collect(inputs)
    for m in missing:
        if is_stream(m):  # triage hands files to its workers by name; a stream is read once
            sys.stderr.write(
                f"dumpkit: warning: {m}: a pipe or device, not a file (triage reads files; analyze reads a dump from a pipe)\n"
            )
        else:
            sys.stderr.write(f"dumpkit: warning: {m}: no such file, folder or matching dump\n")
    if not paths:
        raise UsageError("no dump files found (looked for .dmp, .mdmp, .hdmp, .dmp.xz/.gz/.bz2, .zip and .dkb)")
    page = html_page(output) if fmt == "html" and output else output
    report_dir = os.path.join(os.path.dirname(os.path.abspath(page)), REPORTS) if fmt == "html" and page else None
    job = Job(
        image_paths=tuple(image_paths),
        symbol_paths=tuple(symbol_paths),
        timeout=timeout,
        report_dir=report_dir,
        report_writer=render.per_dump_html if report_dir else None,
        fetch_images=fetch_images,
        use_recorded_paths=recorded_paths,
        unpack_ratio=ratio,
    )
    try:
        cache = Cache(cache_dir) if cache_dir else None
    except OSError as e:
        raise UsageError(f"{cache_dir}: cannot use as cache ({e.strerror or e})") from None
    show = sys.stderr.isatty() if progress is None else progress
    records: List[DumpRecord] = []
    interrupted = False
    started = time.monotonic()
    try:
        for record in _records(paths, job, jobs, cache, scheduler, show, cap or None):
            records.append(record)
    except KeyboardInterrupt:
        interrupted = True
    except RuntimeError as e:  # --scheduler without Dask, or a cluster that cannot be reached
        raise UsageError(str(e)) from None
    except OSError as e:
        if not scheduler:
            raise
        raise UsageError(f"{scheduler}: cannot use the Dask scheduler ({e})") from None
    records.sort(key=lambda r: r.path)
    if fmt == "json":
        text = render.render_triage_json(triage_document(records, __version__, RULES, interrupted))
    else:
        view = triage_view(records, interrupted, time.monotonic() - started)
        if fmt == "markdown":
            text = render.render_triage_markdown(view)
        elif fmt == "html":
            text = render.render_triage_html(view)
        else:
            text = render.render_triage_text(view)
    if page:
        write_file(text, page, make_folder=True)
    else:
        sys.stdout.write(text)
    if cache is not None and cache.damaged:
        sys.stderr.write(
            f"dumpkit: warning: {cache_dir}: {cache.damaged} cache entr{'y was' if cache.damaged == 1 else 'ies were'} "
            "damaged (truncated or not written by dumpkit); removed, and their dumps analysed again\n"
        )
    failed = sum(1 for r in records if not r.ok)
    if failed:
        sys.stderr.write(f"dumpkit: warning: {failed} of {len(records)} dumps not analysed (listed in the output)\n")
    if interrupted:
        sys.stderr.write(f"dumpkit: interrupted: {len(records)} of {len(paths)} dumps finished, written\n")
        return EXIT_INTERRUPTED
    return EXIT_PROBLEMS if failed or missing else EXIT_OK
