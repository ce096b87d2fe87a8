"""Helpers for testing code that uses herald: a clock you move by hand."""

from __future__ import annotations

import threading


class ManualClock:
    """A clock for ``open_store(..., clock=...)`` and ``Hub``: time moves only when told.

    Lease expiry, ttl and pruning can then be tested without sleeping.
    """

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds
