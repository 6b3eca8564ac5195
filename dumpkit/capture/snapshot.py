"""A dump of a running process written at once (`dumpkit capture --attach PID --now`): what
it holds and how it went. Pure: debugger.py writes it, commands/capture.py says it.

As `procdump -ma PID` and Task Manager's "Create dump file" do it: the process is suspended
(NtSuspendProcess) while its memory is read and the dump written, then resumed. No debugger
is attached, so nothing runs in it (an attach starts a break-in thread that the dump would
show among the program's own), its threads keep their place, and a process that already has
a debugger (a `dumpkit capture` waiting for its crash) can be dumped too. There is no
exception: the dump is a snapshot, and its comment stream says so."""

from __future__ import annotations

from typing import Optional

from dumpkit.capture.pymemory import PythonMemory
from dumpkit.records import record

COMMENT = (
    "dumpkit capture --now: a snapshot of a running process, no exception; its threads were "
    "suspended (NtSuspendProcess) while it was written"
)


@record
class Snapshot:
    path: str
    pid: int
    image: str  # the executable's file name
    full: bool
    threads: int  # in the dump's thread list
    python: Optional[PythonMemory]  # None: a full dump (it holds everything) or no CPython
    added_after: int  # bytes added to the file after the writer: Python stacks, command line, pointed
    pointed: int  # of added_after: what the threads' stacks point to
    suspended_seconds: float
    resume_error: Optional[str] = None  # NtResumeProcess failed: the process stays suspended

    @property
    def python_threads(self) -> int:
        """Threads whose Python stack the dump holds."""
        if self.python is None or self.python.state.status.value != "read":
            return 0
        return sum(1 for t in self.python.state.threads if t.frames)
