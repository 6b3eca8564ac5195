"""The fork server triage's worker processes are forked from, started as soon as the front
door has read a `dumpkit triage` command line that will want one.

Where there is a fork server (Linux, macOS), each worker is a fork of a process that has
imported the analysis once, not a new interpreter that imports it again. The server starts
as a new interpreter and imports PRELOAD (~0.15 s here) before it can fork the first
worker; started when the pool is made, it made every parallel run that much longer
(`dumpkit triage` of two dumps: 0.4 s with --jobs 1, 0.56-0.81 s with --jobs 2). Started
by the front door, it imports while the command itself starts, on another core.

Light on purpose: the front door imports this before the command's own modules."""

from __future__ import annotations

import multiprocessing
import os
from typing import Optional

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


def worker_count(asked: Optional[int]) -> int:
    """The worker processes a triage runs: --jobs as asked (at least one), else the CPU count."""
    return max(1, asked) if asked is not None else max(1, os.cpu_count() or 1)


def start_early(jobs: Optional[int], scheduler: Optional[str]) -> None:
    """Start the fork server now when a triage with these --jobs and --scheduler values will
    run worker processes. A guess that turns out wrong (a folder of one dump) costs an idle
    process that ends with this one."""
    if scheduler or worker_count(jobs) <= 1 or "forkserver" not in multiprocessing.get_all_start_methods():
        return
    from multiprocessing import forkserver

    worker_context()
    forkserver.ensure_running()
