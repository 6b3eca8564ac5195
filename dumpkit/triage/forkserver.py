"""The fork server triage's worker processes are forked from, started as soon as a
`dumpkit triage` command line shows it will want one.

Where there is a fork server (Linux, macOS), each worker is a fork of a process that has
imported the analysis once, not a new interpreter that imports it again. The server starts
as a new interpreter and imports PRELOAD (~0.15 s here) before it can fork the first
worker; started when the pool is made, it made every parallel run that much longer
(`dumpkit triage` of two dumps: 0.4 s with --jobs 1, 0.56-0.81 s with --jobs 2). Started
by the front door, it imports while the command itself starts, on another core.

Light on purpose: the front door imports this before it knows the command's options."""

from __future__ import annotations

import multiprocessing
import os
from typing import Optional, Sequence

# What the fork server imports before it forks workers (unwind.decoder: capstone's library,
# which nearly every analysis loads)
PRELOAD = ["dumpkit.triage.analyse", "dumpkit.triage.run", "dumpkit.unwind.decoder"]


def worker_context() -> multiprocessing.context.BaseContext:
    """The context triage's pools start workers in: forkserver where there is one (fork
    itself is unsafe once a pool's threads run), else spawn."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return context


def _jobs_asked(args: Sequence[str]) -> Optional[int]:
    """--jobs / -j as the command line gives it; None when absent or not a number (typer
    then says what is wrong with it)."""
    for i, arg in enumerate(args):
        value = None
        if arg in ("--jobs", "-j") and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith("--jobs="):
            value = arg.split("=", 1)[1]
        if value is not None:
            return int(value) if value.isascii() and value.isdigit() else None
    return None


def start_early(args: Sequence[str]) -> None:
    """Start the fork server now when `dumpkit triage ARGS` will run worker processes
    (more than one job, no Dask scheduler, not a help request). A guess that turns out
    wrong (a folder of one dump) costs an idle process that ends with this one."""
    if any(a in ("--help", "-h") or a == "--scheduler" or a.startswith("--scheduler=") for a in args):
        return
    jobs = _jobs_asked(args)
    if (jobs if jobs is not None else os.cpu_count() or 1) <= 1:
        return
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return
    from multiprocessing import forkserver

    worker_context()
    forkserver.ensure_running()
