"""MCP Events webhook subscriptions on SQLite: each an endpoint of kind ``subscription`` and its
``subscriptions`` row, scheduled from the events it matches."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from herald.errors import NotFound, SubscriptionLimitReached
from herald.models import Endpoint, Finished, OwedEvents, State, WebhookSubscription
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
from herald.store.sqlite.rows import OPEN, Operation, as_json, insert_sql, records, select_list
from herald.store.tables import ENDPOINTS, SUBSCRIPTIONS, Table

INSERT_ENDPOINT = insert_sql(ENDPOINTS)
INSERT_SUBSCRIPTION = insert_sql(SUBSCRIPTIONS)
ENDPOINT_COLUMNS = select_list(ENDPOINTS)
SUBSCRIPTION_COLUMNS = select_list(SUBSCRIPTIONS, "s")

# The events a subscription ``s`` takes of its agent's ``e``: its type globs (GLOB, like
# herald's globs, is case-sensitive with * and ?) and its sender.
MATCHES = (
    " AND (s.match_sender IS NULL OR e.sender = s.match_sender)"
    " AND (json_array_length(s.match_types) = 0"
    "   OR EXISTS (SELECT 1 FROM json_each(s.match_types) g WHERE e.type GLOB g.value))"
)
UNEXPIRED = "(e.expires_at IS NULL OR e.expires_at > :now)"


def _update_sql(table: Table[Any]) -> str:
    """An UPDATE of every column of one row by id (an upsert's REPLACE would delete the row, and
    its deliveries with it)."""
    assigned = ", ".join(f"{name} = ?" for name in table.names)
    return f"UPDATE {table.name} SET {assigned} WHERE id = ?"


UPDATE_ENDPOINT = _update_sql(ENDPOINTS)
UPDATE_SUBSCRIPTION = _update_sql(SUBSCRIPTIONS)


# A batch's attempts added to their subscriptions' rolling windows (a JSON array of [id, minute,
# attempts, failures]); endpoints of other kinds have no subscriptions row and are left out.
ADD_MINUTES = (
    "INSERT INTO subscription_minutes (subscription_id, minute, attempts, failures)"
    " SELECT j.value ->> 0, j.value ->> 1, j.value ->> 2, j.value ->> 3 FROM json_each(?) j"
    " WHERE j.value ->> 0 IN (SELECT id FROM subscriptions)"
    " ON CONFLICT (subscription_id, minute) DO UPDATE SET"
    " attempts = attempts + excluded.attempts, failures = failures + excluded.failures"
)
WINDOWS = (
    "SELECT m.subscription_id, sum(m.attempts), sum(m.failures) FROM subscription_minutes m"
    " JOIN endpoints w ON w.id = m.subscription_id AND w.state = 'active'"
    " WHERE m.subscription_id IN (SELECT value FROM json_each(?)) AND m.minute >= ?"
    " GROUP BY m.subscription_id"
)
SUSPEND = (
    "UPDATE endpoints SET state = 'disabled', disabled_reason = ? WHERE id = ? AND state = 'active'"
)
HOLD = (
    "UPDATE subscriptions SET held_until = max(coalesce(held_until, 0), j.value ->> 1)"
    " FROM json_each(?) j WHERE subscriptions.id = j.value ->> 0"
)
FORGET_MINUTES = "DELETE FROM subscription_minutes WHERE subscription_id = ?"
# The subscriptions still owed expired events ``e`` (:now) no delivery was made of (one made
# is sent all the same): their endpoints are told of the gap.
GAPS_OF_EXPIRY = (
    "UPDATE subscriptions SET gap_at = :now WHERE gap_at IS NULL AND id IN ("
    " SELECT s.id FROM events e JOIN subscriptions s ON s.agent_id = e.agent_id"
    # Read from the overdue events (their index), not from each subscription's backlog.
    f" WHERE e.{OPEN} AND e.expires_at IS NOT NULL AND e.expires_at <= :now"
    f" AND e.seq > s.after_seq{MATCHES}"
    " AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.endpoint_id = s.id AND d.event_id = e.id))"
)
# The subscriptions whose waiting deliveries go with the events pruned (:before).
GAPS_OF_PRUNING = (
    "UPDATE subscriptions SET gap_at = :now WHERE gap_at IS NULL AND id IN ("
    " SELECT d.endpoint_id FROM deliveries d JOIN events e ON e.id = d.event_id"
    " WHERE d.state = 'waiting' AND e.status IN ('delivered', 'expired', 'dead', 'cancelled')"
    " AND e.status_at < :before)"
)


def note_attempts(
    conn: sqlite3.Connection, finished: Sequence[Finished], now: int
) -> list[tuple[str, str]]:
    """What a batch of attempts does to its subscriptions: each adds to its rolling window, a
    failing one is suspended once the window says so, and a receiver's ``Retry-After`` holds
    its deliveries back until then. One statement for a batch of successes. Returns the
    subscriptions it suspended, with why."""
    counts = minute_counts(finished)
    if not counts:
        return []
    conn.execute(ADD_MINUTES, (as_json(counts),))
    suspended = []
    failing = failing_subscriptions(finished)
    if failing:
        windows = conn.execute(WINDOWS, (as_json(failing), window_start(now))).fetchall()
        for subscription_id, attempts, failures in windows:
            if to_suspend(attempts, failures):
                reason = suspension_reason(attempts, failures)
                if conn.execute(SUSPEND, (reason, subscription_id)).rowcount:
                    suspended.append((subscription_id, reason))
    held = held_subscriptions(finished)
    if held:
        conn.execute(HOLD, (as_json(held),))
    return suspended


def mark_gaps_of_expiry(conn: sqlite3.Connection, now: int) -> None:
    """Before events expire: the subscriptions they leave a gap in, and the minutes that left
    every rolling window."""
    conn.execute(GAPS_OF_EXPIRY, {"now": now})
    conn.execute("DELETE FROM subscription_minutes WHERE minute < ?", (window_start(now),))


def mark_gaps_of_pruning(conn: sqlite3.Connection, now: int, before: int) -> None:
    conn.execute(GAPS_OF_PRUNING, {"now": now, "before": before})


class SubscriptionStore:
    """The subscription part of ``SQLiteStore``."""

    _run: Callable[[Operation[Any]], Awaitable[Any]]
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

        def put(conn: sqlite3.Connection) -> tuple[Endpoint, WebhookSubscription] | None:
            found = _select(conn, "e.id = ?", [endpoint.id])
            if not found:
                # Counted in the transaction that inserts: the one writer runs one at a time.
                if max_live is not None:
                    held = _live(conn, endpoint.agent_id, now)
                    if held >= max_live:
                        raise SubscriptionLimitReached(held, max_live)
                try:
                    conn.execute(INSERT_ENDPOINT, ENDPOINTS.values(endpoint))
                except sqlite3.IntegrityError as exc:
                    raise NotFound(f"no agent has the id {endpoint.agent_id!r}") from exc
                conn.execute(INSERT_SUBSCRIPTION, SUBSCRIPTIONS.values(subscription))
                return None
            new_endpoint, new = refreshed_subscription(
                found[0], endpoint, subscription, rotation_until
            )
            conn.execute(UPDATE_ENDPOINT, (*ENDPOINTS.values(new_endpoint), endpoint.id))
            conn.execute(UPDATE_SUBSCRIPTION, (*SUBSCRIPTIONS.values(new), endpoint.id))
            if found[0][0].state is State.DISABLED:
                # Reactivated: the failures that suspended it are not held against it again.
                conn.execute(FORGET_MINUTES, (endpoint.id,))
            return found[0]

        result: tuple[Endpoint, WebhookSubscription] | None = await self._run(put)
        return result

    async def subscriptions(
        self, *, agent_id: str | None = None, ids: Sequence[str] | None = None
    ) -> list[tuple[Endpoint, WebhookSubscription]]:
        where, params = "1", []
        if agent_id is not None:
            where, params = "s.agent_id = ?", [agent_id]
        if ids is not None:
            where += " AND s.id IN (SELECT value FROM json_each(?))"
            params.append(as_json(list(ids)))

        def select(conn: sqlite3.Connection) -> list[tuple[Endpoint, WebhookSubscription]]:
            return _select(conn, where, params)

        result: list[tuple[Endpoint, WebhookSubscription]] = await self._run(select)
        return result

    async def delete_subscription(self, subscription_id: str) -> bool:
        def delete(conn: sqlite3.Connection) -> bool:
            sql = "DELETE FROM endpoints WHERE id = ? AND kind = 'subscription'"
            return conn.execute(sql, (subscription_id,)).rowcount > 0

        return bool(await self._run(delete))

    async def subscription_owed(self, subscription_id: str, limit: int) -> OwedEvents | None:
        now = self.now()
        params = {"id": subscription_id, "now": now, "limit": limit}

        def read(conn: sqlite3.Connection) -> OwedEvents | None:
            head = conn.execute(
                "SELECT s.after_seq, a.last_seq FROM subscriptions s"
                " JOIN agents a ON a.id = s.agent_id WHERE s.id = :id",
                params,
            ).fetchone()
            if head is None:
                return None
            rows = conn.execute(
                "SELECT e.seq, e.id FROM subscriptions s JOIN events e ON e.agent_id = s.agent_id"
                f" WHERE s.id = :id AND e.seq > s.after_seq{MATCHES}"
                " AND (EXISTS (SELECT 1 FROM deliveries d WHERE d.endpoint_id = s.id"
                "     AND d.event_id = e.id AND d.state = 'waiting')"
                f"   OR (e.{OPEN} AND {UNEXPIRED} AND NOT EXISTS (SELECT 1 FROM deliveries d"
                "     WHERE d.endpoint_id = s.id AND d.event_id = e.id)))"
                " ORDER BY e.seq LIMIT :limit",
                params,
            ).fetchall()
            owed, start = owed_events(
                [(row["seq"], row["id"]) for row in rows], head["last_seq"], limit
            )
            if start > head["after_seq"]:
                # Everything up to it is done: later scans start there.
                conn.execute(
                    "UPDATE subscriptions SET after_seq = ? WHERE id = ? AND after_seq < ?",
                    (start, subscription_id, start),
                )
            return owed

        result: OwedEvents | None = await self._run(read)
        return result

    async def owe_gap(self, subscription_id: str) -> None:
        now = self.now()

        def owe(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE subscriptions SET gap_at = coalesce(gap_at, ?) WHERE id = ?",
                (now, subscription_id),
            )

        await self._run(owe)

    async def subscription_gaps(self) -> list[tuple[Endpoint, WebhookSubscription]]:
        now = self.now()

        def select(conn: sqlite3.Connection) -> list[tuple[Endpoint, WebhookSubscription]]:
            return _select(
                conn,
                "s.gap_at IS NOT NULL AND e.state = 'active'"
                " AND (e.expires_at IS NULL OR e.expires_at > ?)",
                [now],
            )

        result: list[tuple[Endpoint, WebhookSubscription]] = await self._run(select)
        return result

    async def gap_told(self, subscription_id: str, gap_at: int) -> bool:
        def told(conn: sqlite3.Connection) -> bool:
            sql = "UPDATE subscriptions SET gap_at = NULL WHERE id = ? AND gap_at = ?"
            return conn.execute(sql, (subscription_id, gap_at)).rowcount > 0

        return bool(await self._run(told))

    async def schedule_subscription_deliveries(self, limit: int) -> int:
        now = self.now()

        def schedule(conn: sqlite3.Connection) -> int:
            return conn.execute(
                "INSERT INTO deliveries (endpoint_id, event_id, next_at)"
                " SELECT w.id, e.id, :now FROM endpoints w JOIN subscriptions s ON s.id = w.id"
                " CROSS JOIN events e"
                " WHERE w.kind = 'subscription' AND w.state = 'active'"
                " AND (w.expires_at IS NULL OR w.expires_at > :now)"
                f" AND e.agent_id = w.agent_id AND e.seq > s.after_seq AND e.{OPEN}"
                f" AND {UNEXPIRED}{MATCHES}"
                " AND NOT EXISTS (SELECT 1 FROM deliveries d"
                "   WHERE d.endpoint_id = w.id AND d.event_id = e.id)"
                f" ORDER BY e.seq LIMIT {int(limit)}",
                {"now": now},
            ).rowcount

        return int(await self._run(schedule))


def _live(conn: sqlite3.Connection, agent_id: str, now: int) -> int:
    """How many unexpired subscriptions the agent holds."""
    row = conn.execute(
        "SELECT count(*) FROM subscriptions s JOIN endpoints e ON e.id = s.id"
        f" WHERE s.agent_id = :agent AND {UNEXPIRED}",
        {"agent": agent_id, "now": now},
    ).fetchone()
    return int(row[0])


def _select(
    conn: sqlite3.Connection, where: str, params: list[Any]
) -> list[tuple[Endpoint, WebhookSubscription]]:
    """The subscriptions ``s`` (with their endpoints ``e``) that ``where`` keeps, by id."""
    subscriptions = records(
        SUBSCRIPTIONS,
        conn.execute(
            f"SELECT {SUBSCRIPTION_COLUMNS} FROM subscriptions s JOIN endpoints e ON e.id = s.id"
            f" WHERE {where} ORDER BY s.id",
            params,
        ),
    )
    endpoints = {
        endpoint.id: endpoint
        for endpoint in records(
            ENDPOINTS,
            conn.execute(
                f"SELECT {ENDPOINT_COLUMNS} FROM endpoints"
                " WHERE id IN (SELECT value FROM json_each(?))",
                (as_json([s.id for s in subscriptions]),),
            ),
        )
    }
    return [(endpoints[s.id], s) for s in subscriptions]
