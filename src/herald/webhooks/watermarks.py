"""The cursors that a webhook subscription's deliveries carry, read from the store once per
few dozen requests rather than once per request.

A delivery's body carries the subscription's safe watermark: the seq before the oldest event it
still owes, the one in the body aside. What it owes is read now and then, and kept up to date
here with what this process delivered or gave up on since (the store hears of those later, in
batches). A kept reading only errs late: events done elsewhere since still count as owed, and
events published since come after its newest seq. So a cursor may lag, never skip; it is read
again whenever a delivery's event is not in the reading, so it never lags far."""

from __future__ import annotations

import asyncio
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
    head: int = 0
    """How many of the oldest owed events are done: a cursor is looked for after them, so that
    each delivery's cursor costs a step or two, not a pass over the events done before it."""

    def mark(self, event_id: str) -> None:
        self.done.add(event_id)
        events = self.owed.events
        while self.head < len(events) and events[self.head][1] in self.done:
            self.head += 1


class Watermarks:
    def __init__(self, read: ReadOwed) -> None:
        self._read = read
        self._readings: dict[str, _Reading] = {}
        self._reading_now: dict[str, asyncio.Lock] = {}
        """Held while a subscription is read: its lanes that find their events beyond the last
        reading together (a claim brought them) wait for one reading, not one each."""

    async def cursor(self, subscription: Endpoint, sending: str, in_hand: int) -> int | None:
        """The cursor for the body of ``sending``. ``in_hand``: how many of the subscription's
        deliveries are claimed and not yet done, so that one reading covers them all. None: the
        subscription is gone."""
        reading = self._reading(subscription)
        if reading is not None and sending in reading.ids:
            return reading.owed.cursor(sending, reading.done, reading.head)
        lock = self._reading_now.setdefault(subscription.id, asyncio.Lock())
        async with lock:
            reading = self._reading(subscription)  # made meanwhile by another lane
            if reading is not None and sending in reading.ids:
                return reading.owed.cursor(sending, reading.done, reading.head)
            return await self._read_again(subscription, sending, in_hand, reading)

    async def _read_again(
        self, subscription: Endpoint, sending: str, in_hand: int, reading: _Reading | None
    ) -> int | None:
        """Claimed after the last reading, or beyond it: read again. What was done here may not
        be recorded yet: it is carried over, and read past."""
        subscription_id = subscription.id
        done = reading.done if reading is not None else set()
        owed = await self._read(subscription_id, max(READ_AHEAD, in_hand + len(done) + 2))
        if owed is None:
            self._readings.pop(subscription_id, None)
            return None
        ids = frozenset(event_id for _, event_id in owed.events)
        if len(self._readings) >= MAX_READINGS:
            self._readings.clear()
            self._reading_now = {
                key: lock for key, lock in self._reading_now.items() if lock.locked()
            }
        fresh = _Reading(subscription.created_at, owed, ids)
        for event_id in done & ids:
            fresh.mark(event_id)
        self._readings[subscription_id] = fresh
        return owed.cursor(sending, fresh.done, fresh.head)

    def done(self, subscription: Endpoint, event_id: str) -> None:
        """``event_id`` was delivered to its endpoint, or given up on: later bodies' cursors may
        pass it."""
        reading = self._reading(subscription)
        if reading is not None and event_id in reading.ids:
            reading.mark(event_id)

    def _reading(self, subscription: Endpoint) -> _Reading | None:
        reading = self._readings.get(subscription.id)
        if reading is None or reading.generation != subscription.created_at:
            return None
        return reading

    def forget(self, subscription_id: str) -> None:
        """The subscription is gone."""
        self._readings.pop(subscription_id, None)
        self._reading_now.pop(subscription_id, None)
