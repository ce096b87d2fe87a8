"""The shared store: PostgreSQL through an asyncpg connection pool.

Many herald processes may share one database. Each operation runs on a pooled connection, those
that write several rows inside one transaction. Publishers to one agent serialise on the agent's
row lock, which makes its ``seq`` gapless; a unique index keeps the dedupe keys unique. Consumers
claim events with ``FOR UPDATE SKIP LOCKED`` so that two never get the same event.

Appends go through a writer task with group commit, as in the SQLite store: those that arrive
while one is in flight are stored next as one batch in one transaction (one lock per agent, one
commit), and each caller gets its answer only after that commit. An append alone with one event
is one statement: one round trip.

Times are integer milliseconds read from the store's clock, never from the database's ``now()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TypeAlias, TypeVar
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from herald.errors import Conflict, HeraldError, InvalidInput, NotFound, StoreUnavailable
from herald.events import (
    Agent,
    Attempt,
    Event,
    EventStatus,
    NewEvent,
    Published,
    Reply,
    new_id,
)
from herald.store import migrations
from herald.store.base import Clock, Store

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

T = TypeVar("T")
Connection: TypeAlias = "PoolConnectionProxy[asyncpg.Record]"
Operation: TypeAlias = Callable[[Connection], Awaitable[T]]

MIN_CONNECTIONS = 1
MAX_CONNECTIONS = 10
TRANSACTION_TRIES = 3
"""A transaction Postgres chose as a deadlock victim is rolled back, so it is run again."""
MAX_GROUP = 1000
"""The most events that appends waiting together are committed with (unless one has more)."""

_MIGRATION_LOCK = int.from_bytes(b"herald", "big")
"""The ``pg_advisory_xact_lock`` key that lets one process at a time migrate a database."""

_DRIVER_ERRORS = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.InternalClientError,
    OSError,
    TimeoutError,
)
_RETRYABLE = (asyncpg.exceptions.DeadlockDetectedError, asyncpg.exceptions.SerializationError)

_AGENT_COLUMNS = "id, handle, key_hash, created_at, webhook_url, delivery::text"
_EVENT_COLUMNS = (
    "id, agent_id, seq, type, text, data::text, created_at, status, dedupe_key, expires_at,"
    " status_at, sender, reply_to, reply_schema::text"
)
_REPLY_COLUMNS = "id, event_id, agent_id, text, data::text, created_at, routed_event_id"
_OPEN = "status IN ('pending', 'sent')"

_CREATE_MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS herald_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at BIGINT NOT NULL
)
"""

# Append one event in one statement: $1 handle, $2 dedupe_key, then the event's fields. The UPDATE
# locks the agent's row and takes its next seq, unless an event already has the dedupe key. The
# answer is that event or the new one; no row if there is no such agent. The statement's snapshot
# may miss an event with the same key committed while it waited for the lock: the unique index
# then fails the statement, and run again it finds that event.
_APPEND_ONE = f"""
WITH earlier AS (
    SELECT events.* FROM events JOIN agents ON agents.id = events.agent_id
    WHERE agents.handle = $1 AND events.dedupe_key = $2
), advanced AS (
    UPDATE agents SET last_seq = last_seq + 1
    WHERE handle = $1 AND NOT EXISTS (SELECT FROM earlier)
    RETURNING id, last_seq
), inserted AS (
    INSERT INTO events (
        id, agent_id, seq, type, text, data, created_at, status, dedupe_key, expires_at,
        status_at, sender, reply_to, reply_schema
    )
    SELECT $3, id, last_seq, $4, $5, $6::jsonb, $7, 'pending', $2, $8, $7, $9, $10, $11::jsonb
    FROM advanced
    RETURNING *
)
SELECT true AS created, {_EVENT_COLUMNS} FROM inserted
UNION ALL
SELECT false AS created, {_EVENT_COLUMNS} FROM earlier
"""

