"""`dumpkit bundle`: the dump plus exactly the image and PDB pages its analysis read, so
that `dumpkit analyze CRASH.dkb` gives the same report on a machine without them; a bundle
given as input is bundled again (with what --image-path or --symbol-path add, and --redact
applied). Says what went in, one line per module and PDB."""

from __future__ import annotations

import os
import sys
from typing import Optional, Sequence

from dumpkit.commands.exits import EXIT_OK, fail

from dumpkit.commands.inputs import open_target, symbol_paths
from dumpkit.commands.output import fetch_progress


def run_bundle(
    dump: str,
    output: str,
    image_path: Sequence[str] = (),
    symbol_path: Sequence[str] = (),
    redact: bool = False,
    only_used_memory: bool = False,
    fetch_images: bool = False,
) -> int:
    """The bundle written to `output` and described on stdout; returns the exit code."""
    from dumpkit.bundle.writer import write_bundle
    from dumpkit.sources.bundle_format import BundleError
    from dumpkit.report.escape import clean
    from dumpkit.words import human_bytes, plural

    if os.path.exists(output) and os.path.exists(dump) and os.path.samefile(output, dump):
        raise fail(f"{output}: refusing to overwrite the dump being read")
    target, problems = open_target(dump)
    data: Optional[bytes] = None
    redacted: tuple = ()
    if redact:
        from dumpkit.bundle.redact import redact_dump
        from dumpkit.problems import Problems
        from dumpkit.sources.bundle import open_redacted_copy
        from dumpkit.sources.bundle_format import MAX_DUMP

        file = target.dump_file
        if file is None:
            raise fail(f"{dump}: --redact needs a dump file")
        if file.file_size > MAX_DUMP:  # redaction searches a copy of the whole dump in memory
            raise fail(
                f"{dump}: --redact takes a dump of at most {human_bytes(MAX_DUMP)}; this one is "
                f"{human_bytes(file.file_size)}"
            )

        original = b"".join(file.file_chunks())  # what the target reads: a bundle's, an unpacked copy
        data, redacted = redact_dump(original, target)
        # The copy is what the bundle analyses, so a run of its own: its problems are what
        # reading it meets, not the original's (which were only read to be redacted).
        problems = Problems()
        target = open_redacted_copy(data, dump, target, problems)  # a bundle's pages and manifest go along
    try:
        done = write_bundle(
            target,
            dump,
            output,
            image_paths=image_path,
            symbol_paths=symbol_paths(list(symbol_path)),
            dump_data=data,
            redacted=redacted,
            only_used_memory=only_used_memory,
            fetch_images=fetch_images,
            fetch_progress=fetch_progress(),
            problems=problems,
        )
    except BundleError as e:
        raise fail(f"{output}: {e}") from None
    m = done.manifest
    pages = sum(i.captured for i in m.images)
    out = [
        f"wrote {clean(output, 500)}: {human_bytes(done.size)}, holding the dump "
        f"({clean(m.dump.name, 200)}, {human_bytes(m.dump.size)}) and {human_bytes(pages)} of image pages "
        f"from {plural(len(m.images), 'module')}"
        + (f", and {human_bytes(sum(p.captured for p in m.pdbs))} of {plural(len(m.pdbs), 'PDB')}" if m.pdbs else "")
    ]
    for image, (_, file_size) in zip(m.images, done.image_files):
        out.append(
            f"  {clean(image.name, 200)}: {human_bytes(image.captured)} of {human_bytes(file_size)} "
            f"in {plural(len(image.ranges), 'range')} (from {image.source})"
        )
    for pdb in m.pdbs:
        out.append(
            f"  {clean(pdb.name, 200)}: {human_bytes(pdb.captured)} of {human_bytes(pdb.file_size)} "
            f"in {plural(len(pdb.ranges), 'range')} (PDB {pdb.guid} age {pdb.age})"
        )
    if done.not_found:
        out.append(
            f"  no image found for {', '.join(clean(n, 100) for n in done.not_found)}: "
            "frames in them are found by stack scanning, from the bundle too"
        )
    if m.dump.kept is not None:
        out.append(
            f"  dump: {human_bytes(sum(n for _, n in m.dump.kept))} of {human_bytes(m.dump.size)} kept "
            "(the rest is memory the analysis did not read, left out)"
        )
    for line in m.redacted:
        out.append(f"  redacted: {clean(line, 300)}")
    out.append(f"verdict: {clean(done.verdict, 300)}")
    sys.stdout.write("\n".join(out) + "\n")
    return EXIT_OK
