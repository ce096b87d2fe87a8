"""Per-key limits, so that one key cannot take what the others need: open event streams, live
MCP sessions, and the publish rate. A key over a limit gets 429 with ``Retry-After`` (a
``RateLimited`` error) and nothing is done. A limit of 0 turns that limit off.

A key here is the caller: an agent or a publisher key (by its id), or the admin key.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

from herald.config import KeyLimits as KeyLimits  # re-exported: the app takes them from here
from herald.errors import RateLimited, TooLarge

ADMIN = "admin"
"""The key of the admin, as the limits count it (agent ids never take this form)."""

STREAM_RETRY_AFTER_S = 5.0
"""A stream slot frees up when one of the key's streams closes: no time can be promised."""


class StreamSlots:
    """How many streams each key has open."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._open: Counter[str] = Counter()

    def acquire(self, key: str) -> Callable[[], None]:
        """Count one more open stream for ``key``; call what it returns when the stream closes.

        Raises:
            RateLimited: the key already has ``limit`` streams open.
        """
        if self.limit and self._open[key] >= self.limit:
            raise RateLimited(
                f"this key has {self._open[key]} streams open, the most it may "
                f"(herald serve --streams-per-key); close one, or resume on one of them",
                STREAM_RETRY_AFTER_S,
            )
        self._open[key] += 1
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            self._open[key] -= 1
            if self._open[key] <= 0:
                del self._open[key]

        return release


class PublishRate:
    """A token bucket per key: ``rate`` events per second, up to ``burst`` at once."""

    def __init__(
        self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)

    def take(self, key: str, events: int) -> None:
        """Count ``events`` published by ``key`` now, or refuse them all.

        Raises:
            TooLarge: more events at once than the burst could ever allow.
            RateLimited: the key is over its rate; the error says when to retry.
        """
        if not self.rate:
            return
        self.check_size(events)
        now = self._clock()
        tokens, at = self._buckets.get(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - at) * self.rate)
        if tokens < events:
            self._buckets[key] = (tokens, now)
            raise RateLimited(
                f"this key is over its publish rate of {self.rate:g} events/s "
                f"(herald serve --publish-rate, --publish-burst); nothing was published",
                (events - tokens) / self.rate,
            )
        self._buckets[key] = (tokens - events, now)

    def check_size(self, events: int) -> None:
        """Raises: TooLarge: more events at once than the burst could ever allow."""
        if self.rate and events > self.burst:
            raise TooLarge(
                f"{events} events at once are over this herald's publish burst of "
                f"{self.burst} (herald serve --publish-burst); send smaller batches"
            )


class Limits:
    """The per-key limits of one ``herald serve``: stream slots and publish buckets here; the
    MCP session limit is kept by the session manager (``herald.http.mcp``)."""

    def __init__(self, config: KeyLimits | None = None) -> None:
        self.config = config or KeyLimits()
        self.streams = StreamSlots(self.config.streams)
        self.publish = PublishRate(self.config.publish_rate, self.config.publish_burst)