# Append a batch: lock the addressees (in id order, so that batches to several agents cannot
# deadlock), find the dedupe keys already used, take the next seqs, insert the new events at once.
_LOCK_AGENTS = """
SELECT id, handle FROM agents
WHERE handle = ANY($1::text[])
ORDER BY id
FOR UPDATE
"""
_FIND_DUPLICATES = f"""
SELECT {_EVENT_COLUMNS} FROM events
WHERE dedupe_key IS NOT NULL
  AND (agent_id, dedupe_key) IN (SELECT * FROM unnest($1::text[], $2::text[]))
"""
_ADVANCE_SEQS = """
UPDATE agents SET last_seq = last_seq + batch.added
FROM unnest($1::text[], $2::bigint[]) AS batch (id, added)
WHERE agents.id = batch.id
RETURNING agents.id, agents.last_seq
"""
_INSERT_EVENTS = """
INSERT INTO events (
    id, agent_id, seq, type, text, data, created_at, status, dedupe_key, expires_at, status_at,
    sender, reply_to, reply_schema
)
SELECT
    id, agent_id, seq, type, text, data::jsonb, created_at, 'pending', dedupe_key, expires_at,
    created_at, sender, reply_to, reply_schema::jsonb
FROM unnest(
    $1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::bigint[],
    $8::text[], $9::bigint[], $10::text[], $11::text[], $12::text[]
) AS batch (
    id, agent_id, seq, type, text, data, created_at, dedupe_key, expires_at, sender, reply_to,
    reply_schema
)
RETURNING id, data::text, reply_schema::text
"""

# Claim and take: $1 agent, $2 consumer, $3 now, $4 limit.
_CLAIMABLE = f"""
SELECT id FROM events
WHERE agent_id = $1 AND {_OPEN} AND (expires_at IS NULL OR expires_at > $3)
  AND (lease_owner IS NULL OR lease_owner = $2 OR lease_until <= $3)
ORDER BY seq
LIMIT $4
FOR UPDATE SKIP LOCKED
"""
_LEASE = f"""
WITH claimed AS MATERIALIZED ({_CLAIMABLE})
UPDATE events SET lease_owner = $2, lease_until = $5
WHERE id IN (SELECT id FROM claimed)
RETURNING {_EVENT_COLUMNS}
"""
_DELIVER = f"""
WITH taken AS MATERIALIZED ({_CLAIMABLE})
UPDATE events SET status = 'delivered', status_at = $3, lease_owner = NULL, lease_until = NULL
WHERE id IN (SELECT id FROM taken)
RETURNING {_EVENT_COLUMNS}
"""

# Ack: $1 agent, $2 ids, $3 up_to_seq, $4 consumer, $5 now.
_ACK = f"""
UPDATE events SET status = 'delivered', status_at = $5, lease_owner = NULL, lease_until = NULL
WHERE agent_id = $1 AND {_OPEN}
  AND (
    id = ANY($2::text[])
    OR (
      seq <= $3::bigint
      AND ($4::text IS NULL OR lease_owner IS NULL OR lease_owner = $4 OR lease_until <= $5)
    )
  )
RETURNING id
"""

_INSERT_REPLY = """
INSERT INTO replies (id, event_id, agent_id, text, data, created_at, routed_event_id)
VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7)
RETURNING data::text
"""

_INSERT_ATTEMPTS = """
INSERT INTO attempts (event_id, at, mechanism, outcome, session, error)
SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[])
"""


@dataclass
class _Append:
    """An append waiting for the writer: its events, when they were published, the answer."""

    events: Sequence[NewEvent]
    now: int
    answer: asyncio.Future[list[Published]]


class PostgresStore(Store):
    """Store on a PostgreSQL database named by a ``postgresql://user@host:port/db`` URL."""

    def __init__(self, url: str, clock: Clock = time.time) -> None:
        super().__init__(clock)
        self.url = url
        self._pool: asyncpg.Pool[asyncpg.Record] | None = None
        self._waiting: deque[_Append] = deque()
        self._writer: asyncio.Task[None] | None = None

    async def open(self) -> None:
        if self._pool is not None:
            return
        where = _without_password(self.url)
        try:
            pool = await asyncpg.create_pool(
                self.url,
                min_size=MIN_CONNECTIONS,
                max_size=MAX_CONNECTIONS,
                server_settings={"application_name": "herald"},
                reset=_keep_session,
            )
        except ValueError as exc:  # a malformed URL: asyncpg parses it only now
            raise InvalidInput(f"cannot open PostgreSQL store {where}: {_describe(exc)}") from exc
        except _DRIVER_ERRORS as exc:
            raise StoreUnavailable(
                f"cannot open PostgreSQL store {where}: {_describe(exc)}"
            ) from exc
        try:
            async with pool.acquire() as conn:
                await _migrate(conn)
        except _DRIVER_ERRORS as exc:
            pool.terminate()
            raise StoreUnavailable(
                f"cannot migrate PostgreSQL store {where}: {_describe(exc)}"
            ) from exc
        except BaseException:
            pool.terminate()
            raise
        self._pool = pool

    async def close(self) -> None:
        if self._writer is not None:  # the appends already accepted are committed first
            await asyncio.wait([self._writer])
        pool, self._pool = self._pool, None
        if pool is None:
            return
        try:
            await pool.close()
        except _DRIVER_ERRORS:  # a broken connection needs no goodbye
            pool.terminate()

    async def _run(self, operation: Operation[T], *, transaction: bool = False) -> T:
        """Run ``operation`` on a pooled connection (in a transaction if asked), mapping driver
        errors to StoreUnavailable."""
        pool = self._pool
        if pool is None:
            raise StoreUnavailable("the store is not open: call open() first")
        tries = 0
        while True:
            tries += 1
            try:
                async with pool.acquire() as conn:
                    if not transaction:
                        return await operation(conn)
                    async with conn.transaction():
                        return await operation(conn)
            except HeraldError:
                raise
            except _DRIVER_ERRORS as exc:
                if tries >= TRANSACTION_TRIES or not _retryable(exc, transaction):
                    raise StoreUnavailable(f"PostgreSQL store failed: {_describe(exc)}") from exc

    # Agents and settings

    async def create_agent(self, agent: Agent) -> None:
        async def insert(conn: Connection) -> None:
            try:
                await conn.execute(
                    "INSERT INTO agents (id, handle, key_hash, webhook_url, created_at, delivery)"
                    " VALUES ($1, $2, $3, $4, $5, $6::jsonb)",
                    agent.id,
                    agent.handle,
                    agent.key_hash,
                    agent.webhook_url,
                    agent.created_at,
                    agent.delivery_json,
                )
            except asyncpg.UniqueViolationError as exc:
                raise Conflict(f"the handle {agent.handle!r} is taken; choose another") from exc

        await self._run(insert)

    async def get_agent(self, agent_id: str) -> Agent | None:
        return await self._one_agent("id", agent_id)

    async def agent_by_key_hash(self, key_hash: str) -> Agent | None:
        return await self._one_agent("key_hash", key_hash)

    async def _one_agent(self, column: str, value: str) -> Agent | None:
        async def select(conn: Connection) -> Agent | None:
            row = await conn.fetchrow(
                f"SELECT {_AGENT_COLUMNS} FROM agents WHERE {column} = $1", value
            )
            return Agent(*row) if row is not None else None

        return await self._run(select)

    async def list_agents(self) -> list[Agent]:
        async def select(conn: Connection) -> list[Agent]:
            # Byte order, as SQLite sorts, whatever the database's collation.
            rows = await conn.fetch(
                f'SELECT {_AGENT_COLUMNS} FROM agents ORDER BY handle COLLATE "C"'
            )
            return [Agent(*row) for row in rows]

        return await self._run(select)

    async def delete_agent(self, agent_id: str) -> bool:
        async def delete(conn: Connection) -> bool:
            return _count(await conn.execute("DELETE FROM agents WHERE id = $1", agent_id)) > 0

        return await self._run(delete)

    async def set_agent_delivery(self, agent_id: str, delivery_json: str) -> bool:
        async def update(conn: Connection) -> bool:
            status = await conn.execute(
                "UPDATE agents SET delivery = $2::jsonb WHERE id = $1", agent_id, delivery_json
            )
            return _count(status) > 0

        return await self._run(update)

    async def get_setting(self, name: str) -> str | None:
        async def select(conn: Connection) -> str | None:
            value = await conn.fetchval("SELECT value FROM settings WHERE name = $1", name)
            return str(value) if value is not None else None

        return await self._run(select)

    async def set_setting_if_absent(self, name: str, value: str) -> str:
        async def upsert(conn: Connection) -> str:
            await conn.execute(
                "INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
                name,
                value,
            )
            # A statement of its own: it sees a row another writer committed meanwhile.
            return str(await conn.fetchval("SELECT value FROM settings WHERE name = $1", name))

        return await self._run(upsert)

    # Events

    async def append(self, events: Sequence[NewEvent]) -> list[Published]:
        if self._pool is None:
            raise StoreUnavailable("the store is not open: call open() first")
        if not events:
            return []
        job = _Append(list(events), self.now(), asyncio.get_running_loop().create_future())
        self._waiting.append(job)
        if self._writer is None:
            self._writer = asyncio.create_task(self._write())
        return await job.answer

    async def _write(self) -> None:
        """Commit the waiting appends, a group at a time, until none is left."""
        try:
            while self._waiting:
                group = [self._waiting.popleft()]
                size = len(group[0].events)
                while self._waiting and size + len(self._waiting[0].events) <= MAX_GROUP:
                    size += len(self._waiting[0].events)
                    group.append(self._waiting.popleft())
                await self._commit([job for job in group if not job.answer.done()])
        finally:
            self._writer = None
            while self._waiting:  # left only if the writer was cancelled: fail them, not hang
                self._waiting.popleft().answer.cancel()

    async def _commit(self, group: list[_Append]) -> None:
        """Commit a group of appends as one, or each alone if the database refuses one of them,
        and answer their callers."""
        outcomes: list[list[Published] | Exception] | None = None
        try:
            if len(group) > 1:
                with contextlib.suppress(InvalidInput):  # then each alone, to fail alone
                    outcomes = await self._run(
                        lambda conn: _append_group(conn, group), transaction=True
                    )
            if outcomes is None:
                outcomes = [await self._append_alone(job) for job in group]
        except asyncio.CancelledError:
            for job in group:
                job.answer.cancel()
            raise
        except Exception as exc:  # the group failed as a whole: nothing of it is stored
            outcomes = [exc] * len(group)
        for job, outcome in zip(group, outcomes, strict=True):
            if job.answer.done():  # its caller gave up
                continue
            if isinstance(outcome, Exception):
                job.answer.set_exception(outcome)
            else:
                job.answer.set_result(outcome)

    async def _append_alone(self, job: _Append) -> list[Published] | Exception:
        async def store(conn: Connection) -> list[Published]:
            try:
                return await _append(conn, job.events, job.now)
            except asyncpg.DataError as exc:  # its message may quote the whole batch: not shown
                raise _refused() from exc

        try:  # one event is one statement: no transaction needed
            return await self._run(store, transaction=len(job.events) > 1)
        except Exception as exc:  # for its caller
            return exc

    async def get_event(self, event_id: str) -> Event | None:
        async def select(conn: Connection) -> Event | None:
            row = await conn.fetchrow(
                f"SELECT {_EVENT_COLUMNS} FROM events WHERE id = $1", event_id
            )
            return _event(row) if row is not None else None

        return await self._run(select)

    async def read_open(self, agent_id: str, after_seq: int, limit: int) -> list[Event]:
        now = self.now()

        async def select(conn: Connection) -> list[Event]:
            rows = await conn.fetch(
                f"SELECT {_EVENT_COLUMNS} FROM events WHERE agent_id = $1 AND {_OPEN}"
                " AND seq > $2 AND (expires_at IS NULL OR expires_at > $3) ORDER BY seq LIMIT $4",
                agent_id,
                after_seq,
                now,
                limit,
            )
            return [_event(row) for row in rows]

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
    ) -> list[Event]:
        now = self.now()

        async def lease(conn: Connection) -> list[Event]:
            if ack_up_to is not None:
                await _acknowledge(conn, agent_id, [], ack_up_to, consumer, now)
            rows = await conn.fetch(_LEASE, agent_id, consumer, now, limit, now + lease_ms)
            events = sorted((_event(row) for row in rows), key=lambda e: e.seq)
            await _insert_attempts(
                conn, [Attempt(e.id, now, mechanism, "leased", consumer) for e in events]
            )
            return events

        return await self._run(lease, transaction=True)

    async def take(self, agent_id: str, limit: int, mechanism: str, session: str) -> list[Event]:
        now = self.now()

        async def deliver(conn: Connection) -> list[Event]:
            rows = await conn.fetch(_DELIVER, agent_id, session, now, limit)
            events = sorted((_event(row) for row in rows), key=lambda e: e.seq)
            await _insert_attempts(
                conn, [Attempt(e.id, now, mechanism, "delivered", session) for e in events]
            )
            return events

        return await self._run(deliver, transaction=True)

    async def ack(
        self,
        agent_id: str,
        *,
        ids: Sequence[str] = (),
        up_to_seq: int | None = None,
        consumer: str | None = None,
    ) -> int:
        now = self.now()
        ids = list(ids)

        async def acknowledge(conn: Connection) -> int:
            return await _acknowledge(conn, agent_id, ids, up_to_seq, consumer, now)

        return await self._run(acknowledge, transaction=True)

    async def mark_sent(self, agent_id: str, ids: Sequence[str]) -> int:
        now = self.now()
        ids = list(ids)

        async def mark(conn: Connection) -> int:
            status = await conn.execute(
                "UPDATE events SET status = 'sent', status_at = $3"
                " WHERE agent_id = $1 AND status = 'pending' AND id = ANY($2::text[])",
                agent_id,
                ids,
                now,
            )
            return _count(status)

        return await self._run(mark)

    async def count_overdue(self, agent_id: str, before_ms: int) -> int:
        now = self.now()

        async def count(conn: Connection) -> int:
            value = await conn.fetchval(
                f"SELECT count(*) FROM events WHERE agent_id = $1 AND {_OPEN}"
                " AND status_at <= $2 AND (expires_at IS NULL OR expires_at > $3)",
                agent_id,
                before_ms,
                now,
            )
            return int(value)

        return await self._run(count)

    async def add_reply(
        self, reply: Reply, routed: NewEvent | None
    ) -> tuple[Reply, Published | None]:
        now = self.now()

        async def insert(conn: Connection) -> tuple[Reply, Published | None]:
            try:
                published = (await _append(conn, [routed], now))[0] if routed else None
                stored = replace(reply, routed_event_id=published.event.id if published else None)
                data = await conn.fetchval(
                    _INSERT_REPLY,
                    stored.id,
                    stored.event_id,
                    stored.agent_id,
                    stored.text,
                    stored.data_json,
                    stored.created_at,
                    stored.routed_event_id,
                )
            except asyncpg.DataError as exc:  # its message may quote the reply: not shown
                raise InvalidInput(
                    "a reply holds what PostgreSQL cannot store: a NUL character in its text,"
                    " \\u0000 or NaN in its data, or an unpaired surrogate"
                ) from exc
            return replace(stored, data_json=data), published  # data as JSONB normalised it

        return await self._run(insert, transaction=True)

    async def replies(self, event_id: str) -> list[Reply]:
        async def select(conn: Connection) -> list[Reply]:
            rows = await conn.fetch(
                f"SELECT {_REPLY_COLUMNS} FROM replies WHERE event_id = $1 ORDER BY created_at, id",
                event_id,
            )
            return [Reply(*row) for row in rows]

        return await self._run(select)

    async def record_attempts(self, attempts: Sequence[Attempt]) -> None:
        await self._run(lambda conn: _insert_attempts(conn, attempts))

    async def attempts(self, event_id: str) -> list[Attempt]:
        async def select(conn: Connection) -> list[Attempt]:
            rows = await conn.fetch(
                "SELECT event_id, at, mechanism, outcome, session, error FROM attempts"
                " WHERE event_id = $1 ORDER BY id",
                event_id,
            )
            return [Attempt(*row) for row in rows]

        return await self._run(select)

    async def expire(self) -> int:
        now = self.now()

        async def mark(conn: Connection) -> int:
            status = await conn.execute(
                "UPDATE events SET status = 'expired', status_at = $1, lease_owner = NULL,"
                f" lease_until = NULL WHERE {_OPEN} AND expires_at IS NOT NULL"
                " AND expires_at <= $1",
                now,
            )
            return _count(status)

        return await self._run(mark)

    async def prune(self, finished_before_ms: int) -> int:
        async def delete(conn: Connection) -> int:
            status = await conn.execute(
                "DELETE FROM events WHERE status IN ('delivered', 'expired') AND status_at < $1",
                finished_before_ms,
            )
            return _count(status)

        return await self._run(delete)


async def _keep_session(conn: asyncpg.Connection[asyncpg.Record]) -> None:
    """Nothing to reset on a connection going back to the pool (asyncpg's default resets the
    session, a round trip more per operation): the store changes no setting, takes only
    transaction locks, listens to nothing and keeps no cursor. An open transaction is rolled back
    all the same."""


async def _migrate(conn: Connection) -> None:
    """Apply the pending migrations, one process at a time."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
        await conn.execute(_CREATE_MIGRATIONS_TABLE)
        applied = {row[0] for row in await conn.fetch("SELECT version FROM herald_migrations")}
        for migration in migrations.load("postgres"):
            if migration.version in applied:
                continue
            await conn.execute(migration.sql)  # no arguments: several statements may run at once
            await conn.execute(
                "INSERT INTO herald_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
                migration.version,
                migration.name,
                int(time.time() * 1000),
            )


async def _append_group(
    conn: Connection, group: list[_Append]
) -> list[list[Published] | Exception]:
    """Store the events of several appends as one batch, in order. An append to an unknown agent
    fails alone (nothing of it is stored); if the database refuses an event, all fail."""
    agents = await _lock_agents(conn, [new for job in group for new in job.events])
    unknown = [_unknown_agent(job.events, agents) for job in group]
    admitted = [
        (new, job.now)
        for job, error in zip(group, unknown, strict=True)
        if error is None
        for new in job.events
    ]
    try:
        published = iter(await _insert(conn, agents, admitted))
    except asyncpg.DataError as exc:  # its message may quote the whole batch: not shown
        raise _refused() from exc
    return [
        error if error is not None else [next(published) for _ in job.events]
        for job, error in zip(group, unknown, strict=True)
    ]


async def _append(conn: Connection, events: Sequence[NewEvent], now: int) -> list[Published]:
    """Store a batch of events, in the caller's transaction if it has more than one."""
    if len(events) == 1:
        return [await _append_one(conn, events[0], now)]
    agents = await _lock_agents(conn, events)
    if (error := _unknown_agent(events, agents)) is not None:
        raise error
    return await _insert(conn, agents, [(new, now) for new in events])


async def _lock_agents(conn: Connection, events: Sequence[NewEvent]) -> dict[str, str]:
    """Lock the addressees' rows; returns their ids by handle."""
    handles = list(dict.fromkeys(new.to for new in events))
    return {row["handle"]: row["id"] for row in await conn.fetch(_LOCK_AGENTS, handles)}


def _unknown_agent(events: Sequence[NewEvent], agents: dict[str, str]) -> NotFound | None:
    for new in events:
        if new.to not in agents:
            return _no_agent(new.to)
    return None


def _no_agent(handle: str) -> NotFound:
    return NotFound(f"no agent has the handle {handle!r}; create it with POST /v1/agents")


def _refused() -> InvalidInput:
    return InvalidInput(
        "an event holds what PostgreSQL cannot store: a NUL character in its text or"
        " dedupe_key, \\u0000 or NaN in its data, or an unpaired surrogate"
    )


async def _insert(
    conn: Connection, agents: dict[str, str], timed: Sequence[tuple[NewEvent, int]]
) -> list[Published]:
    """Store events (each with the time it was published) to agents locked by id, in order:
    all but the repeats of a dedupe key, answered with the event that has it."""
    keys = [(agents[new.to], new.dedupe_key) for new, _ in timed if new.dedupe_key is not None]
    earlier: dict[tuple[str, str], Event] = {}
    if keys:
        rows = await conn.fetch(_FIND_DUPLICATES, [k[0] for k in keys], [k[1] for k in keys])
        earlier = {(row["agent_id"], row["dedupe_key"]): _event(row) for row in rows}

    # The events to store: all but repeats of a dedupe key, stored or earlier in this batch.
    fresh: list[tuple[NewEvent, int]] = []
    repeats: dict[int, tuple[str, str]] = {}  # index in the batch: the key it repeats
    seen = set(earlier)
    for index, (new, now) in enumerate(timed):
        if new.dedupe_key is not None:
            key = (agents[new.to], new.dedupe_key)
            if key in seen:
                repeats[index] = key
                continue
            seen.add(key)
        fresh.append((new, now))

    added = Counter(agents[new.to] for new, _ in fresh)
    next_seq: dict[str, int] = {}
    if added:
        rows = await conn.fetch(_ADVANCE_SEQS, list(added), list(added.values()))
        next_seq = {row["id"]: row["last_seq"] - added[row["id"]] + 1 for row in rows}
    stored: list[Event] = []
    for new, now in fresh:
        agent_id = agents[new.to]
        seq, next_seq[agent_id] = next_seq[agent_id], next_seq[agent_id] + 1
        stored.append(
            Event(
                id=new_id("evt_"),
                agent_id=agent_id,
                seq=seq,
                type=new.type,
                text=new.text,
                data_json=new.data_json,
                created_at=now,
                status=EventStatus.PENDING,
                dedupe_key=new.dedupe_key,
                expires_at=now + int(new.ttl_s * 1000) if new.ttl_s is not None else None,
                status_at=now,
                sender=new.sender,
                reply_to=new.reply_to,
                reply_schema_json=new.reply_schema_json,
            )
        )
    if stored:
        rows = await conn.fetch(
            _INSERT_EVENTS,
            [e.id for e in stored],
            [e.agent_id for e in stored],
            [e.seq for e in stored],
            [e.type for e in stored],
            [e.text for e in stored],
            [e.data_json for e in stored],
            [e.created_at for e in stored],
            [e.dedupe_key for e in stored],
            [e.expires_at for e in stored],
            [e.sender for e in stored],
            [e.reply_to for e in stored],
            [e.reply_schema_json for e in stored],
        )
        # The JSON as JSONB normalised it, as it is read later.
        normalised = {row["id"]: (row["data"], row["reply_schema"]) for row in rows}
        stored = [
            replace(e, data_json=normalised[e.id][0], reply_schema_json=normalised[e.id][1])
            for e in stored
        ]

    earlier.update(((e.agent_id, e.dedupe_key), e) for e in stored if e.dedupe_key is not None)
    created = iter(stored)
    return [
        Published(earlier[repeats[index]], created=False)
        if index in repeats
        else Published(next(created), created=True)
        for index in range(len(timed))
    ]


