"""Storing events on SQLite: the batch planned by ``herald.store.appends``, one seq reservation
of every agent, one multi-row insert for what is new, one journal row.

Publishes queued together are stored as one batch (``APPENDS``, joined by the worker): the
statements are those of one batch, whatever the number of publishes. A publish to an agent that
does not exist is refused alone, and writes nothing. The usual group, every event to one agent
and none with a dedupe key, finds the agent by the statement that reserves its seqs, without a
read of it first; so does a group to several agents (a list of handles) with no dedupe key and
no hold, if all of them exist.

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
from herald.ids import new_id
from herald.models import Event, Hold, NewEvent, Published
from herald.store.appends import (
    AppendPlan,
    DedupeKey,
    dedupe_keys,
    first_seqs,
    no_agent,
    one_each,
    plan_append,
    unknown_addressee,
)
from herald.store.journal import one_agent, published_alone, record
from herald.store.sqlite.journal import write
from herald.store.sqlite.push_windows import hold
from herald.store.sqlite.rows import EVENT_COLUMNS, as_json, event, insert_rows
from herald.store.sqlite.worker import Joinable, Outcome
from herald.store.tables import EVENTS

FIND_STORED_KEYS = f"""
SELECT {EVENT_COLUMNS} FROM events
WHERE agent_id = ? AND dedupe_key IN (SELECT value FROM json_each(?))
"""
REPEATED_KEY = "UNIQUE constraint failed: events.agent_id, events.dedupe_key"
"""What SQLite says when a row repeats a stored dedupe key (index ``events_dedupe``)."""
RESERVE_SEQS = (
    "UPDATE agents SET last_seq = last_seq + :n, pending_events = pending_events + :n,"
    " oldest_open_at = coalesce(oldest_open_at, :now) WHERE id = :agent RETURNING last_seq"
)
RESERVE_SEQS_BY_HANDLE = (
    "UPDATE agents SET last_seq = last_seq + :n, pending_events = pending_events + :n,"
    " oldest_open_at = coalesce(oldest_open_at, :now) WHERE handle = :handle"
    " RETURNING id, last_seq"
)
RESERVE_EACH = (
    "UPDATE agents SET last_seq = last_seq + r.n, pending_events = pending_events + r.n,"
    " oldest_open_at = coalesce(oldest_open_at, r.first_at)"
    " FROM (SELECT value ->> 0 AS id, value ->> 1 AS n, value ->> 2 AS first_at"
    " FROM json_each(:rows)) AS r WHERE agents.id = r.id RETURNING agents.id, agents.last_seq"
)
"""RESERVE_SEQS of several agents at once, from a JSON array of [id, n, first_at]."""
RESERVE_EACH_BY_HANDLE = (
    "UPDATE agents SET last_seq = last_seq + r.n, pending_events = pending_events + r.n,"
    " oldest_open_at = coalesce(oldest_open_at, r.first_at)"
    " FROM (SELECT value ->> 0 AS handle, value ->> 1 AS n, value ->> 2 AS first_at"
    " FROM json_each(:rows)) AS r WHERE agents.handle = r.handle"
    " AND (SELECT count(*) FROM json_each(:rows) AS j JOIN agents AS a"
    " ON a.handle = j.value ->> 0) = json_array_length(:rows)"
    " RETURNING agents.handle, agents.id, agents.last_seq"
)
"""RESERVE_EACH of agents named by handle, from a JSON array of [handle, n, first_at], only if
every one of them exists (otherwise it changes nothing and returns no row)."""
RESERVE_ONE_EACH = (
    "UPDATE agents SET last_seq = last_seq + 1, pending_events = pending_events + 1,"
    " oldest_open_at = coalesce(oldest_open_at, :now)"
    " WHERE id IN (SELECT value FROM json_each(:ids)) RETURNING id, last_seq"
)

Batch = tuple[Sequence[NewEvent], int]
"""One publish: its events, and when it was published."""


def append(conn: sqlite3.Connection, events: Sequence[NewEvent], now: int) -> list[Published]:
    """Store a batch: duplicates answered with the first event, the rest given each agent's next
    seqs and inserted at once.

    Raises:
        NotFound: an addressee does not exist; nothing is stored.
    """
    if len(events) == 1 and events[0].dedupe_key is None and events[0].hold is None:
        ok, answer = _append_alone(conn, events[0], now)  # as ``append_all`` would store it
    else:
        ((ok, answer),) = append_all(conn, [(events, now)])
    if not ok:
        raise answer
    result: list[Published] = answer
    return result


def append_all(conn: sqlite3.Connection, batches: Sequence[Batch]) -> list[Outcome]:
    """Store several publishes' batches as one, in order; each answered with its events'
    answers, or refused alone (NotFound: an addressee does not exist) having stored nothing."""
    handles = {new.to for events, _ in batches for new in events}
    unkeyed = all(new.dedupe_key is None for events, _ in batches for new in events)
    if unkeyed and len(handles) == 1:  # its rules' holds too (``_append_to_one``)
        return _append_to_one(conn, batches, handles.pop())
    if unkeyed and handles and all(new.hold is None for events, _ in batches for new in events):
        stored = _append_to_each(conn, batches)
        if stored is not None:
            return stored
    agents = agent_ids(conn, handles)
    refusals = [unknown_addressee(events, agents) for events, _ in batches]
    kept = [batch for batch, refusal in zip(batches, refusals, strict=True) if refusal is None]
    events = [new for batch, _ in kept for new in batch]
    nows = [now for batch, now in kept for _ in batch]
    if any(new.hold is not None for new in events):  # an agent's quiet hours or digest
        events = hold(conn, events, agents, nows)
    answers = iter(_store(conn, events, nows, agents) if events else [])
    return [
        (False, refusal) if refusal is not None else (True, [next(answers) for _ in batch])
        for (batch, _), refusal in zip(batches, refusals, strict=True)
    ]


def _append_to_one(
    conn: sqlite3.Connection, batches: Sequence[Batch], handle: str
) -> list[Outcome]:
    """``append_all`` of publishes all to the agent ``handle``, none with a dedupe key: every
    event is new, and one statement finds the agent and reserves its seqs (the agent's read and
    its reservation cost a sequential publish two statements). No such agent: each publish is
    refused, and nothing is written. Events its rules may hold are held as they are stored
    (``hold``)."""
    if len(batches) == 1 and len(batches[0][0]) == 1:
        return [_append_alone(conn, batches[0][0][0], batches[0][1])]
    events = [new for events, _ in batches for new in events]
    nows = [now for events, now in batches for _ in events]
    params = {"n": len(events), "now": nows[0], "handle": handle}
    row = conn.execute(RESERVE_SEQS_BY_HANDLE, params).fetchone()
    if row is None:
        return [(False, no_agent(handle)) for _ in batches]
    agent_id, last_seq = row
    if any(new.hold is not None for new in events):
        events = hold(conn, events, {handle: agent_id}, nows)
    plan = plan_append(events, {handle: agent_id}, {})
    added = {agent_id: len(events)}
    answers = iter(_write(conn, plan, events, nows, first_seqs({agent_id: last_seq}, added), added))
    return [(True, [next(answers) for _ in batch]) for batch, _ in batches]


def _append_to_each(conn: sqlite3.Connection, batches: Sequence[Batch]) -> list[Outcome] | None:
    """``append_all`` of publishes to several agents, none with a dedupe key or a hold (a list
    of handles): every event is new, and one statement finds the agents and reserves their seqs,
    where a read of the agents by handle before the reservation cost a list's copy a statement's
    share and a row read back. None, having changed nothing, if an addressee does not exist: the
    full path then refuses the publishes that name it, each alone."""
    counts: dict[str, int] = {}
    first_at: dict[str, int] = {}
    for events, now in batches:
        for new in events:
            counts[new.to] = counts.get(new.to, 0) + 1
            first_at.setdefault(new.to, now)
    rows = as_json([[handle, count, first_at[handle]] for handle, count in counts.items()])
    reserved = conn.execute(RESERVE_EACH_BY_HANDLE, {"rows": rows}).fetchall()
    if not reserved:
        return None
    agents = {handle: agent_id for handle, agent_id, _ in reserved}
    events = [new for events, _ in batches for new in events]
    nows = [now for events, now in batches for _ in events]
    plan = plan_append(events, agents, {})
    added = plan.added
    last_seqs = {agent_id: last_seq for _, agent_id, last_seq in reserved}
    answers = iter(_write(conn, plan, events, nows, first_seqs(last_seqs, added), added))
    return [(True, [next(answers) for _ in batch]) for batch, _ in batches]


def append_to_agents(
    conn: sqlite3.Connection,
    event: NewEvent,
    agents: Mapping[str, str],
    now: int,
    holds: Mapping[str, Hold],
) -> list[Published]:
    """Store ``event`` once for each of ``agents`` (ids by handle, read in this transaction),
    in handle order: a topic's subscribers, the copy of each agent of ``holds`` with its rule
    that may hold it (``NewEvent.hold``). Without a dedupe key or a hold every copy is new,
    and one statement reserves a seq of each agent (one statement for each cost a publish to
    10,000 agents most of its time)."""
    handles = sorted(agents)
    if not handles:
        return []
    held = holds.keys() & agents.keys()
    if event.dedupe_key is not None or held:  # some copies differ: the full plan
        events = [event.for_handle(handle) for handle in handles]
        if held:
            events = [new.with_hold(holds[new.to]) if new.to in held else new for new in events]
        nows = [now] * len(events)
        if held:
            events = hold(conn, events, agents, nows)
        return _store(conn, events, nows, agents)
    ids = [agents[handle] for handle in handles]
    reserved = conn.execute(RESERVE_ONE_EACH, {"ids": as_json(ids), "now": now})
    first = {agent_id: last_seq for agent_id, last_seq in reserved}
    plan = one_each(ids)
    return _write(conn, plan, [event] * len(ids), [now] * len(ids), first, plan.added)


def _append_alone(conn: sqlite3.Connection, new: NewEvent, now: int) -> Outcome:
    """``_append_to_one`` of one publish of one event (every sequential publish): the same
    statements, without the plan of a group (its ids, seq runs and answers by position), which
    cost such a publish more Python than its statements."""
    row = conn.execute(RESERVE_SEQS_BY_HANDLE, {"n": 1, "now": now, "handle": new.to}).fetchone()
    if row is None:
        return False, no_agent(new.to)
    agent_id, seq = row
    if new.hold is not None:
        (new,) = hold(conn, [new], {new.to: agent_id}, [now])
    stored = new.stored(new_id("evt_"), agent_id, seq, now)
    insert_rows(conn, EVENTS, [EVENTS.values(stored)])
    write(conn, published_alone(now, agent_id, seq))
    return True, [Published(stored, True)]


APPENDS: Joinable[Batch, list[Published]] = Joinable(
    alone=lambda conn, batch: append(conn, *batch), together=append_all
)
"""Publishes, which the worker stores together when they are queued one after another."""


def _store(
    conn: sqlite3.Connection,
    events: Sequence[NewEvent],
    nows: Sequence[int],
    agents: Mapping[str, str],
) -> list[Published]:
    if all(new.dedupe_key is None for new in events):
        return _insert(conn, events, nows, agents, {})
    conn.execute("SAVEPOINT keyed_append")
    try:
        return _insert(conn, events, nows, agents, {})
    except BaseException as exc:
        conn.execute("ROLLBACK TO keyed_append")
        if not (isinstance(exc, sqlite3.IntegrityError) and str(exc) == REPEATED_KEY):
            raise
    finally:
        conn.execute("RELEASE keyed_append")
    keys = {key for key in dedupe_keys(events, agents) if key is not None}
    return _insert(conn, events, nows, agents, stored_keys(conn, keys))


def _insert(
    conn: sqlite3.Connection,
    events: Sequence[NewEvent],
    nows: Sequence[int],
    agents: Mapping[str, str],
    earlier: Mapping[DedupeKey, Event],
) -> list[Published]:
    """Store the events (each published at its time in ``nows``) but those whose keys are
    ``earlier``'s or repeat one of the batch."""
    plan = plan_append(events, agents, earlier)
    first_at: dict[str, int] = {}
    for index, agent_id in plan.fresh:
        first_at.setdefault(agent_id, nows[index])
    added = plan.added
    return _write(conn, plan, events, nows, _reserve_seqs(conn, added, first_at), added, earlier)


