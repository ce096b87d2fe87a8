"""PostgreSQL: a scratch database, and the plain-asyncpg baselines (one INSERT per event; herald's
statement for one publish).

Each INSERT runs outside an explicit transaction, so it is its own commit, at the server's
durability settings (``synchronous_commit`` as configured, normally on): the same promise herald
makes. Only loopback servers are accepted.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from benchmarks.measure import Run, Stopwatch

LOOPBACK = {"127.0.0.1", "localhost", "::1"}
SCHEMA = """
CREATE TABLE bench_events (
    id TEXT PRIMARY KEY,
    agent_id TEXT NOT NULL,
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
CREATE INDEX bench_events_open ON bench_events (agent_id, seq)
    WHERE status IN ('pending', 'sent');
CREATE TABLE bench_agents (
    id TEXT PRIMARY KEY, handle TEXT NOT NULL UNIQUE, last_seq BIGINT NOT NULL
);
INSERT INTO bench_agents VALUES ('agt_bench', 'bench', 0);
"""
INSERT = (
    "INSERT INTO bench_events (id, agent_id, seq, type, text, data, created_at, status, status_at)"
    " VALUES ($1, 'agt_bench', $2, 'bench.tick', $3, $4::jsonb, $5, 'pending', $5)"
)
# What herald runs for one publish, without its journal row, counts, dedupe lookup or publish
# lock: the agent's next seq taken from its row and the event inserted, in one statement (its
# own commit), as herald does.
SHAPED_INSERT = """
WITH advanced AS (
    UPDATE bench_agents SET last_seq = last_seq + 1 WHERE handle = 'bench' RETURNING id, last_seq
)
INSERT INTO bench_events (id, agent_id, seq, type, text, data, created_at, status, status_at)
SELECT $1, id, last_seq, 'bench.tick', $2, $3::jsonb, $4, 'pending', $4 FROM advanced
"""
TEXT = "hello from the benchmark"
DATA = '{"n":1}'


def check_loopback(url: str) -> None:
    host = urlsplit(url).hostname or ""
    if host not in LOOPBACK:
        raise ValueError(f"the PostgreSQL URL must point at this machine (127.0.0.1), not {host!r}")


def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


@contextlib.asynccontextmanager
async def scratch_database(admin_url: str) -> AsyncIterator[str]:
    """Create a database for this run; yields its URL and drops it afterwards."""
    check_loopback(admin_url)
    name = f"herald_bench_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(admin_url, timeout=10)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield _with_database(admin_url, name)
        finally:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


async def backend_pids(url: str) -> list[int]:
    """The server processes serving the other connections to the database ``url`` names (the
    server is on this machine: ``check_loopback``), so that their CPU can be read from /proc."""
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "SELECT pid FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return [row["pid"] for row in rows]
    finally:
        await conn.close()


async def _insert(conn: asyncpg.Connection, seq: int) -> None:
    await conn.execute(INSERT, f"evt_{seq:026d}", seq, TEXT, DATA, int(time.time() * 1000))


async def _fresh_tables(conn: asyncpg.Connection) -> None:
    await conn.execute("DROP TABLE IF EXISTS bench_events, bench_agents")
    await conn.execute(SCHEMA)


async def shaped_inserts(url: str, count: int, seconds: float) -> Run:
    """Diagnostic or baseline, not the driver's ceiling: herald's statement for one publish
    without herald around it (``SHAPED_INSERT``), one after another on one connection."""
    conn = await asyncpg.connect(url)
    try:
        await _fresh_tables(conn)
        done = 0

        async def insert() -> None:
            nonlocal done
            done += 1
            now = int(time.time() * 1000)
            await conn.execute(SHAPED_INSERT, f"evt_{done:026d}", TEXT, DATA, now)

        for _ in range(50):  # warm-up
            await insert()
        watch = Stopwatch()
        deadline = watch.wall + seconds
        start = done
        while done - start < count and time.perf_counter() < deadline:
            await insert()
        return watch.run(done - start)
    finally:
        await conn.close()


async def inserts(url: str, workers: int, count: int, seconds: float) -> Run:
    """``workers`` connections inserting one event per statement, ``count`` events in all."""
    connections = [await asyncpg.connect(url) for _ in range(workers)]
    try:
        await _fresh_tables(connections[0])
        for warmup in range(1, 51):
            await _insert(connections[0], -warmup)
        watch = Stopwatch()
        deadline = watch.wall + seconds
        seqs = iter(range(1, count + 1))

        async def worker(conn: asyncpg.Connection) -> int:
            done = 0
            for seq in seqs:
                await _insert(conn, seq)
                done += 1
                if time.perf_counter() >= deadline:
                    break
            return done

        counts = await asyncio.gather(*(worker(conn) for conn in connections))
        return watch.run(sum(counts))
    finally:
        for conn in connections:
            await conn.close()
