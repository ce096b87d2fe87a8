"""What an operator lists and counts (``hub.overview``): pages of events across agents, each
agent with its backlog and activity, the store's counts."""

from __future__ import annotations

from herald.models import Event
from herald.overview import AgentSummary, EventQuery, Stats
from herald.store import Store

TOP_AGENTS = 10


class Overview:
    """The overview part of the hub: reads only, each one query or a few aggregate ones."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def events(self, query: EventQuery) -> list[Event]:
        """A page of events newest first (``Store.list_events``)."""
        return await self._store.list_events(query)

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