def _write(
    conn: sqlite3.Connection,
    plan: AppendPlan,
    events: Sequence[NewEvent],
    nows: Sequence[int],
    first: Mapping[str, int],
    added: Mapping[str, int],
    earlier: Mapping[DedupeKey, Event] | None = None,
) -> list[Published]:
    """Insert the events the plan stores, numbered from each agent's ``first`` seq reserved for
    its ``added`` events, and the journal row that names them; each event's answer."""
    stored = plan.numbered(events, first, nows)
    if stored:
        insert_rows(conn, EVENTS, [EVENTS.values(e) for e in stored])
        entry = JournalEntry(published=plan.published(first, added))
        at = max(e.created_at for e in stored)
        write(conn, record(at, "append", one_agent(added), entry))
    return plan.answers(stored, earlier or {})


def agent_ids(conn: sqlite3.Connection, handles: Collection[str]) -> dict[str, str]:
    """The ids of the agents with those handles (those that exist), by handle."""
    if len(handles) == 1:
        (handle,) = handles
        rows = conn.execute("SELECT handle, id FROM agents WHERE handle = ?", (handle,))
    else:
        rows = conn.execute(
            "SELECT handle, id FROM agents WHERE handle IN (SELECT value FROM json_each(?))",
            (as_json(list(handles)),),
        )
    return {handle: agent_id for handle, agent_id in rows}


def stored_keys(conn: sqlite3.Connection, keys: Collection[DedupeKey]) -> dict[DedupeKey, Event]:
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


def _reserve_seqs(
    conn: sqlite3.Connection, added: Mapping[str, int], first_at: Mapping[str, int]
) -> dict[str, int]:
    """Advance each agent's last seq by its count, and count the events pending (published at
    ``first_at``: its oldest open event, if it had none); returns the first seq reserved for
    each. Several agents in one statement: a statement for each cost a list of 100 handles a
    tenth of its time."""
    if len(added) == 1:
        ((agent_id, count),) = added.items()
        params = {"n": count, "now": first_at[agent_id], "agent": agent_id}
        (last_seq,) = conn.execute(RESERVE_SEQS, params).fetchone()
        return first_seqs({agent_id: last_seq}, added)
    rows = as_json([[agent_id, count, first_at[agent_id]] for agent_id, count in added.items()])
    last_seqs = dict(conn.execute(RESERVE_EACH, {"rows": rows}).fetchall())
    return first_seqs(last_seqs, added)
