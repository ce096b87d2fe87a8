"""Storing events: one alone in one statement, or a batch (of one append or several) at once.

Publishers to one agent serialise on the agent's row lock, which makes its ``seq`` gapless; a
unique index keeps the dedupe keys unique. Before they write anything, they take the agent's
publish lock (``queries.PUBLISH_LOCKS``), so that the one that numbers an agent's events first
also has the lower transaction id, the journal's order.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from operator import itemgetter

import asyncpg

from herald.feed import JournalEntry
from herald.ids import new_id
from herald.models import Event, Hold, NewEvent, Published
from herald.store.appends import (
    DedupeKey,
    dedupe_keys,
    first_seqs,
    no_agent,
    one_each,
    plan_append,
    unknown_addressee,
)
from herald.store.journal import note_written, one_agent, published, record
from herald.store.postgres import queries
from herald.store.postgres.errors import refused
from herald.store.postgres.push_windows import hold
from herald.store.postgres.rows import Connection, arrays, copies_values, event
from herald.store.tables import EVENTS, Type

JSON_FIELDS = tuple((c.name, c.attribute) for c in EVENTS.columns if c.type is Type.JSON)
"""The JSON columns of events and their fields: JSONB normalises what is stored in them."""


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
    agents = await lock_agents(conn, [new for job in group for new in job.events])
    unknown = [unknown_addressee(job.events, agents) for job in group]
    admitted = [
        (new, job.now)
        for job, error in zip(group, unknown, strict=True)
        if error is None
        for new in job.events
    ]
    if any(new.hold is not None for new, _ in admitted):  # an agent's quiet hours or digest
        nows = [now for _, now in admitted]
        held = await hold(conn, [new for new, _ in admitted], agents, nows)
        admitted = list(zip(held, nows, strict=True))
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
    if len(events) == 1 and events[0].hold is None:
        return [await _append_one(conn, events[0], now)]
    agents = await lock_agents(conn, events)
    if (error := unknown_addressee(events, agents)) is not None:
        raise error
    if any(new.hold is not None for new in events):  # an agent's quiet hours or digest
        events = await hold(conn, events, agents, [now] * len(events))
    return await _insert(conn, agents, [(new, now) for new in events])


PUBLISH_LOCKS = 1024
"""How many publish locks the agents share. A publish to a topic takes the lock of each of its
subscribers in one transaction, and PostgreSQL's lock table holds about 6,400 locks in all (64
for each connection, by default): so a publish to 10,000 agents takes at most 1,024 of them. Two
agents share one lock now and then, which only makes their publishers take turns."""


def publish_lock(handle: str) -> int:
    """The second half of the key of the publish lock of the agent ``handle`` (one of
    ``PUBLISH_LOCKS``; handles share them)."""
    return zlib.crc32(handle.encode()) % PUBLISH_LOCKS


async def append_to_agents(
    conn: Connection,
    event: NewEvent,
    handles: Sequence[str],
    now: int,
    holds: Mapping[str, Hold],
) -> list[Published]:
    """Store ``event`` once for each agent of ``handles`` (a topic's subscribers, read in the
    caller's transaction) that still exists once locked, in the order given: an agent deleted
    meanwhile is no longer subscribed. The copy of each agent of ``holds`` has its rule that
    may hold it (``NewEvent.hold``)."""
    held = holds.keys() & set(handles)
    if event.dedupe_key is not None or held:  # some copies differ: the full plan
        events = [event.for_handle(handle) for handle in handles]
        if held:
            events = [new.with_hold(holds[new.to]) if new.to in held else new for new in events]
        agents = await lock_agents(conn, events)
        events = [new for new in events if new.to in agents]
        if held:
            events = await hold(conn, events, agents, [now] * len(events))
        timed = [(new, now) for new in events]
        return await _insert(conn, agents, timed) if timed else []
    agents = await _lock_handles(conn, handles)
    ids = [agents[handle] for handle in handles if handle in agents]
    if not ids:
        return []
    count = len(ids)
    rows = await conn.fetch(queries.ADVANCE_ONE_EACH, ids, now)
    plan = one_each(ids)
    first = first_seqs({row["id"]: row["last_seq"] for row in rows}, plan.added)
    # Every copy holds the same JSON: normalised once, as JSONB will store it, not per copy.
    normal = await conn.fetchrow(queries.NORMALISE_JSON, event.data_json, event.reply_schema_json)
    assert normal is not None, "a SELECT without FROM answers one row"
    same = replace(event, data_json=normal[0], reply_schema_json=normal[1])
    stored = plan.numbered([same] * count, first, [now] * count)
    entry = JournalEntry(published=plan.published(first, plan.added))
    row = record(now, "append", one_agent(first), entry)
    assert row is not None  # events are stored
    copied = copies_values(EVENTS, stored, queries.COPY_COLUMNS)
    await conn.execute(queries.INSERT_COPIES, *copied, row.at, row.kind, row.agent_id, row.detail)
    note_written()
    return plan.answers(stored, {})


async def lock_agents(conn: Connection, events: Sequence[NewEvent]) -> dict[str, str]:
    """Take the addressees' publish locks, then lock their rows (one statement); returns their
    ids by handle."""
    return await _lock_handles(conn, list(dict.fromkeys(new.to for new in events)))


async def _lock_handles(conn: Connection, handles: Sequence[str]) -> dict[str, str]:
    """``lock_agents`` of the agents with ``handles`` (each once)."""
    keys = sorted({publish_lock(h) for h in handles})
    rows = await conn.fetch(queries.LOCK_AGENTS, handles, keys)
    return {row["handle"]: row["id"] for row in rows}


async def _insert(
    conn: Connection, agents: dict[str, str], timed: Sequence[tuple[NewEvent, int]]
) -> list[Published]:
    """Store events (each with the time it was published) to agents locked by id, in order:
    all but the repeats of a dedupe key, answered with the event that has it."""
    events = [new for new, _ in timed]
    keys = [key for key in dedupe_keys(events, agents) if key is not None]
    earlier: dict[DedupeKey, Event] = {}
    if keys:
        rows = await conn.fetch(queries.FIND_DUPLICATES, [k[0] for k in keys], [k[1] for k in keys])
        earlier = {(row["agent_id"], row["dedupe_key"]): event(row) for row in rows}
    plan = plan_append(events, agents, earlier)
    added = plan.added
    first: dict[str, int] = {}
    if added:
        first_at: dict[str, int] = {}
        for index, agent_id in plan.fresh:
            first_at.setdefault(agent_id, timed[index][1])
        rows = await conn.fetch(
            queries.ADVANCE_SEQS, list(added), list(added.values()), [first_at[a] for a in added]
        )
        first = first_seqs({row["id"]: row["last_seq"] for row in rows}, added)
    stored = plan.numbered(events, first, [now for _, now in timed])
    return plan.answers(await _insert_fresh(conn, stored), earlier)


async def _insert_fresh(conn: Connection, stored: list[Event]) -> list[Event]:
    """Insert the events at once, and the journal row that names them; returns them with their
    JSON as JSONB normalised it, as it is read later."""
    if not stored:
        return stored
    agent_id = one_agent(e.agent_id for e in stored)
    entry = JournalEntry(published=published(stored))
    row = record(max(e.created_at for e in stored), "append", agent_id, entry)
    assert row is not None  # events were stored
    rows = await conn.fetch(
        queries.INSERT_EVENTS, *arrays(EVENTS, stored), row.at, row.kind, row.agent_id, row.detail
    )
    note_written()
    by_id = {row["id"]: row for row in rows}
    return [replace(e, **{field: by_id[e.id][name] for name, field in JSON_FIELDS}) for e in stored]


_APPEND_ONE_VALUES = itemgetter(*(EVENTS.names.index(name) for name in queries.APPEND_ONE_COLUMNS))
"""An event's values of ``queries.APPEND_ONE_COLUMNS``, by position (a dict of its columns by
name cost a sequential publish a tenth of its own CPU)."""
_APPEND_ONE_ROW = EVENTS.reader(("created", *EVENTS.names, *(c.name for c in EVENTS.extra)))
"""The event of a row of ``queries.APPEND_ONE``, its columns read by position."""


async def _append_one(conn: Connection, new: NewEvent, now: int) -> Published:
    values = EVENTS.values(new.stored(new_id("evt_"), "", 0, now))
    row = await conn.fetchrow(
        queries.APPEND_ONE,
        new.to,
        new.dedupe_key,
        *_APPEND_ONE_VALUES(values),
        publish_lock(new.to),
    )
    if row is None:
        raise no_agent(new.to)
    created: bool = row[0]
    if created:
        note_written()  # by the statement itself
    return Published(_APPEND_ONE_ROW(row), created=created)
