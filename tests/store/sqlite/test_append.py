"""Storing a batch on SQLite: what it asks the database, and what it leaves there."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from herald import open_store
from herald.ids import new_id
from herald.models import Agent, NewEvent
from herald.store.sqlite.append import append


@pytest.fixture
def conn(tmp_path: Path) -> sqlite3.Connection:
    """A connection to a store with one agent, alice, as the store's own makes them."""
    path = tmp_path / "herald.db"

    async def with_alice() -> None:
        store = await open_store(f"sqlite:///{path}")
        try:
            await store.create_agent(Agent(new_id("agt_"), "alice", "hash", store.now()))
        finally:
            await store.close()

    asyncio.run(with_alice())
    connection = sqlite3.connect(path, isolation_level=None)
    connection.row_factory = sqlite3.Row
    return connection


def keyed(start: int, count: int) -> list[NewEvent]:
    return [
        NewEvent(to="alice", type="note", text=f"{n}", data_json="null", dedupe_key=f"k{n}")
        for n in range(start, start + count)
    ]


def traced(conn: sqlite3.Connection) -> list[str]:
    """The reads of events the connection makes from now on."""
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    return statements


def event_reads(statements: list[str]) -> list[str]:
    return [s for s in statements if s.lstrip().startswith("SELECT") and "FROM events" in s]


def test_a_batch_of_new_keys_is_stored_without_looking_them_up(conn: sqlite3.Connection) -> None:
    # Looking every key up first cost a batch of 1,000 keyed events (herald send --file's) a
    # tenth more than the same batch without keys; a query per key, a third more.
    statements = traced(conn)
    conn.execute("BEGIN IMMEDIATE")
    published = append(conn, keyed(0, 1000) + keyed(500, 10), now=1)
    conn.execute("COMMIT")
    assert [p.created for p in published] == [True] * 1000 + [False] * 10
    assert [p.event.id for p in published[1000:]] == [p.event.id for p in published[500:510]]
    assert event_reads(statements) == []


def test_a_batch_repeating_stored_keys_reads_them_at_once_and_numbers_only_the_rest(
    conn: sqlite3.Connection,
) -> None:
    conn.execute("BEGIN IMMEDIATE")
    first = append(conn, keyed(0, 1000), now=1)
    conn.execute("COMMIT")
    statements = traced(conn)
    conn.execute("BEGIN IMMEDIATE")
    again = append(conn, keyed(500, 1000), now=2)
    conn.execute("COMMIT")
    assert [p.created for p in again] == [False] * 500 + [True] * 500
    assert [p.event.id for p in again[:500]] == [p.event.id for p in first[500:]]
    assert [p.event.seq for p in again[500:]] == list(range(1001, 1501))  # no gap left
    assert len(event_reads(statements)) == 1
    (count,) = conn.execute("SELECT count(*) FROM events").fetchone()
    assert count == 1500
