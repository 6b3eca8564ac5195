"""One thread per process that stops analyses past their time limit (triage/analyse.py).

A timer thread started for every dump cost a fleet's small dumps a tenth of their analysis:
the start waits until the new thread has run, and each dump's file was unmapped while a
second thread lived. One watchdog serves every analysis of the process, one after another
or several at once (a Dask worker runs them in its threads), and ends LINGER seconds after
the last: no thread is left running once the work is done."""

from __future__ import annotations

import threading
import time
from typing import Callable, Dict, Optional, Tuple

# Seconds the watchdog waits for the next analysis before its thread ends: longer than the
# gap between two dumps of a busy worker, far shorter than anyone waits for the thread to go.
LINGER = 0.05


class Watchdog:
    """Deadlines of running analyses: at one's end, `fire(thread id)` is called for it
    (from the watchdog's thread, once)."""

    def __init__(self, fire: Callable[[int], None]):
        self._fire = fire
        self._cond = threading.Condition(threading.Lock())
        self._deadlines: Dict[int, Tuple[float, int]] = {}  # token -> (deadline, thread id)
        self._next = 0
        self._thread: Optional[threading.Thread] = None

    def arm(self, seconds: float, thread_id: int) -> int:
        """A deadline `seconds` from now for the thread `thread_id`: its token."""
        with self._cond:
            token = self._next
            self._next += 1
            self._deadlines[token] = (time.monotonic() + seconds, thread_id)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="dumpkit-watchdog", daemon=True)
                self._thread.start()
            else:
                self._cond.notify()
        return token

    def disarm(self, token: int) -> bool:
        """Withdraw a deadline; whether it had fired already."""
        with self._cond:
            fired = self._deadlines.pop(token, None) is None
            if not fired:
                # the thread may sleep toward this deadline: wake it to find the next one,
                # or none, and end after LINGER instead of at the withdrawn deadline
                self._cond.notify()
            return fired

    def _run(self) -> None:
        with self._cond:
            while True:
                if not self._deadlines:
                    self._cond.wait(LINGER)
                    if not self._deadlines:
                        self._thread = None  # the next arm() starts another
                        return
                    continue
                token, (deadline, thread_id) = min(self._deadlines.items(), key=lambda kv: kv[1][0])
                left = deadline - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                del self._deadlines[token]
                self._fire(thread_id)