async def _append_one(conn: Connection, new: NewEvent, now: int) -> Published:
    row = await conn.fetchrow(
        _APPEND_ONE,
        new.to,
        new.dedupe_key,
        new_id("evt_"),
        new.type,
        new.text,
        new.data_json,
        now,
        now + int(new.ttl_s * 1000) if new.ttl_s is not None else None,
        new.sender,
        new.reply_to,
        new.reply_schema_json,
    )
    if row is None:
        raise _no_agent(new.to)
    return Published(_event(row), created=row["created"])


async def _acknowledge(
    conn: Connection,
    agent_id: str,
    ids: list[str],
    up_to_seq: int | None,
    consumer: str | None,
    now: int,
) -> int:
    rows = await conn.fetch(_ACK, agent_id, ids, up_to_seq, consumer, now)
    done = [row[0] for row in rows]
    await _insert_attempts(
        conn, [Attempt(event_id, now, "ack", "delivered", consumer) for event_id in done]
    )
    return len(done)


async def _insert_attempts(conn: Connection, attempts: Sequence[Attempt]) -> None:
    if not attempts:
        return
    await conn.execute(
        _INSERT_ATTEMPTS,
        [a.event_id for a in attempts],
        [a.at for a in attempts],
        [a.mechanism for a in attempts],
        [a.outcome for a in attempts],
        [a.session for a in attempts],
        [a.error for a in attempts],
    )


