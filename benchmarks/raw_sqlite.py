"""Baselines with the plain ``sqlite3`` driver at herald's durability (WAL, synchronous=FULL).

The table has the columns and the key indexes of herald's events table; every write is its own
committed transaction, as a hand-written service with the same promise (answer only after
commit) would do it without group commit.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from benchmarks.measure import Run, Stopwatch

SCHEMA = """
CREATE TABLE events (
    id TEXT PRIMARY KEY,
    agent_id TEXT NOT NULL,
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
CREATE INDEX events_open ON events (agent_id, seq) WHERE status IN ('pending', 'sent');
CREATE TABLE agents (id TEXT PRIMARY KEY, handle TEXT NOT NULL UNIQUE, last_seq INTEGER NOT NULL);
INSERT INTO agents VALUES ('agt_bench', 'bench', 0);
"""
INSERT = (
    "INSERT INTO events (id, agent_id, seq, type, text, data, created_at, status, status_at)"
    " VALUES (?, 'agt_bench', ?, 'bench.tick', ?, ?, ?, 'pending', ?)"
)
TEXT = "hello from the benchmark"
DATA = '{"n":1}'
OPEN = "status IN ('pending', 'sent')"


def connect(path: Path) -> sqlite3.Connection:
    """A fresh database file with the events table, in WAL mode with synchronous=FULL."""
    path.unlink(missing_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.executescript(SCHEMA)
    return conn


def _row(seq: int) -> tuple[str, int, str, str, int, int]:
    now = int(time.time() * 1000)
    return (f"evt_{seq:026d}", seq, TEXT, DATA, now, now)


def inserts(path: Path, count: int, seconds: float) -> Run:
    """One INSERT and one COMMIT per event, sequentially."""
    conn = connect(path)
    try:
        watch = Stopwatch()
        deadline = watch.wall + seconds
        seq = 0
        while seq < count and time.perf_counter() < deadline:
            seq += 1
            conn.execute("BEGIN")
            conn.execute(INSERT, _row(seq))
            conn.execute("COMMIT")
        return watch.run(seq)
    finally:
        conn.close()


def shaped_inserts(path: Path, count: int, seconds: float) -> Run:
    """Figure 1a's baseline: herald's statements for one publish without herald around them
    (find the agent by handle and take the next seq from its row in one UPDATE, insert), one
    COMMIT per event."""
    conn = connect(path)
    try:
        watch = Stopwatch()
        deadline = watch.wall + seconds
        done = 0
        while done < count and time.perf_counter() < deadline:
            conn.execute("BEGIN IMMEDIATE")
            _agent, seq = conn.execute(
                "UPDATE agents SET last_seq = last_seq + 1 WHERE handle = ? RETURNING id, last_seq",
                ("bench",),
            ).fetchone()
            conn.execute(INSERT, _row(seq))
            conn.execute("COMMIT")
            done += 1
        return watch.run(done)
    finally:
        conn.close()


def batches(path: Path, batch_size: int, count: int, seconds: float) -> Run:
    """``executemany`` of ``batch_size`` events and one COMMIT per batch, sequentially."""
    conn = connect(path)
    try:
        watch = Stopwatch()
        deadline = watch.wall + seconds
        seq = 0
        while seq < count and time.perf_counter() < deadline:
            conn.execute("BEGIN")
            conn.executemany(INSERT, [_row(seq + i) for i in range(1, batch_size + 1)])
            conn.execute("COMMIT")
            seq += batch_size
        return watch.run(seq)
    finally:
        conn.close()


def _fill(conn: sqlite3.Connection, backlog: int) -> None:
    conn.execute("BEGIN")
    conn.executemany(INSERT, [_row(seq) for seq in range(1, backlog + 1)])
    conn.execute("COMMIT")


def _drain_step(conn: sqlite3.Connection, cursor: int, limit: int) -> list[Any]:
    """Acknowledge up to ``cursor`` and lease the next ``limit`` events, in one transaction."""
    now = int(time.time() * 1000)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute(
        "UPDATE events SET status = 'delivered', status_at = ?, lease_owner = NULL,"
        f" lease_until = NULL WHERE agent_id = 'agt_bench' AND {OPEN} AND seq <= ?",
        (now, cursor),
    )
    rows = conn.execute(
        "SELECT id, agent_id, seq, type, text, data, created_at, status, dedupe_key, expires_at,"
        f" status_at FROM events WHERE agent_id = 'agt_bench' AND {OPEN} AND seq > ?"
        " ORDER BY seq LIMIT ?",
        (cursor, limit),
    ).fetchall()
    conn.executemany(
        "UPDATE events SET lease_owner = 'default', lease_until = ? WHERE id = ?",
        [(now + 30_000, row[0]) for row in rows],
    )
    conn.execute("COMMIT")
    return rows


def drain(path: Path, backlog: int, limit: int, seconds: float) -> Run:
    """Drain a backlog with a cursor, ``limit`` events a step: ack to the cursor, lease the next."""
    conn = connect(path)
    try:
        _fill(conn, backlog)
        watch = Stopwatch()
        deadline = watch.wall + seconds
        cursor = drained = 0
        while time.perf_counter() < deadline:
            rows = _drain_step(conn, cursor, limit)
            if not rows:
                break
            drained += len(rows)
            cursor = rows[-1][2]
        return watch.run(drained)
    finally:
        conn.close()
