"""Storing events: duplicates answered with the first event, the rest given each agent's next
seqs and inserted at once."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Sequence

from herald.errors import NotFound
from herald.models import NewEvent, Published
from herald.store.sqlite.rows import EVENT_COLUMNS, event, event_row


def append(conn: sqlite3.Connection, events: Sequence[NewEvent], now: int) -> list[Published]:
    """Store a batch: duplicates answered with the first event, then one seq reservation per
    agent and one multi-row insert for what is new."""
    agents = _agent_ids(conn, {new.to for new in events})
    results: list[Published | None] = []
    fresh: list[tuple[int, NewEvent, str]] = []
    first_of_key: dict[tuple[str, str], int] = {}
    for index, new in enumerate(events):
        agent_id = agents[new.to]
        if new.dedupe_key is not None:
            key = (agent_id, new.dedupe_key)
            if key in first_of_key:  # repeated inside this batch: filled in below
                results.append(None)
                continue
            row = conn.execute(
                f"SELECT {EVENT_COLUMNS} FROM events WHERE agent_id = ? AND dedupe_key = ?", key
            ).fetchone()
            if row is not None:
                results.append(Published(event(row), created=False))
                continue
            first_of_key[key] = index
        results.append(None)
        fresh.append((index, new, agent_id))
    next_seq = _reserve_seqs(conn, Counter(agent_id for _, _, agent_id in fresh))
    rows = []
    for index, new, agent_id in fresh:
        seq = next_seq[agent_id]
        next_seq[agent_id] += 1
        stored = new.stored(agent_id, seq, now)
        rows.append(event_row(stored))
        results[index] = Published(stored, created=True)
    conn.executemany(f"INSERT INTO events ({EVENT_COLUMNS}) VALUES ({', '.join('?' * 14)})", rows)
    for index, new in enumerate(events):
        if results[index] is None:
            first = results[first_of_key[(agents[new.to], new.dedupe_key or "")]]
            assert first is not None
            results[index] = Published(first.event, created=False)
    return [result for result in results if result is not None]


def _agent_ids(conn: sqlite3.Connection, handles: set[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for handle in sorted(handles):
        row = conn.execute("SELECT id FROM agents WHERE handle = ?", (handle,)).fetchone()
        if row is None:
            raise NotFound(f"no agent has the handle {handle!r}; create it with POST /v1/agents")
        found[handle] = row[0]
    return found


def _reserve_seqs(conn: sqlite3.Connection, counts: Counter[str]) -> dict[str, int]:
    """Advance each agent's last seq by its count; returns the first seq reserved for each."""
    first: dict[str, int] = {}
    for agent_id, count in counts.items():
        (last,) = conn.execute(
            "UPDATE agents SET last_seq = last_seq + ? WHERE id = ? RETURNING last_seq",
            (count, agent_id),
        ).fetchone()
        first[agent_id] = last - count + 1
    return first
