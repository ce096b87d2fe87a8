"""What an operator lists and counts, on PostgreSQL: pages of events, agents with their backlog,
the store's counts, and an event offered again."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
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
from herald.store.postgres import queries
from herald.store.postgres.rows import Connection, Runner, endpoint, event
from herald.store.rules import like_patterns
from herald.store.tables import AGENTS

ALREADY_PENDING = (
    "event {!r} is pending already and none of its deliveries was given up on: it is being"
    " offered; redeliver an event once it is delivered, expired, dead or undeliverable"
)


class OverviewStore:
    """The overview half of ``PostgresStore``."""

    _run: Runner
    now: Callable[[], int]

    async def get_endpoint(self, endpoint_id: str) -> Endpoint | None:
        async def select(conn: Connection) -> Endpoint | None:
            row = await conn.fetchrow(queries.GET_ENDPOINT, endpoint_id)
            return endpoint(row) if row is not None else None

        return await self._run(select)

    async def next_attempts(self, endpoint_ids: Sequence[str]) -> dict[str, int]:
        async def select(conn: Connection) -> dict[str, int]:
            rows = await conn.fetch(queries.NEXT_ATTEMPTS, list(endpoint_ids))
            return {row["endpoint_id"]: row["next_at"] for row in rows}

        return await self._run(select)

    async def listing_bound(self, query: EventQuery, scan: int) -> Position | None:
        looked = query.looked()

        async def select(conn: Connection) -> Position | None:
            if looked.agent_id is not None:
                return await _seq_bound(conn, looked, scan)
            sql, args = events_page(replace(looked, limit=1), columns="created_at, id")
            row = await conn.fetchrow(f"{sql} OFFSET ${len(args) + 1}", *args, scan - 1)
            return None if row is None else (row["created_at"], row["id"])

        return await self._run(select)

    async def list_events(self, query: EventQuery) -> list[Event]:
        async def select(conn: Connection) -> list[Event]:
            if query.agent_id is None:
                sql, args = events_page(query)
                return [event(row) for row in await conn.fetch(sql, *args)]
            found: list[Event] = []
            for run in query.runs():  # one agent's: its runs of seqs in turn
                sql, args = events_page(replace(query, limit=query.limit - len(found)), run)
                found += [event(row) for row in await conn.fetch(sql, *args)]
                if len(found) >= query.limit:
                    break
            return found

        return await self._run(select)

    async def agent_summaries(
        self,
        agent_id: str | None = None,
        *,
        after: str | None = None,
        search: str | None = None,
        limit: int | None = None,
    ) -> list[AgentSummary]:
        now = self.now()
        args = (now, agent_id, after, search, limit)

        async def select(conn: Connection) -> list[AgentSummary]:
            rows = await conn.fetch(queries.AGENT_SUMMARIES, *args)
            return [
                AgentSummary(
                    AGENTS.record(row),
                    row["pending"],
                    row["live_sessions"],
                    row["last_activity_at"],
                )
                for row in rows
            ]

        return await self._run(select)

    async def stats(self, top: int = 10) -> Stats:
        now = self.now()

        async def select(conn: Connection) -> Stats:
            async def rows(sql: str, *args: Any) -> list[tuple[Any, ...]]:
                return [tuple(row) for row in await conn.fetch(sql, *args)]

            (counts,) = await rows(queries.EVENTS_BY_STATUS)
            *by_status, published = counts
            oldest = await rows(queries.OLDEST_PENDING, now)
            return Stats(
                events={
                    **{s.value: n for s, n in zip(COUNTED_STATUSES, by_status, strict=True)},
                    EventStatus.SCHEDULED.value: await conn.fetchval(queries.SCHEDULED_EVENTS),
                    EventStatus.CANCELLED.value: await conn.fetchval(queries.CANCELLED_EVENTS),
                },
                published=published,
                attempts_recorded=await rows(queries.ATTEMPTS_RECORDED),
                top_pending=await rows(queries.TOP_PENDING, now, top),
                sessions=await rows(queries.SESSIONS_BY_WAY, now),
                endpoints=await rows(queries.ENDPOINTS_BY_STATE),
                clients=await rows(queries.CLIENTS, now),
                oldest_pending=oldest[0] if oldest else None,
            )

        return await self._run(select)

    async def gauges(self) -> Gauges:
        now = self.now()

        async def select(conn: Connection) -> Gauges:
            pending = await conn.fetchval(queries.PENDING, now)
            oldest = await conn.fetchrow(queries.OLDEST_PENDING, now)
            return Gauges(
                read_at=now,
                pending=pending,
                oldest_pending_at=oldest["created_at"] if oldest is not None else None,
                sessions=[tuple(row) for row in await conn.fetch(queries.SESSIONS_BY_WAY, now)],
                endpoints=[tuple(row) for row in await conn.fetch(queries.ENDPOINTS_BY_STATE)],
                dead=await conn.fetchval(queries.DEAD_EVENTS),
                scheduled=await conn.fetchval(queries.SCHEDULED_EVENTS),
            )

        return await self._run(select)

    async def redeliver(self, event_id: str) -> Event | None:
        now = self.now()

        async def reoffer(conn: Connection) -> Event | None:
            redeliverable = await conn.fetchrow(queries.REDELIVERABLE, event_id)
            if redeliverable is None:
                return None
            if not redeliverable[0]:
                raise Conflict(ALREADY_PENDING.format(event_id))
            row = await conn.fetchrow(queries.REOFFER_EVENT, event_id, now)
            if row is None:
                return None
            reopened = event(row)
            # Open again, it is scheduled for the endpoints that have no delivery of it.
            await conn.execute(queries.SCHEDULE_AGAIN_FROM, reopened.agent_id, reopened.seq)
            await conn.execute(queries.RESTART_DELIVERIES, event_id, now)
            return reopened

        return await self._run(reoffer, transaction=True)


async def _seq_bound(conn: Connection, looked: EventQuery, scan: int) -> int | None:
    """``listing_bound`` of one agent's listing: the ``scan``-th seq of its runs in turn."""
    runs = looked.runs()
    for index, run in enumerate(runs):
        if index == len(runs) - 1:  # the last: its row at the offset left, if it has one
            sql, args = events_page(replace(looked, limit=1), run, columns="seq")
            found = await conn.fetchval(f"{sql} OFFSET ${len(args) + 1}", *args, scan - 1)
            return None if found is None else int(found)
        sql, args = events_page(replace(looked, limit=scan), run, columns="seq")
        seqs = [row["seq"] for row in await conn.fetch(sql, *args)]
        if len(seqs) == scan:
            return int(seqs[-1])
        scan -= len(seqs)
    return None


