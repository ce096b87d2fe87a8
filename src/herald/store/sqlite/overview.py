"""What an operator lists and counts, on SQLite: pages of events, agents with their backlog,
the store's counts, and an event offered again."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from herald.errors import Conflict
from herald.models import COUNTED_STATUSES, Endpoint, Event, EventStatus
from herald.overview import (
    AgentSummary,
    EventQuery,
    Gauges,
    Position,
    SeqRun,
    Stats,
    moment_of,
)
from herald.store.sqlite.counts import changes_of
from herald.store.sqlite.endpoints import SCHEDULE_AGAIN_FROM
from herald.store.sqlite.rows import (
    AGENT_COLUMNS,
    EVENT_COLUMNS,
    OPEN,
    Operation,
    as_json,
    event,
    record,
    records,
    select_list,
)
from herald.store.tables import AGENTS, ENDPOINTS, EVENTS

# Open events past their expiry that the upkeep has not marked expired yet, per agent: few (it
# marks them every few seconds), read from the expiry index. The counts in the agents' rows hold
# them until then; the pending events an operator is shown do not.
OVERDUE = f"""
SELECT agent_id, count(*) AS n FROM events INDEXED BY events_expiry
WHERE {OPEN} AND expires_at IS NOT NULL AND expires_at <= :now
GROUP BY agent_id
"""

# One query for every agent: its open events from the counts in its row, each other count and
# maximum read from an index on the agent's id.
AGENT_SUMMARIES = f"""
WITH overdue AS ({OVERDUE})
SELECT {AGENT_COLUMNS},
    agents.pending_events + agents.sent_events - coalesce(overdue.n, 0) AS pending,
    (SELECT count(*) FROM sessions s WHERE s.agent_id = agents.id AND s.expires_at > :now)
        AS live_sessions,
    max(
        coalesce((SELECT e.created_at FROM events e WHERE e.agent_id = agents.id
            ORDER BY e.seq DESC LIMIT 1), 0),
        coalesce((SELECT max(s.seen_at) FROM sessions s WHERE s.agent_id = agents.id), 0)
    ) AS last_activity_at
FROM agents LEFT JOIN overdue ON overdue.agent_id = agents.id
WHERE (:agent IS NULL OR id = :agent) AND (:after IS NULL OR handle > :after)
    AND (:search IS NULL OR instr(handle, :search) > 0)
ORDER BY handle LIMIT :limit
"""

# The counts in ``EventStatus``'s order, then the events ever published (each agent's seqs are
# given in turn from 1).
EVENTS_BY_STATUS = """
SELECT coalesce(sum(pending_events), 0), coalesce(sum(sent_events), 0),
    coalesce(sum(delivered_events), 0), coalesce(sum(expired_events), 0),
    coalesce(sum(dead_events), 0),
    coalesce(sum(last_seq), 0)
FROM agents
"""

TOP_PENDING = f"""
WITH overdue AS ({OVERDUE}), backlog AS (
    SELECT a.id, a.handle, a.pending_events + a.sent_events - coalesce(overdue.n, 0) AS pending
    FROM agents a LEFT JOIN overdue ON overdue.agent_id = a.id
    WHERE a.pending_events + a.sent_events > 0
)
SELECT id, handle, pending FROM backlog WHERE pending > 0
ORDER BY pending DESC, handle LIMIT :top
"""

# The oldest open, unexpired event. Each agent's row keeps when its oldest open event was
# published (oldest_open_at); only an agent with open events past their expiry (OVERDUE) may have
# its oldest unexpired one published later: so that event is one of the first agents' by that
# time, one more of them than there are such agents. Each is found by one seek in the open
# events' index.
OLDEST_PENDING = f"""
WITH candidates AS (
    SELECT id, handle FROM agents WHERE oldest_open_at IS NOT NULL
    ORDER BY oldest_open_at LIMIT (SELECT count(*) FROM ({OVERDUE})) + 1
)
SELECT e.id, c.id, c.handle, e.created_at FROM candidates c
JOIN events e ON e.rowid = (
    SELECT o.rowid FROM events o INDEXED BY events_open
    WHERE o.agent_id = c.id AND o.{OPEN} AND (o.expires_at IS NULL OR o.expires_at > :now)
    ORDER BY o.seq LIMIT 1
)
ORDER BY e.created_at, e.id LIMIT 1
"""

# The open, unexpired events the metrics count: the counts in the agents' rows, less those past
# their expiry that the upkeep has yet to mark.
PENDING = f"""
SELECT coalesce(sum(pending_events + sent_events), 0)
    - (SELECT coalesce(sum(n), 0) FROM ({OVERDUE}))
FROM agents
"""
DEAD_EVENTS = "SELECT coalesce(sum(dead_events), 0) FROM agents"
SCHEDULED_EVENTS = "SELECT count(*) FROM events INDEXED BY events_due WHERE status = 'scheduled'"
CANCELLED_EVENTS = (
    "SELECT count(*) FROM events INDEXED BY events_cancelled WHERE status = 'cancelled'"
)
SESSIONS_BY_WAY = """
SELECT transport, era, count(*) FROM sessions WHERE expires_at > :now
GROUP BY transport, era ORDER BY transport, era
"""
ENDPOINTS_BY_STATE = (
    "SELECT kind, CASE WHEN state = 'active' AND failing_since IS NOT NULL THEN 'failing'"
    " ELSE state END AS shown, count(*) FROM endpoints GROUP BY kind, shown ORDER BY kind, shown"
)
CLIENTS = """
SELECT client_name, era, count(*) FROM sessions WHERE expires_at > :now
GROUP BY client_name, era ORDER BY client_name, era
"""

# A pending event is being offered: it is offered again only once a delivery of it was given up.
REDELIVERABLE = """
SELECT e.status <> 'pending' OR EXISTS (
    SELECT 1 FROM deliveries d WHERE d.event_id = e.id AND d.state = 'dead'),
    e.agent_id, e.status
FROM events e WHERE e.id = :id
"""
REOFFER_EVENT = f"""
UPDATE events SET status = 'pending', is_open = 1, status_at = :now, lease_owner = NULL,
    lease_until = NULL, lease_cursor = NULL, handed_out = 0,
    expires_at = CASE WHEN expires_at IS NULL THEN NULL ELSE :now + expires_at - created_at END
WHERE id = :id RETURNING {EVENT_COLUMNS}
"""
RESTART_DELIVERIES = """
UPDATE deliveries SET state = 'waiting', attempts = 0, next_at = :now, claimed_by = NULL,
    claimed_until = NULL, last_error = NULL
WHERE event_id = :id AND state IN ('done', 'dead')
  AND endpoint_id IN (SELECT id FROM endpoints WHERE kind <> 'subscription')
