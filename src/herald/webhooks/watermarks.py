"""The cursors that a webhook subscription's deliveries carry, read from the store once per
few dozen requests rather than once per request.

A delivery's body carries the subscription's safe watermark: the seq before the oldest event it
still owes, the one in the body aside. What it owes is read now and then, and kept up to date
here with what this process delivered or gave up on since (the store hears of those later, in
batches). A kept reading only errs late: events done elsewhere since still count as owed, and
events published since come after its newest seq. So a cursor may lag, never skip; it is read
again whenever a delivery's event is not in the reading, so it never lags far."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from herald.models import Endpoint, OwedEvents

ReadOwed = Callable[[str, int], Awaitable[OwedEvents | None]]
"""What a subscription owes (``hub.subscriptions.owed``): its id, at most how many events."""

READ_AHEAD = 128
"""Each reading takes at least this many owed events: the deliveries claimed next are among
them, for several claims (24 at most each, by default), so that a busy subscription is read about
once per hundred deliveries, not once per claim."""
MAX_READINGS = 10_000
"""Readings of at most this many subscriptions are kept (then all are forgotten at once)."""


@dataclass
class _Reading:
    generation: int
    """When its subscription was made (``Endpoint.created_at``): one made anew under the same
    id owes anew, so a reading of the one before is no reading of it."""
    owed: OwedEvents
    ids: frozenset[str]
    done: set[str] = field(default_factory=set)
    """Those of ``ids`` this process delivered or gave up on since."""


class Watermarks:
    def __init__(self, read: ReadOwed) -> None:
        self._read = read
        self._readings: dict[str, _Reading] = {}

    async def cursor(self, subscription: Endpoint, sending: str, in_hand: int) -> int | None:
        """The cursor for the body of ``sending``. ``in_hand``: how many of the subscription's
        deliveries are claimed and not yet done, so that one reading covers them all. None: the
        subscription is gone."""
        subscription_id = subscription.id
        reading = self._reading(subscription)
        if reading is not None and sending in reading.ids:
            return reading.owed.cursor(sending, reading.done)
        # Claimed after the last reading, or beyond it: read again. What was done here may not
        # be recorded yet: it is carried over, and read past.
        done = reading.done if reading is not None else set()
        owed = await self._read(subscription_id, max(READ_AHEAD, in_hand + len(done) + 2))
        if owed is None:
            self._readings.pop(subscription_id, None)
            return None
        ids = frozenset(event_id for _, event_id in owed.events)
        if len(self._readings) >= MAX_READINGS:
            self._readings.clear()
        fresh = _Reading(subscription.created_at, owed, ids, done & ids)
        self._readings[subscription_id] = fresh
        return owed.cursor(sending, fresh.done)

    def done(self, subscription: Endpoint, event_id: str) -> None:
        """``event_id`` was delivered to its endpoint, or given up on: later bodies' cursors may
        pass it."""
        reading = self._reading(subscription)
        if reading is not None and event_id in reading.ids:
            reading.done.add(event_id)

    def _reading(self, subscription: Endpoint) -> _Reading | None:
        reading = self._readings.get(subscription.id)
        if reading is None or reading.generation != subscription.created_at:
            return None
        return reading

    def forget(self, subscription_id: str) -> None:
        """The subscription is gone."""
        self._readings.pop(subscription_id, None)