def events_page(
    query: EventQuery, run: SeqRun | None = None, columns: str = queries.EVENT_COLUMNS
) -> tuple[str, list[Any]]:
    """The SELECT of a page of events (of one agent's: of one ``run`` of its seqs) and its
    arguments: only the filters given are in it, so that each combination gets a plan of its
    own (a filter made void by a NULL argument would not be read from its index)."""
    parts: list[str] = []
    args: list[Any] = []

    def arg(value: Any) -> str:
        args.append(value)
        return f"${len(args)}"

    if query.agent_id is not None:
        parts.append(f"agent_id = {arg(query.agent_id)}")
    if query.status is not None:
        parts.append(f"status = {arg(query.status.value)}")
    if query.type is not None:
        if query.type_is_glob:
            parts.append(f"type LIKE {arg(like_patterns([query.type])[0])}")
        else:
            parts.append(f"type = {arg(query.type)}")
    if query.topic is not None:
        if query.topic_is_glob:
            parts.append(f"topic LIKE {arg(like_patterns([query.topic])[0])}")
        else:
            parts.append(f"topic = {arg(query.topic)}")
    if query.since_ms is not None:
        parts.append(f"created_at >= {arg(query.since_ms)}::bigint")
    if query.until_ms is not None:
        parts.append(f"created_at < {arg(query.until_ms)}::bigint")
    if run is not None and run.numbered:
        # One agent's events by seq: the range is read from the index on the agent and seq.
        parts.append("seq > 0")
        if run.before is not None:
            parts.append(f"seq < {arg(run.before)}::bigint")
        if run.through is not None:
            parts.append(f"seq >= {arg(run.through)}::bigint")
        order = "seq DESC"
    elif run is not None:
        # Its events not yet numbered (seq below zero), the newest the lowest: ascending.
        parts.append("seq < 0")
        if run.before is not None:
            parts.append(f"seq > {arg(run.before)}::bigint")
        if run.through is not None:
            parts.append(f"seq <= {arg(run.through)}::bigint")
        order = "seq"
    else:
        if query.before is not None:
            at, event_id = (arg(value) for value in moment_of(query.before))
            parts.append(f'(created_at, id COLLATE "C") < ({at}::bigint, {event_id}::text)')
        if query.through is not None:
            at, event_id = (arg(value) for value in moment_of(query.through))
            parts.append(f'(created_at, id COLLATE "C") >= ({at}::bigint, {event_id}::text)')
        order = 'created_at DESC, id COLLATE "C" DESC'
    where = " WHERE " + " AND ".join(parts) if parts else ""
    limit = arg(query.limit)
    sql = f"SELECT {columns} FROM events{where} ORDER BY {order} LIMIT {limit}"
    return sql, args
