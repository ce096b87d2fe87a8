"""The SQL pieces of the SQLite store against its schema: what SQLite makes of them."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from herald import open_store
from herald.models import Agent, Event, NewEvent, Priority
from herald.store.sqlite.attempts import acknowledge, claimable, lease
from herald.store.sqlite.rows import EVENT_COLUMNS, FINISHED, insert_rows, records
from herald.store.tables import EVENTS

PLAIN = {int, float, str, bytes}
"""The types ``sqlite3`` binds directly; any other value (None, an enum's member, a subclass
of one of these) goes through its adaptation protocol first."""


class Binding(sqlite3.Connection):
    """A connection that keeps every parameter its statements were given."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.bound: list[Any] = []

    def execute(self, sql: str, parameters: Iterable[Any] = (), /) -> sqlite3.Cursor:
        self.bound.extend(parameters)
        return super().execute(sql, parameters)


@pytest.fixture
def conn(tmp_path: Path) -> Binding:
    """A connection to a store with one agent, alice, and 10 events of hers."""
    path = tmp_path / "herald.db"

    async def with_alice() -> None:
        store = await open_store(f"sqlite:///{path}")
        try:
            await store.create_agent(Agent("agt_alice", "alice", "hash", store.now()))
            await store.append([NewEvent(to="alice", type="t", text=f"{n}") for n in range(10)])
        finally:
            await store.close()

    asyncio.run(with_alice())
    return sqlite3.connect(path, isolation_level=None, factory=Binding)


def alices(events: list[NewEvent], first_seq: int) -> list[Event]:
    return [
        new.stored(f"evt_{first_seq + n}", "agt_alice", first_seq + n, 1_000)
        for n, new in enumerate(events)
    ]


def stored_from(conn: sqlite3.Connection, seq: int) -> list[Event]:
    sql = f"SELECT {EVENT_COLUMNS} FROM events WHERE seq >= ? ORDER BY seq"
    return records(EVENTS, conn.execute(sql, (seq,)))


def test_an_event_s_row_binds_only_plain_values(conn: Binding) -> None:
    events = alices(
        [
            NewEvent(to="alice", type="t", text="plain"),
            NewEvent(to="alice", type="t", text="urgent", priority=Priority.HIGH),
        ],
        first_seq=11,
    )
    insert_rows(conn, EVENTS, [EVENTS.values(e) for e in events])
    assert conn.bound
    assert {type(value) for value in conn.bound} <= PLAIN
    assert stored_from(conn, 11) == events
    # Rows whose values are in different columns: a column None in some of them is bound.
    events = alices(
        [
            NewEvent(to="alice", type="t", text="keyed", dedupe_key="k", sender="bob"),
            NewEvent(to="alice", type="t", text="plain"),
            NewEvent(to="alice", type="t", text="threaded", thread="th", deliver_at=5_000),
        ],
        first_seq=13,
    )
    insert_rows(conn, EVENTS, [EVENTS.values(e) for e in events])
    assert stored_from(conn, 13) == events


def test_finished_events_are_read_from_their_index(conn: sqlite3.Connection) -> None:
    for sql in (
        f"SELECT agent_id, status, count(*) FROM events WHERE {FINISHED} AND status_at < 1"
        " GROUP BY agent_id, status",
        f"DELETE FROM events WHERE {FINISHED} AND status_at < 1",
    ):
        plan = " ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}"))
        assert "USING INDEX events_finished" in plan, sql


def test_an_acknowledgement_makes_no_table_per_event(conn: sqlite3.Connection) -> None:
    # SQLite checks a partial index's condition for each row an UPDATE changes; an IN list
    # there is a table of its values made anew per row (two per event acknowledged). Only the
    # statement's own tables (the rows to change, those it returns) may be opened.
    conn.execute("BEGIN IMMEDIATE")
    events = claimable(conn, "agt_alice", "c", 10, now=1)
    lease(conn, "agt_alice", events, "c", 60_000, None)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    done = acknowledge(conn, "agt_alice", [], events[-1].seq, "c", now=2)
    conn.set_trace_callback(None)
    assert len(done) == 10
    updates = [s for s in statements if s.lstrip().startswith("UPDATE events")]
    assert updates
    for sql in updates:
        opcodes = [row[1] for row in conn.execute(f"EXPLAIN {sql}")]
        assert opcodes.count("OpenEphemeral") <= 2, sql
    conn.execute("ROLLBACK")
