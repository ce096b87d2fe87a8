"""Endpoints and their delivery schedule, on SQLite (one writer: claims cannot collide)."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from herald.endpoints import Delivery, Endpoint, Kind, State
from herald.events import Agent, Attempt, Event
from herald.store.sqlite.attempts import insert_attempts
from herald.store.sqlite.rows import AGENT_COLUMNS, EVENT_COLUMNS, OPEN, Operation, event

ENDPOINT_COLUMNS = (
    "id, agent_id, kind, url, secret, created_at, mode, previous_secret, previous_until, state,"
    " disabled_reason, failing_since, last_error, last_attempt_at"
)
DELIVERY_COLUMNS = "endpoint_id, event_id, attempts, next_at, state, last_error"


def endpoint(row: Sequence[Any]) -> Endpoint:
    values = list(row)
    values[2] = Kind(values[2])
    values[9] = State(values[9])
    return Endpoint(*values)


def _prefixed(columns: str, alias: str) -> str:
    return ", ".join(f"{alias}.{name.strip()}" for name in columns.split(","))


class EndpointStore:
    """The endpoint half of ``SQLiteStore``."""

    _run: Callable[[Operation[Any]], Awaitable[Any]]
    now: Callable[[], int]

    async def put_endpoint(self, new: Endpoint) -> None:
        def put(conn: sqlite3.Connection) -> None:
            conn.execute(
                "DELETE FROM endpoints WHERE agent_id = ? AND kind = ?",
                (new.agent_id, new.kind.value),
            )
            conn.execute(
                f"INSERT INTO endpoints ({ENDPOINT_COLUMNS}) VALUES ({', '.join('?' * 14)})",
                (
                    new.id,
                    new.agent_id,
                    new.kind.value,
                    new.url,
                    new.secret,
                    new.created_at,
                    new.mode,
                    new.previous_secret,
                    new.previous_until,
                    new.state.value,
                    new.disabled_reason,
                    new.failing_since,
                    new.last_error,
                    new.last_attempt_at,
                ),
            )

        await self._run(put)

    async def endpoints(self, agent_id: str) -> list[Endpoint]:
        def select(conn: sqlite3.Connection) -> list[Endpoint]:
            rows = conn.execute(
                f"SELECT {ENDPOINT_COLUMNS} FROM endpoints WHERE agent_id = ? ORDER BY kind",
                (agent_id,),
            )
            return [endpoint(row) for row in rows]

        result: list[Endpoint] = await self._run(select)
        return result

    async def delete_endpoint(self, agent_id: str, kind: str) -> bool:
        def delete(conn: sqlite3.Connection) -> bool:
            sql = "DELETE FROM endpoints WHERE agent_id = ? AND kind = ?"
            return conn.execute(sql, (agent_id, kind)).rowcount > 0

        return bool(await self._run(delete))

    async def rotate_secret(
        self, endpoint_id: str, secret: str, previous_until: int
    ) -> Endpoint | None:
        def rotate(conn: sqlite3.Connection) -> Endpoint | None:
            row = conn.execute(
                "UPDATE endpoints SET previous_secret = secret, previous_until = ?, secret = ?"
                f" WHERE id = ? RETURNING {ENDPOINT_COLUMNS}",
                (previous_until, secret, endpoint_id),
            ).fetchone()
            return endpoint(row) if row else None

        result: Endpoint | None = await self._run(rotate)
        return result

    async def schedule_deliveries(
        self,
        before_ms: int,
        limit: int,
        *,
        agents: Sequence[str] | None = None,
        not_agents: Sequence[str] = (),
    ) -> int:
        now = self.now()

        def schedule(conn: sqlite3.Connection) -> int:
            params: list[Any] = [now, before_ms, now]
            where = ""
            if agents is not None:
                where += f" AND e.agent_id IN ({', '.join('?' * len(agents)) or 'NULL'})"
                params += list(agents)
            if not_agents:
                where += f" AND e.agent_id NOT IN ({', '.join('?' * len(not_agents))})"
                params += list(not_agents)
            return conn.execute(
                "INSERT INTO deliveries (endpoint_id, event_id, next_at)"
                # From the endpoints (CROSS JOIN keeps that order): agents without one
                # cost nothing, however many events wait for them.
                " SELECT w.id, e.id, ? FROM endpoints w CROSS JOIN events e"
                f" WHERE e.agent_id = w.agent_id AND w.state = 'active' AND e.{OPEN}"
                " AND e.status_at <= ?"
                " AND (e.expires_at IS NULL OR e.expires_at > ?)"
                f"{where}"
                " AND NOT EXISTS (SELECT 1 FROM deliveries d"
                "   WHERE d.endpoint_id = w.id AND d.event_id = e.id)"
                f" ORDER BY e.seq LIMIT {int(limit)}",
                params,
            ).rowcount

        return int(await self._run(schedule))

    async def claim_deliveries(
        self,
        worker: str,
        limit: int,
        lease_ms: int,
        *,
        per_endpoint: int = 4,
        skip_endpoints: Sequence[str] = (),
    ) -> list[tuple[Delivery, Endpoint, Event, Agent]]:
        now = self.now()

        def claim(conn: sqlite3.Connection) -> list[tuple[Delivery, Endpoint, Event, Agent]]:
            skip = ""
            if skip_endpoints:
                skip = f" AND d.endpoint_id NOT IN ({', '.join('?' * len(skip_endpoints))})"
            rows = conn.execute(
                f"SELECT {_prefixed(DELIVERY_COLUMNS, 'd')}, {_prefixed(ENDPOINT_COLUMNS, 'w')},"
                f" {_prefixed(EVENT_COLUMNS, 'e')}, {_prefixed(AGENT_COLUMNS, 'a')}"
                " FROM deliveries d JOIN endpoints w ON w.id = d.endpoint_id"
                " JOIN events e ON e.id = d.event_id JOIN agents a ON a.id = e.agent_id"
                " WHERE d.state = 'waiting' AND d.next_at <= ? AND w.state = 'active'"
                " AND (d.claimed_until IS NULL OR d.claimed_until <= ?)"
                # Due order, from the index; event ids sort by creation within a moment.
                f"{skip} ORDER BY d.next_at, d.event_id LIMIT ?",
                [now, now, *skip_endpoints, limit * per_endpoint],
            )
            claimed = []
            per: Counter[str] = Counter()
            for row in rows:
                delivery = Delivery(*row[:6])
                if per[delivery.endpoint_id] >= per_endpoint:
                    continue
                per[delivery.endpoint_id] += 1
                conn.execute(
                    "UPDATE deliveries SET claimed_by = ?, claimed_until = ?"
                    " WHERE endpoint_id = ? AND event_id = ?",
                    (worker, now + lease_ms, delivery.endpoint_id, delivery.event_id),
                )
                claimed.append((delivery, endpoint(row[6:20]), event(row[20:34]), Agent(*row[34:])))
                if len(claimed) >= limit:
                    break
            return claimed

        result: list[tuple[Delivery, Endpoint, Event, Agent]] = await self._run(claim)
        return result

    async def finish_delivery(
        self,
        delivery: Delivery,
        *,
        attempt: Attempt,
        next_at: int | None,
        event_status: str | None,
        endpoint_ok: bool,
        disable_reason: str | None = None,
        disable_failing_since: int | None = None,
    ) -> None:
        now = self.now()
        key = (delivery.endpoint_id, delivery.event_id)

        def finish(conn: sqlite3.Connection) -> None:
            state = "waiting" if next_at is not None else ("done" if endpoint_ok else "dead")
            conn.execute(
                "UPDATE deliveries SET attempts = attempts + 1, next_at = coalesce(?, next_at),"
                " state = ?, claimed_by = NULL, claimed_until = NULL, last_error = ?"
                " WHERE endpoint_id = ? AND event_id = ?",
                (next_at, state, attempt.error, *key),
            )
            if event_status is not None:
                conn.execute(
                    f"UPDATE events SET status = ?, status_at = ? WHERE id = ? AND {OPEN}"
                    " AND (? = 'delivered' OR status = 'pending')",
                    (event_status, now, delivery.event_id, event_status),
                )
            insert_attempts(conn, [attempt])
            _note_endpoint(conn, delivery.endpoint_id, now, endpoint_ok, attempt.error)
            _disable(conn, delivery.endpoint_id, disable_reason, disable_failing_since)

        await self._run(finish)

    async def deliveries(self, event_id: str) -> list[Delivery]:
        def select(conn: sqlite3.Connection) -> list[Delivery]:
            rows = conn.execute(
                f"SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE event_id = ?"
                " ORDER BY endpoint_id",
                (event_id,),
            )
            return [Delivery(*row) for row in rows]

        result: list[Delivery] = await self._run(select)
        return result


def _note_endpoint(
    conn: sqlite3.Connection, endpoint_id: str, now: int, ok: bool, error: str | None
) -> None:
    if ok:
        conn.execute(
            "UPDATE endpoints SET failing_since = NULL, last_error = NULL, last_attempt_at = ?"
            " WHERE id = ?",
            (now, endpoint_id),
        )
    else:
        conn.execute(
            "UPDATE endpoints SET failing_since = coalesce(failing_since, ?), last_error = ?,"
            " last_attempt_at = ? WHERE id = ?",
            (now, error, now, endpoint_id),
        )


def _disable(
    conn: sqlite3.Connection, endpoint_id: str, reason: str | None, failing_since: int | None
) -> None:
    if reason is not None:
        conn.execute(
            "UPDATE endpoints SET state = 'disabled', disabled_reason = ? WHERE id = ?",
            (reason, endpoint_id),
        )
    elif failing_since is not None:
        conn.execute(
            "UPDATE endpoints SET state = 'disabled',"
            " disabled_reason = 'kept failing for too long; last error: ' || last_error"
            " WHERE id = ? AND failing_since IS NOT NULL AND failing_since <= ?",
            (endpoint_id, failing_since),
        )