"""


class OverviewStore:
    """The overview half of ``SQLiteStore``."""

    _run: Callable[[Operation[Any]], Awaitable[Any]]
    now: Callable[[], int]

    async def get_endpoint(self, endpoint_id: str) -> Endpoint | None:
        def select(conn: sqlite3.Connection) -> Endpoint | None:
            rows = conn.execute(
                f"SELECT {select_list(ENDPOINTS)} FROM endpoints WHERE id = ?", (endpoint_id,)
            )
            return record(ENDPOINTS, rows)

        result: Endpoint | None = await self._run(select)
        return result

    async def next_attempts(self, endpoint_ids: Sequence[str]) -> dict[str, int]:
        def select(conn: sqlite3.Connection) -> dict[str, int]:
            rows = conn.execute(
                "SELECT endpoint_id, min(next_at) FROM deliveries WHERE state = 'waiting'"
                " AND endpoint_id IN (SELECT value FROM json_each(?)) GROUP BY endpoint_id",
                (as_json(list(endpoint_ids)),),
            )
            return {row[0]: row[1] for row in rows}

        result: dict[str, int] = await self._run(select)
        return result

    async def listing_bound(self, query: EventQuery, scan: int) -> Position | None:
        looked = query.looked()

        def select(conn: sqlite3.Connection) -> Position | None:
            if looked.agent_id is None:
                where, params = _filters(looked)
                row = conn.execute(
                    f"SELECT created_at, id FROM events{where}"
                    " ORDER BY created_at DESC, id DESC LIMIT 1 OFFSET :offset",
                    params | {"offset": scan - 1},
                ).fetchone()
                return None if row is None else (row[0], row[1])
            return _seq_bound(conn, looked, scan)

        result: Position | None = await self._run(select)
        return result

    async def list_events(self, query: EventQuery) -> list[Event]:
        def select(conn: sqlite3.Connection) -> list[Event]:
            if query.agent_id is None:
                where, params = _filters(query)
                rows = conn.execute(
                    f"SELECT {EVENT_COLUMNS} FROM events{where}"
                    " ORDER BY created_at DESC, id DESC LIMIT :limit",
                    params,
                )
                return records(EVENTS, rows)
            found: list[Event] = []
            for run in query.runs():  # one agent's: its runs of seqs in turn
                where, params = _filters(query, run)
                params["limit"] = query.limit - len(found)
                rows = conn.execute(
                    f"SELECT {EVENT_COLUMNS} FROM events{where} ORDER BY {_seq_order(run)}"
                    " LIMIT :limit",
                    params,
                )
                found += records(EVENTS, rows)
                if len(found) >= query.limit:
                    break
            return found

        result: list[Event] = await self._run(select)
        return result

    async def agent_summaries(
        self,
        agent_id: str | None = None,
        *,
        after: str | None = None,
        search: str | None = None,
        limit: int | None = None,
    ) -> list[AgentSummary]:
        params = {
            "now": self.now(),
            "agent": agent_id,
            "after": after,
            "search": search,
            "limit": -1 if limit is None else limit,  # SQLite: a negative LIMIT is none
        }

        def select(conn: sqlite3.Connection) -> list[AgentSummary]:
            rows = conn.execute(AGENT_SUMMARIES, params).fetchall()
            return [
                AgentSummary(
                    AGENTS.record(row),
                    row["pending"],
                    row["live_sessions"],
                    row["last_activity_at"] or None,
                )
                for row in rows
            ]

        result: list[AgentSummary] = await self._run(select)
        return result

    async def stats(self, top: int = 10) -> Stats:
        params = {"now": self.now(), "top": top}

        def select(conn: sqlite3.Connection) -> Stats:
            def rows(sql: str) -> list[tuple[Any, ...]]:
                return [tuple(row) for row in conn.execute(sql, params)]

            (counts,) = rows(EVENTS_BY_STATUS)
            *by_status, published = counts
            oldest = rows(OLDEST_PENDING)
            (scheduled,) = conn.execute(SCHEDULED_EVENTS).fetchone()
            (cancelled,) = conn.execute(CANCELLED_EVENTS).fetchone()
            return Stats(
                events={
                    **{s.value: n for s, n in zip(COUNTED_STATUSES, by_status, strict=True)},
                    EventStatus.SCHEDULED.value: scheduled,
                    EventStatus.CANCELLED.value: cancelled,
                },
                published=published,
                attempts_recorded=rows(
                    "SELECT mechanism, outcome, recorded FROM attempt_counts"
                    " ORDER BY mechanism, outcome"
                ),
                top_pending=rows(TOP_PENDING),
                sessions=rows(SESSIONS_BY_WAY),
                endpoints=rows(ENDPOINTS_BY_STATE),
                clients=rows(CLIENTS),
                oldest_pending=oldest[0] if oldest else None,
            )

        result: Stats = await self._run(select)
        return result

    async def gauges(self) -> Gauges:
        params = {"now": self.now()}

        def select(conn: sqlite3.Connection) -> Gauges:
            def rows(sql: str) -> list[tuple[Any, ...]]:
                return [tuple(row) for row in conn.execute(sql, params)]

            (pending,) = conn.execute(PENDING, params).fetchone()
            (dead,) = conn.execute(DEAD_EVENTS).fetchone()
            (scheduled,) = conn.execute(SCHEDULED_EVENTS).fetchone()
            found = conn.execute(OLDEST_PENDING, params).fetchone()
            oldest = found[3] if found else None
            return Gauges(
                read_at=params["now"],
                pending=pending,
                oldest_pending_at=oldest,
                sessions=rows(SESSIONS_BY_WAY),
                endpoints=rows(ENDPOINTS_BY_STATE),
                dead=dead,
                scheduled=scheduled,
            )

        result: Gauges = await self._run(select)
        return result

    async def redeliver(self, event_id: str) -> Event | None:
        params = {"id": event_id, "now": self.now()}

        def reoffer(conn: sqlite3.Connection) -> Event | None:
            found = conn.execute(REDELIVERABLE, params).fetchone()
            if found is None:
                return None
            if not found[0]:
                raise Conflict(_ALREADY_PENDING.format(event_id))
            row = conn.execute(REOFFER_EVENT, params).fetchone()
            reopened = event(row)
            # Open again, it is scheduled for the endpoints that have no delivery of it.
            conn.execute(SCHEDULE_AGAIN_FROM, {"seq": reopened.seq, "agent": reopened.agent_id})
            changes_of([(found[1], found[2], 1)], "pending").apply(conn)
            conn.execute(RESTART_DELIVERIES, params)
            return reopened

        result: Event | None = await self._run(reoffer)
        return result


_ALREADY_PENDING = (
    "event {!r} is pending already and none of its deliveries was given up on: it is being"
    " offered; redeliver an event once it is delivered, expired, dead or undeliverable"
)


def _seq_order(run: SeqRun) -> str:
    return "seq DESC" if run.numbered else "seq"


def _seq_bound(conn: sqlite3.Connection, looked: EventQuery, scan: int) -> int | None:
    """``listing_bound`` of one agent's listing: the ``scan``-th seq of its runs in turn."""
    runs = looked.runs()
    for index, run in enumerate(runs):
        where, params = _filters(looked, run)
        select = f"SELECT seq FROM events{where} ORDER BY {_seq_order(run)}"
        if index == len(runs) - 1:  # the last: its row at the offset left, if it has one
            row = conn.execute(f"{select} LIMIT 1 OFFSET :offset", params | {"offset": scan - 1})
            found = row.fetchone()
            return None if found is None else int(found[0])
        seqs = [row[0] for row in conn.execute(f"{select} LIMIT :scan", params | {"scan": scan})]
        if len(seqs) == scan:
            return int(seqs[-1])
        scan -= len(seqs)
    return None


