"""What an operator lists and counts (``hub.overview``): pages of events across agents, each
agent with its backlog and activity, the store's counts, and the gauges a metrics scrape reads."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

from herald.config import DEFAULTS
from herald.feed import item_data
from herald.models import Event
from herald.overview import AgentSummary, EventPage, EventQuery, Gauges, Position, Stats
from herald.store import Store

TOP_AGENTS = 10
DAY_MS = 24 * 3600 * 1000
GAUGES_MAX_AGE_S = 1.0
"""How old the copy of the store's gauges may be: however many scrapes come, each process reads
them once a second at most."""


class Overview:
    """The overview part of the hub: reads only, each one query or a few aggregate ones."""

    def __init__(self, store: Store, scan: int = DEFAULTS.hub.scan_events) -> None:
        self._store = store
        self._scan = scan
        self._gauges: Gauges | None = None
        self._gauges_at = 0.0
        self._gauges_read = asyncio.Lock()

    async def events(self, query: EventQuery) -> EventPage:
        """A page of events newest first (``Store.list_events``). A narrowed query (a type, a
        status, or times in one agent's listing) looks at ``scan`` events of the page's order
        at most, however few of them it lists: its page then says where that look ended."""
        if not query.narrowed:
            return EventPage(await self._store.list_events(query))
        bound = await self._store.listing_bound(query, self._scan)
        events = await self._store.list_events(replace(query, through=bound))
        return EventPage(events, bound if len(events) < query.limit else None)

    async def page(self, query: EventQuery) -> tuple[list[Event], Position | None]:
        """At most ``query.limit`` events of ``query`` (``events``), and the position the page
        after starts from: after its last event when more follow, where its look ended when it
        stopped short (a narrowed query), None when this is the last page."""
        listed = await self.events(replace(query, limit=query.limit + 1))  # one more: a next?
        page = listed.events[: query.limit]
        if len(listed.events) > query.limit:
            return page, query.position(page[-1])
        return page, listed.looked_to

    async def agents(
        self,
        agent_id: str | None = None,
        *,
        after: str | None = None,
        search: str | None = None,
        limit: int | None = None,
    ) -> list[AgentSummary]:
        """Every agent (or one) with its open events, live sessions and last activity, by
        handle: those after the handle ``after`` whose handle contains ``search``, at most
        ``limit``."""
        return await self._store.agent_summaries(agent_id, after=after, search=search, limit=limit)

    async def stats(self) -> Stats:
        return await self._store.stats(TOP_AGENTS)

    async def loop_guard_trips(self, limit: int) -> tuple[int, list[dict[str, Any]]]:
        """How many messages loop guards refused in the last 24 hours (by the store's clock),
        and the newest ``limit`` trips the journal keeps, each as the feed's ``loop_guard``
        item shows it, newest first (one whose sender was deleted since is left out, as the
        feed leaves it out)."""
        last_day, trips = await self._store.loop_guard_trips(self._store.now() - DAY_MS, limit)
        handles = await self._store.agent_handles(sorted({trip.agent_id for _, trip in trips}))
        shown = [
            (at, trip, handles[trip.agent_id]) for at, trip in trips if trip.agent_id in handles
        ]
        return last_day, [
            item_data(
                "loop_guard",
                at,
                trip.agent_id,
                handle,
                to=trip.to,
                thread=trip.thread,
                limit=trip.limit,
                maximum=trip.maximum,
            )
            for at, trip, handle in shown
        ]

    async def gauges(self, max_age_s: float = GAUGES_MAX_AGE_S) -> Gauges:
        """The open events, sessions and endpoints (``Store.gauges``), as read at most
        ``max_age_s`` ago (by the monotonic clock); scrapes that come together share a read."""
        async with self._gauges_read:
            if self._gauges is None or time.monotonic() - self._gauges_at >= max_age_s:
                self._gauges = await self._store.gauges()
                self._gauges_at = time.monotonic()
            return self._gauges