def _event(row: asyncpg.Record) -> Event:
    return Event(
        id=row["id"],
        agent_id=row["agent_id"],
        seq=row["seq"],
        type=row["type"],
        text=row["text"],
        data_json=row["data"],
        created_at=row["created_at"],
        status=EventStatus(row["status"]),
        dedupe_key=row["dedupe_key"],
        expires_at=row["expires_at"],
        status_at=row["status_at"],
        sender=row["sender"],
        reply_to=row["reply_to"],
        reply_schema_json=row["reply_schema"],
    )


def _retryable(exc: BaseException, transaction: bool) -> bool:
    """Whether an operation that failed was rolled back whole and may simply be run again."""
    if isinstance(exc, asyncpg.UniqueViolationError):
        # An append that lost a race for its dedupe key: run again, it finds the winner's event.
        return exc.constraint_name == "events_dedupe"
    return transaction and isinstance(exc, _RETRYABLE)


def _count(status: str) -> int:
    """The row count of a command status such as ``UPDATE 3``."""
    return int(status.rsplit(" ", 1)[-1])


def _describe(exc: BaseException, limit: int = 300) -> str:
    """A driver error in one line of bounded length: some quote every argument of the query."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _without_password(url: str) -> str:
    """The URL to name in messages: no password, no query (which may hold one)."""
    parts = urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    if ":" in userinfo:
        userinfo = userinfo.split(":", 1)[0] + ":***"
    return repr(urlunsplit((parts.scheme, f"{userinfo}{at}{host}", parts.path, "", "")))