def _filters(query: EventQuery, run: SeqRun | None = None) -> tuple[str, dict[str, Any]]:
    """The WHERE clause (or nothing) and the parameters of a page of events (of one agent's:
    of one ``run`` of its seqs)."""
    parts: list[str] = []
    params: dict[str, Any] = {"limit": query.limit}
    if query.agent_id is not None:
        parts.append("agent_id = :agent")
        params["agent"] = query.agent_id
    if query.status is not None:
        parts.append("status = :status")
        params["status"] = query.status.value
    if query.type is not None:
        parts.append("type GLOB :type" if query.type_is_glob else "type = :type")
        params["type"] = query.type
    if query.topic is not None:
        parts.append("topic GLOB :topic" if query.topic_is_glob else "topic = :topic")
        params["topic"] = query.topic
    if query.since_ms is not None:
        parts.append("created_at >= :since")
        params["since"] = query.since_ms
    if query.until_ms is not None:
        parts.append("created_at < :until")
        params["until"] = query.until_ms
    if run is not None and run.numbered:
        # One agent's events by seq: the range is read from the index on the agent and seq.
        parts.append("seq > 0")
        if run.before is not None:
            parts.append("seq < :before_seq")
            params["before_seq"] = run.before
        if run.through is not None:
            parts.append("seq >= :through_seq")
            params["through_seq"] = run.through
        return " WHERE " + " AND ".join(parts), params
    if run is not None:
        # Its events not yet numbered (seq below zero), the newest the lowest: ascending.
        parts.append("seq < 0")
        if run.before is not None:
            parts.append("seq > :before_seq")
            params["before_seq"] = run.before
        if run.through is not None:
            parts.append("seq <= :through_seq")
            params["through_seq"] = run.through
        return " WHERE " + " AND ".join(parts), params
    if query.before is not None:
        # The range on created_at is read from the index; the tie on it is broken by id.
        parts.append("created_at <= :before_at AND (created_at < :before_at OR id < :before_id)")
        params["before_at"], params["before_id"] = moment_of(query.before)
    if query.through is not None:
        parts.append(
            "created_at >= :through_at AND (created_at > :through_at OR id >= :through_id)"
        )
        params["through_at"], params["through_id"] = moment_of(query.through)
    return (" WHERE " + " AND ".join(parts) if parts else ""), params
