"""The one error a fetch raises for what a server or network did (apart, so that a run
on the warm cache imports no HTTP code at all)."""

from __future__ import annotations

from typing import Optional


class FetchError(Exception):
    """A request that gave nothing usable; the message is one line with no credentials.
    `offline`: the host could not be reached at all (asking it again this run is pointless);
    `status`: the HTTP status that refused it, when one did."""

    def __init__(self, message: str, offline: bool = False, status: Optional[int] = None):
        super().__init__(message)
        self.offline = offline
        self.status = status
