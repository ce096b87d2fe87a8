"""What runs for one live session: its backlog first, then each new event, and the escalation of
pushes not acknowledged in time.

The store is the truth: the worker reads open events after what it has offered, so a lost
wake-up costs latency (until the next poll), never an event. The events this process commits
are handed to the session as they are stored (``LiveSession.hand``), so in the common case the
worker pushes them without reading them back: a read waited behind the store's next group of
writes. Whenever the store may hold events it was not handed (its first look, a wake-up from
elsewhere, a handover that did not follow on, a poll tick), it reads the store. Deadlines are
kept by the hub's clock; only the worker's waits between looks are real time, and bounded.
"""

from __future__ import annotations

import asyncio
import itertools
import logging

from herald.delivery.base import Backlog
from herald.delivery.cascade import Cascade, PendingWrites
from herald.delivery.push_rules import is_pushed
from herald.delivery.sessions import LiveSession
from herald.hub import Hub
from herald.models import Event

log = logging.getLogger("herald.delivery")

OFFER_PAGE = 100
"""Open events one read of the store takes for a session: each goes through the cascade (or is
counted for a backlog summary) before the next read."""


class SessionWorker:
    """Offers one session its agent's events through the cascade, for as long as it lives.

    Args:
        hub: where the events are read.
        cascade: how each event is pushed.
        session: the session served.
        backlog_limit: a backlog longer than this arrives as one summary.
        poll_interval_s: the longest wait between looks at the store without a wake-up.
    """

    def __init__(
        self,
        hub: Hub,
        cascade: Cascade,
        session: LiveSession,
        *,
        backlog_limit: int,
        poll_interval_s: float,
    ) -> None:
        self.hub = hub
        self.cascade = cascade
        self.session = session
        self.backlog_limit = backlog_limit
        self.poll_interval_s = poll_interval_s

    async def run(self) -> None:
        """Serve until cancelled (the session ended)."""
        session = self.session
        try:
            backlog_offered = False
            while True:
                if session.peer.ready():
                    if not backlog_offered:
                        await self.offer_backlog()
                        backlog_offered = True
                    await self.offer_new()
                    await self.escalate()
                try:
                    async with asyncio.timeout(self.next_wait()):
                        await session.wake.wait()
                except TimeoutError:
                    session.must_read = True  # the slow poll: a lost wake-up costs only latency
                session.wake.clear()
        except Exception:  # the worker's top level: log, and leave the events in the store
            log.exception("delivery to session %s stopped", session.id)

    def next_wait(self) -> float:
        """Real seconds until the next look: the poll interval, or less when a push falls due
        (by the hub's clock) sooner."""
        wait = self.poll_interval_s
        oldest = next(iter(self.session.unconfirmed.values()), None)
        if oldest is not None:  # the first pushed falls due first
            wait = min(wait, oldest.at + self.session.caps.ack_timeout_s - self.hub.clock())
        return max(wait, 0.0)

    async def offer_backlog(self) -> None:
        """A backlog of more events to push than the limit is told in one summary and not
        pushed one by one; a shorter one is left to ``offer_new``, in order. Events no way
        pushes (low, muted) are counted apart: they are never pushes to come, so a backlog of
        them alone is no reason for a summary."""
        session = self.session
        agent_id = session.agent.id
        page = await self.hub.open_events(agent_id, 0, self.backlog_limit + 1)
        if len(page) <= self.backlog_limit:
            return
        preferences = await self.hub.preferences.of(agent_id)
        oldest: Event | None = None
        unread = not_pushed = last_seq = 0
        while page:
            for event in page:
                if not is_pushed(event, preferences):
                    not_pushed += 1
                    continue
                unread += 1
                oldest = oldest or event
            last_seq = page[-1].seq
            page = await self.hub.open_events(agent_id, last_seq, OFFER_PAGE)
        if oldest is None or unread <= self.backlog_limit:
            return
        await self.cascade.summarise(session, Backlog(unread, oldest, not_pushed))
        session.offered_through = last_seq

    async def offer_new(self) -> None:
        """Offer the events after ``offered_through``: those handed over as they were committed
        here, else (when the store may hold others) those read from the store."""
        session = self.session
        while events := session.take_handed() or await self._read_new():
            writes = PendingWrites()
            preferences = await self.hub.preferences.of(session.agent.id)
            for event in events:
                if event.seq <= session.offered_through:
                    continue  # read from the store and handed over both
                if is_pushed(event, preferences):  # one that is not waits, to be drained
                    await self.cascade.offer(session, event, writes)
                session.offered_through = event.seq
            self.cascade.record(session, writes)

    async def _read_new(self) -> list[Event]:
        session = self.session
        if not session.must_read:
            return []
        session.must_read = False
        events = await self.hub.open_events(session.agent.id, session.offered_through, OFFER_PAGE)
        if events:
            session.handed_through = max(session.handed_through, events[-1].seq)
            session.must_read = True  # until a read finds nothing more
        return events

    async def escalate(self) -> None:
        """Events sent but not acknowledged in time go on down the cascade."""
        session = self.session
        now = self.hub.clock()
        timeout = session.caps.ack_timeout_s
        # ``unconfirmed`` is in the order of the pushes, so of their deadlines too: a session
        # whose client never acknowledges holds thousands, and only the first few are due.
        due = list(
            itertools.takewhile(lambda p: now - p.at >= timeout, session.unconfirmed.values())
        )
        if due:  # each push's own record first, then what its escalation makes of it
            await self.cascade.written(session)
        writes = PendingWrites()
        for pushed in due:
            del session.unconfirmed[pushed.event.id]
            current = await self.hub.find_event(pushed.event.id)
            if current is None or not current.status.is_open:
                continue
            await self.cascade.offer(session, current, writes, pushed.mechanism_index + 1)
        await self.cascade.flush(session, writes)
