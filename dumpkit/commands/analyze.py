"""`dumpkit analyze`: one dump, analysed, its report written in the format asked for."""

from __future__ import annotations

import sys
from typing import Optional, Sequence

from dumpkit.commands.exits import EXIT_OK, EXIT_PROBLEMS, warn_problems

from dumpkit.commands.inputs import open_target, symbol_paths
from dumpkit.commands.output import SHARED_FORMATS, Format, report_format, text_width, write_output, fetch_progress
from dumpkit.limits import MAX_FRAMES, OVERSIZED_FRAME


def run_analyze(
    dump: str,
    image_path: Sequence[str] = (),
    symbol_path: Sequence[str] = (),
    recorded_paths: bool = True,
    fetch_images: bool = False,
    fmt_name: Optional[str] = None,
    output: Optional[str] = None,
    max_frames: int = MAX_FRAMES,
    threshold: int = OVERSIZED_FRAME,
    color: Optional[bool] = None,
    width_asked: Optional[int] = None,
    redact: Optional[bool] = None,
) -> int:
    """`dumpkit analyze`: the report written where asked; returns the exit code."""
    from dumpkit.engine import Options, analyze as run

    fmt = report_format(fmt_name, output)
    target, problems = open_target(dump)
    opts = Options(
        image_paths=tuple(image_path),
        symbol_paths=symbol_paths(list(symbol_path)),
        use_recorded_paths=recorded_paths,
        max_frames=max(1, max_frames),
        oversized_threshold=max(1, threshold),
        fetch_images=fetch_images,
        fetch_progress=fetch_progress(),
    )
    result = run(target, opts, problems=problems)
    report = result.report
    if redact if redact is not None else fmt in SHARED_FORMATS:
        from dumpkit.report.redact import redact_report

        report = redact_report(report)
    if fmt is Format.json:
        from dumpkit.report.json_report import render_json

        text = render_json(report) + "\n"
    elif fmt is Format.markdown:
        from dumpkit.report.markdown import render_markdown

        text = render_markdown(report)
    elif fmt is Format.html:
        from dumpkit.report.html import render_html

        text = render_html(report)
    else:
        from dumpkit.report.text import render_text

        tty = sys.stdout.isatty() and not output
        use_color = tty if color is None else color
        if use_color and not output:
            from dumpkit.console import colour_ready

            use_color = colour_ready()  # a Windows console shows escapes as text until told
        width = text_width(tty, width_asked)
        text = render_text(report, color=use_color and not output, width=width)
    write_output(text, output, dump)
    warn_problems(list(report.soft_errors))
    return EXIT_PROBLEMS if report.soft_errors else EXIT_OK
