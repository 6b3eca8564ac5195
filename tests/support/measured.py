"""dumpkit's CLI run as a user runs it, measured: in a grandchild with an address-space
limit, its wall time and its own peak RSS (Linux: resource, fork). The hostile corpus
(tests/hostile) and the slim bundles (tests/bundle) are held to the limits below."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

from tests.support.samples import ROOT

ADDRESS_SPACE = 1536 << 20  # RLIMIT_AS for each CLI run
MAX_RSS_KB = 400 << 10  # what a case may really use
TIMEOUT = 30.0  # hard kill
MAX_SECONDS = 10.0  # "a few seconds", with headroom for a loaded CI machine


# The CLI runs as the grandchild of a small fresh interpreter, which sets the limits, waits
# for it and writes its peak RSS to the pipe it is given. A child forked from this test process (hundreds of MB
# after other tests, under xdist too) would start with this process's resident pages counted
# in its own peak: Linux carries the high-water mark through fork and exec.
_MEASURED = r"""
import os, resource, signal, sys
report, limit = int(sys.argv[1]), int(sys.argv[2])
pid = os.fork()
if pid == 0:
    os.close(report)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.execv(sys.argv[3], sys.argv[3:])
_, status, usage = os.wait4(pid, 0)
os.write(report, str(usage.ru_maxrss).encode())
code = os.waitstatus_to_exitcode(status)
if code < 0:  # died of a signal: so does this process, for the same exit status
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
"""


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    seconds: float
    max_rss_kb: int


def run_cli(args, timeout: float = TIMEOUT, cwd=None, address_space: int = ADDRESS_SPACE) -> Run:
    """The CLI in a grandchild with an address-space limit (a dump is mapped whole: a
    multi-GB one needs more than the default), and its own peak RSS."""
    read_end, write_end = os.pipe()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        cmd = [sys.executable, "-c", _MEASURED, str(write_end), str(address_space), sys.executable, "-m", "dumpkit"]
        cmd += map(str, args)
        p = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            cwd=cwd or ROOT,
            pass_fds=(write_end,),
            start_new_session=True,  # a timeout kills the CLI with its parent
        )
        os.close(write_end)
        timer = threading.Timer(timeout, lambda: os.killpg(p.pid, 9))
        timer.start()
        try:
            p.wait()
        finally:
            timer.cancel()
        with os.fdopen(read_end, "rb") as r:
            rss = r.read()
        took = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        return Run(
            p.returncode,
            out.read().decode("utf-8", "replace"),
            err.read().decode("utf-8", "replace"),
            took,
            int(rss) if rss else 0,
        )
