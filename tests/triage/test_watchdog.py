"""The one watchdog thread of a process (triage/watchdog.py): each deadline fires once, for
its own thread, while others run on; a withdrawn one never fires; the thread ends once no
analysis is running."""

from __future__ import annotations

import threading
import time

from dumpkit.triage.watchdog import LINGER, Watchdog


def _until(condition, seconds: float = 10.0) -> bool:
    end = time.monotonic() + seconds
    while not condition() and time.monotonic() < end:
        time.sleep(0.005)
    return condition()


def _watchdogs():
    return [t for t in threading.enumerate() if t.name == "dumpkit-watchdog"]


def test_each_deadline_fires_once_for_its_thread_and_the_thread_then_ends():
    fired = []
    dog = Watchdog(fired.append)
    late = dog.arm(600, 2)
    soon = dog.arm(0.01, 1)
    assert _until(lambda: fired == [1])
    assert dog.disarm(soon) is True  # it had fired
    assert dog.disarm(late) is False  # withdrawn before its time: never fires
    again = dog.arm(600, 3)  # a new analysis on the same watchdog
    assert dog.disarm(again) is False
    time.sleep(LINGER * 4)
    assert fired == [1]
    assert _until(lambda: not _watchdogs())


def test_analyses_in_several_threads_share_one_watchdog():
    assert _until(lambda: not _watchdogs())  # none lingering from an earlier test
    fired = []
    dog = Watchdog(fired.append)
    tokens = [dog.arm(600, k) for k in range(8)]
    assert len(_watchdogs()) == 1
    assert [dog.disarm(t) for t in tokens] == [False] * 8
    assert _until(lambda: not _watchdogs()) and fired == []
