"""Schedules on PostgreSQL: events stored for later with placeholder seqs, made pending when due
by whichever process finds them first, and cancelled (``herald.store.schedules`` says how the
seqs go).

Making events pending numbers them as a publish does, so it takes their agents' publish locks
first, as a publish does (``append.py``): only then does its transaction write (and take its
id), so that the journal's order stays each agent's seq order. Other processes hear of the
events as of a publish (``herald_events``), and every process looking for due events at once
releases each one once: they take turns on the publish locks, and read the events again after."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from herald.errors import Conflict
from herald.feed import JournalEntry, PublishedRange
from herald.loop_guard import GuardedSend
from herald.models import Event, NewEvent, Published
from herald.store.appends import DedupeKey, dedupe_keys, plan_append, unknown_addressee
from herald.store.journal import one_agent, record
from herald.store.postgres import loop_guards, queries
from herald.store.postgres.append import JSON_FIELDS, lock_agents, publish_lock
from herald.store.postgres.attempts import write_attempts
from herald.store.postgres.journal import write
from herald.store.postgres.push_windows import hold
from herald.store.postgres.rows import Connection, Runner, arrays, event, unnest_insert
from herald.store.schedules import (
    cancel_attempt,
    first_placeholders,
    going_down,
    why_not_cancellable,
)
from herald.store.tables import EVENTS

LOWEST_SEQS = """
SELECT agent_id, min(seq) AS lowest FROM events
WHERE agent_id = ANY($1::text[]) AND seq < 0 GROUP BY agent_id
"""
INSERT_SCHEDULED = f"""
{unnest_insert(EVENTS)}
RETURNING id, {", ".join(f"{name}::text AS {name}" for name, _ in JSON_FIELDS)}
"""
# $1 now, $2 the most to release: the agents of the events due first (no row locked yet).
DUE_AGENTS = """
SELECT a.id, a.handle FROM agents a WHERE a.id IN (
    SELECT agent_id FROM events WHERE status = 'scheduled' AND deliver_at <= $1
    ORDER BY deliver_at LIMIT $2
)
"""
# ...and once their publish locks are held, the due events of those agents, locked.
DUE = """
SELECT id, agent_id, deliver_at FROM events
WHERE status = 'scheduled' AND deliver_at <= $1 AND agent_id = ANY($3::text[])
ORDER BY deliver_at, created_at, seq DESC LIMIT $2
FOR UPDATE SKIP LOCKED
"""
# The count trigger counts the events pending as their status changes: only the seqs here.
TAKE_SEQS = """
UPDATE agents SET last_seq = last_seq + batch.added
FROM unnest($1::text[], $2::bigint[]) AS batch (agent, added)
WHERE agents.id = batch.agent
RETURNING agents.id, agents.last_seq
"""
RELEASE = f"""
UPDATE events SET seq = batch.next_seq, status = 'pending', created_at = events.deliver_at,
    status_at = events.deliver_at
FROM unnest($1::text[], $2::bigint[]) AS batch (event_id, next_seq)
WHERE events.id = batch.event_id
RETURNING {", ".join(f"events.{name}" for name in EVENTS.names)}
"""
NEXT_DUE = "SELECT min(deliver_at) FROM events WHERE status = 'scheduled'"
WAKE = "SELECT pg_notify('herald_events', agent) FROM unnest($1::text[]) AS agent"
CANCELLABLE = """
SELECT e.status, e.agent_id, e.handed_out, e.lease_owner IS NOT NULL,
    EXISTS (SELECT FROM attempts a WHERE a.event_id = e.id)
        OR EXISTS (SELECT FROM deliveries d WHERE d.event_id = e.id)
