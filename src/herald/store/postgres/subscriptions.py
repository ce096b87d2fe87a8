"""MCP Events webhook subscriptions on PostgreSQL: each an endpoint of kind ``subscription`` and
its ``subscriptions`` row, scheduled from the events it matches (by any process, once)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import asyncpg

from herald.errors import NotFound, SubscriptionLimitReached
from herald.models import Endpoint, OwedEvents, WebhookSubscription
from herald.store.postgres import queries
from herald.store.postgres.rows import Connection, Runner, count
from herald.store.rules import owed_events, refreshed_subscription
from herald.store.tables import ENDPOINTS, SUBSCRIPTIONS


def _pair(row: asyncpg.Record) -> tuple[Endpoint, WebhookSubscription]:
    return ENDPOINTS.record(row, "w_"), SUBSCRIPTIONS.record(row)


class SubscriptionStore:
    """The subscription part of ``PostgresStore``."""

    _run: Runner
    now: Callable[[], int]

    async def put_subscription(
        self,
        endpoint: Endpoint,
        subscription: WebhookSubscription,
        rotation_until: int,
        *,
        max_live: int | None = None,
    ) -> tuple[Endpoint, WebhookSubscription] | None:
        now = self.now()

        async def put(conn: Connection) -> tuple[Endpoint, WebhookSubscription] | None:
            # The agent first: a put racing this one (same key or not) then sees what it stored.
            if await conn.fetchrow(queries.LOCK_SUBSCRIBER, endpoint.agent_id) is None:
                raise NotFound(f"no agent has the id {endpoint.agent_id!r}")
            row = await conn.fetchrow(queries.LOCK_SUBSCRIPTION, endpoint.id)
            if row is None:
                if max_live is not None:
                    held = await conn.fetchval(queries.LIVE_SUBSCRIPTIONS, endpoint.agent_id, now)
                    if held >= max_live:
                        raise SubscriptionLimitReached(held, max_live)
                await conn.execute(queries.INSERT_ENDPOINT, *ENDPOINTS.values(endpoint))
                await conn.execute(queries.INSERT_SUBSCRIPTION, *SUBSCRIPTIONS.values(subscription))
                return None
            before = _pair(row)
            new_endpoint, new = refreshed_subscription(
                before, endpoint, subscription, rotation_until
            )
            await conn.execute(
                queries.UPDATE_ENDPOINT, *ENDPOINTS.values(new_endpoint), endpoint.id
            )
            await conn.execute(queries.UPDATE_SUBSCRIPTION, *SUBSCRIPTIONS.values(new), endpoint.id)
            return before

        return await self._run(put, transaction=True)

    async def subscriptions(
        self, *, agent_id: str | None = None, ids: Sequence[str] | None = None
    ) -> list[tuple[Endpoint, WebhookSubscription]]:
        wanted = list(ids) if ids is not None else None

        async def select(conn: Connection) -> list[tuple[Endpoint, WebhookSubscription]]:
            rows = await conn.fetch(queries.LIST_SUBSCRIPTIONS, agent_id, wanted)
            return [_pair(row) for row in rows]

        return await self._run(select)

    async def delete_subscription(self, subscription_id: str) -> bool:
        async def delete(conn: Connection) -> bool:
            return count(await conn.execute(queries.DELETE_SUBSCRIPTION, subscription_id)) > 0

        return await self._run(delete)

    async def subscription_owed(self, subscription_id: str, limit: int) -> OwedEvents | None:
        now = self.now()

        async def read(conn: Connection) -> OwedEvents | None:
            head = await conn.fetchrow(queries.SUBSCRIPTION_HEAD, subscription_id)
            if head is None:
                return None
            rows = await conn.fetch(queries.SUBSCRIPTION_OWED, subscription_id, now, limit)
            owed, start = owed_events(
                [(row["seq"], row["id"]) for row in rows], head["last_seq"], limit
            )
            if start > head["after_seq"]:
                # Everything up to it is done: later scans start there.
                await conn.execute(queries.ADVANCE_SUBSCRIPTION, subscription_id, start)
            return owed

        return await self._run(read)

    async def schedule_subscription_deliveries(self, limit: int) -> int:
        now = self.now()

        async def schedule(conn: Connection) -> int:
            return count(await conn.execute(queries.SCHEDULE_SUBSCRIPTION_DELIVERIES, now, limit))

        return await self._run(schedule)
