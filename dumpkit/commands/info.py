"""`dumpkit info`: what the dump holds (system, process, exception, threads, modules,
streams), as tables or JSON; nothing is walked."""

from __future__ import annotations

from dumpkit.commands.exits import EXIT_OK, EXIT_PROBLEMS, warn_problems
from dumpkit.commands.inputs import open_target
from dumpkit.commands.output import fetch_progress, write_output


def run_info(dump: str, json_out: bool = False, fetch_images: bool = False) -> int:
    """The contents written to stdout; returns the exit code. `fetch_images`: every
    module's image fetched where it is published (warming the cache for later runs), and
    each module's image source shown."""
    from dumpkit.engine import Options, contents

    target, problems = open_target(dump)
    options = Options(fetch_images=fetch_images, fetch_progress=fetch_progress())
    doc = contents(target, problems=problems, options=options)
    if json_out:
        from dumpkit.report.json_report import render_json

        write_output(render_json(doc, indent=1) + "\n", None, dump)
    else:
        from rich.console import Console

        from dumpkit.report.contents import render_contents

        render_contents(doc, Console(highlight=False, soft_wrap=False, width=max(120, Console().width)))
        sources = [f"  {m.name}: {m.image_source}" for m in doc.modules if m.image_source]
        if sources:  # --fetch-images: where each image came from (JSON: modules[].image_source)
            write_output("Images\n" + "\n".join(sources) + "\n", None, dump)
    warn_problems(list(doc.soft_errors))
    return EXIT_PROBLEMS if doc.soft_errors else EXIT_OK
