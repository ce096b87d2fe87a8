"""The bare endpoint's PostgreSQL store (asyncpg): one writer task on one connection that commits
what concurrent requests hand it together (group commit), at the server's durability
(synchronous_commit as configured).

The tables are like ``bare_sqlite``'s (herald's columns, the indexes a publish and a drain use).
A request that fails fails its whole group (rolled back): the benchmarks send only requests that
succeed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

from benchmarks.bare_work import Drain, Publish, Row

SCHEMA = """
CREATE TABLE IF NOT EXISTS agents (
    id TEXT PRIMARY KEY, handle TEXT NOT NULL UNIQUE, last_seq BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS events (
    id TEXT PRIMARY KEY,
    agent_id TEXT NOT NULL REFERENCES agents (id),
    seq BIGINT NOT NULL,
    type TEXT NOT NULL,
    text TEXT NOT NULL,
    data JSONB NOT NULL,
    dedupe_key TEXT,
    created_at BIGINT NOT NULL,
    expires_at BIGINT,
    status TEXT NOT NULL,
    status_at BIGINT,
    lease_owner TEXT,
    lease_until BIGINT,
    UNIQUE (agent_id, seq)
);
CREATE UNIQUE INDEX IF NOT EXISTS events_dedupe ON events (agent_id, dedupe_key)
    WHERE dedupe_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS events_open ON events (agent_id, seq)
    WHERE status IN ('pending', 'sent');
"""
OPEN = "status IN ('pending', 'sent')"
RESERVE = "UPDATE agents SET last_seq = last_seq + $1 WHERE handle = $2 RETURNING id, last_seq"
INSERT = """
INSERT INTO events (id, agent_id, seq, type, text, data, dedupe_key, created_at, status, status_at)
SELECT id, agent_id, seq, type, text, data::jsonb, dedupe_key, created_at, 'pending', status_at
FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[],
            $7::text[], $8::bigint[], $9::bigint[])
    AS e (id, agent_id, seq, type, text, data, dedupe_key, created_at, status_at)
"""
ACK = f"""
UPDATE events SET status = 'delivered', status_at = $1, lease_owner = NULL, lease_until = NULL
WHERE agent_id = (SELECT id FROM agents WHERE handle = $2) AND {OPEN} AND seq <= $3
"""
LEASE = f"""
UPDATE events SET lease_owner = $1, lease_until = $2
WHERE id IN (
    SELECT id FROM events
    WHERE agent_id = (SELECT id FROM agents WHERE handle = $3) AND {OPEN}
      AND (lease_owner IS NULL OR lease_owner = $1 OR lease_until <= $4) AND seq > $5
    ORDER BY seq LIMIT $6 FOR UPDATE SKIP LOCKED
)
RETURNING id, agent_id, seq, type, text, data::text, dedupe_key, created_at, status
"""
Work = Callable[[asyncpg.Connection], Awaitable[Any]]


class PostgresStore:
    """Runs each request's statements on the writer's connection; answers after their commit."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._conn: asyncpg.Connection | None = None
        self._waiting: list[tuple[Work, asyncio.Future[Any]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def open(self) -> None:
        self._conn = await asyncpg.connect(self._url)
        await self._conn.execute(SCHEMA)

    async def close(self) -> None:
        if self._writer is not None:
            await self._writer
        if self._conn is not None:
            await self._conn.close()

    async def create_agent(self, agent_id: str, handle: str) -> None:
        await self._run(lambda conn: conn.execute(
            "INSERT INTO agents (id, handle) VALUES ($1, $2)", agent_id, handle
        ))  # fmt: skip

    async def publish(self, publish: Publish) -> None:
        async def write(conn: asyncpg.Connection) -> None:
            for handle, count in publish.counts.items():
                row = await conn.fetchrow(RESERVE, count, handle)
                if row is None:
                    raise LookupError(f"no agent {handle!r}")
                publish.reserved(handle, row["id"], row["last_seq"])
            await conn.execute(INSERT, *zip(*publish.rows(), strict=True))

        await self._run(write)

    async def drain(self, drain: Drain) -> list[Row]:
        async def step(conn: asyncpg.Connection) -> list[Row]:
            await conn.execute(ACK, drain.now, drain.handle, drain.cursor)
            leased = await conn.fetch(
                LEASE, drain.consumer, drain.lease_until, drain.handle, drain.now, drain.cursor,
                drain.limit,
            )  # fmt: skip
            return sorted((tuple(row) for row in leased), key=lambda row: row[2])

        leased: list[Row] = await self._run(step)
        return leased

    async def _run(self, work: Work) -> Any:
        answer = asyncio.get_running_loop().create_future()
        self._waiting.append((work, answer))
        if self._writer is None:
            self._writer = asyncio.create_task(self._write())
        return await answer

    async def _write(self) -> None:
        """The writer: take every job waiting, run them in one transaction, commit, answer them
        all; until none is waiting."""
        assert self._conn is not None, "open() first"
        try:
            while self._waiting:
                group, self._waiting = self._waiting, []
                try:
                    async with self._conn.transaction():
                        results = [await work(self._conn) for work, _ in group]
                except Exception as exc:
                    results = [exc] * len(group)
                for (_, answer), result in zip(group, results, strict=True):
                    if answer.done():
                        continue
                    if isinstance(result, Exception):
                        answer.set_exception(result)
                    else:
                        answer.set_result(result)
        finally:
            self._writer = None
