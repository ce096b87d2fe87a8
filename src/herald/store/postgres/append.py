"""Storing events: one alone in one statement, or a batch (of one append or several) at once.

Publishers to one agent serialise on the agent's row lock, which makes its ``seq`` gapless; a
unique index keeps the dedupe keys unique.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

import asyncpg

from herald.errors import NotFound
from herald.ids import new_id
from herald.models import Event, NewEvent, Published
from herald.store.postgres import queries
from herald.store.postgres.errors import no_agent, refused
from herald.store.postgres.rows import Connection, event


@dataclass
class PendingAppend:
    """An append waiting for the writer: its events, when they were published, the answer."""

    events: Sequence[NewEvent]
    now: int
    answer: asyncio.Future[list[Published]]


async def append_group(
    conn: Connection, group: list[PendingAppend]
) -> list[list[Published] | Exception]:
    """Store the events of several appends as one batch, in order. An append to an unknown agent
    fails alone (nothing of it is stored); if the database refuses an event, all fail."""
    agents = await _lock_agents(conn, [new for job in group for new in job.events])
    unknown = [_unknown_agent(job.events, agents) for job in group]
    admitted = [
        (new, job.now)
        for job, error in zip(group, unknown, strict=True)
        if error is None
        for new in job.events
    ]
    try:
        published = iter(await _insert(conn, agents, admitted))
    except asyncpg.DataError as exc:  # its message may quote the whole batch: not shown
        raise refused() from exc
    return [
        error if error is not None else [next(published) for _ in job.events]
        for job, error in zip(group, unknown, strict=True)
    ]


async def append(conn: Connection, events: Sequence[NewEvent], now: int) -> list[Published]:
    """Store a batch of events, in the caller's transaction if it has more than one."""
    if len(events) == 1:
        return [await _append_one(conn, events[0], now)]
    agents = await _lock_agents(conn, events)
    if (error := _unknown_agent(events, agents)) is not None:
        raise error
    return await _insert(conn, agents, [(new, now) for new in events])


async def _lock_agents(conn: Connection, events: Sequence[NewEvent]) -> dict[str, str]:
    """Lock the addressees' rows; returns their ids by handle."""
    handles = list(dict.fromkeys(new.to for new in events))
    return {row["handle"]: row["id"] for row in await conn.fetch(queries.LOCK_AGENTS, handles)}


def _unknown_agent(events: Sequence[NewEvent], agents: dict[str, str]) -> NotFound | None:
    for new in events:
        if new.to not in agents:
            return no_agent(new.to)
    return None


async def _insert(
    conn: Connection, agents: dict[str, str], timed: Sequence[tuple[NewEvent, int]]
) -> list[Published]:
    """Store events (each with the time it was published) to agents locked by id, in order:
    all but the repeats of a dedupe key, answered with the event that has it."""
    keys = [(agents[new.to], new.dedupe_key) for new, _ in timed if new.dedupe_key is not None]
    earlier: dict[tuple[str, str], Event] = {}
    if keys:
        rows = await conn.fetch(queries.FIND_DUPLICATES, [k[0] for k in keys], [k[1] for k in keys])
        earlier = {(row["agent_id"], row["dedupe_key"]): event(row) for row in rows}

    # The events to store: all but repeats of a dedupe key, stored or earlier in this batch.
    fresh: list[tuple[NewEvent, int]] = []
    repeats: dict[int, tuple[str, str]] = {}  # index in the batch: the key it repeats
    seen = set(earlier)
    for index, (new, now) in enumerate(timed):
        if new.dedupe_key is not None:
            key = (agents[new.to], new.dedupe_key)
            if key in seen:
                repeats[index] = key
                continue
            seen.add(key)
        fresh.append((new, now))

    stored = await _insert_fresh(conn, await _numbered(conn, agents, fresh))
    earlier.update(((e.agent_id, e.dedupe_key), e) for e in stored if e.dedupe_key is not None)
    created = iter(stored)
    return [
        Published(earlier[repeats[index]], created=False)
        if index in repeats
        else Published(next(created), created=True)
        for index in range(len(timed))
    ]


async def _numbered(
    conn: Connection, agents: dict[str, str], fresh: list[tuple[NewEvent, int]]
) -> list[Event]:
    """The events to store, each given the next seq of its agent."""
    added = Counter(agents[new.to] for new, _ in fresh)
    next_seq: dict[str, int] = {}
    if added:
        rows = await conn.fetch(queries.ADVANCE_SEQS, list(added), list(added.values()))
        next_seq = {row["id"]: row["last_seq"] - added[row["id"]] + 1 for row in rows}
    stored: list[Event] = []
    for new, now in fresh:
        agent_id = agents[new.to]
        seq, next_seq[agent_id] = next_seq[agent_id], next_seq[agent_id] + 1
        stored.append(new.stored(agent_id, seq, now))
    return stored


async def _insert_fresh(conn: Connection, stored: list[Event]) -> list[Event]:
    """Insert the events at once; returns them with their JSON as JSONB normalised it, as it is
    read later."""
    if not stored:
        return stored
    rows = await conn.fetch(
        queries.INSERT_EVENTS,
        [e.id for e in stored],
        [e.agent_id for e in stored],
        [e.seq for e in stored],
        [e.type for e in stored],
        [e.text for e in stored],
        [e.data_json for e in stored],
        [e.created_at for e in stored],
        [e.dedupe_key for e in stored],
        [e.expires_at for e in stored],
        [e.sender for e in stored],
        [e.reply_to for e in stored],
        [e.reply_schema_json for e in stored],
    )
    normalised = {row["id"]: (row["data"], row["reply_schema"]) for row in rows}
    return [
        replace(e, data_json=normalised[e.id][0], reply_schema_json=normalised[e.id][1])
        for e in stored
    ]


async def _append_one(conn: Connection, new: NewEvent, now: int) -> Published:
    row = await conn.fetchrow(
        queries.APPEND_ONE,
        new.to,
        new.dedupe_key,
        new_id("evt_"),
        new.type,
        new.text,
        new.data_json,
        now,
        now + int(new.ttl_s * 1000) if new.ttl_s is not None else None,
        new.sender,
        new.reply_to,
        new.reply_schema_json,
    )
    if row is None:
        raise no_agent(new.to)
    return Published(event(row), created=row["created"])
