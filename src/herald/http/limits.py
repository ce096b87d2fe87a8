"""Per-key limits, so that one key cannot take what the others need: open event streams, live
MCP sessions, the publish rate, the events its ``events/poll`` calls look at, and requests in
flight (its share of connections). A key over a limit gets 429 with ``Retry-After`` (a
``RateLimited`` error; over MCP, the Events extension's ResourceExhausted with ``retryAfterMs``)
and nothing is done. A limit of 0 turns that limit off.

A key here is the caller: an agent or a publisher key (by its id), or the admin key.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

from starlette.responses import Response
from starlette.types import Scope

from herald.config import KeyLimits as KeyLimits  # re-exported: the app takes them from here
from herald.errors import RateLimited, TooLarge
from herald.http.io import error_headers, error_response
from herald.keys import hash_key

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


class TokenBuckets:
    """A token bucket per key: ``rate`` tokens a second, up to ``burst``."""

    def __init__(
        self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)

    def level(self, key: str) -> tuple[float, float]:
        """The tokens ``key`` holds now (refilled since last set), and now."""
        now = self._clock()
        tokens, at = self._buckets.get(key, (float(self.burst), now))
        return min(float(self.burst), tokens + (now - at) * self.rate), now

    def set(self, key: str, tokens: float, now: float) -> None:
        """What ``key`` holds at ``now`` (below zero: a debt its next refills pay first)."""
        self._buckets[key] = (tokens, now)


class PublishRate(TokenBuckets):
    """Events published per key: ``rate`` events per second, up to ``burst`` at once."""

    def take(self, key: str, events: int) -> None:
        """Count ``events`` published by ``key`` now, or refuse them all.

        Raises:
            TooLarge: more events at once than the burst could ever allow.
            RateLimited: the key is over its rate; the error says when to retry.
        """
        if not self.rate:
            return
        self.check_size(events)
        tokens, now = self.level(key)
        if tokens < events:
            self.set(key, tokens, now)
            raise RateLimited(
                f"this key is over its publish rate of {self.rate:g} events/s "
                f"(herald serve --publish-rate, --publish-burst); nothing was published",
                (events - tokens) / self.rate,
            )
        self.set(key, tokens - events, now)

    def check_size(self, events: int) -> None:
        """Raises: TooLarge: more events at once than the burst could ever allow."""
        if self.rate and events > self.burst:
            raise TooLarge(
                f"{events} events at once are over this herald's publish burst of "
                f"{self.burst} (herald serve --publish-burst); send smaller batches"
            )


class PollCost(TokenBuckets):
    """A bucket per key of the events its polls may look at: ``rate`` a second, up to
    ``burst``. A poll is let in while its key's bucket holds one event at least, and costs what
    it looked at once answered (it cannot know before), so one poll may take the bucket below
    zero: the key's next polls wait until it has refilled."""

    def admit(self, key: str) -> Callable[[int], None]:
        """Let one poll of ``key`` in; call what it returns with the events it looked at.

        Raises:
            RateLimited: the key's polls looked at more than its rate allows; the error says
                when to poll again.
        """
        if not self.rate:
            return lambda looked: None
        events, now = self.level(key)
        if events < 1:  # a poll looks at one event at least
            self.set(key, events, now)
            raise RateLimited(
                f"this key's polls are over their rate of {self.rate:g} events looked at a"
                " second (herald serve --poll-rate, --poll-burst); poll again later",
                (1 - events) / self.rate,
            )

        def cost(looked: int) -> None:
            events, now = self.level(key)
            self.set(key, events - max(looked, 1), now)

        return cost


class Limits:
    """The per-key limits of one ``herald serve``: stream slots, publish and poll buckets here;
    the MCP session limit is kept by the session manager (``herald.http.mcp``)."""

    def __init__(self, config: KeyLimits | None = None) -> None:
        self.config = config or KeyLimits()
        self.streams = StreamSlots(self.config.streams)
        self.publish = PublishRate(self.config.publish_rate, self.config.publish_burst)
        self.polls = PollCost(self.config.poll_rate, self.config.poll_burst)


SHARE_RETRY_AFTER_S = 1.0
"""Most requests end within a second; the ones that hold a share longer are streams."""


class KeyShares:
    """No key holds more than ``limit`` requests in flight at once (0: no limit), so that one
    key cannot take every connection herald can hold, with slow bodies or any other way. A
    request is the key's once its head is read (its ``Authorization: Bearer`` key, valid or not:
    the count needs no store); one over the limit gets 429 at once, its body unread. Requests
    without a key (``/healthz``, ``/readyz``, the console's files) are not counted. (Kept around
    each request by ``herald.http.middleware``.)"""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._held: Counter[str] = Counter()

    def take(self, scope: Scope) -> Callable[[], None] | None:
        """Count the request in its key's share; call what it returns when the request ends.
        None: the key holds its share already (answer it with ``refusal``)."""
        key = _bearer(scope) if self.limit else None
        if key is None:
            return _nothing
        if self._held[key] >= self.limit:
            return None
        self._held[key] += 1

        def release() -> None:
            self._held[key] -= 1
            if self._held[key] <= 0:
                del self._held[key]

        return release

    def refusal(self, scope: Scope) -> Response:
        """The answer to a request its key's share has no room for."""
        key = _bearer(scope)
        held = self._held[key] if key is not None else 0
        message = (
            f"this key has {held} requests in flight, the most one key may hold at once"
            " (herald serve --requests-per-key; by default a quarter of the connections it"
            " can hold); wait for one to end"
        )
        refusal = RateLimited(message, SHARE_RETRY_AFTER_S)
        return error_response(
            refusal.code, refusal.message, refusal.http_status, error_headers(refusal)
        )


def _nothing() -> None:
    pass


def _bearer(scope: Scope) -> str | None:
    """Whom the request's key names, as a hash (the key itself is not kept); None: no key."""
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, key = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and key.strip():
                return hash_key(key.strip())
            return None
    return None
