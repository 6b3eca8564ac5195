"""`dumpkit info`: what the dump holds (system, process, exception, threads, modules,
streams), as tables or JSON; nothing is walked."""

from __future__ import annotations

from dumpkit.commands.exits import EXIT_OK, EXIT_PROBLEMS, warn_problems
from dumpkit.commands.inputs import open_target
from dumpkit.commands.output import write_output


def run_info(dump: str, json_out: bool = False) -> int:
    """The contents written to stdout; returns the exit code."""
    from dumpkit.engine import contents

    target, problems = open_target(dump)
    doc = contents(target, problems=problems)
    if json_out:
        from dumpkit.report.json_report import render_json

        write_output(render_json(doc, indent=1) + "\n", None, dump)
    else:
        from rich.console import Console

        from dumpkit.report.contents import render_contents

        render_contents(doc, Console(highlight=False, soft_wrap=False, width=max(120, Console().width)))
    warn_problems(list(doc.soft_errors))
    return EXIT_PROBLEMS if doc.soft_errors else EXIT_OK
