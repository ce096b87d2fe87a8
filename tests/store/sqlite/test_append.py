"""Storing a batch on SQLite: what it asks the database."""

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


def test_a_batch_of_keyed_events_looks_its_keys_up_in_one_query(conn: sqlite3.Connection) -> None:
    # A query per key cost a batch of 1,000 keyed events (herald send --file's) a third more
    # than the same batch without keys.
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    conn.execute("BEGIN IMMEDIATE")
    published = append(conn, keyed(0, 1000) + keyed(500, 1000), now=1)
    conn.execute("COMMIT")
    assert sum(p.created for p in published) == 1500
    reads = [s for s in statements if s.lstrip().startswith("SELECT") and "FROM events" in s]
    assert len(reads) == 1
