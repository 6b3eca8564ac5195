"""How a command ends: its exit code, and the lines on stderr that go with it.

Exit codes: 0 analysed; 1 analysed, but problems were met reading the dump (listed);
2 unusable input or arguments (one line on stderr, no traceback); 130 interrupted (Ctrl-C),
as a shell reports a command its SIGINT ended."""

from __future__ import annotations

import sys
from typing import Callable, List, Optional

EXIT_OK, EXIT_PROBLEMS, EXIT_UNUSABLE, EXIT_INTERRUPTED = 0, 1, 2, 130


class Exit(SystemExit):
    """Leave with this exit code: any message is on stderr already. A SystemExit, so that
    it ends the process the same way whichever parser called the command."""


def fail(message: str) -> Exit:
    sys.stderr.write(f"dumpkit: error: {message}\n")
    return Exit(EXIT_UNUSABLE)


MAX_WARNINGS = 20


def warn_problems(problems: List[str]) -> None:
    """Exit code 1 always comes with its reasons on stderr (whatever stdout holds): a count,
    then the problems themselves (the first MAX_WARNINGS)."""
    if not problems:
        return
    from dumpkit.report.escape import clean  # a problem may quote dump-controlled text

    n = len(problems)
    sys.stderr.write(
        f"dumpkit: warning: {n} problem{'s' if n != 1 else ''} reading the dump or walking its stacks (see the report)\n"
    )
    for e in problems[:MAX_WARNINGS]:
        sys.stderr.write(f"dumpkit: warning: {clean(e, 1000)}\n")
    if n > MAX_WARNINGS:
        sys.stderr.write(f"dumpkit: warning: ... and {n - MAX_WARNINGS} more in the report\n")


def guarded(run: Callable[[], Optional[int]]) -> None:
    """Run a command line to its exit: Ctrl-C is one line and 130, a closed pipe (`| head`)
    is a quiet 0, not a traceback."""
    try:
        sys.exit(run())
    except KeyboardInterrupt:
        sys.stderr.write("dumpkit: interrupted\n")
        sys.exit(EXIT_INTERRUPTED)
    except BrokenPipeError:
        sys.exit(0)
