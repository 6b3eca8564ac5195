"""One thread per process that stops analyses past their time limit (triage/analyse.py).

A timer thread started for every dump cost a fleet's small dumps a tenth of their analysis:
the start waits until the new thread has run, and each dump's file was unmapped while a
second thread lived. One watchdog serves every analysis of the process, one after another
or several at once (a Dask worker runs them in its threads), and ends one to two LINGERs
after the last: no thread is left running once the work is done."""

from __future__ import annotations

import threading
import time
from typing import Callable, Dict, Optional, Tuple

# Seconds the watchdog waits for the next analysis before its thread ends: longer than the
# gap between two dumps of a busy worker, far shorter than anyone waits for the thread to go.
LINGER = 0.05


class Watchdog:
    """Deadlines of running analyses: at one's end, `fire(thread id)` is called for it
    (from the watchdog's thread, once).

    Arming and withdrawing a deadline do not wake the thread, except for a deadline earlier
    than the one it sleeps toward: a fleet's small dumps come hundreds a second, and two
    wake-ups of a second thread each (the GIL handed over and back) cost them ~3% of their
    analysis. The thread looks again at least every LINGER seconds instead, which is how it
    finds a withdrawn deadline and, LINGER after the last, that no analysis is running."""

    def __init__(self, fire: Callable[[int], None]):
        self._fire = fire
        self._cond = threading.Condition(threading.Lock())
        self._deadlines: Dict[int, Tuple[float, int]] = {}  # token -> (deadline, thread id)
        self._next = 0
        self._thread: Optional[threading.Thread] = None
        self._wake_at: Optional[float] = None  # when the thread looks again (None: no thread)

    def arm(self, seconds: float, thread_id: int) -> int:
        """A deadline `seconds` from now for the thread `thread_id`: its token."""
        with self._cond:
            token = self._next
            self._next += 1
            deadline = time.monotonic() + seconds
            self._deadlines[token] = (deadline, thread_id)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="dumpkit-watchdog", daemon=True)
                self._wake_at = deadline
                self._thread.start()
            elif self._wake_at is not None and deadline < self._wake_at:
                self._cond.notify()  # it sleeps past this one's end
        return token

    def disarm(self, token: int) -> bool:
        """Withdraw a deadline; whether it had fired already."""
        with self._cond:
            return self._deadlines.pop(token, None) is None

    def _run(self) -> None:
        with self._cond:
            idle_since: Optional[float] = None
            while True:
                now = time.monotonic()
                if not self._deadlines:
                    idle_since = now if idle_since is None else idle_since
                    if now - idle_since >= LINGER:
                        self._thread = self._wake_at = None  # the next arm() starts another
                        return
                    self._wake_at = idle_since + LINGER
                    self._cond.wait(self._wake_at - now)
                    continue
                idle_since = None
                token, (deadline, thread_id) = min(self._deadlines.items(), key=lambda kv: kv[1][0])
                if deadline <= now:
                    del self._deadlines[token]
                    self._fire(thread_id)
                    continue
                self._wake_at = min(deadline, now + LINGER)
                self._cond.wait(self._wake_at - now)