FROM events e WHERE e.id = $1 FOR UPDATE
"""
CANCEL = f"""
UPDATE events SET status = 'cancelled', status_at = $2, lease_owner = NULL, lease_until = NULL
WHERE id = $1 RETURNING {queries.EVENT_COLUMNS}
"""


class ScheduleStore:
    """The schedules of ``PostgresStore``."""

    _run: Runner
    now: Callable[[], int]

    async def schedule(
        self, events: Sequence[NewEvent], guard: GuardedSend | None = None
    ) -> list[Published]:
        now = self.now()

        async def insert(conn: Connection) -> list[Published]:
            if guard is not None:
                await loop_guards.check(conn, guard, now)
            agents = await lock_agents(conn, events)
            if (error := unknown_addressee(events, agents)) is not None:
                raise error
            keys = [key for key in dedupe_keys(events, agents) if key is not None]
            earlier: dict[DedupeKey, Event] = {}
            if keys:
                rows = await conn.fetch(
                    queries.FIND_DUPLICATES, [k[0] for k in keys], [k[1] for k in keys]
                )
                earlier = {(row["agent_id"], row["dedupe_key"]): event(row) for row in rows}
            timed = events
            if any(new.hold is not None for new in events):  # held as of when each is due
                timed = await hold(conn, events, agents, [new.deliver_at or now for new in events])
            plan = plan_append(timed, agents, earlier)
            added = plan.added
            rows = await conn.fetch(LOWEST_SEQS, list(added))
            lowest = {row["agent_id"]: row["lowest"] for row in rows}
            first = first_placeholders(lowest, added)
            stored = going_down(plan.numbered(timed, first, [now] * len(events)), first, added)
            if stored:
                inserted = await conn.fetch(INSERT_SCHEDULED, *arrays(EVENTS, stored))
                normalised = {row["id"]: row for row in inserted}
                stored = [
                    replace(e, **{f: normalised[e.id][name] for name, f in JSON_FIELDS})
                    for e in stored
                ]
            return plan.answers(stored, earlier)

        return await self._run(insert, transaction=True)

    async def release_due(self, limit: int) -> list[Event]:
        now = self.now()

        async def release(conn: Connection) -> list[Event]:
            agents = {row["id"]: row["handle"] for row in await conn.fetch(DUE_AGENTS, now, limit)}
            if not agents:
                return []
            handles = sorted(agents.values())
            keys = sorted({publish_lock(h) for h in handles})
            await conn.fetch(queries.LOCK_AGENTS, handles, keys)
            due: dict[str, list[str]] = {}
            for row in await conn.fetch(DUE, now, limit, list(agents)):
                due.setdefault(row["agent_id"], []).append(row["id"])
            if not due:
                return []
            ordered = sorted(due)
            taken = await conn.fetch(TAKE_SEQS, ordered, [len(due[a]) for a in ordered])
            ids: list[str] = []
            seqs: list[int] = []
            ranges = []
            for row in sorted(taken, key=lambda r: r["id"]):
                of_agent = due[row["id"]]
                first = row["last_seq"] - len(of_agent) + 1
                ids += of_agent
                seqs += range(first, first + len(of_agent))
                ranges.append(PublishedRange(row["id"], first, row["last_seq"]))
            released = [event(row) for row in await conn.fetch(RELEASE, ids, seqs)]
            entry = JournalEntry(published=tuple(ranges))
            await write(conn, record(now, "append", one_agent(ordered), entry))
            await conn.execute(WAKE, ordered)
            return sorted(released, key=lambda e: (e.agent_id, e.seq))

        return await self._run(release, transaction=True)

    async def next_due(self) -> int | None:
        async def select(conn: Connection) -> int | None:
            found: int | None = await conn.fetchval(NEXT_DUE)
            return found

        return await self._run(select)

    async def cancel(self, event_id: str) -> Event | None:
        now = self.now()

        async def cancel(conn: Connection) -> Event | None:
            found = await conn.fetchrow(CANCELLABLE, event_id)
            if found is None:
                return None
            status, agent_id, handed_out, leased, tried = found
            reason = why_not_cancellable(status, handed_out, leased, tried)
            if reason is not None:
                raise Conflict(f"event {event_id!r} cannot be cancelled: {reason}")
            row = await conn.fetchrow(CANCEL, event_id, now)
            attempt = cancel_attempt(event_id, now, status)
            await write_attempts(conn, [attempt], now, "cancel", agent_id)
            return event(row) if row is not None else None

        return await self._run(cancel, transaction=True)
