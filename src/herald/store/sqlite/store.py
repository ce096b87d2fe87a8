"""The SQLite store: every operation a function of the one connection, run by the worker."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import replace

from herald.errors import Conflict
from herald.feed import JournalEntry, LoopGuardTrip
from herald.loop_guard import GuardedSend, LoopLimits
from herald.models import (
    EVERY_EVENT,
    Agent,
    Attempt,
    Drained,
    Event,
    EventMatch,
    NewEvent,
    Published,
    Reply,
    StartPosition,
)
from herald.store.base import DEFAULT_SCAN, Store
from herald.store.journal import one_agent, record
from herald.store.rules import (
    ACK,
    DELIVERED,
    LEASED,
    NO_SEQ_LIMIT,
    first_unhanded,
    looked_through,
    missing,
    polled,
    push_holders,
)
from herald.store.sqlite import loop_guards
from herald.store.sqlite.append import APPENDS, append
from herald.store.sqlite.attempts import (
    AttemptRun,
    Burials,
    RunIds,
    acknowledge,
    attempt_rows,
    claimable,
    insert_attempt_rows,
    lease,
    mark_pushed,
    matching_seqs,
    newest_seq,
    start_position,
    write_attempts,
    write_runs,
)
from herald.store.sqlite.counts import StatusChanges, changes_of
from herald.store.sqlite.endpoints import SCHEDULE_AGAIN_FROM, EndpointStore
from herald.store.sqlite.event_types import EventTypeStore
from herald.store.sqlite.journal import JournalStore, write
from herald.store.sqlite.overview import OverviewStore
from herald.store.sqlite.publisher_keys import PublisherKeyStore
from herald.store.sqlite.push_windows import PushWindowStore
from herald.store.sqlite.rows import (
    AGENT_COLUMNS,
    EVENT_COLUMNS,
    FINISHED,
    OPEN,
    UNEXPIRED,
    Operation,
    T,
    as_json,
    chunks,
    delivered,
    event,
    insert_sql,
    match_sql,
    records,
    select_list,
)
from herald.store.sqlite.schedules import ScheduleStore
from herald.store.sqlite.sessions import SessionStore
from herald.store.sqlite.subscriptions import (
    SubscriptionStore,
    mark_gaps_of_expiry,
    mark_gaps_of_pruning,
)
from herald.store.sqlite.topics import TopicStore
from herald.store.sqlite.worker import Worker
from herald.store.tables import AGENTS, ATTEMPTS, EVENTS, REPLIES
from herald.times import Clock
from herald.urls import synchronous_mode

INSERT_AGENT = insert_sql(AGENTS)
INSERT_REPLY = insert_sql(REPLIES)
REPLY_COLUMNS = select_list(REPLIES)
# ?1 keys' hashes (a JSON array), ?2 now: those that are an agent's key, or its previous one in
# its grace.
WORKING_KEY_HASHES = """
SELECT key_hash FROM agents WHERE key_hash IN (SELECT value FROM json_each(?1))
UNION
SELECT previous_key_hash FROM agents
WHERE previous_key_hash IN (SELECT value FROM json_each(?1)) AND previous_until > ?2
"""
ATTEMPT_COLUMNS = select_list(ATTEMPTS)
# Runs that no event names any more go once every event they name is gone: an event pruned
# finished before the cut, so a run left behind it is older. One still naming a live event stays.
PRUNE_RUNS = """
DELETE FROM attempt_runs WHERE at < ? AND NOT EXISTS (
    SELECT 1 FROM json_each(attempt_runs.event_ids) AS j JOIN events e ON e.id = j.value
)
"""
# An event's attempts: its own rows, and the runs it names (migration 0031), in time order; at
# one time in the order written (a run placed after the attempts row it was written after).
HISTORY = f"""
SELECT {ATTEMPT_COLUMNS} FROM (
    SELECT {ATTEMPT_COLUMNS}, id AS place, 0 AS source, id FROM attempts WHERE event_id = :event
    UNION ALL
    SELECT {select_list(ATTEMPTS, "r").replace("r.event_id", ":event AS event_id")},
        r.after, 1, r.id
    FROM events e, json_each('[' || e.attempt_runs || ']') AS j
    JOIN attempt_runs r ON r.id = j.value
    WHERE e.id = :event
) ORDER BY at, place, source, id
"""
COUNT_HANDED_OUT = (
    f"UPDATE events SET handed_out = handed_out + 1 WHERE agent_id = ? AND {OPEN}"
    " AND id IN ({marks})"
)
"""Events handed out once more, those still open: the agent, then each id (``marks`` its
placeholders)."""


class SQLiteStore(
    EndpointStore,
    SubscriptionStore,
    SessionStore,
    EventTypeStore,
    TopicStore,
    OverviewStore,
    PublisherKeyStore,
    JournalStore,
    ScheduleStore,
    PushWindowStore,
    Store,
):
    """Store on a SQLite file. ``synchronous`` is SQLite's pragma: FULL (default) fsyncs each
    commit, NORMAL survives a crashed process but not a power cut."""

    shared = False  # one process serves it (``herald serve`` holds its lock)

    def __init__(self, path: str, clock: Clock = time.time, synchronous: str = "FULL") -> None:
        super().__init__(clock)
        self.path = path
        self.synchronous = synchronous_mode(synchronous)
        self._worker = Worker(self.path, self.synchronous, self._journal_committed)

    async def open(self) -> None:
        await self._worker.start()

    async def close(self) -> None:
        await self._worker.stop()

    async def _run(self, operation: Operation[T]) -> T:
        return await self._worker.run(operation)

    # Agents and settings

    async def create_agent(self, agent: Agent) -> None:
        def insert(conn: sqlite3.Connection) -> None:
            try:
                conn.execute(INSERT_AGENT, AGENTS.values(agent))
            except sqlite3.IntegrityError as exc:
                raise Conflict(f"the handle {agent.handle!r} is taken; choose another") from exc

        await self._run(insert)

    async def get_agent(self, agent_id: str) -> Agent | None:
        return await self._one_agent("id = ?", agent_id)

    async def agent_by_handle(self, handle: str) -> Agent | None:
        return await self._one_agent("handle = ?", handle)

    async def agent_by_key_hash(self, key_hash: str) -> Agent | None:
        # The current key, or the previous one while its grace lasts.
        return await self._one_agent(
            "key_hash = ?1 OR (previous_key_hash = ?1 AND previous_until > ?2)",
            key_hash,
            self.now(),
        )

    async def working_key_hashes(self, key_hashes: Sequence[str]) -> set[str]:
        params = (json.dumps(list(key_hashes)), self.now())

        def select(conn: sqlite3.Connection) -> set[str]:
            rows = conn.execute(WORKING_KEY_HASHES, params)
            return {row[0] for row in rows}

        result: set[str] = await self._run(select)
        return result

    async def _one_agent(self, where: str, *values: object) -> Agent | None:
        def select(conn: sqlite3.Connection) -> Agent | None:
            row = conn.execute(
                f"SELECT {AGENT_COLUMNS} FROM agents WHERE {where}", values
            ).fetchone()
            return AGENTS.record(row) if row else None

        return await self._run(select)

    async def rotate_agent_key(
        self, agent_id: str, key_hash: str, previous_until: int | None
    ) -> bool:
        def update(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute(
                "UPDATE agents SET key_hash = ?2, previous_until = ?3,"
                " previous_key_hash = CASE WHEN ?3 IS NULL THEN NULL ELSE key_hash END"
                " WHERE id = ?1",
                (agent_id, key_hash, previous_until),
            )
            return cursor.rowcount > 0

        return await self._run(update)

    async def list_agents(self) -> list[Agent]:
        def select(conn: sqlite3.Connection) -> list[Agent]:
            rows = conn.execute(f"SELECT {AGENT_COLUMNS} FROM agents ORDER BY handle")
            return records(AGENTS, rows)

        return await self._run(select)

    async def delete_agent(self, agent_id: str) -> bool:
        def delete(conn: sqlite3.Connection) -> bool:
            return conn.execute("DELETE FROM agents WHERE id = ?", (agent_id,)).rowcount > 0

        return await self._run(delete)

    async def set_agent_delivery(self, agent_id: str, delivery_json: str) -> bool:
        def update(conn: sqlite3.Connection) -> bool:
            return (
                conn.execute(
                    "UPDATE agents SET delivery = ? WHERE id = ?", (delivery_json, agent_id)
                ).rowcount
                > 0
            )

        return await self._run(update)

    async def set_agent_preferences(self, agent_id: str, preferences_json: str) -> bool:
        def update(conn: sqlite3.Connection) -> bool:
            changed = conn.execute(
                "UPDATE agents SET preferences = ? WHERE id = ?", (preferences_json, agent_id)
            )
            # A type no longer muted: its events are scheduled for webhooks from the first.
            conn.execute(SCHEDULE_AGAIN_FROM, {"seq": 1, "agent": agent_id})
            return changed.rowcount > 0

        return await self._run(update)

    async def get_setting(self, name: str) -> str | None:
        def select(conn: sqlite3.Connection) -> str | None:
            row = conn.execute("SELECT value FROM settings WHERE name = ?", (name,)).fetchone()
            return row[0] if row else None

        return await self._run(select)

    async def set_setting_if_absent(self, name: str, value: str) -> str:
        def upsert(conn: sqlite3.Connection) -> str:
            conn.execute(
                "INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
                (name, value),
            )
            return str(
                conn.execute("SELECT value FROM settings WHERE name = ?", (name,)).fetchone()[0]
            )

        return await self._run(upsert)

    async def set_setting(self, name: str, value: str) -> None:
        def upsert(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO settings (name, value) VALUES (?, ?)"
                " ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                (name, value),
            )

        await self._run(upsert)

    # Events

    async def append(self, events: Sequence[NewEvent]) -> list[Published]:
        return await self._worker.run_joinable(APPENDS, (events, self.now()), self._appended)

    def _appended(self, published: list[Published]) -> None:
        created = [p.event for p in published if p.created]
        if created:
            self.on_appended(created)

    async def get_event(self, event_id: str) -> Event | None:
        def select(conn: sqlite3.Connection) -> Event | None:
            row = conn.execute(
                f"SELECT {EVENT_COLUMNS} FROM events WHERE id = ?", (event_id,)
            ).fetchone()
            return event(row) if row else None

        return await self._run(select)

    async def read_open(self, agent_id: str, after_seq: int, limit: int) -> list[Event]:
        now = self.now()
        params = {"agent": agent_id, "after": after_seq, "limit": limit, "now": now}
        sql = (
            f"SELECT {EVENT_COLUMNS}, handed_out FROM events WHERE agent_id = :agent AND {OPEN}"
            f" AND seq > :after AND {UNEXPIRED} ORDER BY seq LIMIT :limit"
        )

        def select(conn: sqlite3.Connection) -> list[Event]:
            burials = Burials(self.max_deliveries, RunIds(conn))
            while True:  # each look that finds only the dying buries them all: it ends
                rows = conn.execute(sql, params)
                read = EVENTS.reader([column[0] for column in rows.description])
                found = rows.fetchall()
                spared = burials.spare(conn, found, read, now)
                if spared or not found:
                    if burials.dead:
                        write_runs(conn, burials.runs(None), now, "dead", agent_id)
                    return [read(row) for row in spared]

        return await self._run(select)

    async def claim(
        self,
        agent_id: str,
        consumer: str,
        limit: int,
        lease_ms: int,
        mechanism: str,
        *,
        ack_up_to: int | None = None,
        match: EventMatch = EVERY_EVENT,
        after: int | None = None,
    ) -> list[Event]:
        now = self.now()
        acknowledged: list[tuple[str, int]] = []

        def leased(conn: sqlite3.Connection) -> list[Event]:
            run_ids = RunIds(conn)
            ack_run, lease_run = run_ids.take(), run_ids.take()
            if ack_up_to is not None:
                acknowledged[:] = acknowledge(
                    conn, agent_id, [], ack_up_to, consumer, now, False, match, ack_run
                )
            burials = Burials(self.max_deliveries, run_ids)
            events = claimable(
                conn, agent_id, consumer, limit, now, ack_up_to, match, after, burials=burials
            )
            lease(conn, agent_id, events, consumer, now + lease_ms, ack_up_to, lease_run)
            acked = [event_id for event_id, _ in acknowledged]
            runs = [
                AttemptRun(ACK, DELIVERED, consumer, acked, run=ack_run),
                *burials.runs(consumer),
                AttemptRun(mechanism, LEASED, consumer, [e.id for e in events], run=lease_run),
            ]
            write_runs(conn, runs, now, "claim", agent_id)
            return events

        events = await self._run(leased)
        if acknowledged:
            self.on_acknowledged([created_at for _, created_at in acknowledged])
        return events

    async def poll(
        self,
        agent_id: str,
        consumer: str,
        limit: int,
        lease_ms: int,
        *,
        cursor: int,
        match: EventMatch,
        scan: int,
    ) -> Drained:
        now = self.now()
        acknowledged: list[tuple[str, int]] = []

        def leased(conn: sqlite3.Connection) -> Drained:
            run_ids = RunIds(conn)
            ack_run, lease_run = run_ids.take(), run_ids.take()
            acknowledged[:] = acknowledge(
                conn, agent_id, [], cursor, consumer, now, False, match, ack_run
            )
            newest = newest_seq(conn, agent_id)
            through = looked_through(cursor, scan, newest)
            burials = Burials(self.max_deliveries, run_ids)
            events = claimable(
                conn, agent_id, consumer, limit, now, cursor, match, cursor, through, burials
            )
            lease(conn, agent_id, events, consumer, now + lease_ms, cursor, lease_run)
            unhanded = None
            if through < newest and len(events) < limit:
                seqs = matching_seqs(conn, agent_id, cursor, through, match, now, len(events) + 1)
                unhanded = first_unhanded(seqs, events)
            acked = [event_id for event_id, _ in acknowledged]
            runs = [
                AttemptRun(ACK, DELIVERED, consumer, acked, run=ack_run),
                *burials.runs(consumer),
                AttemptRun("poll", LEASED, consumer, [e.id for e in events], run=lease_run),
            ]
            write_runs(conn, runs, now, "claim", agent_id)
            return polled(cursor, events, limit, through, newest, unhanded)

        drained = await self._run(leased)
        if acknowledged:
            self.on_acknowledged([created_at for _, created_at in acknowledged])
        return drained

    async def take(self, agent_id: str, limit: int, mechanism: str, session: str) -> list[Event]:
        now = self.now()

        def deliver(conn: sqlite3.Connection) -> list[Event]:
            events = claimable(conn, agent_id, session, limit, now)
            ids = [event.id for event in events]
            conn.execute(
                "UPDATE events SET status = 'delivered', is_open = 0, status_at = ?,"
                " lease_owner = NULL, lease_until = NULL"
                " WHERE id IN (SELECT value FROM json_each(?))",
                (now, as_json(ids)),
            )
            changes_of([(e.agent_id, e.status, 1) for e in events], "delivered").apply(conn)
            run = AttemptRun(mechanism, DELIVERED, session, ids)
            write_runs(conn, [run], now, "take", agent_id)
            return [delivered(event, now) for event in events]

        return await self._run(deliver)

    async def ack(
        self,
        agent_id: str,
        *,
        ids: Sequence[str] = (),
        up_to_seq: int | None = None,
        consumer: str | None = None,
        unheld: bool = False,
        match: EventMatch = EVERY_EVENT,
    ) -> int:
        now = self.now()
        ids = list(ids)

        def finish(conn: sqlite3.Connection) -> list[tuple[str, int]]:
            run = RunIds(conn).take()
            acked = acknowledge(conn, agent_id, ids, up_to_seq, consumer, now, unheld, match, run)
            done = [event_id for event_id, _ in acked]
            ack_run = AttemptRun(ACK, DELIVERED, consumer, done, run=run)
            write_runs(conn, [ack_run], now, "ack", agent_id)
            return acked

        acknowledged = await self._run(finish)
        if acknowledged:
            self.on_acknowledged([created_at for _, created_at in acknowledged])
        return len(acknowledged)

    async def start_position(
        self,
        agent_id: str,
        match: EventMatch,
        not_before_ms: int | None = None,
        *,
        scan: int = DEFAULT_SCAN,
    ) -> StartPosition:
        now = self.now()
        return await self._run(
            lambda conn: start_position(conn, agent_id, match, not_before_ms, now, scan)
        )

    async def mark_sent(self, agent_id: str, ids: Sequence[str], *, durable: bool = True) -> int:
        now = self.now()
        ids = list(ids)

        def mark(conn: sqlite3.Connection) -> int:
            changed = 0
            for chunk in chunks(ids, 500):
                marks = ", ".join("?" * len(chunk))
                conn.execute(COUNT_HANDED_OUT.format(marks=marks), [agent_id, *chunk])
                changed += conn.execute(
                    "UPDATE events SET status = 'sent', status_at = ?"
                    f" WHERE agent_id = ? AND status = 'pending' AND id IN ({marks})",
                    [now, agent_id, *chunk],
                ).rowcount
            changes_of([(agent_id, "pending", changed)], "sent").apply(conn)
            return changed

        return await self._worker.run(mark, durable=durable)

    async def count_handed_out(self, agent_id: str, ids: Sequence[str]) -> None:
        def count(conn: sqlite3.Connection) -> None:
            for chunk in chunks(list(ids), 500):
                marks = ", ".join("?" * len(chunk))
                conn.execute(COUNT_HANDED_OUT.format(marks=marks), [agent_id, *chunk])

        await self._worker.run(count, durable=False)

    async def count_unread(self, agent_id: str, before_ms: int) -> int:
        params = {"agent": agent_id, "before": before_ms, "now": self.now()}

        def count(conn: sqlite3.Connection) -> int:
            return int(
                conn.execute(
                    f"SELECT count(*) FROM events WHERE agent_id = :agent AND {OPEN}"
                    f" AND status_at <= :before AND {UNEXPIRED}",
                    params,
                ).fetchone()[0]
            )

        return await self._run(count)

    async def inbox_marks(self, agent_ids: Sequence[str]) -> dict[str, tuple[int, int]]:
        params = {"agents": as_json(list(agent_ids)), "now": self.now()}

        def marks(conn: sqlite3.Connection) -> dict[str, tuple[int, int]]:
            rows = conn.execute(
                "SELECT agent_id, count(*), sum(seq) FROM events"
                " WHERE agent_id IN (SELECT value FROM json_each(:agents))"
                f" AND {OPEN} AND {UNEXPIRED} GROUP BY agent_id",
                params,
            ).fetchall()
            return {row[0]: (row[1], row[2]) for row in rows}

        result: dict[str, tuple[int, int]] = await self._run(marks)
        return result

    async def history(self) -> str:
        def select(conn: sqlite3.Connection) -> str:
            return str(conn.execute("SELECT id FROM herald_history").fetchone()[0])

        return await self._run(select)

    async def missing_after(
        self,
        agent_id: str,
        after_seq: int,
        through_seq: int | None = None,
        match: EventMatch = EVERY_EVENT,
    ) -> int:
        matching, params = match_sql(match)
        params |= {"agent": agent_id, "after": after_seq, "through": through_seq, "now": self.now()}

        def count(conn: sqlite3.Connection) -> int:
            row = conn.execute(
                "SELECT min(a.last_seq, coalesce(:through, a.last_seq)) AS last_seq,"
                " count(e.id) AS stored, coalesce(sum((e.status = 'expired'"
                f" OR (e.{OPEN} AND e.expires_at <= :now)){matching}), 0) AS expired"
                " FROM agents a LEFT JOIN events e ON e.agent_id = a.id AND e.seq > :after"
                # A bound the index reads (``:through IS NULL OR ...`` would read to the end).
                f" AND e.seq <= coalesce(:through, {NO_SEQ_LIMIT})"
                " WHERE a.id = :agent GROUP BY a.id",
                params,
            ).fetchone()
            return (
                0
                if row is None
                else missing(row["last_seq"], after_seq, row["stored"], row["expired"])
            )

        return await self._run(count)

    async def append_message(self, event: NewEvent, guard: GuardedSend) -> Published:
        now = self.now()

        def insert(conn: sqlite3.Connection) -> Published:
            loop_guards.check(conn, guard, now)
            return append(conn, [event], now)[0]

        return await self._run(insert)

    async def record_loop_guard(self, trip: LoopGuardTrip) -> None:
        row = record(self.now(), "loop_guard", trip.agent_id, JournalEntry(loop_guards=(trip,)))

        def insert(conn: sqlite3.Connection) -> None:
            write(conn, row)

        await self._run(insert)

    async def loop_limits(self, agent_id: str, defaults: LoopLimits) -> LoopLimits:
        return await self._run(lambda conn: loop_guards.limits_of(conn, agent_id, defaults))

    async def set_loop_limits(
        self, agent_id: str, exchanges: int | None, window_s: int | None, per_minute: int | None
    ) -> None:
        await self._run(
            lambda conn: conn.execute(
                loop_guards.SET_LIMITS, (agent_id, exchanges, window_s, per_minute)
            )
        )

    async def add_reply(
        self, reply: Reply, routed: NewEvent | None, guard: GuardedSend | None = None
    ) -> tuple[Reply, Published | None]:
        now = self.now()

        def insert(conn: sqlite3.Connection) -> tuple[Reply, Published | None]:
            if guard is not None:
                loop_guards.check(conn, guard, now)
            published = append(conn, [routed], now)[0] if routed is not None else None
            stored = replace(reply, routed_event_id=published.event.id if published else None)
            conn.execute(INSERT_REPLY, REPLIES.values(stored))
            return stored, published

        return await self._run(insert)

    async def replies(self, event_id: str) -> list[Reply]:
        def select(conn: sqlite3.Connection) -> list[Reply]:
            rows = conn.execute(
                f"SELECT {REPLY_COLUMNS} FROM replies WHERE event_id = ? ORDER BY created_at, id",
                (event_id,),
            )
            return records(REPLIES, rows)

        return await self._run(select)

    async def record_attempts(self, attempts: Sequence[Attempt], *, durable: bool = True) -> None:
        now = self.now()
        await self._worker.run(
            lambda conn: write_attempts(conn, attempts, now, "attempts", None), durable=durable
        )

    async def record_pushes(self, pushes: Sequence[tuple[str, Attempt]]) -> None:
        # Streams push while the store writes their publishes: what can be made before the
        # writer's thread takes the operation is made here, so that it holds that thread (and
        # the publishes queued behind it) for its statements alone.
        now = self.now()
        held = push_holders(pushes)
        pushed = as_json([[event, owner, holder] for (event, owner), holder in held.items()])
        agent = one_agent(agent_id for agent_id, _ in pushes)
        attempts = attempt_rows([attempt for _, attempt in pushes], now, "pushes", agent)

        def record(conn: sqlite3.Connection) -> None:
            mark_pushed(conn, pushed, now)
            insert_attempt_rows(conn, attempts)

        await self._run(record)

    async def attempts(self, event_id: str) -> list[Attempt]:
        def select(conn: sqlite3.Connection) -> list[Attempt]:
            return records(ATTEMPTS, conn.execute(HISTORY, {"event": event_id}))

        return await self._run(select)

    async def expire(self) -> int:
        now = self.now()

        def mark(conn: sqlite3.Connection) -> int:
            conn.execute("DELETE FROM sessions WHERE expires_at <= ?", (now,))
            conn.execute(
                "DELETE FROM endpoints WHERE kind = 'subscription' AND expires_at <= ?", (now,)
            )
            mark_gaps_of_expiry(conn, now)
            overdue = f"{OPEN} AND expires_at IS NOT NULL AND expires_at <= :now"
            counted = conn.execute(
                f"SELECT agent_id, status, count(*) FROM events WHERE {overdue}"
                " GROUP BY agent_id, status",
                {"now": now},
            )
            changes = changes_of(counted, "expired")
            rows = conn.execute(
                "UPDATE events SET status = 'expired', is_open = 0, status_at = :now,"
                f" lease_owner = NULL, lease_until = NULL WHERE {OPEN} AND expires_at IS NOT NULL"
                " AND expires_at <= :now RETURNING id, agent_id",
                {"now": now},
            ).fetchall()
            changes.apply(conn)
            entry = JournalEntry(expired=tuple(sorted(row[0] for row in rows)))
            write(conn, record(now, "expire", one_agent(row[1] for row in rows), entry))
            return len(rows)

        return await self._run(mark)

    async def prune(self, finished_before_ms: int) -> int:
        now = self.now()

        def delete(conn: sqlite3.Connection) -> int:
            mark_gaps_of_pruning(conn, now, finished_before_ms)
            finished = f"{FINISHED} AND status_at < ?"
            changes = StatusChanges()
            for agent_id, status, count in conn.execute(
                f"SELECT agent_id, status, count(*) FROM events WHERE {finished}"
                " GROUP BY agent_id, status",
                (finished_before_ms,),
            ):
                changes.deleted(agent_id, status, count)
            deleted: int = conn.execute(
                f"DELETE FROM events WHERE {finished}", (finished_before_ms,)
            ).rowcount
            changes.apply(conn)
            conn.execute(PRUNE_RUNS, (finished_before_ms,))
            return deleted

        return await self._run(delete)
