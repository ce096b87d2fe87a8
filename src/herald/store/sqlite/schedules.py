"""Schedules on SQLite: events stored for later with placeholder seqs, made pending when due,
and cancelled (``herald.store.schedules`` says how the seqs go)."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from herald.errors import Conflict
from herald.feed import JournalEntry, PublishedRange
from herald.loop_guard import GuardedSend
from herald.models import Event, EventStatus, NewEvent, Published
from herald.store.appends import dedupe_keys, plan_append, unknown_addressee
from herald.store.journal import one_agent, record
from herald.store.schedules import (
    cancel_attempt,
    first_placeholders,
    going_down,
    why_not_cancellable,
)
from herald.store.sqlite import loop_guards
from herald.store.sqlite.append import RESERVE_SEQS, agent_ids, stored_keys
from herald.store.sqlite.attempts import write_attempts
from herald.store.sqlite.counts import StatusChanges
from herald.store.sqlite.journal import write
from herald.store.sqlite.push_windows import hold
from herald.store.sqlite.rows import EVENT_COLUMNS, Operation, as_json, event, insert_rows
from herald.store.tables import EVENTS

LOWEST_SEQ = "SELECT min(seq) FROM events WHERE agent_id = ? AND seq < 0"
CLOSE_SCHEDULED = "UPDATE events SET is_open = 0 WHERE id IN (SELECT value FROM json_each(?))"
DUE = """
SELECT id, agent_id, deliver_at FROM events INDEXED BY events_due
WHERE status = 'scheduled' AND deliver_at <= ?
ORDER BY deliver_at, created_at, seq DESC LIMIT ?
"""
NEXT_DUE = "SELECT min(deliver_at) FROM events INDEXED BY events_due WHERE status = 'scheduled'"
RELEASE = (
    "UPDATE events SET seq = ?, status = 'pending', is_open = 1, created_at = ?, status_at = ?"
    " WHERE id = ?"
)
RELEASED = f"""
SELECT {EVENT_COLUMNS} FROM events WHERE id IN (SELECT value FROM json_each(?))
ORDER BY agent_id, seq
"""
CANCELLABLE = """
SELECT e.status, e.agent_id, e.handed_out, e.lease_owner IS NOT NULL,
    e.attempt_runs IS NOT NULL OR EXISTS (SELECT 1 FROM attempts a WHERE a.event_id = e.id)
        OR EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id)
FROM events e WHERE e.id = ?
"""
CANCEL = f"""
UPDATE events SET status = 'cancelled', is_open = 0, status_at = ?, lease_owner = NULL,
    lease_until = NULL
WHERE id = ? RETURNING {EVENT_COLUMNS}
"""


class ScheduleStore:
    """The schedules of ``SQLiteStore``."""

    _run: Callable[[Operation[Any]], Awaitable[Any]]
    now: Callable[[], int]

    async def schedule(
        self, events: Sequence[NewEvent], guard: GuardedSend | None = None
    ) -> list[Published]:
        now = self.now()

        def insert(conn: sqlite3.Connection) -> list[Published]:
            if guard is not None:
                loop_guards.check(conn, guard, now)
            agents = agent_ids(conn, {new.to for new in events})
            if (error := unknown_addressee(events, agents)) is not None:
                raise error
            keys = {key for key in dedupe_keys(events, agents) if key is not None}
            earlier = stored_keys(conn, keys) if keys else {}
            timed = events
            if any(new.hold is not None for new in events):  # held as of when each is due
                timed = hold(conn, events, agents, [new.deliver_at or now for new in events])
            plan = plan_append(timed, agents, earlier)
            added = plan.added
            lowest = {a: conn.execute(LOWEST_SEQ, (a,)).fetchone()[0] or 0 for a in added}
            first = first_placeholders(lowest, added)
            stored = going_down(plan.numbered(timed, first, [now] * len(events)), first, added)
            if stored:
                insert_rows(conn, EVENTS, [EVENTS.values(e) for e in stored])
                conn.execute(CLOSE_SCHEDULED, (as_json([e.id for e in stored]),))
            return plan.answers(stored, earlier)

        result: list[Published] = await self._run(insert)
        return result

    async def release_due(self, limit: int) -> list[Event]:
        now = self.now()

        def release(conn: sqlite3.Connection) -> list[Event]:
            due: dict[str, list[tuple[str, int]]] = {}
            for event_id, agent_id, at in conn.execute(DUE, (now, limit)):
                due.setdefault(agent_id, []).append((event_id, at))
            if not due:
                return []
            updates = []
            ranges = []
            for agent_id, of_agent in sorted(due.items()):
                params = {"n": len(of_agent), "now": of_agent[0][1], "agent": agent_id}
                (last,) = conn.execute(RESERVE_SEQS, params).fetchone()
                first = last - len(of_agent) + 1
                updates += [(first + n, at, at, i) for n, (i, at) in enumerate(of_agent)]
                ranges.append(PublishedRange(agent_id, first, last))
            conn.executemany(RELEASE, updates)
            entry = JournalEntry(published=tuple(ranges))
            write(conn, record(now, "append", one_agent(due), entry))
            ids = as_json([update[3] for update in updates])
            return [event(row) for row in conn.execute(RELEASED, (ids,))]

        result: list[Event] = await self._run(release)
        return result

    async def next_due(self) -> int | None:
        def select(conn: sqlite3.Connection) -> int | None:
            found: int | None = conn.execute(NEXT_DUE).fetchone()[0]
            return found

        result: int | None = await self._run(select)
        return result

    async def cancel(self, event_id: str) -> Event | None:
        now = self.now()

        def cancel(conn: sqlite3.Connection) -> Event | None:
            found = conn.execute(CANCELLABLE, (event_id,)).fetchone()
            if found is None:
                return None
            status, agent_id, handed_out, leased, tried = found
            reason = why_not_cancellable(status, handed_out, bool(leased), bool(tried))
            if reason is not None:
                raise Conflict(f"event {event_id!r} cannot be cancelled: {reason}")
            row = conn.execute(CANCEL, (now, event_id)).fetchone()
            if status == EventStatus.PENDING.value:
                changes = StatusChanges()
                changes.changed(agent_id, status, EventStatus.CANCELLED.value)
                changes.apply(conn)
            write_attempts(conn, [cancel_attempt(event_id, now, status)], now, "cancel", agent_id)
            return event(row)

        result: Event | None = await self._run(cancel)
        return result
