"""MCP Events webhook subscriptions on PostgreSQL: each an endpoint of kind ``subscription`` and
its ``subscriptions`` row, scheduled from the events it matches (by any process, once)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import asyncpg

from herald.errors import NotFound, SubscriptionLimitReached
from herald.models import Endpoint, Finished, OwedEvents, State, WebhookSubscription
from herald.store.postgres import queries
from herald.store.postgres.rows import Connection, Runner, count
from herald.store.rules import (
    failing_subscriptions,
    held_subscriptions,
    minute_counts,
    owed_events,
    refreshed_subscription,
    suspension_reason,
    to_suspend,
    window_start,
)
from herald.store.tables import ENDPOINTS, SUBSCRIPTIONS


async def note_attempts(
    conn: Connection, finished: Sequence[Finished], now: int
) -> list[tuple[str, str]]:
    """What a batch of attempts does to its subscriptions: each adds to its rolling window, a
    failing one is suspended once the window says so, and a receiver's ``Retry-After`` holds
    its deliveries back until then. One statement for a batch of successes. Returns the
    subscriptions it suspended, with why."""
    counts = minute_counts(finished)
    if not counts:
        return []
    await conn.execute(
        queries.ADD_SUBSCRIPTION_MINUTES,
        [c[0] for c in counts],
        [c[1] for c in counts],
        [c[2] for c in counts],
        [c[3] for c in counts],
    )
    suspended = []
    failing = failing_subscriptions(finished)
    if failing:
        windows = await conn.fetch(queries.SUBSCRIPTION_WINDOWS, failing, window_start(now))
        for row in windows:
            attempts, failures = row["attempts"], row["failures"]
            if to_suspend(attempts, failures):
                reason = suspension_reason(attempts, failures)
                sub = row["subscription_id"]
                if count(await conn.execute(queries.SUSPEND_SUBSCRIPTION, sub, reason)):
                    suspended.append((sub, reason))
    held = held_subscriptions(finished)
    if held:
        await conn.execute(queries.HOLD_SUBSCRIPTIONS, [h[0] for h in held], [h[1] for h in held])
    return suspended


async def mark_gaps_of_expiry(conn: Connection, now: int) -> None:
    """Before events expire: the subscriptions they leave a gap in, and the minutes that left
    every rolling window."""
    await conn.execute(queries.GAPS_OF_EXPIRY, now)
    await conn.execute(queries.FORGET_OLD_MINUTES, window_start(now))


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
            # A subscription that exists is locked before its agent, as a batch of attempts
            # locks its endpoint before the agent's row (counting its events): in the other
            # order, a refresh and a batch of its deliveries would deadlock.
            await conn.fetchrow(queries.LOCK_SUBSCRIPTION, endpoint.id)
            # Then the agent: a put racing this one (same key or not) then sees what it stored.
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
            if before[0].state is State.DISABLED:
                # Reactivated: the failures that suspended it are not held against it again.
                await conn.execute(queries.FORGET_SUBSCRIPTION_MINUTES, endpoint.id)
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

    async def owe_gap(self, subscription_id: str) -> None:
        now = self.now()

        async def owe(conn: Connection) -> None:
            await conn.execute(queries.OWE_GAP, subscription_id, now)

        await self._run(owe)

    async def subscription_gaps(self) -> list[tuple[Endpoint, WebhookSubscription]]:
        now = self.now()

        async def select(conn: Connection) -> list[tuple[Endpoint, WebhookSubscription]]:
            return [_pair(row) for row in await conn.fetch(queries.SUBSCRIPTION_GAPS, now)]

        return await self._run(select)

    async def gap_told(self, subscription_id: str, gap_at: int) -> bool:
        async def told(conn: Connection) -> bool:
            return count(await conn.execute(queries.GAP_TOLD, subscription_id, gap_at)) > 0

        return await self._run(told)

    async def schedule_subscription_deliveries(self, limit: int) -> int:
        now = self.now()

        async def schedule(conn: Connection) -> int:
            return count(await conn.execute(queries.SCHEDULE_SUBSCRIPTION_DELIVERIES, now, limit))

        return await self._run(schedule)
