"""The bare endpoint's SQLite store: one writer thread that commits what concurrent requests hand
it together (group commit), at herald's durability (WAL, synchronous=FULL).

The tables have the columns of herald's ``agents`` and ``events`` and the indexes a publish and
a drain use (the id, an agent's seqs, its open events, the dedupe keys); not herald's listing
indexes, its counts, attempts or journal. A request that fails fails its whole group (rolled
back): the benchmarks send only requests that succeed.
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
from collections.abc import Callable
from typing import Any

from benchmarks.bare_work import Drain, Publish, Row

SCHEMA = """
CREATE TABLE IF NOT EXISTS agents (
    id TEXT PRIMARY KEY, handle TEXT NOT NULL UNIQUE, last_seq INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS events (
    id TEXT PRIMARY KEY,
    agent_id TEXT NOT NULL REFERENCES agents (id),
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    text TEXT NOT NULL,
    data TEXT NOT NULL,
    dedupe_key TEXT,
    created_at INTEGER NOT NULL,
    expires_at INTEGER,
    status TEXT NOT NULL,
    status_at INTEGER,
    lease_owner TEXT,
    lease_until INTEGER,
    UNIQUE (agent_id, seq)
);
CREATE UNIQUE INDEX IF NOT EXISTS events_dedupe ON events (agent_id, dedupe_key)
    WHERE dedupe_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS events_open ON events (agent_id, seq)
    WHERE status IN ('pending', 'sent');
"""
OPEN = "status IN ('pending', 'sent')"
RESERVE = "UPDATE agents SET last_seq = last_seq + ? WHERE handle = ? RETURNING id, last_seq"
INSERT = (
    "INSERT INTO events (id, agent_id, seq, type, text, data, dedupe_key, created_at, status,"
    " status_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?)"
)
ACK = (
    "UPDATE events SET status = 'delivered', status_at = ?, lease_owner = NULL,"
    f" lease_until = NULL WHERE agent_id = ? AND {OPEN} AND seq <= ?"
)
LEASE = (
    "UPDATE events SET lease_owner = ?, lease_until = ? WHERE id IN (SELECT id FROM events"
    f" WHERE agent_id = ? AND {OPEN} AND (lease_owner IS NULL OR lease_owner = ?"
    " OR lease_until <= ?) AND seq > ? ORDER BY seq LIMIT ?)"
    " RETURNING id, agent_id, seq, type, text, data, dedupe_key, created_at, status"
)
Work = Callable[[sqlite3.Connection], Any]


class SqliteStore:
    """Runs each request's statements on the writer thread; answers after their commit."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._jobs: queue.SimpleQueue[tuple[Work, asyncio.Future[Any]] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._write, name="bare-writer", daemon=True)
        self._loop: asyncio.AbstractEventLoop | None = None

    async def open(self) -> None:
        self._loop = asyncio.get_running_loop()
        conn = sqlite3.connect(self._path, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.executescript(SCHEMA)
        conn.close()
        self._thread.start()

    async def close(self) -> None:
        self._jobs.put(None)
        await asyncio.to_thread(self._thread.join)

    async def create_agent(self, agent_id: str, handle: str) -> None:
        await self._run(lambda conn: conn.execute(
            "INSERT INTO agents (id, handle) VALUES (?, ?)", (agent_id, handle)
        ))  # fmt: skip

    async def publish(self, publish: Publish) -> None:
        def write(conn: sqlite3.Connection) -> None:
            for handle, count in publish.counts.items():
                row = conn.execute(RESERVE, (count, handle)).fetchone()
                if row is None:
                    raise LookupError(f"no agent {handle!r}")
                publish.reserved(handle, *row)
            conn.executemany(INSERT, publish.rows())

        await self._run(write)

    async def drain(self, drain: Drain) -> list[Row]:
        def step(conn: sqlite3.Connection) -> list[Row]:
            (agent_id,) = conn.execute(
                "SELECT id FROM agents WHERE handle = ?", (drain.handle,)
            ).fetchone()
            conn.execute(ACK, (drain.now, agent_id, drain.cursor))
            leased = conn.execute(
                LEASE,
                (drain.consumer, drain.lease_until, agent_id, drain.consumer, drain.now,
                 drain.cursor, drain.limit),
            ).fetchall()  # fmt: skip
            return sorted(leased, key=lambda row: row[2])  # RETURNING has no order

        leased: list[Row] = await self._run(step)
        return leased

    async def _run(self, work: Work) -> Any:
        assert self._loop is not None, "open() first"
        answer = self._loop.create_future()
        self._jobs.put((work, answer))
        return await answer

    def _write(self) -> None:
        """The writer thread: take every job waiting, run them in one transaction, commit,
        answer them all."""
        conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA synchronous=FULL")
        try:
            while (job := self._jobs.get()) is not None:
                group = [job]
                while not self._jobs.empty():
                    more = self._jobs.get_nowait()
                    if more is None:
                        self._jobs.put(None)  # stop after this group
                        break
                    group.append(more)
                self._commit(conn, group)
        finally:
            conn.close()

    def _commit(
        self, conn: sqlite3.Connection, group: list[tuple[Work, asyncio.Future[Any]]]
    ) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            results = [work(conn) for work, _ in group]
            conn.execute("COMMIT")
        except Exception as exc:
            conn.execute("ROLLBACK")
            results = [exc] * len(group)
        assert self._loop is not None
        self._loop.call_soon_threadsafe(_answer, [answer for _, answer in group], results)


def _answer(answers: list[asyncio.Future[Any]], results: list[Any]) -> None:
    for answer, result in zip(answers, results, strict=True):
        if answer.done():
            continue
        if isinstance(result, Exception):
            answer.set_exception(result)
        else:
            answer.set_result(result)
