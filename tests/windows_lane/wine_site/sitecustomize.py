"""Imported at start-up by the Windows lane's interpreter (its ._pth lists this folder and
`import site`): works around one Wine 8 bug so that worker processes can be tested; changes
nothing dumpkit does.

concurrent.futures.ProcessPoolExecutor wakes its management thread by sending an empty
message down a pipe (`_ThreadWakeup.wakeup`: `send_bytes(b"")`) and drains it with
`while reader.poll(): reader.recv_bytes()`. On Windows, `poll()` detects an empty message
with a zero-byte overlapped ReadFile that leaves the message in the pipe (CPython's
multiprocessing.connection.wait relies on this). Wine's ReadFile consumes it: `poll()` says
True, the message is gone, and `recv_bytes()` blocks for ever, so an executor given two
tasks hangs (seen with CPython 3.8 and 3.12 under Wine 8.0, plain stdlib, no dumpkit:
`multiprocessing.Pipe(duplex=False)`, `w.send_bytes(b"")`, `r.poll()` is True, then
`r.recv_bytes()` never returns). A one-byte wake-up message is read the same way on Windows
and on Wine; the executor does nothing else with it.
"""

import sys

if sys.platform == "win32":
    try:
        from concurrent.futures import process as _process

        def _wakeup(self):
            if getattr(self, "_closed", False):  # 3.9+ keep a closed flag
                return
            self._writer.send_bytes(b"\0")

        _process._ThreadWakeup.wakeup = _wakeup
    except (ImportError, AttributeError):
        pass
