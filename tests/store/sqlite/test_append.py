"""Storing a batch on SQLite: what it asks the database, and what it leaves there."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest

from herald import open_store
from herald.errors import NotFound
from herald.ids import new_id
from herald.models import Agent, NewEvent
from herald.store.sqlite.append import append, append_all


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


def add_bob(conn: sqlite3.Connection) -> None:
    conn.execute(
        "INSERT INTO agents (id, handle, key_hash, created_at) VALUES ('agt_b', 'bob', 'h2', 1)"
    )


def plain(to: str, n: int, key: str | None = None) -> NewEvent:
    return NewEvent(to=to, type="note", text=f"{n}", data_json="null", dedupe_key=key)


def test_publishes_stored_together_take_the_statements_of_one_batch(
    conn: sqlite3.Connection,
) -> None:
    add_bob(conn)
    statements = traced(conn)
    conn.execute("BEGIN IMMEDIATE")
    outcomes = append_all(
        conn,
        [
            ([plain("alice", 0)], 10),
            ([plain("bob", 1), plain("alice", 2, key="k")], 11),
            ([plain("nobody", 3), plain("alice", 4)], 12),  # refused alone
            ([plain("alice", 5, key="k")], 13),  # answered with the event stored before it
        ],
    )
    conn.execute("COMMIT")
    around = ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE")
    writes = [s.split()[0] for s in statements if not s.startswith(around)]
    # The addressees read at once, one seq reservation for all the agents, one insert, one
    # journal row.
    assert writes == ["SELECT", "UPDATE", "INSERT", "INSERT"]
    assert [ok for ok, _ in outcomes] == [True, True, False, True]
    assert isinstance(outcomes[2][1], NotFound)
    first, second, _, fourth = (answer for _, answer in outcomes)
    assert [(p.event.text, p.event.seq, p.event.created_at) for p in first + second] == [
        ("0", 1, 10),
        ("1", 1, 11),
        ("2", 2, 11),
    ]
    assert [(p.event.id, p.created) for p in fourth] == [(second[1].event.id, False)]
    assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == 3
    alice = first[0].event.agent_id
    journal = conn.execute("SELECT at, agent_id, detail FROM journal WHERE kind = 'append'")
    (at, agent_id, detail), *others = journal.fetchall()
    assert others == []
    assert (at, agent_id) == (11, None)  # the newest publish's time; two agents
    assert sorted(json.loads(detail)["published"]) == sorted([["agt_b", 1, 1], [alice, 1, 2]])


def test_publishes_to_one_agent_find_it_by_the_statement_that_reserves_its_seqs(
    conn: sqlite3.Connection,
) -> None:
    # A sequential publish paid a read of its agent before the reservation of its seq.
    statements = traced(conn)
    conn.execute("BEGIN IMMEDIATE")
    outcomes = append_all(conn, [([plain("alice", 0)], 10), ([plain("alice", 1)], 11)])
    conn.execute("COMMIT")
    around = ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE")
    writes = [s.split()[0] for s in statements if not s.startswith(around)]
    assert writes == ["UPDATE", "INSERT", "INSERT"]
    answers = [p for ok, published in outcomes if ok for p in published]
    assert [(p.event.text, p.event.seq, p.event.created_at) for p in answers] == [
        ("0", 1, 10),
        ("1", 2, 11),
    ]
    row = conn.execute("SELECT last_seq, pending_events, oldest_open_at FROM agents").fetchone()
    assert tuple(row) == (2, 2, 10)
    (detail,) = conn.execute("SELECT detail FROM journal WHERE kind = 'append'").fetchone()
    assert json.loads(detail)["published"] == [[answers[0].event.agent_id, 1, 2]]
    # An agent that does not exist: the statement changes no row; each publish is refused.
    del statements[:]
    conn.execute("BEGIN IMMEDIATE")
    refused = append_all(conn, [([plain("nobody", 2)], 12), ([plain("nobody", 3)], 13)])
    conn.execute("COMMIT")
    assert [s.split()[0] for s in statements if not s.startswith(around)] == ["UPDATE"]
    assert [ok for ok, _ in refused] == [False, False]
    assert all(isinstance(error, NotFound) for _, error in refused)
    assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == 2
    assert tuple(conn.execute("SELECT last_seq, pending_events FROM agents").fetchone()) == (2, 2)


def test_a_list_of_agents_is_found_by_the_statement_that_reserves_their_seqs(
    conn: sqlite3.Connection,
) -> None:
    # A list of handles paid a read of its agents by handle before the reservation of their
    # seqs: a statement, and a row read back, for each copy.
    add_bob(conn)
    statements = traced(conn)
    conn.execute("BEGIN IMMEDIATE")
    outcomes = append_all(
        conn,
        [([plain("alice", 0), plain("bob", 1)], 10), ([plain("bob", 2), plain("alice", 3)], 11)],
    )
    conn.execute("COMMIT")
    around = ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE")
    assert [s.split()[0] for s in statements if not s.startswith(around)] == [
        "UPDATE",
        "INSERT",
        "INSERT",
    ]
    answers = [p for ok, published in outcomes if ok for p in published]
    assert [(p.event.text, p.event.seq, p.event.created_at) for p in answers] == [
        ("0", 1, 10),
        ("1", 1, 10),
        ("2", 2, 11),
        ("3", 2, 11),
    ]
    counters = "SELECT handle, last_seq, pending_events, oldest_open_at FROM agents"
    assert sorted(tuple(row) for row in conn.execute(counters)) == [
        ("alice", 2, 2, 10),
        ("bob", 2, 2, 10),
    ]
    (detail,) = conn.execute("SELECT detail FROM journal WHERE kind = 'append'").fetchone()
    alice, bob = answers[0].event.agent_id, answers[1].event.agent_id
    assert sorted(json.loads(detail)["published"]) == sorted([[alice, 1, 2], [bob, 1, 2]])


def test_a_list_naming_an_agent_that_does_not_exist_is_refused_alone_and_changes_nothing(
    conn: sqlite3.Connection,
) -> None:
    add_bob(conn)
    conn.execute("BEGIN IMMEDIATE")
    outcomes = append_all(
        conn,
        [([plain("alice", 0), plain("nobody", 1)], 10), ([plain("bob", 2), plain("alice", 3)], 11)],
    )
    conn.execute("COMMIT")
    assert [ok for ok, _ in outcomes] == [False, True]
    assert isinstance(outcomes[0][1], NotFound)
    assert [(p.event.text, p.event.seq) for p in outcomes[1][1]] == [("2", 1), ("3", 1)]
    counters = "SELECT handle, last_seq, pending_events, oldest_open_at FROM agents"
    assert sorted(tuple(row) for row in conn.execute(counters)) == [
        ("alice", 1, 1, 11),
        ("bob", 1, 1, 11),
    ]
    assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == 2
