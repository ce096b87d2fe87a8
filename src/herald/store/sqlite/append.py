"""Storing events on SQLite: the batch planned by ``herald.store.appends``, one seq reservation
per agent, one multi-row insert for what is new.

A batch with dedupe keys is first stored as if none of its keys were: that is the usual batch
(``herald send --file`` sending a file once), and the unique index of keys checks it as the rows
go in, where looking every key up first cost a batch a tenth more. If a key is stored already,
the index refuses its row: the batch is undone, the keys stored are read, and it is stored
again, its repeats answered with the events that have their keys."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Mapping, Sequence

from herald.feed import JournalEntry
from herald.models import Event, NewEvent, Published
from herald.store.appends import (
    DedupeKey,
    dedupe_keys,
    first_seqs,
    no_agent,
    plan_append,
)
from herald.store.journal import one_agent, published, record
from herald.store.sqlite.journal import write
from herald.store.sqlite.rows import EVENT_COLUMNS, INSERT_EVENT, event
from herald.store.tables import EVENTS

FIND_STORED_KEYS = f"""
SELECT {EVENT_COLUMNS} FROM events
WHERE agent_id = ? AND dedupe_key IN (SELECT value FROM json_each(?))
"""
REPEATED_KEY = "UNIQUE constraint failed: events.agent_id, events.dedupe_key"
"""What SQLite says when a row repeats a stored dedupe key (index ``events_dedupe``)."""


def append(conn: sqlite3.Connection, events: Sequence[NewEvent], now: int) -> list[Published]:
    """Store a batch: duplicates answered with the first event, the rest given each agent's next
    seqs and inserted at once."""
    agents = _agent_ids(conn, {new.to for new in events})
    if all(new.dedupe_key is None for new in events):
        return _insert(conn, events, agents, now, {})
    conn.execute("SAVEPOINT keyed_append")
    try:
        return _insert(conn, events, agents, now, {})
    except BaseException as exc:
        conn.execute("ROLLBACK TO keyed_append")
        if not (isinstance(exc, sqlite3.IntegrityError) and str(exc) == REPEATED_KEY):
            raise
    finally:
        conn.execute("RELEASE keyed_append")
    keys = {key for key in dedupe_keys(events, agents) if key is not None}
    return _insert(conn, events, agents, now, _stored(conn, keys))


def _insert(
    conn: sqlite3.Connection,
    events: Sequence[NewEvent],
    agents: Mapping[str, str],
    now: int,
    earlier: Mapping[DedupeKey, Event],
) -> list[Published]:
    """Store the events but those whose keys are ``earlier``'s or repeat one of the batch."""
    plan = plan_append(events, agents, earlier)
    stored = plan.numbered(events, _reserve_seqs(conn, plan.added, now), [now] * len(events))
    conn.executemany(INSERT_EVENT, [EVENTS.values(e) for e in stored])
    entry = JournalEntry(published=published(stored))
    write(conn, record(now, "append", one_agent(e.agent_id for e in stored), entry))
    return plan.answers(stored, earlier)


def _agent_ids(conn: sqlite3.Connection, handles: set[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for handle in sorted(handles):
        row = conn.execute("SELECT id FROM agents WHERE handle = ?", (handle,)).fetchone()
        if row is None:
            raise no_agent(handle)
        found[handle] = row[0]
    return found


def _stored(conn: sqlite3.Connection, keys: Collection[DedupeKey]) -> dict[DedupeKey, Event]:
    """The events already stored with those keys: one query per agent, each key looked up in
    the index of dedupe keys (a query per key cost a batch a third more)."""
    by_agent: dict[str, list[str]] = {}
    for agent_id, key in keys:
        by_agent.setdefault(agent_id, []).append(key)
    found: dict[DedupeKey, Event] = {}
    for agent_id, agent_keys in by_agent.items():
        listed = json.dumps(agent_keys, ensure_ascii=False)
        for row in conn.execute(FIND_STORED_KEYS, (agent_id, listed)):
            found[agent_id, row["dedupe_key"]] = event(row)
    return found


def _reserve_seqs(conn: sqlite3.Connection, added: Mapping[str, int], now: int) -> dict[str, int]:
    """Advance each agent's last seq by its count, and count the events pending (published
    ``now``: its oldest open event, if it had none); returns the first seq reserved for each."""
    last_seqs = {}
    for agent_id, count in added.items():
        (last_seqs[agent_id],) = conn.execute(
            "UPDATE agents SET last_seq = last_seq + :n, pending_events = pending_events + :n,"
            " oldest_open_at = coalesce(oldest_open_at, :now)"
            " WHERE id = :agent RETURNING last_seq",
            {"n": count, "now": now, "agent": agent_id},
        ).fetchone()
    return first_seqs(last_seqs, added)
